//! The MCP gateway: `{api_public_url}/api/mcp/gateway/{secret}` is a
//! streamable HTTP endpoint that forwards every request to the instance's
//! MCP server with the user's OAuth access token, so that any MCP client
//! can use an instance without holding its tokens. Instead of the secret,
//! a client holding the user's access token may use
//! `/api/mcp/gateway/{instance_id}` with `Authorization: Bearer <token>`
//! (the caller's own instance, `mcp:write`); that header is never
//! forwarded.
//!
//! Tokens are refreshed before they expire (within a minute of expiry, with
//! up to 30 s of jitter so that instances do not all refresh at once), one
//! refresh at a time per (user, server) across instances (a PostgreSQL
//! advisory lock; the tokens are re-read under the lock, so a refresh made
//! meanwhile elsewhere is used, not repeated). A `401` from the server
//! tries one silent refresh and retries; a grant the authorization server
//! no longer honours marks the session `needs_reauth`.

use crate::authz::GatewayAccess;
use crate::context::ServerContext;
use crate::db::datastore::mcp::GatewayTarget;
use crate::db::enums::McpSessionStatus;
use crate::error::Error;
use crate::mcp::oauth::{RefreshError, StoredTokens};
use chrono::Utc;
use futures::StreamExt;

/// The request headers forwarded to the MCP server, and the answer's
/// headers forwarded back.
const REQUEST_HEADERS: &[&str] = &[
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];
const RESPONSE_HEADERS: &[&str] = &[
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "cache-control",
];

fn http_client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        crate::fetch::operator_client()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap_or_default()
    })
}

fn open_tokens(cx: &ServerContext, target: &GatewayTarget, sealed: &[u8]) -> Option<StoredTokens> {
    let plain = cx.secrets.open(sealed, target.session_id.as_bytes()).ok()?;
    serde_json::from_slice(&plain).ok()
}

fn not_active() -> Error {
    Error::conflict(
        "mcp_instance_not_active",
        "the MCP instance needs a new authorization: connect the account again",
    )
}

/// The access token to send: `None` for a server without authentication.
/// Refreshes first when the token is about to expire, or when `force`
/// (the server answered `401`).
pub(crate) async fn access_token(
    cx: &ServerContext,
    target: &GatewayTarget,
    force: bool,
) -> Result<Option<String>, Error> {
    let Some(sealed) = target.tokens_sealed.as_deref() else {
        return Ok(None);
    };
    let tokens = open_tokens(cx, target, sealed)
        .ok_or_else(|| Error::internal("the stored MCP tokens cannot be opened"))?;
    let jitter = i64::from(rand::random::<u8>() % 30);
    let soon = Utc::now() + chrono::Duration::seconds(60 + jitter);
    let due = force || target.token_expires_at.is_some_and(|t| t <= soon);
    if !due || tokens.refresh_token().is_none() {
        if force && tokens.refresh_token().is_none() {
            cx.datastore
                .mcp_session_needs_reauth(target.session_id)
                .await?;
            return Err(not_active());
        }
        return Ok(tokens.access_token().map(str::to_string));
    }
    let seen = sealed.to_vec();
    let outcome = cx
        .datastore
        .mcp_session_refresh(target, |current, expires| async move {
            let Some(current) = current else {
                return Ok((None, Err(Some(not_active()))));
            };
            let Some(tokens) = open_tokens(cx, target, &current) else {
                return Err(Error::internal("the stored MCP tokens cannot be opened"));
            };
            // Refreshed meanwhile by another request or instance: use it.
            let fresh = if force {
                current != seen
            } else {
                expires.is_none_or(|t| t > Utc::now() + chrono::Duration::seconds(60))
            };
            if fresh {
                return Ok((None, Ok(tokens.access_token().map(str::to_string))));
            }
            let http = crate::mcp::oauth::OAuthHttp::new(&cx.log, &cx.config.fetch, &target.url)?;
            match crate::mcp::oauth::refresh(&http, &tokens).await {
                Ok(new) => {
                    let plain = serde_json::to_vec(&new.stored).map_err(Error::internal)?;
                    let sealed = cx.secrets.seal(&plain, target.session_id.as_bytes());
                    let access = new.stored.access_token().map(str::to_string);
                    Ok((Some((sealed, new.expires_at)), Ok(access)))
                }
                Err(RefreshError::Revoked(why)) => {
                    slog::info!(cx.log, "an MCP grant was revoked"; "session" => %target.session_id,
                        "reason" => why);
                    Ok((None, Err(None)))
                }
                Err(RefreshError::Failed(why)) => Ok((
                    None,
                    Err(Some(crate::mcp::unavailable(format!(
                        "refreshing the MCP access token failed: {why}"
                    )))),
                )),
            }
        })
        .await?;
    match outcome {
        None => Err(not_active()),
        Some(Ok(token)) => Ok(token),
        Some(Err(Some(e))) => Err(e),
        Some(Err(None)) => {
            cx.datastore
                .mcp_session_needs_reauth(target.session_id)
                .await?;
            Err(not_active())
        }
    }
}

/// Forwards one request (`POST`, `GET` or `DELETE`) to the instance a
/// gateway secret granted.
pub async fn forward(
    cx: &ServerContext,
    (_grant, target): (GatewayAccess, GatewayTarget),
    method: reqwest::Method,
    headers: &http::HeaderMap,
    body: bytes::Bytes,
) -> Result<http::Response<dropshot::Body>, Error> {
    forward_target(cx, target, method, headers, body).await
}

/// Forwards one request to the caller's own instance `instance_id`
/// (authorized by the user's bearer token).
pub async fn forward_instance(
    cx: &ServerContext,
    access: &crate::authz::OrgAccess,
    instance_id: uuid::Uuid,
    method: reqwest::Method,
    headers: &http::HeaderMap,
    body: bytes::Bytes,
) -> Result<http::Response<dropshot::Body>, Error> {
    let (_, target) = cx
        .datastore
        .mcp_instance_targets(access, &[instance_id])
        .await?
        .into_iter()
        .next()
        .ok_or(Error::NotFound {
            what: "MCP instance",
        })?;
    forward_target(cx, target, method, headers, body).await
}

async fn forward_target(
    cx: &ServerContext,
    target: GatewayTarget,
    method: reqwest::Method,
    headers: &http::HeaderMap,
    body: bytes::Bytes,
) -> Result<http::Response<dropshot::Body>, Error> {
    if target.status != McpSessionStatus::Active {
        return Err(not_active());
    }
    let mut token = access_token(cx, &target, false).await?;
    let mut retried = false;
    loop {
        let mut request = http_client().request(method.clone(), &target.url).timeout(
            std::time::Duration::from_secs(cx.config.mcp.timeout_secs.max(1) * 10),
        );
        for name in REQUEST_HEADERS {
            if let Some(value) = headers.get(*name) {
                request = request.header(*name, value.as_bytes());
            }
        }
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        if !body.is_empty() {
            request = request.body(body.clone());
        }
        let response = request.send().await.map_err(|e| {
            crate::mcp::unavailable(format!("the MCP server cannot be reached: {e}"))
        })?;
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            if token.is_some() && !retried {
                retried = true;
                token = access_token(cx, &target, true).await?;
                continue;
            }
            return Err(crate::mcp::unavailable(
                "the MCP server rejected the stored credentials",
            ));
        }
        let mut builder = http::Response::builder().status(status);
        for name in RESPONSE_HEADERS {
            if let Some(value) = response.headers().get(*name) {
                builder = builder.header(*name, value.as_bytes());
            }
        }
        let frames = response.bytes_stream().map(|chunk| {
            chunk
                .map(hyper::body::Frame::data)
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        });
        return builder
            .body(dropshot::Body::wrap(http_body_util::StreamBody::new(
                frames,
            )))
            .map_err(Error::internal);
    }
}
