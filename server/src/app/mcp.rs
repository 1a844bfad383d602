//! MCP rules: the catalog with its tools, connecting accounts (no
//! authentication, or OAuth 2.1 with PKCE), instances and gateway URLs.
//!
//! Scoping: a session and its instance belong to one (organization, user).
//! Every operation is authorized in the organization (`mcp:read` /
//! `mcp:write`) and every query of a session or instance also filters by
//! the caller, so another user's or organization's ids are `404`.

use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::mcp::{McpInstanceRow, McpServerRow};
use crate::error::Error;
use crate::mcp::config::{McpAuth, McpServerConfig};
use base64::Engine;
use uuid::Uuid;
use workspace_api::mcp::{
    CallbackQuery, ConnectAccount, ConnectionData, ConnectionStart, GenerateUrl, McpDeleted,
    McpInstance, McpInstanceList, McpServer, McpServerList, McpServerWithTools, McpTool, McpUrl,
};

fn server_view(s: McpServerRow) -> McpServer {
    McpServer {
        id: s.id,
        name: s.name,
        toolkit_name: s.toolkit_name,
        toolkit_slug: s.toolkit_slug,
        toolkit_logo: s.toolkit_logo,
        created_at: s.created_at,
        server_instance_count: s.instance_count,
    }
}

fn instance_view(i: McpInstanceRow) -> McpInstance {
    McpInstance {
        id: i.id,
        name: i.name,
        server_id: i.server_id,
        session_id: i.session_id,
        toolkit_name: i.toolkit_name,
        toolkit_slug: i.toolkit_slug,
        status: i.status.as_str().to_string(),
        created_at: i.created_at,
        updated_at: i.updated_at,
    }
}

/// `502 mcp_server_unavailable`.
pub use crate::mcp::unavailable;

/// The configured entry of a server (its OAuth client settings).
fn configured(cx: &ServerContext, id: Uuid) -> Result<&McpServerConfig, Error> {
    cx.mcp_catalog
        .get(&id)
        .ok_or(Error::NotFound { what: "MCP server" })
}

pub async fn list_servers(cx: &ServerContext, access: &OrgAccess) -> Result<McpServerList, Error> {
    Ok(McpServerList {
        servers: cx
            .datastore
            .mcp_servers_list(access)
            .await?
            .into_iter()
            .map(server_view)
            .collect(),
    })
}

/// A tool's slug: `{toolkit}_{name}`, lowercase, other characters `_`.
pub fn tool_slug(toolkit: &str, name: &str) -> String {
    format!("{toolkit}_{name}")
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A server's tools: from the cache while fresh, else listed over MCP
/// (unauthenticated) and cached; a stale entry is served when the server
/// fails.
pub async fn server_tools(
    cx: &ServerContext,
    access: &OrgAccess,
    server: &McpServerRow,
) -> Result<Vec<crate::mcp::ListedTool>, Error> {
    let cached = cx
        .datastore
        .mcp_tool_cache_get(server.id, &server.url)
        .await?;
    let ttl = cx.config.mcp.tools_cache_ttl_secs as f64;
    if let Some((tools, age)) = &cached
        && *age < ttl
        && let Ok(tools) = serde_json::from_value(tools.clone())
    {
        return Ok(tools);
    }
    let mut listed = cx.mcp.list_tools(&server.url, None).await;
    if matches!(listed, Err(crate::mcp::McpError::Unauthorized(_)))
        && let Some(token) = caller_token(cx, access, server).await?
    {
        // A server that lists its tools to authorized users only: the
        // caller's own active instance authorizes the listing.
        listed = cx.mcp.list_tools(&server.url, Some(&token)).await;
    }
    match listed {
        Ok(tools) => {
            let json = serde_json::to_value(&tools).map_err(Error::internal)?;
            cx.datastore
                .mcp_tool_cache_put(server.id, &server.url, &json)
                .await?;
            Ok(tools)
        }
        Err(e) => {
            slog::warn!(cx.log, "listing an MCP server's tools failed";
                "server" => &server.name, "error" => %e);
            match cached.and_then(|(tools, _)| serde_json::from_value(tools).ok()) {
                Some(tools) => Ok(tools),
                None => Err(unavailable(format!(
                    "the tools of MCP server {:?} could not be listed: {e}",
                    server.name
                ))),
            }
        }
    }
}

/// The access token of the caller's first active instance of `server`.
async fn caller_token(
    cx: &ServerContext,
    access: &OrgAccess,
    server: &McpServerRow,
) -> Result<Option<String>, Error> {
    let instances = cx
        .datastore
        .mcp_instances_list(access, Some(server.id))
        .await?;
    let Some(instance) = instances
        .iter()
        .find(|i| i.status == crate::db::enums::McpSessionStatus::Active)
    else {
        return Ok(None);
    };
    let targets = cx
        .datastore
        .mcp_instance_targets(access, &[instance.id])
        .await?;
    match targets.first() {
        Some((_, target)) => crate::app::mcp_gateway::access_token(cx, target, false).await,
        None => Ok(None),
    }
}

pub async fn server_with_tools(
    cx: &ServerContext,
    access: &OrgAccess,
    server_id: Uuid,
) -> Result<McpServerWithTools, Error> {
    let server = cx.datastore.mcp_server_get(access, server_id).await?;
    let tools = server_tools(cx, access, &server).await?;
    let tools = tools
        .into_iter()
        .map(|t| McpTool {
            slug: tool_slug(&server.toolkit_slug, &t.name),
            name: t.name,
            description: t.description,
            toolkit: server.toolkit_slug.clone(),
        })
        .collect();
    Ok(McpServerWithTools {
        id: server.id,
        name: server.name,
        toolkit_name: server.toolkit_name,
        toolkit_slug: server.toolkit_slug,
        toolkit_logo: server.toolkit_logo,
        created_at: server.created_at,
        server_instance_count: server.instance_count,
        tools,
    })
}

fn check_flow_type(flow_type: Option<&str>) -> Result<(), Error> {
    match flow_type {
        Some(f)
            if f.is_empty()
                || f.len() > 50
                || !f
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Err(Error::invalid(
                "invalid_flow_type",
                "flow_type must be 1 to 50 of A-Z, a-z, 0-9, - and _",
            ))
        }
        _ => Ok(()),
    }
}

/// The frontend page the browser lands on after a connection.
pub fn frontend_callback(cx: &ServerContext, params: &[(&str, &str)]) -> String {
    let mut url = format!(
        "{}/mcp/callback",
        cx.config.mcp.frontend_url.trim_end_matches('/')
    );
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params.iter())
        .finish();
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query);
    }
    url
}

/// The OAuth redirect URI of this service.
pub fn redirect_uri(cx: &ServerContext) -> String {
    cx.config.mcp.redirect_uri()
}

fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn quota(
    cx: &ServerContext,
    features: crate::db::datastore::organizations::FeatureOverrides,
) -> u32 {
    features
        .mcp_sessions
        .map(|v| v.max(0) as u32)
        .unwrap_or(cx.config.features.mcp_sessions)
}

pub async fn connect_account(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::McpWrite>,
    body: ConnectAccount,
) -> Result<ConnectionStart, Error> {
    check_flow_type(body.flow_type.as_deref())?;
    let server = cx.datastore.mcp_server_get(grant, body.server_id).await?;
    let config = configured(cx, server.id)?;
    let quota = quota(cx, cx.datastore.org_features(grant).await?);
    let session_id = Uuid::new_v4();
    match config.auth {
        McpAuth::None => {
            cx.datastore
                .mcp_session_create(
                    grant,
                    session_id,
                    server.id,
                    quota,
                    body.flow_type.as_deref(),
                    None,
                    &server.toolkit_name,
                )
                .await?;
            let server_id = server.id.to_string();
            let session = session_id.to_string();
            let mut params = vec![
                ("mcp_server_id", server_id.as_str()),
                ("mcp_session_id", session.as_str()),
            ];
            if let Some(f) = body.flow_type.as_deref() {
                params.push(("flow_type", f));
            }
            let redirect_url = frontend_callback(cx, &params);
            Ok(ConnectionStart {
                id: session_id.to_string(),
                status: "active".to_string(),
                redirect_url,
                connection_data: ConnectionData {
                    auth_config: "none".to_string(),
                    expected_params: Vec::new(),
                },
            })
        }
        McpAuth::Oauth => {
            let flow = crate::mcp::oauth::start(cx, &server, config).await?;
            let state = flow.state.clone();
            let flow_json = serde_json::to_vec(&flow.stored).map_err(Error::internal)?;
            let sealed = cx.secrets.seal(&flow_json, session_id.as_bytes());
            let expires =
                chrono::Utc::now() + chrono::Duration::seconds(cx.config.mcp.state_ttl_secs as i64);
            cx.datastore
                .mcp_session_create(
                    grant,
                    session_id,
                    server.id,
                    quota,
                    body.flow_type.as_deref(),
                    Some((&crate::authn::hash_secret(&state), expires, &sealed)),
                    &server.toolkit_name,
                )
                .await?;
            Ok(ConnectionStart {
                id: session_id.to_string(),
                status: "pending".to_string(),
                redirect_url: flow.authorization_url,
                connection_data: ConnectionData {
                    auth_config: "oauth2".to_string(),
                    expected_params: vec!["code".to_string(), "state".to_string()],
                },
            })
        }
    }
}

/// The OAuth callback: always a URL of the frontend to redirect to.
pub async fn callback(
    cx: &ServerContext,
    query: CallbackQuery,
    origin: &crate::audit::Origin,
) -> String {
    match callback_inner(cx, query, origin).await {
        Ok(url) => url,
        Err(code) => frontend_callback(cx, &[("error", code.as_str())]),
    }
}

async fn callback_inner(
    cx: &ServerContext,
    query: CallbackQuery,
    origin: &crate::audit::Origin,
) -> Result<String, String> {
    let Some(state) = query.state.as_deref().filter(|s| !s.is_empty()) else {
        return Err("invalid_state".to_string());
    };
    let taken = cx.authorize_oauth_state(state).await.map_err(|e| {
        slog::warn!(cx.log, "MCP callback: reading the session failed"; "error" => %e);
        "server_error".to_string()
    })?;
    let Some((grant, session)) = taken else {
        return Err("invalid_state".to_string());
    };
    let fail = |code: String| async move {
        if let Err(e) = cx.datastore.mcp_session_fail(&grant).await {
            slog::warn!(cx.log, "MCP callback: failing the session failed"; "error" => %e);
        }
        code
    };
    if let Some(error) = query.error.as_deref() {
        let code = if error
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            error.to_string()
        } else {
            "access_denied".to_string()
        };
        return Err(fail(code).await);
    }
    let Some(code) = query.code.as_deref().filter(|c| !c.is_empty()) else {
        return Err(fail("invalid_request".to_string()).await);
    };
    let Some(config) = cx.mcp_catalog.get(&session.server_id) else {
        return Err(fail("server_not_configured".to_string()).await);
    };
    let flow: Option<crate::mcp::oauth::StoredFlow> = session
        .flow_sealed
        .as_deref()
        .and_then(|sealed| cx.secrets.open(sealed, session.id.as_bytes()).ok())
        .and_then(|plain| serde_json::from_slice(&plain).ok());
    let Some(flow) = flow else {
        return Err(fail("invalid_state".to_string()).await);
    };
    let iss = query.iss.as_deref();
    let tokens = match crate::mcp::oauth::exchange(cx, config, &flow, code, state, iss).await {
        Ok(tokens) => tokens,
        Err(Error::InvalidRequest {
            code: "issuer_mismatch",
            message,
        }) => {
            slog::warn!(cx.log, "MCP callback: the issuer does not match"; "error" => %message);
            return Err(fail("issuer_mismatch".to_string()).await);
        }
        Err(e) => {
            slog::warn!(cx.log, "MCP callback: the code exchange failed"; "error" => %e);
            return Err(fail("token_exchange_failed".to_string()).await);
        }
    };
    let tokens_json = serde_json::to_vec(&tokens.stored).map_err(|_| "server_error".to_string())?;
    let tokens_sealed = cx.secrets.seal(&tokens_json, session.id.as_bytes());
    // Keep what refresh and revocation need; the verifier is spent.
    let mut kept = flow.clone();
    kept.auth_state = None;
    let kept = serde_json::to_vec(&kept).map_err(|_| "server_error".to_string())?;
    let kept = cx.secrets.seal(&kept, session.id.as_bytes());
    let name = cx
        .mcp_catalog
        .get(&session.server_id)
        .map(|c| c.toolkit_name.clone())
        .unwrap_or_default();
    match cx
        .datastore
        .mcp_session_activate(
            &grant,
            &session,
            &tokens_sealed,
            tokens.expires_at,
            &kept,
            &name,
            origin,
        )
        .await
    {
        Ok(Some(_)) => {}
        Ok(None) => return Err("invalid_state".to_string()),
        Err(e) => {
            slog::warn!(cx.log, "MCP callback: activating the session failed"; "error" => %e);
            return Err("server_error".to_string());
        }
    }
    let server_id = session.server_id.to_string();
    let session_id = session.id.to_string();
    let mut params = vec![
        ("mcp_server_id", server_id.as_str()),
        ("mcp_session_id", session_id.as_str()),
    ];
    if let Some(f) = session.flow_type.as_deref() {
        params.push(("flow_type", f));
    }
    Ok(frontend_callback(cx, &params))
}

pub async fn list_instances(
    cx: &ServerContext,
    access: &OrgAccess,
    server_id: Option<Uuid>,
) -> Result<McpInstanceList, Error> {
    Ok(McpInstanceList {
        instances: cx
            .datastore
            .mcp_instances_list(access, server_id)
            .await?
            .into_iter()
            .map(instance_view)
            .collect(),
    })
}

pub const INSTANCE_NAME_MAX_CHARS: usize = 100;

pub async fn rename_instance(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::McpWrite>,
    id: Uuid,
    name: &str,
) -> Result<McpInstance, Error> {
    let name = name.trim();
    let count = name.chars().count();
    if count == 0 || count > INSTANCE_NAME_MAX_CHARS || name.chars().any(char::is_control) {
        return Err(Error::invalid(
            "invalid_name",
            format!(
                "the name must be 1 to {INSTANCE_NAME_MAX_CHARS} characters, without control characters"
            ),
        ));
    }
    Ok(instance_view(
        cx.datastore.mcp_instance_rename(grant, id, name).await?,
    ))
}

pub async fn delete_instance(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::McpWrite>,
    id: Uuid,
) -> Result<McpDeleted, Error> {
    let deleted = cx.datastore.mcp_instance_delete(grant, id).await?;
    if let (Some(sealed), Some(config)) = (
        deleted.tokens_sealed.as_deref(),
        cx.mcp_catalog.get(&deleted.server_id),
    ) {
        match cx.secrets.open(sealed, deleted.session_id.as_bytes()) {
            Ok(plain) => {
                if let Ok(tokens) = serde_json::from_slice(&plain)
                    && let Err(e) = crate::mcp::oauth::revoke(cx, config, &tokens).await
                {
                    slog::warn!(grant.log(), "revoking MCP tokens failed"; "error" => %e);
                }
            }
            Err(e) => slog::warn!(grant.log(), "opening MCP tokens failed"; "error" => ?e),
        }
    }
    Ok(McpDeleted {
        success: true,
        message: "MCP instance deleted".to_string(),
    })
}

pub async fn generate_url(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::McpWrite>,
    body: GenerateUrl,
) -> Result<McpUrl, Error> {
    let secret = random_secret();
    let status = cx
        .datastore
        .mcp_instance_set_gateway(
            grant,
            body.server_id,
            body.session_id,
            &crate::authn::hash_secret(&secret),
        )
        .await?;
    Ok(McpUrl {
        mcp_url: format!(
            "{}/api/mcp/gateway/{secret}",
            cx.config.mcp.api_public_url.trim_end_matches('/')
        ),
        status: status.as_str().to_string(),
    })
}
