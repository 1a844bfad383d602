//! The state shared by every request handler.

use crate::audit::{Actor as AuditActor, Origin};
use crate::authn::{Actor, TokenKeys};
use crate::authz::{
    Admin, DeploymentAccess, DownloadGrant, GatewayAccess, Grant, LiveAccess, OAuthCallbackGrant,
    OrgAccess, Requirement, ScimGrant, SystemAdmin, on, perm,
};
use crate::config::Config;
use crate::db::Datastore;
use crate::db::datastore::deployments::KeyAdmission;
use crate::db::datastore::mcp::{GatewayTarget, PendingSession};
use crate::db::datastore::organizations::{AccessLookup, Caller, Pending};
use crate::error::Error;
use crate::providers::ModelRegistry;

pub struct ServerContext {
    pub config: Config,
    pub datastore: Datastore,
    pub tokens: TokenKeys,
    /// Encryption of secrets at rest.
    pub secrets: crate::secrets::Secrets,
    /// Outgoing e-mail (SMTP, or the `email_outbox` table by default).
    pub mailer: std::sync::Arc<dyn crate::mailer::Mailer>,
    /// The language models this server offers and their clients.
    pub models: ModelRegistry,
    /// Where uploaded files live (local directory or S3).
    pub files: std::sync::Arc<dyn crate::storage::FileStore>,
    /// Signs the local store's download links (`None` with S3: presigned).
    pub download_links: Option<std::sync::Arc<crate::storage::LinkSigner>>,
    /// The embedding models knowledge bases may use.
    pub embedders: crate::embedder::EmbedderRegistry,
    /// The bounded password-hashing pool.
    pub hashing: std::sync::Arc<crate::hashing::PasswordHashing>,
    /// Request, database, hashing and stream metrics (`/metrics`).
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// This instance's LISTEN connection, fanned out (chat streams, stop
    /// requests, WebSocket notices across instances).
    pub chat_hub: std::sync::Arc<crate::chat_hub::Hub>,
    /// The leases of the answers this instance generates (chat and
    /// conversations; see `app::streams`).
    pub leases: std::sync::Arc<crate::leases::Leases>,
    /// Speech to text (`None`: not configured).
    pub transcriber: Option<std::sync::Arc<dyn crate::transcribe::Transcriber>>,
    pub log: slog::Logger,
    /// The MCP client (streamable HTTP) and the configured MCP servers by
    /// their stable ids.
    pub mcp: std::sync::Arc<dyn crate::mcp::McpClient>,
    pub mcp_catalog: std::collections::HashMap<uuid::Uuid, crate::mcp::config::McpServerConfig>,
    /// Where the server is in its shutdown: once it is no longer
    /// [`ShutdownPhase::Serving`], open WebSockets close with 1001 (going
    /// away) so that clients reconnect to another instance.
    pub shutdown: tokio::sync::watch::Sender<ShutdownPhase>,
    /// When this instance last wrote each personal access token's
    /// `last_used_at` (see [`ServerContext::token_used`]).
    pub token_touches: crate::authn::RecentTouches,
    /// Records the usage of model calls in batches (see `usage.rs`).
    pub usage: crate::usage::UsageRecorder,
    /// Which organizations have budgets (see `app::usage::admit`).
    pub budget_cache: crate::usage::BudgetCache,
}

/// Where the server is in its shutdown ([`crate::Server::shutdown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownPhase {
    /// Serving; also during the drain window that begins a shutdown
    /// (`http.drain_secs`: `/readyz` answers 503 and responses close their
    /// connections, but requests, WebSockets and workers go on).
    Serving,
    /// The drain window ended: no new connection, idle ones closed;
    /// WebSockets are closed and knowledge-base workers claim no new job;
    /// requests, answers and jobs in progress go on for
    /// `http.shutdown_grace_secs`.
    Draining,
    /// The grace period ended: answers end as interrupted, and jobs in
    /// progress are handed back to the queue.
    GraceOver,
}

/// Who reads the audit log ([`ServerContext::authorize_audit_reader`]):
/// an organization's admin, or a system administrator (every event, or
/// one organization's).
pub enum AuditReader {
    Org(Grant<on::Org, Admin<perm::AuditRead>>),
    All(SystemAdmin, Option<uuid::Uuid>),
}

impl AuditReader {
    /// What the reads are limited to.
    pub fn scope(&self) -> crate::db::datastore::audit::AuditScope<'_> {
        use crate::db::datastore::audit::AuditScope;
        match self {
            AuditReader::Org(grant) => AuditScope::Org(grant.access()),
            AuditReader::All(admin, org) => AuditScope::All(admin, *org),
        }
    }

    /// The request's logger.
    pub fn log(&self) -> &slog::Logger {
        match self {
            AuditReader::Org(grant) => grant.log(),
            AuditReader::All(admin, _) => admin.log(),
        }
    }
}

type Rq = dropshot::RequestContext<ServerContext>;

impl ServerContext {
    /// Who the request's bearer credential names: a user by their verified
    /// access token (no database round trip; its session is checked by the
    /// statement that uses it), or a personal access token (`wsp_…`) by
    /// the hash of its secret, looked up by the statement that uses it.
    pub fn caller(&self, rqctx: &Rq) -> Result<Caller, Error> {
        let headers = rqctx.request.headers();
        if let Some(secret) = crate::authn::personal_token(headers) {
            return Ok(Caller::Token(crate::authn::hash_secret(secret)));
        }
        Ok(Caller::User(self.tokens.verify_request(headers)?))
    }

    /// Authenticates the request (its bearer token; the token's user must
    /// still exist and its session be live, checked in one statement; a
    /// personal access token must be live). For operations on the caller's
    /// own account only; every org-scoped operation calls
    /// [`ServerContext::authorize`] instead.
    pub async fn authenticate(&self, rqctx: &Rq) -> Result<Actor, Error> {
        use crate::db::datastore::sessions::SessionCheck;
        match self.caller(rqctx)? {
            Caller::User(actor) => match self.datastore.session_check(&actor).await? {
                SessionCheck::NoUser => Err(crate::authn::invalid_token()),
                SessionCheck::Ended => Err(crate::authn::session_revoked()),
                SessionCheck::Live => Ok(actor),
            },
            Caller::Token(hash) => {
                let (user_id, token_id, scopes) = self
                    .datastore
                    .token_user(&hash)
                    .await?
                    .ok_or_else(crate::authn::invalid_token)?;
                self.token_used(token_id);
                Ok(Actor {
                    user_id,
                    session_id: None,
                    issued_at: 0,
                    token_id: Some(token_id),
                    scopes: Some(scopes),
                })
            }
        }
    }

    /// Authenticates the request, and with a personal access token checks
    /// that its scopes cover `permission` (`403 insufficient_scope`): the
    /// one call of an operation on the caller's own account that changes
    /// something a token may do (creating an organization).
    pub async fn authenticate_scoped<P: crate::authz::perm::Permission>(
        &self,
        rqctx: &Rq,
        permission: P,
    ) -> Result<Actor, Error> {
        let actor = self.authenticate(rqctx).await?;
        actor.require_scope(permission.name())?;
        Ok(actor)
    }

    /// Authenticates a request that only a login may make (managing
    /// personal access tokens and sessions, changing the password): a
    /// personal access token is `403 token_not_allowed`, whatever its
    /// scopes.
    pub async fn authenticate_login(&self, rqctx: &Rq) -> Result<Actor, Error> {
        let actor = self.authenticate(rqctx).await?;
        if actor.token_id.is_some() {
            return Err(crate::authz::token_not_allowed());
        }
        Ok(actor)
    }

    /// Notes that a personal access token was used: its `last_used_at` is
    /// written at most once a minute per token and instance, after the
    /// request's own statement and off its path (a bounded set of recent
    /// writes is this instance's only memory of it).
    pub fn token_used(&self, token_id: uuid::Uuid) {
        if !self.token_touches.due(token_id) {
            return;
        }
        let datastore = self.datastore.clone();
        let log = self.log.clone();
        tokio::spawn(async move {
            if let Err(e) = datastore.token_touch(token_id).await {
                slog::warn!(log, "recording a token's use failed"; "error" => %e);
            }
        });
    }

    /// The one authorization call of an org-scoped handler: authenticates
    /// the request and checks, in one database statement, that the caller
    /// is an active member of the scope's organization whose role meets
    /// `require`, and that the token's session is live (a revoked session
    /// is `401 session_revoked` on every instance at once). The token's signature is checked once per token (see
    /// [`TokenKeys`]); the statement runs on a shared, pipelined
    /// connection ([`crate::db::pipeline`]), so authorizing takes no
    /// pooled connection.
    ///
    /// Not a member (including an organization that does not exist, so
    /// existence is not revealed): `403 forbidden` for [`Scope::Org`],
    /// `404 not_found` for an object scope. A member whose role falls
    /// short: `403 forbidden`.
    pub async fn authorize<T: on::Target, R: Requirement>(
        &self,
        rqctx: &Rq,
        target: T,
        require: R,
    ) -> Result<Grant<T::Object, R::Grants>, Error> {
        let caller = self.caller(rqctx)?;
        let lookup = self
            .datastore
            .access_lookup(&caller, target.scope())
            .await?;
        self.grant(rqctx, lookup, target, require).await
    }

    /// [`Self::authorize`] of an organization-scoped request, with the
    /// request's read sent in the same round trip as the authorization
    /// statement (one round trip instead of two on the hottest reads,
    /// issue #37). `read` reads through a [`Pending`] (the organization
    /// asked for, not yet granted); its answer, or its error, is returned
    /// only with the grant. Refused, the caller gets exactly what
    /// [`Self::authorize`] answers and the read's answer is dropped
    /// unseen. The membership and role are read by the same statement as
    /// for [`Self::authorize`], on every request, so a role or membership
    /// change holds from the next request on, on every instance.
    pub async fn authorize_with<R: Requirement, V>(
        &self,
        rqctx: &Rq,
        target: on::Org,
        require: R,
        read: impl AsyncFnOnce(&Pending<'_>) -> Result<V, Error>,
    ) -> Result<(Grant<on::Org, R::Grants>, V), Error> {
        let caller = self.caller(rqctx)?;
        let (lookup, read) = self
            .datastore
            .access_lookup_with(&caller, target.0, read)
            .await?;
        let grant = self.grant(rqctx, lookup, target, require).await?;
        Ok((grant, read?))
    }

    /// The grant, or the refusal, of what the authorization statement
    /// found.
    async fn grant<T: on::Target, R: Requirement>(
        &self,
        rqctx: &Rq,
        lookup: AccessLookup,
        target: T,
        require: R,
    ) -> Result<Grant<T::Object, R::Grants>, Error> {
        let scope = target.scope();
        match lookup {
            AccessLookup::NoUser => Err(crate::authn::invalid_token()),
            AccessLookup::SessionEnded => Err(crate::authn::session_revoked()),
            AccessLookup::NotMember { token, .. } => {
                if let Some((token_id, _)) = token {
                    self.token_used(token_id);
                }
                Err(scope.not_found().unwrap_or_else(|| {
                    Error::forbidden("you are not a member of this organization")
                }))
            }
            AccessLookup::SsoRequired { token, .. } => {
                if let Some((token_id, _)) = token {
                    self.token_used(token_id);
                }
                Err(scope.not_found().unwrap_or_else(crate::authz::sso_required))
            }
            AccessLookup::Member {
                user_id,
                token,
                membership,
            } => {
                let token_id = token.as_ref().map(|(id, _)| *id);
                if let Some(token_id) = token_id {
                    self.token_used(token_id);
                }
                let origin = self.origin(rqctx, AuditActor::user(user_id, token_id));
                let org_id = membership.org_id;
                crate::telemetry::note_organization(org_id);
                // Kept for the audit log only where a refusal is recorded
                // (not copied, with its three strings, for every request).
                let refusal_origin = require.administrative().then(|| origin.clone());
                let granted = OrgAccess::grant(
                    user_id, membership, token, target, require, &rqctx.log, origin,
                );
                if let Err(Error::Forbidden { code, .. }) = &granted
                    && let Some(origin) = &refusal_origin
                {
                    self.audit_refusal(rqctx, origin, Some(org_id), code).await;
                }
                granted
            }
        }
    }

    /// The one authentication of a deployment key (the OpenAI-compatible
    /// operations), in one round trip: the active, unexpired deployment
    /// whose key the request presents, the access it grants, and what the
    /// request reads with it (see
    /// [`Datastore::deployment_admit_by_key`](crate::db::Datastore::deployment_admit_by_key):
    /// its hit in the rate window, counted only for an `origin` the
    /// deployment allows, and `with_agent` the agent and its tools). Every
    /// statement is keyed by the key's hash. `None` when there is no such
    /// key (the caller answers `401 invalid_api_key`).
    pub async fn authorize_deployment_key(
        &self,
        headers: &http::HeaderMap,
        origin: Option<&str>,
        with_agent: bool,
    ) -> Result<Option<(DeploymentAccess, KeyAdmission)>, Error> {
        let Some(key) = crate::authn::deployment_key(headers) else {
            return Ok(None);
        };
        let hash = crate::authn::hash_secret(key);
        Ok(self
            .datastore
            .deployment_admit_by_key(&hash, origin, with_agent)
            .await?
            .map(|admitted| {
                let d = &admitted.deployment;
                (
                    DeploymentAccess::grant(d.org_id, d.id, d.agent_id),
                    admitted,
                )
            }))
    }

    /// The organization whose SCIM bearer token (`wscim_…`) the request
    /// carries (issue #37), or `None` (no such token: `401`). Garbage costs
    /// no statement.
    pub async fn authorize_scim(&self, rqctx: &Rq) -> Result<Option<ScimGrant>, Error> {
        let token = rqctx
            .request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| crate::authn::is_secret_shaped(t, workspace_api::scim::TOKEN_PREFIX));
        let Some(token) = token else {
            return Ok(None);
        };
        let hash = crate::authn::hash_secret(token);
        let Some(org_id) = self.datastore.scim_authenticate(&hash).await? else {
            return Ok(None);
        };
        let origin = self.origin(rqctx, AuditActor::SYSTEM);
        crate::telemetry::note_organization(org_id);
        Ok(Some(ScimGrant::grant(org_id, origin)))
    }

    /// Redeems a WebSocket ticket (single-use: it is consumed) issued for
    /// `org_id`: the member it was issued to, or `None` when it is unknown,
    /// used, expired or of another organization.
    pub async fn authorize_ws_ticket(
        &self,
        org_id: uuid::Uuid,
        ticket: &str,
    ) -> Result<Option<LiveAccess>, Error> {
        if ticket.len() > crate::authn::TICKET_MAX_LEN {
            return Ok(None);
        }
        Ok(self
            .datastore
            .chat_ws_ticket_take(&crate::authn::hash_ticket(ticket))
            .await?
            .filter(|(org, _)| *org == org_id)
            .map(|(org, user)| LiveAccess::grant(org, user)))
    }

    /// Checks a signed download link of the local file store: `404` when
    /// the store signs no links, `403 invalid_signature`, `410
    /// link_expired`.
    pub fn authorize_download(
        &self,
        file_id: uuid::Uuid,
        expires: i64,
        signature: &str,
    ) -> Result<DownloadGrant, Error> {
        let Some(links) = &self.download_links else {
            return Err(Error::NotFound { what: "file" });
        };
        if !links.verify(file_id, expires, signature) {
            return Err(Error::Forbidden {
                code: "invalid_signature",
                message: "the download link's signature does not match".to_string(),
            });
        }
        if chrono::Utc::now().timestamp() > expires {
            return Err(Error::gone("link_expired", "the download link has expired"));
        }
        Ok(DownloadGrant::grant(file_id))
    }

    /// The MCP instance behind a gateway secret (`404` for an unknown
    /// one).
    pub async fn authorize_gateway_secret(
        &self,
        secret: &str,
    ) -> Result<(GatewayAccess, GatewayTarget), Error> {
        let target = self
            .datastore
            .mcp_gateway_target(&crate::authn::hash_secret(secret))
            .await?
            .ok_or(Error::NotFound {
                what: "MCP gateway",
            })?;
        Ok((GatewayAccess::grant(target.instance_id), target))
    }

    /// Takes the pending MCP session an OAuth callback's `state` names
    /// (single-use); `None` when it is unknown, used or expired (an expired
    /// one is marked failed).
    pub async fn authorize_oauth_state(
        &self,
        state: &str,
    ) -> Result<Option<(OAuthCallbackGrant, PendingSession)>, Error> {
        Ok(self
            .datastore
            .mcp_session_take_state(&crate::authn::hash_secret(state))
            .await?
            .filter(|session| !session.expired)
            .map(|session| (OAuthCallbackGrant::grant(session.id), session)))
    }

    /// The one authorization call of a system-level operation (the global
    /// permission catalog, feature gates): `403 forbidden` unless the caller
    /// is a system administrator, flagged `is_system_admin` in the database
    /// or listed (by e-mail) in the configuration's `auth.system_admins`.
    /// A personal access token is `403 token_not_allowed` here, whatever
    /// its scopes: system administration needs a login.
    pub async fn authorize_system_admin(&self, rqctx: &Rq) -> Result<SystemAdmin, Error> {
        let actor = self.authenticate_login(rqctx).await?;
        let origin = self.origin(rqctx, AuditActor::user(actor.user_id, None));
        match self.system_admin(rqctx, &actor, origin.clone()).await? {
            Some(admin) => Ok(admin),
            None => {
                self.audit_refusal(rqctx, &origin, None, "forbidden").await;
                Err(Error::forbidden("system administrator access is required"))
            }
        }
    }

    /// The system administrator grant of `actor`, if they are one.
    async fn system_admin(
        &self,
        rqctx: &Rq,
        actor: &Actor,
        origin: Origin,
    ) -> Result<Option<SystemAdmin>, Error> {
        let user = self.datastore.user_get(actor.user_id).await?;
        let listed = self
            .config
            .auth
            .system_admins
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&user.email));
        Ok((user.is_system_admin || listed)
            .then(|| SystemAdmin::grant(actor.user_id, &rqctx.log, origin)))
    }

    /// The one authorization call of the audit log's operations: with
    /// `org_id`, the organization's admins (a role of the admin level with
    /// `audit:read`) or a system administrator; without, system
    /// administrators only (every organization's events and the system
    /// ones). A member refused is recorded as for any administrative
    /// operation.
    pub async fn authorize_audit_reader(
        &self,
        rqctx: &Rq,
        org_id: Option<uuid::Uuid>,
    ) -> Result<AuditReader, Error> {
        const READ: Admin<perm::AuditRead> = Admin(perm::AUDIT_READ);
        let Some(org_id) = org_id else {
            return Ok(AuditReader::All(
                self.authorize_system_admin(rqctx).await?,
                None,
            ));
        };
        match self.authorize(rqctx, on::Org(org_id), READ).await {
            Ok(grant) => Ok(AuditReader::Org(grant)),
            Err(refused @ Error::Forbidden { .. }) => {
                let Ok(actor) = self.authenticate_login(rqctx).await else {
                    return Err(refused);
                };
                let origin = self.origin(rqctx, AuditActor::user(actor.user_id, None));
                match self.system_admin(rqctx, &actor, origin).await? {
                    Some(admin) => Ok(AuditReader::All(admin, Some(org_id))),
                    None => Err(refused),
                }
            }
            Err(other) => Err(other),
        }
    }

    /// The audit log's origin of a request by `actor`: the client address
    /// (as `http.trusted_proxies` resolves it), user agent and request id.
    pub fn origin(&self, rqctx: &Rq, actor: AuditActor) -> Origin {
        let headers = rqctx.request.headers();
        let forwarded = headers
            .get_all("x-forwarded-for")
            .into_iter()
            .map(|v| v.to_str().unwrap_or(""));
        let address = self
            .config
            .http
            .client_address(rqctx.request.remote_addr().ip(), forwarded);
        Origin::of(actor, address, headers, &rqctx.request_id)
    }

    /// Records a refused administrative operation (`authz.denied`, outcome
    /// `denied`) in the organization's chain, or the system chain for a
    /// system-level one, in a transaction of its own. A failure to record
    /// is logged: the refusal stands either way.
    async fn audit_refusal(
        &self,
        rqctx: &Rq,
        origin: &Origin,
        org_id: Option<uuid::Uuid>,
        code: &str,
    ) {
        let event = crate::audit::Event::new(org_id, "authz.denied")
            .outcome(crate::audit::Outcome::Denied)
            .details(serde_json::json!({
                "operation": rqctx.endpoint.operation_id,
                "error_code": code,
            }));
        if let Err(e) = self.datastore.audit_record(origin, &event).await {
            slog::warn!(rqctx.log, "recording a refusal in the audit log failed"; "error" => %e);
        }
    }
}
