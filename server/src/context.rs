//! The state shared by every request handler.

use crate::authn::{Actor, TokenKeys};
use crate::authz::{DeploymentAccess, OrgAccess, Require, Scope, SystemAdmin};
use crate::config::Config;
use crate::db::Datastore;
use crate::db::datastore::deployments::DeploymentRow;
use crate::db::datastore::organizations::AccessLookup;
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
}

/// Where the server is in its shutdown ([`crate::Server::shutdown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownPhase {
    Serving,
    /// No new connection; WebSockets are closed and knowledge-base workers
    /// claim no new job; requests, answers and jobs in progress go on for
    /// `http.shutdown_grace_secs`.
    Draining,
    /// The grace period ended: answers end as interrupted, and jobs in
    /// progress are handed back to the queue.
    GraceOver,
}

type Rq = dropshot::RequestContext<ServerContext>;

impl ServerContext {
    /// Authenticates the request (its bearer token; the token's user must
    /// still exist). For operations on the caller's own account only; every
    /// org-scoped operation calls [`ServerContext::authorize`] instead.
    pub async fn authenticate(&self, rqctx: &Rq) -> Result<Actor, Error> {
        let user_id = self.tokens.verify_request(rqctx.request.headers())?;
        if !self.datastore.user_exists(user_id).await? {
            return Err(crate::authn::invalid_token());
        }
        Ok(Actor { user_id })
    }

    /// Verifies the request's token only, without a database round trip.
    /// For operations on the caller's own account whose own statement reads
    /// the user and answers `401 invalid_token` when it no longer exists
    /// (`GET /api/users/me`).
    pub fn authenticate_token(&self, rqctx: &Rq) -> Result<Actor, Error> {
        Ok(Actor {
            user_id: self.tokens.verify_request(rqctx.request.headers())?,
        })
    }

    /// The one authorization call of an org-scoped handler: authenticates
    /// the request and checks, in one database statement, that the caller
    /// is an active member of the scope's organization whose role meets
    /// `require`. The token's signature is checked once per token (see
    /// [`TokenKeys`]); the statement runs on a shared, pipelined
    /// connection ([`crate::db::pipeline`]), so authorizing takes no
    /// pooled connection.
    ///
    /// Not a member (including an organization that does not exist, so
    /// existence is not revealed): `403 forbidden` for [`Scope::Org`],
    /// `404 not_found` for an object scope. A member whose role falls
    /// short: `403 forbidden`.
    pub async fn authorize(
        &self,
        rqctx: &Rq,
        scope: Scope,
        require: Require,
    ) -> Result<OrgAccess, Error> {
        let user_id = self.tokens.verify_request(rqctx.request.headers())?;
        match self.datastore.access_lookup(user_id, scope).await? {
            AccessLookup::NoUser => Err(crate::authn::invalid_token()),
            AccessLookup::NotMember => Err(scope
                .not_found()
                .unwrap_or_else(|| Error::forbidden("you are not a member of this organization"))),
            AccessLookup::Member(membership) => {
                OrgAccess::grant(user_id, membership, require, &rqctx.log)
            }
        }
    }

    /// The one authentication of a deployment key (the OpenAI-compatible
    /// operations): the active, unexpired deployment whose key the request
    /// presents, and the access it grants. `None` when there is none (the
    /// caller answers `401 invalid_api_key`).
    pub async fn authorize_deployment_key(
        &self,
        headers: &http::HeaderMap,
    ) -> Result<Option<(DeploymentAccess, DeploymentRow)>, Error> {
        let Some(key) = crate::authn::deployment_key(headers) else {
            return Ok(None);
        };
        let hash = crate::authn::hash_deployment_key(key);
        Ok(self.datastore.deployment_by_key(&hash).await?.map(|found| {
            let d = found.deployment;
            (DeploymentAccess::grant(d.org_id, d.id, d.agent_id), d)
        }))
    }

    /// The one authorization call of a system-level operation (the global
    /// permission catalog, feature gates): `403 forbidden` unless the caller
    /// is a system administrator, flagged `is_system_admin` in the database
    /// or listed (by e-mail) in the configuration's `auth.system_admins`.
    pub async fn authorize_system_admin(&self, rqctx: &Rq) -> Result<SystemAdmin, Error> {
        let actor = self.authenticate(rqctx).await?;
        let user = self.datastore.user_get(actor.user_id).await?;
        let listed = self
            .config
            .auth
            .system_admins
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&user.email));
        if user.is_system_admin || listed {
            Ok(SystemAdmin::grant(actor.user_id, &rqctx.log))
        } else {
            Err(Error::forbidden("system administrator access is required"))
        }
    }
}
