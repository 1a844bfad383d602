//! OAuth 2.1 with PKCE for MCP servers, through `rmcp`'s auth module:
//! RFC 9728 protected-resource metadata then RFC 8414 authorization-server
//! metadata, RFC 7591 dynamic registration when no `client_id` is
//! configured, PKCE S256, the code exchange; RFC 7009 revocation by hand
//! (rmcp has none).
//!
//! Nothing is kept in process memory between the two halves of a flow:
//! what the callback needs (the metadata, the client, rmcp's PKCE state) is
//! sealed into the session row, so any instance of the service may receive
//! the callback.

use crate::context::ServerContext;
use crate::db::datastore::mcp::McpServerRow;
use crate::error::Error;
use crate::mcp::config::McpServerConfig;
use chrono::{DateTime, Utc};
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, InMemoryCredentialStore, InMemoryStateStore,
    OAuthClientConfig, StateStore, StoredAuthorizationState,
};
use serde::{Deserialize, Serialize};

/// The client this service is at an authorization server.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Client {
    pub client_id: String,
    pub client_secret: Option<String>,
}

/// What the callback needs of a pending flow (sealed in the session).
#[derive(Clone, Deserialize, Serialize)]
pub struct StoredFlow {
    pub metadata: AuthorizationMetadata,
    pub client: Client,
    pub scopes: Vec<String>,
    pub redirect_uri: String,
    /// rmcp's PKCE state (verifier, CSRF token); `None` once spent.
    pub auth_state: Option<StoredAuthorizationState>,
}

/// The tokens of an active session and what refreshing and revoking them
/// needs (sealed in the session).
#[derive(Clone, Deserialize, Serialize)]
pub struct StoredTokens {
    /// The token endpoint's answer as received (`access_token`,
    /// `refresh_token`, `expires_in`, ...).
    pub token: serde_json::Value,
    pub received_at: DateTime<Utc>,
    pub client: Client,
    pub token_endpoint: String,
    pub revocation_endpoint: Option<String>,
}

impl StoredTokens {
    pub fn access_token(&self) -> Option<&str> {
        self.token.get("access_token").and_then(|v| v.as_str())
    }
    pub fn refresh_token(&self) -> Option<&str> {
        self.token.get("refresh_token").and_then(|v| v.as_str())
    }
}

/// A started flow.
pub struct Started {
    pub authorization_url: String,
    /// The `state` of the authorization URL (rmcp's CSRF token).
    pub state: String,
    pub stored: StoredFlow,
}

/// The tokens of a finished flow.
pub struct Tokens {
    pub stored: StoredTokens,
    pub expires_at: Option<DateTime<Utc>>,
}

fn gateway(e: impl std::fmt::Display) -> Error {
    crate::app::mcp::unavailable(format!("MCP authorization failed: {e}"))
}

async fn manager(url: &str) -> Result<AuthorizationManager, Error> {
    // The catalog is the operator's: its servers may live on private or
    // loopback addresses (rmcp still rejects link-local and reserved ones).
    AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(gateway)
}

/// Discovers the authorization server, registers (or reuses) the client
/// and builds the authorization URL with PKCE S256.
pub async fn start(
    cx: &ServerContext,
    server: &McpServerRow,
    config: &McpServerConfig,
) -> Result<Started, Error> {
    let mut m = manager(&server.url).await?;
    let resolution = m.resolve_metadata().await.map_err(gateway)?;
    if !resolution.source.is_discovered() {
        return Err(gateway(
            "the server publishes no OAuth metadata (RFC 9728 / RFC 8414)",
        ));
    }
    let metadata = resolution.metadata;
    m.set_metadata(metadata.clone());
    let redirect_uri = crate::app::mcp::redirect_uri(cx);
    let scopes: Vec<String> = if config.scopes.is_empty() {
        m.select_initial_scopes(&[]).await
    } else {
        config.scopes.clone()
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let client = match &config.client_id {
        Some(id) => Client {
            client_id: id.clone(),
            client_secret: config.client_secret.clone(),
        },
        None => registered_client(cx, server, &mut m, &redirect_uri, &scope_refs).await?,
    };
    let mut client_config = OAuthClientConfig::new(client.client_id.clone(), redirect_uri.clone())
        .with_scopes(scopes.clone());
    if let Some(secret) = &client.client_secret {
        client_config = client_config.with_client_secret(secret.clone());
    }
    m.configure_client(client_config).map_err(gateway)?;
    let states = InMemoryStateStore::new();
    m.set_state_store(states.clone());
    let authorization_url = m
        .get_authorization_url(&scope_refs)
        .await
        .map_err(gateway)?;
    let state = url::Url::parse(&authorization_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| Error::internal("the authorization URL has no state"))?;
    let auth_state = states.load(&state).await.map_err(Error::internal)?;
    if auth_state.is_none() {
        return Err(Error::internal("rmcp kept no PKCE state"));
    }
    Ok(Started {
        authorization_url,
        state,
        stored: StoredFlow {
            metadata,
            client,
            scopes,
            redirect_uri,
            auth_state,
        },
    })
}

/// The stored dynamic registration of the server for this redirect URI,
/// or a new one (RFC 7591) stored sealed.
async fn registered_client(
    cx: &ServerContext,
    server: &McpServerRow,
    m: &mut AuthorizationManager,
    redirect_uri: &str,
    scopes: &[&str],
) -> Result<Client, Error> {
    let aad = server.id.as_bytes();
    if let Some(sealed) = cx
        .datastore
        .mcp_oauth_client_get(server.id, redirect_uri)
        .await?
        && let Ok(plain) = cx.secrets.open(&sealed, aad)
        && let Ok(client) = serde_json::from_slice::<Client>(&plain)
    {
        return Ok(client);
    }
    let registered = m
        .register_client("Workspace", redirect_uri, scopes)
        .await
        .map_err(gateway)?;
    let client = Client {
        client_id: registered.client_id,
        client_secret: registered.client_secret,
    };
    let plain = serde_json::to_vec(&client).map_err(Error::internal)?;
    cx.datastore
        .mcp_oauth_client_put(server.id, redirect_uri, &cx.secrets.seal(&plain, aad))
        .await?;
    // Another instance may have registered at the same time: use the
    // stored one so that every instance agrees.
    if let Some(sealed) = cx
        .datastore
        .mcp_oauth_client_get(server.id, redirect_uri)
        .await?
        && let Ok(plain) = cx.secrets.open(&sealed, aad)
        && let Ok(stored) = serde_json::from_slice::<Client>(&plain)
    {
        return Ok(stored);
    }
    Ok(client)
}

/// Exchanges the code with the PKCE verifier of the flow.
pub async fn exchange(
    _cx: &ServerContext,
    config: &McpServerConfig,
    flow: &StoredFlow,
    code: &str,
    state: &str,
) -> Result<Tokens, Error> {
    let Some(auth_state) = flow.auth_state.clone() else {
        return Err(Error::internal("the flow's PKCE state is spent"));
    };
    let mut m = manager(&config.url).await?;
    m.set_metadata(flow.metadata.clone());
    let mut client_config =
        OAuthClientConfig::new(flow.client.client_id.clone(), flow.redirect_uri.clone())
            .with_scopes(flow.scopes.clone());
    if let Some(secret) = &flow.client.client_secret {
        client_config = client_config.with_client_secret(secret.clone());
    }
    m.configure_client(client_config).map_err(gateway)?;
    let states = InMemoryStateStore::new();
    states
        .save(state, auth_state)
        .await
        .map_err(Error::internal)?;
    m.set_state_store(states);
    m.set_credential_store(InMemoryCredentialStore::new());
    let response = m
        .exchange_code_for_token(code, state)
        .await
        .map_err(gateway)?;
    let token = serde_json::to_value(&response).map_err(Error::internal)?;
    let received_at = Utc::now();
    let expires_at = token
        .get("expires_in")
        .and_then(|v| v.as_i64())
        .map(|secs| received_at + chrono::Duration::seconds(secs));
    let revocation_endpoint = flow
        .metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Ok(Tokens {
        stored: StoredTokens {
            token,
            received_at,
            client: flow.client.clone(),
            token_endpoint: flow.metadata.token_endpoint.clone(),
            revocation_endpoint,
        },
        expires_at,
    })
}

/// Revokes the tokens at the provider (RFC 7009) when it declares a
/// revocation endpoint: the refresh token (which revokes the grant), else
/// the access token.
pub async fn revoke(
    _cx: &ServerContext,
    _config: &McpServerConfig,
    tokens: &StoredTokens,
) -> Result<(), Error> {
    let Some(endpoint) = &tokens.revocation_endpoint else {
        return Ok(());
    };
    let (token, hint) = match (tokens.refresh_token(), tokens.access_token()) {
        (Some(t), _) => (t, "refresh_token"),
        (None, Some(t)) => (t, "access_token"),
        (None, None) => return Ok(()),
    };
    let mut form = vec![
        ("token", token),
        ("token_type_hint", hint),
        ("client_id", tokens.client.client_id.as_str()),
    ];
    if let Some(secret) = tokens.client.client_secret.as_deref() {
        form.push(("client_secret", secret));
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = reqwest::Client::new()
        .post(endpoint)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .map_err(gateway)?;
    if !response.status().is_success() {
        return Err(gateway(format!(
            "the revocation endpoint answered {}",
            response.status()
        )));
    }
    Ok(())
}

/// Why a refresh failed.
pub enum RefreshError {
    /// The grant is gone (`invalid_grant`, `401`): connect again.
    Revoked(String),
    /// Anything else (unreachable, `5xx`): try again later.
    Failed(String),
}

/// Exchanges the refresh token for new tokens (RFC 6749 section 6) at
/// the token endpoint, authenticating as the endpoint declares (a secret,
/// when the client has one, by `client_secret_post`; else the public
/// client's `client_id`). A server that does not return a new refresh
/// token keeps the old one valid.
pub async fn refresh(tokens: &StoredTokens) -> Result<Tokens, RefreshError> {
    let Some(refresh_token) = tokens.refresh_token() else {
        return Err(RefreshError::Revoked("no refresh token".to_string()));
    };
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", tokens.client.client_id.as_str()),
    ];
    if let Some(secret) = tokens.client.client_secret.as_deref() {
        form.push(("client_secret", secret));
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = reqwest::Client::new()
        .post(&tokens.token_endpoint)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body)
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await
        .map_err(|e| RefreshError::Failed(e.to_string()))?;
    let status = response.status();
    let json: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let error = json
            .get("error")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        return Err(
            if status.as_u16() == 401 || error == "invalid_grant" || error == "invalid_client" {
                RefreshError::Revoked(format!("{status} {error}"))
            } else {
                RefreshError::Failed(format!("{status} {error}"))
            },
        );
    }
    if json.get("access_token").and_then(|v| v.as_str()).is_none() {
        return Err(RefreshError::Failed("no access_token in the answer".into()));
    }
    let mut token = json;
    if token.get("refresh_token").is_none()
        && let Some(map) = token.as_object_mut()
    {
        map.insert("refresh_token".into(), refresh_token.into());
    }
    let received_at = Utc::now();
    let expires_at = token
        .get("expires_in")
        .and_then(|v| v.as_i64())
        .map(|secs| received_at + chrono::Duration::seconds(secs));
    Ok(Tokens {
        stored: StoredTokens {
            token,
            received_at,
            client: tokens.client.clone(),
            token_endpoint: tokens.token_endpoint.clone(),
            revocation_endpoint: tokens.revocation_endpoint.clone(),
        },
        expires_at,
    })
}
