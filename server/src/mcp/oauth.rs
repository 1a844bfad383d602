//! OAuth 2.1 with PKCE for MCP servers, through `rmcp`'s auth module:
//! RFC 9728 protected-resource metadata then RFC 8414 authorization-server
//! metadata, RFC 7591 dynamic registration when no `client_id` is
//! configured, PKCE S256, the code exchange; RFC 7009 revocation and
//! refreshing by hand (rmcp keeps neither outside its own session).
//!
//! Client authentication at the token and revocation endpoints uses one
//! method per client, decided when the flow starts ([`auth_method`]): the
//! `token_endpoint_auth_method` of the RFC 7591 registration response, else
//! (a configured client) the best the authorization server declares in
//! `token_endpoint_auth_methods_supported`: `client_secret_basic` when
//! listed or when the list is absent (RFC 8414's default), else
//! `client_secret_post`; a client without a secret is public (`none`: its
//! `client_id` in the body). The registration is made by hand (rmcp's drops
//! the answer's method) and asks for a public client, as MCP clients do.
//!
//! Every request of these flows (discovery, registration, token, refresh,
//! revocation) goes through one [`OAuthHttp`] client built by
//! [`crate::fetch`]: the endpoints come from an upstream's metadata, so
//! link-local and cloud-metadata addresses are refused, private ones only
//! when the MCP server itself is on a private or loopback address (or
//! `fetch.allow_private_networks`), and every answer is read up to
//! [`crate::fetch::MAX_ANSWER_BYTES`].
//!
//! Nothing is kept in process memory between the two halves of a flow:
//! what the callback needs (the metadata, the client, rmcp's PKCE state) is
//! sealed into the session row, so any instance of the service may receive
//! the callback.

use crate::context::ServerContext;
use crate::db::datastore::mcp::McpServerRow;
use crate::error::Error;
use crate::mcp::config::McpServerConfig;
use base64::Engine;
use chrono::{DateTime, Utc};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, InMemoryCredentialStore,
    InMemoryStateStore, OAuthClientConfig, OAuthHttpClient, OAuthHttpClientError,
    OAuthHttpClientFuture, OAuthHttpRedirectPolicy, OAuthHttpRequest, StateStore,
    StoredAuthorizationState,
};
use serde::{Deserialize, Serialize};

/// The HTTP client of the OAuth flows of one MCP server (see the module
/// documentation): rmcp's requests and this module's own.
#[derive(Clone)]
pub struct OAuthHttp {
    log: slog::Logger,
    allow_private: bool,
    follow: reqwest::Client,
    stop: reqwest::Client,
}

/// Whether `url`'s host is a loopback or private address, or `localhost`.
pub(crate) fn is_local(url: &str) -> bool {
    match url::Url::parse(url).ok().as_ref().and_then(|u| u.host()) {
        Some(url::Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => !crate::fetch::is_public(ip.into()),
        Some(url::Host::Ipv6(ip)) => !crate::fetch::is_public(ip.into()),
        None => false,
    }
}

/// Why an OAuth request failed; its text never holds the answer's body.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Refused(crate::fetch::GuardError),
    #[error("the request failed: {0}")]
    Send(String),
    #[error(transparent)]
    Body(#[from] crate::fetch::BodyError),
}

impl OAuthHttp {
    /// The client for the MCP server at `mcp_url`.
    pub fn new(
        log: &slog::Logger,
        fetch: &crate::kb_config::FetchConfig,
        mcp_url: &str,
    ) -> Result<OAuthHttp, Error> {
        let allow_private = fetch.allow_private_networks || is_local(mcp_url);
        let build = |redirects| {
            crate::fetch::guarded_builder(allow_private, redirects)
                .timeout(std::time::Duration::from_secs(15))
                .connect_timeout(std::time::Duration::from_secs(10))
                .build()
                .map_err(|e| Error::internal(format!("building the OAuth client: {e}")))
        };
        Ok(OAuthHttp {
            log: log.clone(),
            allow_private,
            follow: build(5)?,
            stop: build(0)?,
        })
    }

    /// Sends `request` (redirects not followed); the status and the body,
    /// at most [`crate::fetch::MAX_ANSWER_BYTES`].
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, bytes::Bytes), HttpError> {
        let request = request
            .build()
            .map_err(|e| HttpError::Send(crate::error::chain(&e)))?;
        let (status, _, body) = self.execute_on(&self.stop, request).await?;
        Ok((status, body))
    }

    async fn execute_on(
        &self,
        client: &reqwest::Client,
        request: reqwest::Request,
    ) -> Result<
        (
            reqwest::StatusCode,
            reqwest::header::HeaderMap,
            bytes::Bytes,
        ),
        HttpError,
    > {
        let url = request.url().to_string();
        let result = self.execute_unlogged(client, request).await;
        if let Err(e) = &result {
            // rmcp keeps only the text of some errors: said here whole.
            slog::warn!(self.log, "an MCP OAuth request failed"; "url" => url, "error" => %e);
        }
        result
    }

    async fn execute_unlogged(
        &self,
        client: &reqwest::Client,
        request: reqwest::Request,
    ) -> Result<
        (
            reqwest::StatusCode,
            reqwest::header::HeaderMap,
            bytes::Bytes,
        ),
        HttpError,
    > {
        // A literal address skips the resolver: checked here.
        crate::fetch::check_url(request.url(), self.allow_private).map_err(HttpError::Refused)?;
        let response = client.execute(request).await.map_err(|e| {
            let text = crate::error::chain(&e);
            match refusal(&e) {
                Some(g) => HttpError::Refused(g),
                None => HttpError::Send(text),
            }
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = crate::fetch::read_limited(response, crate::fetch::MAX_ANSWER_BYTES).await?;
        Ok((status, headers, body))
    }

    /// A POST to an endpoint named by the metadata.
    fn post(&self, url: &str) -> reqwest::RequestBuilder {
        self.stop.post(url)
    }
}

/// The guard's refusal inside a reqwest error, if that is what it is.
fn refusal(e: &reqwest::Error) -> Option<crate::fetch::GuardError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(g) = s.downcast_ref::<crate::fetch::GuardError>() {
            return Some(g.clone());
        }
        source = s.source();
    }
    None
}

impl OAuthHttpClient for OAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let boxed = |e: HttpError| Box::new(e) as OAuthHttpClientError;
            let client = match request.redirect_policy {
                OAuthHttpRedirectPolicy::Stop => &self.stop,
                _ => &self.follow,
            };
            let version = request.request.version();
            let http = reqwest::Request::try_from(request.request)
                .map_err(|e| boxed(HttpError::Send(e.to_string())))?;
            let (status, headers, body) = self.execute_on(client, http).await.map_err(boxed)?;
            let mut builder = http::Response::builder().status(status).version(version);
            for (name, value) in &headers {
                builder = builder.header(name, value);
            }
            builder
                .body(body.to_vec())
                .map_err(|e| boxed(HttpError::Send(e.to_string())))
        })
    }
}

/// The client this service is at an authorization server.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Client {
    pub client_id: String,
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post` or `none`; absent in
    /// rows written before it was kept (then: `client_secret_post` with a
    /// secret, else `none`).
    #[serde(default)]
    pub auth_method: Option<String>,
}

/// A token-endpoint client authentication method this service speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    /// HTTP Basic with the form-urlencoded id and secret (RFC 6749 2.3.1).
    Basic,
    /// `client_id` and `client_secret` in the form body.
    Post,
    /// A public client: `client_id` in the form body, no secret.
    None,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Basic => "client_secret_basic",
            AuthMethod::Post => "client_secret_post",
            AuthMethod::None => "none",
        }
    }

    fn parse(s: &str) -> Option<AuthMethod> {
        match s {
            "client_secret_basic" => Some(AuthMethod::Basic),
            "client_secret_post" => Some(AuthMethod::Post),
            "none" => Some(AuthMethod::None),
            _ => None,
        }
    }
}

impl Client {
    /// The method this client authenticates with.
    pub fn method(&self) -> AuthMethod {
        match (
            self.auth_method.as_deref().and_then(AuthMethod::parse),
            &self.client_secret,
        ) {
            (_, None) => AuthMethod::None,
            (Some(m), Some(_)) => m,
            (None, Some(_)) => AuthMethod::Post,
        }
    }

    /// Adds this client's authentication to a token or revocation request
    /// whose form is `form`; the request with its form body.
    fn authenticate<'a>(
        &'a self,
        request: reqwest::RequestBuilder,
        mut form: Vec<(&'a str, &'a str)>,
    ) -> reqwest::RequestBuilder {
        let request = match (self.method(), self.client_secret.as_deref()) {
            (AuthMethod::Basic, Some(secret)) => {
                let enc = |v: &str| {
                    url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
                };
                let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    enc(&self.client_id),
                    enc(secret)
                ));
                request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("Basic {credentials}"),
                )
            }
            (AuthMethod::Post, Some(secret)) => {
                form.push(("client_id", self.client_id.as_str()));
                form.push(("client_secret", secret));
                request
            }
            _ => {
                form.push(("client_id", self.client_id.as_str()));
                request
            }
        };
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
    }
}

/// The method a client authenticates with at the token endpoint: the one
/// its registration declared, else the best of the server's
/// `token_endpoint_auth_methods_supported` (absent: `client_secret_basic`,
/// RFC 8414's default); `none` without a secret.
pub fn auth_method(
    metadata: &AuthorizationMetadata,
    declared: Option<&str>,
    has_secret: bool,
) -> AuthMethod {
    if !has_secret {
        return AuthMethod::None;
    }
    if let Some(m) = declared.and_then(AuthMethod::parse) {
        return m;
    }
    let supported: Option<Vec<&str>> = metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|m| m.as_str()).collect());
    match supported {
        None => AuthMethod::Basic,
        Some(list) if list.contains(&"client_secret_basic") => AuthMethod::Basic,
        Some(list) if list.contains(&"client_secret_post") => AuthMethod::Post,
        Some(list) if list.contains(&"none") => AuthMethod::None,
        Some(_) => AuthMethod::Basic,
    }
}

/// `metadata` as rmcp should see it for the code exchange: it picks HTTP
/// Basic unless `client_secret_post` alone is listed, so the list is
/// narrowed to the client's method.
fn metadata_for(metadata: &AuthorizationMetadata, method: AuthMethod) -> AuthorizationMetadata {
    let mut m = metadata.clone();
    m.additional_fields.insert(
        "token_endpoint_auth_methods_supported".to_string(),
        serde_json::json!([method.as_str()]),
    );
    m
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
    super::unavailable(format!("MCP authorization failed: {e}"))
}

/// rmcp's error as a `502` that names the kind of failure, never an
/// upstream's text (its messages can carry the authorization server's
/// answer); the whole error is logged.
fn auth_failed(log: &slog::Logger, e: AuthError) -> Error {
    slog::warn!(log, "MCP authorization failed"; "error" => %crate::error::chain(&e));
    // This service's own refusal (guard, body limit) is said as it is.
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if let Some(ours) = s.downcast_ref::<HttpError>() {
            return gateway(ours);
        }
        source = s.source();
    }
    gateway(match e {
        AuthError::AuthorizationFailed(_) => "the authorization failed",
        AuthError::TokenExchangeFailed(_) => "the token endpoint refused the code",
        AuthError::TokenRefreshFailed(_) | AuthError::TokenRefreshRejected(_) => {
            "refreshing the token failed"
        }
        AuthError::HttpError(_) => "the authorization server cannot be reached",
        AuthError::DiscoveryRequestFailed { .. }
        | AuthError::ProtectedResourceMetadataInvalid { .. }
        | AuthError::AuthorizationServersUnavailable { .. }
        | AuthError::MetadataError(_)
        | AuthError::NoAuthorizationSupport => "no usable OAuth metadata was discovered",
        AuthError::PkceUnsupported => "the authorization server does not support PKCE with S256",
        AuthError::RegistrationFailed(_) => "the dynamic client registration failed",
        AuthError::InvalidScope(_) => "the scope was refused",
        _ => "the OAuth exchange failed",
    })
}

async fn manager(
    log: &slog::Logger,
    url: &str,
    http: &OAuthHttp,
) -> Result<AuthorizationManager, Error> {
    // The address policy is the client's; rmcp checks the host strings of
    // discovered URLs (literal private addresses refused unless the MCP
    // server is on loopback).
    AuthorizationManager::new_with_oauth_http_client(url, std::sync::Arc::new(http.clone()))
        .await
        .map_err(|e| auth_failed(log, e))
}

/// Discovers the authorization server, registers (or reuses) the client
/// and builds the authorization URL with PKCE S256.
pub async fn start(
    cx: &ServerContext,
    server: &McpServerRow,
    config: &McpServerConfig,
) -> Result<Started, Error> {
    let http = OAuthHttp::new(&cx.log, &cx.config.fetch, &server.url)?;
    let log = &cx.log;
    let mut m = manager(log, &server.url, &http).await?;
    let resolution = m
        .resolve_metadata()
        .await
        .map_err(|e| auth_failed(log, e))?;
    if !resolution.source.is_discovered() {
        return Err(gateway(
            "the server publishes no OAuth metadata (RFC 9728 / RFC 8414)",
        ));
    }
    let metadata = resolution.metadata;
    m.set_metadata(metadata.clone());
    let redirect_uri = cx.config.mcp.redirect_uri();
    let scopes: Vec<String> = if config.scopes.is_empty() {
        m.select_initial_scopes(&[]).await
    } else {
        config.scopes.clone()
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let mut client = match &config.client_id {
        Some(id) => Client {
            client_id: id.clone(),
            client_secret: config.client_secret.clone(),
            auth_method: None,
        },
        None => registered_client(cx, &http, server, &metadata, &redirect_uri, &scopes).await?,
    };
    let method = auth_method(
        &metadata,
        client.auth_method.as_deref(),
        client.client_secret.is_some(),
    );
    client.auth_method = Some(method.as_str().to_string());
    configure(log, &mut m, &metadata, &client, &redirect_uri, &scopes)?;
    let states = InMemoryStateStore::new();
    m.set_state_store(states.clone());
    let authorization_url = m
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|e| auth_failed(log, e))?;
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

/// Configures rmcp's OAuth client for `client` (its secret only when it
/// authenticates with one; the metadata narrowed to its method).
fn configure(
    log: &slog::Logger,
    m: &mut AuthorizationManager,
    metadata: &AuthorizationMetadata,
    client: &Client,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<(), Error> {
    let method = client.method();
    m.set_metadata(metadata_for(metadata, method));
    let mut client_config =
        OAuthClientConfig::new(client.client_id.clone(), redirect_uri.to_string())
            .with_scopes(scopes.to_vec());
    if let (Some(secret), false) = (&client.client_secret, method == AuthMethod::None) {
        client_config = client_config.with_client_secret(secret.clone());
    }
    m.configure_client(client_config)
        .map_err(|e| auth_failed(log, e))
}

/// RFC 7591 dynamic registration, asking for a public client as MCP
/// clients do; the answer's `client_secret` and `token_endpoint_auth_method`
/// are kept (rmcp's registration drops the method).
async fn register(
    http: &OAuthHttp,
    metadata: &AuthorizationMetadata,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<Client, Error> {
    let Some(endpoint) = metadata.registration_endpoint.as_deref() else {
        return Err(gateway(
            "the authorization server offers no dynamic client registration: configure a client_id",
        ));
    };
    let mut request = serde_json::json!({
        "client_name": "Workspace",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if !scopes.is_empty() {
        request["scope"] = scopes.join(" ").into();
    }
    let (status, body) = http
        .send(http.post(endpoint).json(&request))
        .await
        .map_err(|e| gateway(format!("the registration endpoint: {e}")))?;
    if !status.is_success() {
        return Err(gateway(format!(
            "the registration endpoint answered {status}"
        )));
    }
    let answer: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|_| gateway("the registration endpoint's answer is not JSON"))?;
    let Some(client_id) = answer["client_id"].as_str().filter(|s| !s.is_empty()) else {
        return Err(gateway("the registration answer has no client_id"));
    };
    Ok(Client {
        client_id: client_id.to_string(),
        // An empty secret is a public client (as rmcp reads it).
        client_secret: answer["client_secret"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        auth_method: answer["token_endpoint_auth_method"]
            .as_str()
            .map(str::to_string),
    })
}

/// The stored dynamic registration of the server for this redirect URI,
/// or a new one (RFC 7591) stored sealed.
async fn registered_client(
    cx: &ServerContext,
    http: &OAuthHttp,
    server: &McpServerRow,
    metadata: &AuthorizationMetadata,
    redirect_uri: &str,
    scopes: &[String],
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
    let client = register(http, metadata, redirect_uri, scopes).await?;
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

/// Exchanges the code with the PKCE verifier of the flow, after checking
/// the authorization response's `iss` (RFC 9207) against the issuer
/// discovered for the flow: `400 issuer_mismatch` when they differ, or
/// when a provider that announces `iss` sent none.
pub async fn exchange(
    cx: &ServerContext,
    config: &McpServerConfig,
    flow: &StoredFlow,
    code: &str,
    state: &str,
    iss: Option<&str>,
) -> Result<Tokens, Error> {
    let Some(auth_state) = flow.auth_state.clone() else {
        return Err(Error::internal("the flow's PKCE state is spent"));
    };
    let http = OAuthHttp::new(&cx.log, &cx.config.fetch, &config.url)?;
    let log = &cx.log;
    let mut m = manager(log, &config.url, &http).await?;
    configure(
        log,
        &mut m,
        &flow.metadata,
        &flow.client,
        &flow.redirect_uri,
        &flow.scopes,
    )?;
    let states = InMemoryStateStore::new();
    states
        .save(state, auth_state)
        .await
        .map_err(Error::internal)?;
    m.set_state_store(states);
    m.set_credential_store(InMemoryCredentialStore::new());
    let response = m
        .exchange_code_for_token_with_issuer(code, state, iss)
        .await
        .map_err(|e| match e {
            AuthError::AuthorizationServerMismatch { .. }
            | AuthError::AuthorizationServerMissingIssuer { .. } => {
                Error::invalid("issuer_mismatch", e.to_string())
            }
            e => auth_failed(log, e),
        })?;
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
    cx: &ServerContext,
    config: &McpServerConfig,
    tokens: &StoredTokens,
) -> Result<(), Error> {
    revoke_at(&cx.log, &cx.config.fetch, &config.url, tokens).await
}

/// [`revoke`] outside a request (a deletion job): `mcp_url` is the MCP
/// server's, which decides the addresses its endpoints may have (see
/// [`OAuthHttp::new`]).
pub async fn revoke_at(
    log: &slog::Logger,
    fetch: &crate::kb_config::FetchConfig,
    mcp_url: &str,
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
    let form = vec![("token", token), ("token_type_hint", hint)];
    let http = OAuthHttp::new(log, fetch, mcp_url)?;
    let (status, _) = http
        .send(tokens.client.authenticate(http.post(endpoint), form))
        .await
        .map_err(|e| gateway(format!("the revocation endpoint: {e}")))?;
    if !status.is_success() {
        return Err(gateway(format!(
            "the revocation endpoint answered {status}"
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
/// the token endpoint, authenticating with the client's method (see the
/// module documentation). A server that does not return a new refresh
/// token keeps the old one valid. `http` is the MCP server's
/// ([`OAuthHttp::new`]).
pub async fn refresh(http: &OAuthHttp, tokens: &StoredTokens) -> Result<Tokens, RefreshError> {
    let Some(refresh_token) = tokens.refresh_token() else {
        return Err(RefreshError::Revoked("no refresh token".to_string()));
    };
    let form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
    ];
    let request = tokens
        .client
        .authenticate(http.post(&tokens.token_endpoint), form)
        .header(reqwest::header::ACCEPT, "application/json");
    let (status, body) = http
        .send(request)
        .await
        .map_err(|e| RefreshError::Failed(format!("the token endpoint: {e}")))?;
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if !status.is_success() {
        // The error code only when it looks like one (RFC 6749 codes are
        // a few lowercase words): the text may reach an API client.
        let error = json
            .get("error")
            .and_then(|v| v.as_str())
            .filter(|e| e.len() <= 40 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
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
