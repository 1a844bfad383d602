//! Sessions: what a login starts, refresh-token rotation with reuse
//! detection, logout, listing and revoking.
//!
//! A session's access tokens carry its id (`sid`); whether it is live is
//! checked by each request's own authorization statement (see
//! `db::datastore::sessions`), never in process memory, so a revocation
//! holds on every instance from the next request on.

use crate::authn::Actor;
use crate::context::ServerContext;
use crate::db::datastore::sessions::{
    ClientSeen, NewRefresh, RefreshOutcome, RevokeReason, USER_AGENT_MAX_CHARS,
};
use crate::error::Error;
use std::net::IpAddr;
use uuid::Uuid;
use workspace_api::auth::{
    LoginResponse, REFRESH_TOKEN_PREFIX, RefreshRequest, Session, SessionsRevoked, TokenType,
};

/// Where a request came from: its client address (behind a trusted proxy,
/// the forwarded one) and `User-Agent`.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    pub address: IpAddr,
    pub user_agent: Option<String>,
    /// The request's id (for the audit log).
    pub request_id: Option<String>,
}

impl ClientInfo {
    /// `user_agent` bounded to [`USER_AGENT_MAX_CHARS`] characters, without
    /// control characters.
    pub fn new(address: IpAddr, user_agent: Option<&str>) -> ClientInfo {
        let user_agent = user_agent
            .map(|ua| {
                ua.chars()
                    .filter(|c| !c.is_control())
                    .take(USER_AGENT_MAX_CHARS)
                    .collect::<String>()
            })
            .map(|ua| ua.trim().to_string())
            .filter(|ua| !ua.is_empty());
        ClientInfo {
            address,
            user_agent,
            request_id: None,
        }
    }

    /// The audit log's origin of this request by `actor`.
    pub fn origin(&self, actor: crate::audit::Actor) -> crate::audit::Origin {
        crate::audit::Origin {
            actor,
            address: Some(self.address.to_string()),
            user_agent: self.user_agent.clone(),
            request_id: self.request_id.clone(),
        }
    }

    fn seen(&self) -> ClientSeen<'_> {
        ClientSeen {
            address: self.address,
            user_agent: self.user_agent.as_deref(),
        }
    }
}

/// The tokens of a session, as login, refresh and `signup_invite` answer.
pub struct Issued {
    pub access_token: String,
    pub expires_in: u64,
    pub refresh_token: String,
    pub refresh_expires_in: u64,
    pub session_id: Uuid,
}

impl From<Issued> for LoginResponse {
    fn from(issued: Issued) -> LoginResponse {
        LoginResponse {
            access_token: issued.access_token,
            token_type: TokenType::Bearer,
            expires_in: issued.expires_in,
            refresh_token: issued.refresh_token,
            refresh_expires_in: issued.refresh_expires_in,
            session_id: issued.session_id,
        }
    }
}

fn issue(
    cx: &ServerContext,
    user_id: Uuid,
    session_id: Uuid,
    refresh_token: String,
) -> Result<Issued, Error> {
    Ok(Issued {
        access_token: cx.tokens.issue(user_id, session_id)?,
        expires_in: cx.tokens.lifetime_secs(),
        refresh_token,
        refresh_expires_in: cx.config.auth.refresh_token_lifetime_secs,
        session_id,
    })
}

/// Starts a session for `user_id` (who just proved a password) and issues
/// its first tokens; marks the user active.
pub async fn start(
    cx: &ServerContext,
    user_id: Uuid,
    client: &ClientInfo,
) -> Result<Issued, Error> {
    start_in(cx, user_id, client, None).await
}

/// [`start`], for a single sign-on of `sso_organization` when given (the
/// session then acts in that organization only).
pub async fn start_in(
    cx: &ServerContext,
    user_id: Uuid,
    client: &ClientInfo,
    sso_organization: Option<Uuid>,
) -> Result<Issued, Error> {
    let (refresh_token, hash) = crate::authn::new_secret(REFRESH_TOKEN_PREFIX);
    let session_id = cx
        .datastore
        .session_start(
            user_id,
            &client.seen(),
            &NewRefresh {
                hash: &hash,
                lifetime_secs: cx.config.auth.refresh_token_lifetime_secs,
            },
            &client.origin(crate::audit::Actor::user(user_id, None)),
            sso_organization,
        )
        .await?;
    issue(cx, user_id, session_id, refresh_token)
}

fn invalid_refresh_token() -> Error {
    Error::unauthenticated(
        "invalid_refresh_token",
        "the refresh token is not valid or has expired; log in again",
    )
}

/// `POST /api/auth/refresh`: exchanges the refresh token for new tokens
/// (see the operation's description for reuse detection).
pub async fn refresh(
    cx: &ServerContext,
    request: RefreshRequest,
    client: &ClientInfo,
    log: &slog::Logger,
) -> Result<LoginResponse, Error> {
    let presented = request.refresh_token.trim();
    if !crate::authn::is_secret_shaped(presented, REFRESH_TOKEN_PREFIX) {
        return Err(invalid_refresh_token());
    }
    let (next, next_hash) = crate::authn::new_secret(REFRESH_TOKEN_PREFIX);
    let outcome = cx
        .datastore
        .session_refresh(
            &crate::authn::hash_secret(presented),
            &NewRefresh {
                hash: &next_hash,
                lifetime_secs: cx.config.auth.refresh_token_lifetime_secs,
            },
            &client.seen(),
        )
        .await?;
    match outcome {
        RefreshOutcome::Refreshed {
            user_id,
            session_id,
        } => Ok(issue(cx, user_id, session_id, next)?.into()),
        RefreshOutcome::Unknown | RefreshOutcome::Expired => Err(invalid_refresh_token()),
        RefreshOutcome::SessionEnded => Err(crate::authn::session_revoked()),
        RefreshOutcome::Reused { session_id } => {
            slog::warn!(log, "a used refresh token was presented again: session revoked";
                "session_id" => session_id.to_string(),
                "client" => client.address.to_string());
            Err(Error::unauthenticated(
                "refresh_token_reused",
                "this refresh token was already used; the session is revoked as a \
                 precaution: log in again",
            ))
        }
    }
}

/// `POST /api/auth/logout`: revokes the caller's session.
pub async fn logout(cx: &ServerContext, actor: &Actor) -> Result<String, Error> {
    let Some(session_id) = actor.session_id else {
        return Ok(
            "this access token was issued before sessions existed: there is no \
                   session to revoke; it stops working when it expires"
                .to_string(),
        );
    };
    cx.datastore
        .session_revoke(actor.user_id, session_id, RevokeReason::Logout)
        .await?;
    Ok("logged out: the session is revoked".to_string())
}

/// `GET /api/auth/sessions`.
pub async fn list(cx: &ServerContext, actor: &Actor) -> Result<Vec<Session>, Error> {
    let rows = cx.datastore.sessions_list(actor.user_id).await?;
    Ok(rows
        .into_iter()
        .map(|r| Session {
            current: Some(r.id) == actor.session_id,
            id: r.id,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            expires_at: r.expires_at,
            ip_address: r.ip_address.map(|a| a.to_string()),
            user_agent: r.user_agent,
        })
        .collect())
}

/// `DELETE /api/auth/revoke_session`: one of the caller's own sessions.
pub async fn revoke(
    cx: &ServerContext,
    actor: &Actor,
    session_id: Uuid,
) -> Result<SessionsRevoked, Error> {
    let reason = if Some(session_id) == actor.session_id {
        RevokeReason::Logout
    } else {
        RevokeReason::Revoked
    };
    if !cx
        .datastore
        .session_revoke(actor.user_id, session_id, reason)
        .await?
    {
        return Err(Error::NotFound { what: "session" });
    }
    Ok(SessionsRevoked {
        message: "the session is revoked".to_string(),
        revoked: 1,
    })
}

/// `POST /api/auth/revoke_other_sessions`.
pub async fn revoke_others(cx: &ServerContext, actor: &Actor) -> Result<SessionsRevoked, Error> {
    let revoked = cx
        .datastore
        .sessions_revoke_others(actor.user_id, actor.session_id, RevokeReason::OthersRevoked)
        .await?;
    Ok(SessionsRevoked {
        message: format!("{revoked} other session(s) revoked"),
        revoked,
    })
}

#[cfg(test)]
mod tests {
    use super::ClientInfo;

    #[test]
    fn user_agents_are_bounded_and_cleaned() {
        let addr = "127.0.0.1".parse().unwrap();
        let long = "x".repeat(2000);
        let info = ClientInfo::new(addr, Some(&long));
        assert_eq!(info.user_agent.unwrap().chars().count(), 512);
        let info = ClientInfo::new(addr, Some("curl/8\r\n\u{1b}[31m"));
        assert_eq!(info.user_agent.as_deref(), Some("curl/8[31m"));
        assert_eq!(ClientInfo::new(addr, Some("  ")).user_agent, None);
        assert_eq!(ClientInfo::new(addr, None).user_agent, None);
    }
}
