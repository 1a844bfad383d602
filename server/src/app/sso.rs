//! Single sign-on per organization (issue #37) with OpenID Connect, through
//! `openidconnect` (discovery, PKCE, nonce, ID-token verification): an
//! organization's admins register its provider; a person signs in with
//! `POST /api/auth/sso/start` (the provider's authorization URL; the
//! sign-in kept in the database) and `POST /api/auth/sso/callback` (the
//! code exchanged, the ID token checked, the person found or created, their
//! role set from their groups, a session started that acts in that
//! organization only).
//!
//! The provider's discovery document and keys are read at each sign-in, so
//! rotated keys are picked up at once and nothing is cached in one
//! instance. Every request to the provider goes through the fetch guard
//! (private addresses only for a provider on one, as for MCP servers) with
//! answers bounded.

use super::sessions::ClientInfo;
use crate::authz::{Admin, Grant, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::sso::{NewLogin, NewProvider, Person, ProviderRow, SignIn};
use crate::error::Error;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde_json::{Map, Value};
use uuid::Uuid;
use workspace_api::auth::LoginResponse;
use workspace_api::sso::{
    DOMAINS_MAX, LOGIN_LIFETIME_SECS, ROLE_MAPPINGS_MAX, SsoCallbackRequest, SsoConfig,
    SsoConfigInput, SsoRoleMapping, SsoStart, SsoStartRequest,
};

/// The grant of the operations that manage a provider.
pub type ManageGrant = Grant<on::Org, Admin<perm::OrganizationAdmin>>;

fn sso_failed(reason: impl Into<String>) -> Error {
    Error::unauthenticated("sso_failed", reason)
}

fn unavailable(what: &str) -> Error {
    Error::BadGateway {
        code: "sso_provider_unavailable",
        message: format!("the single sign-on provider could not be reached: {what}"),
    }
}

/// The HTTP client of one provider: the fetch guard, no redirects, short
/// timeouts, answers bounded.
#[derive(Clone)]
struct ProviderHttp {
    client: reqwest::Client,
    allow_private: bool,
}

/// Why a request to the provider failed (never its answer's body).
#[derive(Debug, thiserror::Error)]
enum HttpError {
    #[error("{0}")]
    Refused(crate::fetch::GuardError),
    #[error("the request failed: {0}")]
    Send(String),
    #[error(transparent)]
    Body(#[from] crate::fetch::BodyError),
}

impl ProviderHttp {
    fn new(cx: &ServerContext, issuer: &str) -> Result<ProviderHttp, Error> {
        let allow_private =
            cx.config.fetch.allow_private_networks || crate::mcp::oauth::is_local(issuer);
        let client = crate::fetch::guarded_builder(allow_private, 0)
            .timeout(std::time::Duration::from_secs(15))
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| Error::internal(format!("building the SSO client: {e}")))?;
        Ok(ProviderHttp {
            client,
            allow_private,
        })
    }

    async fn send(&self, request: reqwest::Request) -> Result<http::Response<Vec<u8>>, HttpError> {
        crate::fetch::check_url(request.url(), self.allow_private).map_err(HttpError::Refused)?;
        let response = self
            .client
            .execute(request)
            .await
            .map_err(|e| HttpError::Send(crate::error::chain(&e)))?;
        let mut builder = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            builder = builder.header(name, value);
        }
        let body = crate::fetch::read_limited(response, crate::fetch::MAX_ANSWER_BYTES).await?;
        builder
            .body(body.to_vec())
            .map_err(|e| HttpError::Send(e.to_string()))
    }

    /// The client `openidconnect` sends its requests with (its futures own
    /// what they use).
    fn oidc(
        &self,
    ) -> impl Fn(
        openidconnect::HttpRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Result<openidconnect::HttpResponse, HttpError>,
    > + Send
    + Sync {
        let http = self.clone();
        move |request| {
            let http = http.clone();
            Box::pin(async move { http.call(request).await })
        }
    }

    /// One of `openidconnect`'s requests.
    async fn call(
        &self,
        request: openidconnect::HttpRequest,
    ) -> Result<openidconnect::HttpResponse, HttpError> {
        let request =
            reqwest::Request::try_from(request).map_err(|e| HttpError::Send(e.to_string()))?;
        self.send(request).await
    }

    /// The provider's discovery document and keys, checked to name
    /// `issuer` exactly.
    async fn discover(&self, issuer: &str) -> Result<CoreProviderMetadata, Discovery> {
        let issuer = IssuerUrl::new(issuer.to_string())
            .map_err(|e| Discovery::Unusable(format!("the issuer is not a URL: {e}")))?;
        CoreProviderMetadata::discover_async(issuer, &self.oidc())
            .await
            .map_err(|e| match e {
                openidconnect::DiscoveryError::Validation(_) => Discovery::OtherIssuer,
                openidconnect::DiscoveryError::Request(e) => Discovery::Unreachable(e.to_string()),
                other => Discovery::Unusable(crate::error::chain(&other)),
            })
    }
}

/// Why reading a provider's discovery document failed.
enum Discovery {
    /// It names another issuer.
    OtherIssuer,
    /// It could not be reached.
    Unreachable(String),
    /// It is not a usable discovery document (or its keys are not).
    Unusable(String),
}

fn config_view(row: ProviderRow) -> SsoConfig {
    SsoConfig {
        organization_id: row.org_id,
        issuer: row.issuer,
        client_id: row.client_id,
        client_secret_set: true,
        domains: row.domains,
        groups_claim: row.groups_claim,
        role_mappings: serde_json::from_value(row.role_mappings).unwrap_or_default(),
        default_role: row.default_role,
        enforced: row.enforced,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

/// `GET /api/org/sso`.
pub async fn get(cx: &ServerContext, grant: &ManageGrant) -> Result<SsoConfig, Error> {
    let row = cx.datastore.sso_provider(grant.org_id()).await?;
    row.map(config_view).ok_or(Error::NotFound {
        what: "single sign-on provider",
    })
}

/// `DELETE /api/org/sso`.
pub async fn delete(cx: &ServerContext, grant: &ManageGrant) -> Result<(), Error> {
    if cx.datastore.sso_provider_delete(grant).await? {
        Ok(())
    } else {
        Err(Error::NotFound {
            what: "single sign-on provider",
        })
    }
}

/// Whether `url` may name a provider or a redirect: `https://`, or
/// `http://` on a loopback or private address (or anywhere when
/// `allow_http`).
fn acceptable_url(url: &str, allow_http: bool) -> bool {
    match url::Url::parse(url) {
        Ok(u) if u.username().is_empty() && u.password().is_none() && u.host().is_some() => {
            u.scheme() == "https"
                || (u.scheme() == "http" && (allow_http || crate::mcp::oauth::is_local(url)))
        }
        _ => false,
    }
}

fn valid_domain(domain: &str) -> bool {
    domain.len() <= 253
        && domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// `PUT /api/org/sso`.
pub async fn put(
    cx: &ServerContext,
    grant: &ManageGrant,
    input: SsoConfigInput,
) -> Result<SsoConfig, Error> {
    let issuer = input.issuer.trim().trim_end_matches('/').to_string();
    if issuer.len() > 2000 || !acceptable_url(&issuer, cx.config.fetch.allow_private_networks) {
        return Err(Error::invalid(
            "invalid_url",
            "issuer must be an https:// URL (http:// only on a loopback or private address) \
             without credentials",
        ));
    }
    let client_id = input.client_id.trim();
    if client_id.is_empty() || client_id.len() > 255 {
        return Err(Error::invalid(
            "invalid_request",
            "client_id must be 1 to 255 characters",
        ));
    }
    if let Some(secret) = &input.client_secret
        && (secret.is_empty() || secret.len() > 1000)
    {
        return Err(Error::invalid(
            "invalid_request",
            "client_secret must be 1 to 1000 characters",
        ));
    }
    let mut domains: Vec<String> = input.domains.iter().map(|d| d.trim().to_string()).collect();
    domains.sort();
    domains.dedup();
    if domains.is_empty() || domains.len() > DOMAINS_MAX || !domains.iter().all(|d| valid_domain(d))
    {
        return Err(Error::invalid(
            "invalid_domains",
            format!(
                "domains must be 1 to {DOMAINS_MAX} lowercase domain names such as example.com"
            ),
        ));
    }
    let groups_claim = input.groups_claim.unwrap_or_else(|| "groups".to_string());
    if groups_claim.is_empty() || groups_claim.chars().count() > 100 {
        return Err(Error::invalid(
            "invalid_request",
            "groups_claim must be 1 to 100 characters",
        ));
    }
    if input.role_mappings.len() > ROLE_MAPPINGS_MAX
        || input
            .role_mappings
            .iter()
            .any(|m| m.group.is_empty() || m.group.chars().count() > 200)
    {
        return Err(Error::invalid(
            "invalid_request",
            format!("at most {ROLE_MAPPINGS_MAX} role_mappings, each group 1 to 200 characters"),
        ));
    }
    let mut roles: Vec<String> = input.role_mappings.iter().map(|m| m.role.clone()).collect();
    roles.extend(input.default_role.clone());
    let missing = cx.datastore.ungivable_roles(grant, &roles).await?;
    if let Some(name) = missing.first() {
        return Err(Error::invalid(
            "invalid_role",
            format!("{name:?} is not a role of the organization that single sign-on may give"),
        ));
    }
    // The provider must answer for this issuer now.
    let http = ProviderHttp::new(cx, &issuer)?;
    match http.discover(&issuer).await {
        Ok(_) => {}
        Err(Discovery::OtherIssuer) => {
            return Err(Error::invalid(
                "sso_issuer_mismatch",
                "the provider's discovery document names another issuer",
            ));
        }
        Err(Discovery::Unreachable(why) | Discovery::Unusable(why)) => {
            slog::info!(cx.log, "an SSO provider's discovery failed"; "issuer" => &issuer, "error" => why);
            return Err(Error::invalid(
                "invalid_sso_provider",
                "the issuer's /.well-known/openid-configuration (or its keys) could not be read \
                 as an OpenID Connect discovery document",
            ));
        }
    }
    let sealed = input
        .client_secret
        .as_ref()
        .map(|s| cx.secrets.seal(s.as_bytes(), grant.org_id().as_bytes()));
    let mappings = serde_json::to_value(&input.role_mappings).map_err(Error::internal)?;
    let row = cx
        .datastore
        .sso_provider_put(
            grant,
            &NewProvider {
                issuer: &issuer,
                client_id,
                client_secret: sealed.as_deref(),
                groups_claim: &groups_claim,
                role_mappings: &mappings,
                default_role: input.default_role.as_deref(),
                enforced: input.enforced,
                domains: &domains,
            },
        )
        .await?;
    row.map(config_view).ok_or_else(|| {
        Error::invalid(
            "invalid_request",
            "client_secret is required when the organization has no provider yet",
        )
    })
}

/// The `openidconnect` client of a stored provider.
fn client_of(
    cx: &ServerContext,
    provider: &ProviderRow,
    metadata: CoreProviderMetadata,
    redirect_uri: &str,
) -> Result<
    CoreClient<
        openidconnect::EndpointSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointMaybeSet,
        openidconnect::EndpointMaybeSet,
    >,
    Error,
> {
    let secret = cx
        .secrets
        .open(&provider.client_secret, provider.org_id.as_bytes())
        .map_err(|e| Error::internal(format!("opening an SSO client secret: {e}")))?;
    let secret = String::from_utf8(secret).map_err(Error::internal)?;
    let redirect = RedirectUrl::new(redirect_uri.to_string())
        .map_err(|_| Error::invalid("invalid_redirect_uri", "redirect_uri is not a URL"))?;
    Ok(CoreClient::from_provider_metadata(
        metadata,
        ClientId::new(provider.client_id.clone()),
        Some(ClientSecret::new(secret)),
    )
    .set_redirect_uri(redirect))
}

/// `POST /api/auth/sso/start`.
pub async fn start(
    cx: &ServerContext,
    request: SsoStartRequest,
    client: &ClientInfo,
) -> Result<SsoStart, Error> {
    super::auth::rate_limit(cx, super::auth::Limited::Login, client.address).await?;
    if request.redirect_uri.len() > 2000 || !acceptable_url(&request.redirect_uri, false) {
        return Err(Error::invalid(
            "invalid_redirect_uri",
            "redirect_uri must be an https:// URL (http:// only on a loopback or private \
             address) without credentials",
        ));
    }
    let provider = match (&request.email, request.organization_id) {
        (Some(email), _) => {
            super::auth::validate_email(email)?;
            let normalized = super::auth::normalize_email(email);
            let domain = normalized.rsplit('@').next().unwrap_or_default();
            cx.datastore.sso_provider_for_domain(domain).await?
        }
        (None, Some(org_id)) => cx.datastore.sso_provider(org_id).await?,
        (None, None) => {
            return Err(Error::invalid(
                "invalid_request",
                "give email or organization_id",
            ));
        }
    };
    let provider = provider.ok_or(Error::NotFound {
        what: "single sign-on provider",
    })?;
    let http = ProviderHttp::new(cx, &provider.issuer)?;
    let metadata = discovered(cx, &http, &provider).await?;
    let oidc = client_of(cx, &provider, metadata, &request.redirect_uri)?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = oidc
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("email".to_string()))
        .add_scope(Scope::new("profile".to_string()))
        .set_pkce_challenge(challenge)
        .url();
    cx.datastore
        .sso_login_begin(&NewLogin {
            state_hash: &crate::authn::hash_secret(state.secret()),
            org_id: provider.org_id,
            nonce: nonce.secret(),
            pkce_verifier: verifier.secret(),
            redirect_uri: &request.redirect_uri,
            lifetime_secs: LOGIN_LIFETIME_SECS,
        })
        .await?;
    Ok(SsoStart {
        authorization_url: url.to_string(),
        state: state.secret().clone(),
        organization_id: provider.org_id,
        expires_at: chrono::Utc::now() + chrono::Duration::seconds(LOGIN_LIFETIME_SECS),
    })
}

/// The provider's discovery document now (`502` when unreachable or
/// unusable; `401 sso_failed` when it names another issuer).
async fn discovered(
    cx: &ServerContext,
    http: &ProviderHttp,
    provider: &ProviderRow,
) -> Result<CoreProviderMetadata, Error> {
    http.discover(&provider.issuer).await.map_err(|e| match e {
        Discovery::OtherIssuer => {
            sso_failed("the provider's discovery document names another issuer")
        }
        Discovery::Unreachable(why) | Discovery::Unusable(why) => {
            slog::warn!(cx.log, "an SSO provider's discovery failed";
                "issuer" => &provider.issuer, "error" => why);
            unavailable("its discovery document or keys could not be read")
        }
    })
}

/// The payload of a JWT (already verified), as JSON.
fn jwt_payload(token: &str) -> Option<Map<String, Value>> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// The groups in `claim`: an array of strings, or one string.
fn groups_of(claims: &Map<String, Value>, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|g| g.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(g)) => vec![g.clone()],
        _ => Vec::new(),
    }
}

/// The role a person's groups give: the first mapping whose group they
/// have, else the default.
fn role_for(
    mappings: &[SsoRoleMapping],
    default_role: Option<&str>,
    groups: &[String],
) -> Option<String> {
    mappings
        .iter()
        .find(|m| groups.contains(&m.group))
        .map(|m| m.role.clone())
        .or_else(|| default_role.map(str::to_string))
}

/// A name from the provider, cleaned to what an account's name may hold.
fn clean_name(value: Option<&str>, fallback: &str) -> String {
    let cleaned: String = value
        .unwrap_or_default()
        .chars()
        .filter(|c| !super::auth::is_forbidden_char(*c))
        .take(100)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        fallback.to_string()
    } else {
        cleaned.to_string()
    }
}

/// The hash an account created by single sign-on holds: of a random secret
/// nobody keeps (made once per process: an argon2 hash costs tens of
/// milliseconds), so a password login to it fails as any wrong one does.
pub(crate) async fn unusable_password_hash(cx: &ServerContext) -> Result<String, Error> {
    static HASH: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    HASH.get_or_try_init(|| async {
        let (secret, _) = crate::authn::new_secret("sso_");
        super::auth::hash_password(cx, secret).await
    })
    .await
    .cloned()
}

/// `POST /api/auth/sso/callback`.
pub async fn callback(
    cx: &ServerContext,
    request: SsoCallbackRequest,
    client: &ClientInfo,
) -> Result<LoginResponse, Error> {
    super::auth::rate_limit(cx, super::auth::Limited::Login, client.address).await?;
    let invalid_state = || {
        Error::invalid(
            "invalid_sso_state",
            "this sign-in is unknown, used or expired; start again",
        )
    };
    if request.state.len() > 200 || request.code.len() > 4000 {
        return Err(invalid_state());
    }
    let login = cx
        .datastore
        .sso_login_take(&crate::authn::hash_secret(&request.state))
        .await?
        .filter(|l| !l.expired)
        .ok_or_else(invalid_state)?;
    let provider = cx
        .datastore
        .sso_provider(login.org_id)
        .await?
        .ok_or_else(invalid_state)?;
    // RFC 9207: an authorization response from another issuer (a mix-up).
    if let Some(iss) = &request.iss
        && iss.trim_end_matches('/') != provider.issuer
    {
        return Err(sso_failed(
            "the authorization response came from another issuer",
        ));
    }
    let http = ProviderHttp::new(cx, &provider.issuer)?;
    let metadata = discovered(cx, &http, &provider).await?;
    let oidc = client_of(cx, &provider, metadata, &login.redirect_uri)?;
    let call = http.oidc();
    let token = oidc
        .exchange_code(AuthorizationCode::new(request.code))
        .map_err(|_| unavailable("it has no token endpoint"))?
        .set_pkce_verifier(PkceCodeVerifier::new(login.pkce_verifier))
        .request_async(&call)
        .await
        .map_err(|e| {
            slog::info!(cx.log, "an SSO code exchange failed";
                "issuer" => &provider.issuer, "error" => crate::error::chain(&e));
            sso_failed("the provider refused the authorization code")
        })?;
    let id_token = token
        .id_token()
        .ok_or_else(|| sso_failed("the provider sent no ID token"))?;
    let verified = id_token
        .claims(&oidc.id_token_verifier(), &Nonce::new(login.nonce))
        .map_err(|e| sso_failed(format!("the ID token failed a check: {e}")))?;
    let subject = verified.subject().as_str().to_string();
    let mut claims = jwt_payload(&id_token.to_string()).unwrap_or_default();
    // Claims the ID token leaves out (e-mail, groups) from UserInfo, for
    // the same subject.
    if let Some(endpoint) = oidc.user_info_url() {
        let request = http
            .client
            .get(endpoint.url().clone())
            .bearer_auth(token.access_token().secret())
            .header(http::header::ACCEPT, "application/json")
            .build()
            .map_err(Error::internal)?;
        match http.send(request).await {
            Ok(answer) if answer.status().is_success() => {
                if let Ok(Value::Object(info)) = serde_json::from_slice(answer.body())
                    && info.get("sub").and_then(Value::as_str) == Some(subject.as_str())
                {
                    for (key, value) in info {
                        claims.entry(key).or_insert(value);
                    }
                }
            }
            Ok(answer) => {
                slog::info!(cx.log, "an SSO UserInfo request was refused";
                    "issuer" => &provider.issuer, "status" => answer.status().as_u16());
            }
            Err(e) => {
                slog::info!(cx.log, "an SSO UserInfo request failed";
                    "issuer" => &provider.issuer, "error" => e.to_string());
            }
        }
    }
    let email = claims
        .get("email")
        .and_then(Value::as_str)
        .ok_or_else(|| sso_failed("the provider sent no e-mail address"))?
        .to_string();
    if claims.get("email_verified") == Some(&Value::Bool(false)) {
        return Err(sso_failed(
            "the provider has not verified the e-mail address",
        ));
    }
    super::auth::validate_email(&email)
        .map_err(|_| sso_failed("the e-mail address is not valid"))?;
    let email_normalized = super::auth::normalize_email(&email);
    let domain = email_normalized.rsplit('@').next().unwrap_or_default();
    if !provider.domains.iter().any(|d| d == domain) {
        return Err(sso_failed(
            "the e-mail address is outside the organization's domains",
        ));
    }
    let groups = groups_of(&claims, &provider.groups_claim);
    let mappings: Vec<SsoRoleMapping> =
        serde_json::from_value(provider.role_mappings.clone()).unwrap_or_default();
    let role = role_for(&mappings, provider.default_role.as_deref(), &groups).ok_or_else(|| {
        Error::Forbidden {
            code: "sso_not_assigned",
            message: "none of your groups gives you a role in this organization".to_string(),
        }
    })?;
    let local = email_normalized
        .split('@')
        .next()
        .unwrap_or("user")
        .to_string();
    let full = claims
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let first_name = clean_name(
        claims
            .get("given_name")
            .and_then(Value::as_str)
            .or_else(|| full.split_whitespace().next()),
        &local,
    );
    let last_name = clean_name(
        claims
            .get("family_name")
            .and_then(Value::as_str)
            .or_else(|| {
                full.split_once(char::is_whitespace)
                    .map(|(_, rest)| rest.trim())
            }),
        "-",
    );
    let unusable = unusable_password_hash(cx).await?;
    let origin = client.origin(crate::audit::Actor::ANONYMOUS);
    let person = Person {
        issuer: &provider.issuer,
        subject: &subject,
        email_normalized: &email_normalized,
        email: email.trim(),
        first_name: &first_name,
        last_name: &last_name,
        role: &role,
        unusable_password_hash: &unusable,
    };
    // Two first sign-ins of one person at once: the second finds what the
    // first made.
    let mut signed_in = SignIn::Raced;
    for _ in 0..3 {
        signed_in = cx
            .datastore
            .sso_sign_in(provider.org_id, &person, &origin)
            .await?;
        if !matches!(signed_in, SignIn::Raced) {
            break;
        }
    }
    let user_id: Uuid = match signed_in {
        SignIn::User(user_id) => user_id,
        SignIn::Raced => {
            return Err(Error::internal(
                "single sign-on kept racing another sign-in",
            ));
        }
        SignIn::EmailTaken => {
            return Err(Error::conflict(
                "email_taken",
                "an account with this e-mail address exists and is not a member of the \
                 organization; an admin adds it to the organization first",
            ));
        }
        SignIn::Suspended => {
            return Err(Error::Forbidden {
                code: "membership_suspended",
                message: "your membership of this organization is suspended or was removed"
                    .to_string(),
            });
        }
        SignIn::UnknownRole => {
            return Err(Error::Forbidden {
                code: "sso_not_assigned",
                message: "the role your groups give no longer exists in this organization"
                    .to_string(),
            });
        }
    };
    Ok(
        super::sessions::start_in(cx, user_id, client, Some(provider.org_id))
            .await?
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_come_from_the_first_mapped_group_else_the_default() {
        let mappings = vec![
            SsoRoleMapping {
                group: "admins".into(),
                role: "admin".into(),
            },
            SsoRoleMapping {
                group: "eng".into(),
                role: "member".into(),
            },
        ];
        let groups = |g: &[&str]| g.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            role_for(&mappings, Some("viewer"), &groups(&["eng", "admins"])).as_deref(),
            Some("admin")
        );
        assert_eq!(
            role_for(&mappings, Some("viewer"), &groups(&["sales"])).as_deref(),
            Some("viewer")
        );
        assert_eq!(role_for(&mappings, None, &groups(&["sales"])), None);
    }

    #[test]
    fn domains_and_urls() {
        assert!(valid_domain("example.com"));
        assert!(valid_domain("eu.corp-1.example"));
        for bad in [
            "Example.com",
            "example",
            "-a.com",
            "a..com",
            "a.com/x",
            "é.com",
        ] {
            assert!(!valid_domain(bad), "{bad}");
        }
        assert!(acceptable_url("https://idp.example.com", false));
        assert!(acceptable_url("http://127.0.0.1:8080/cb", false));
        assert!(!acceptable_url("http://idp.example.com", false));
        assert!(acceptable_url("http://idp.example.com", true));
        assert!(!acceptable_url("https://user:pw@idp.example.com", false));
        assert!(!acceptable_url("javascript:alert(1)", false));
    }

    #[test]
    fn groups_are_an_array_or_one_string() {
        let claims: Map<String, Value> =
            serde_json::from_str(r#"{"groups": ["a", 1, "b"], "team": "c"}"#).unwrap();
        assert_eq!(groups_of(&claims, "groups"), vec!["a", "b"]);
        assert_eq!(groups_of(&claims, "team"), vec!["c"]);
        assert!(groups_of(&claims, "none").is_empty());
    }
}
