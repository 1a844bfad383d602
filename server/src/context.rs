//! The state shared by every request handler.

use crate::authn::{Actor, TokenKeys};
use crate::authz::OrgAccess;
use crate::config::Config;
use crate::db::Datastore;
use crate::error::Error;
use crate::providers::ModelRegistry;

pub struct ServerContext {
    pub config: Config,
    pub datastore: Datastore,
    pub tokens: TokenKeys,
    /// Outgoing e-mail (SMTP, or the `email_outbox` table by default).
    pub mailer: std::sync::Arc<dyn crate::mailer::Mailer>,
    /// The language models this server offers and their clients.
    pub models: ModelRegistry,
    pub log: slog::Logger,
}

impl ServerContext {
    /// Authenticates the request (its bearer token).
    pub async fn authenticate(&self, headers: &http::HeaderMap) -> Result<Actor, Error> {
        self.tokens.authenticate(headers, &self.datastore).await
    }

    /// `403 forbidden` unless the actor is a system administrator: flagged
    /// `is_system_admin` in the database or listed (by e-mail) in the
    /// configuration's `auth.system_admins`.
    pub async fn require_system_admin(&self, actor: &Actor) -> Result<(), Error> {
        let user = self.datastore.user_get(actor.user_id).await?;
        let listed = self
            .config
            .auth
            .system_admins
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&user.email));
        if user.is_system_admin || listed {
            Ok(())
        } else {
            Err(Error::forbidden("system administrator access is required"))
        }
    }

    /// Authorizes `actor` for `permission` in organization `org_id`.
    ///
    /// A caller who is not an active member (including when the organization
    /// does not exist, so existence is not revealed) gets `403 forbidden`, as
    /// does a member whose role lacks the permission. Pass `None` as the
    /// permission to require membership only.
    pub async fn authorize(
        &self,
        actor: &Actor,
        org_id: uuid::Uuid,
        permission: Option<&str>,
    ) -> Result<OrgAccess, Error> {
        let access = self
            .datastore
            .org_access(actor.user_id, org_id)
            .await?
            .ok_or_else(|| Error::forbidden("you are not a member of this organization"))?;
        if let Some(permission) = permission {
            access.require(permission)?;
        }
        Ok(access)
    }
}
