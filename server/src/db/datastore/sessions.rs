//! Sessions and their refresh tokens.
//!
//! A session is what a login starts: its access tokens carry its id (the
//! `sid` claim) and its refresh tokens (stored as SHA-256 only) are
//! exchanged one at a time. Whether a session is live is checked by the
//! statement each request runs anyway ([`session_live!`], part of the
//! authorization statement, `users/me`'s and [`Datastore::session_check`]),
//! so a revocation takes effect on every instance at the next request.

use super::Datastore;
use crate::authn::Actor;
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use std::net::IpAddr;
use uuid::Uuid;

/// The SQL expression that says whether the access token's session is
/// live, for a statement that has the token's user as `u` (from `users`),
/// its `sid` claim (nullable uuid) as parameter `$sid` and its `iat` claim
/// (int8) as `$iat`. A token with a session: the session is the user's,
/// not revoked and not expired (a primary-key lookup). A token issued
/// before sessions existed (no `sid`): valid unless the user's password
/// changed after it was issued.
macro_rules! session_live {
    ($sid:literal, $iat:literal) => {
        concat!(
            "(CASE WHEN ",
            $sid,
            "::uuid IS NULL THEN (u.password_changed_at IS NULL \
                  OR u.password_changed_at < to_timestamp(",
            $iat,
            "::int8)) \
             ELSE EXISTS (SELECT 1 FROM sessions s WHERE s.id = ",
            $sid,
            "::uuid AND s.user_id = u.id AND s.revoked_at IS NULL AND s.expires_at > now()) END)"
        )
    };
}
pub(crate) use session_live;

/// Why a session ended (`sessions.revoked_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevokeReason {
    Logout,
    Revoked,
    OthersRevoked,
    RefreshTokenReused,
    PasswordReset,
    PasswordChanged,
}

impl RevokeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RevokeReason::Logout => "logout",
            RevokeReason::Revoked => "revoked",
            RevokeReason::OthersRevoked => "others_revoked",
            RevokeReason::RefreshTokenReused => "refresh_token_reused",
            RevokeReason::PasswordReset => "password_reset",
            RevokeReason::PasswordChanged => "password_changed",
        }
    }
}

/// Where a login or refresh came from.
pub struct ClientSeen<'a> {
    pub address: IpAddr,
    pub user_agent: Option<&'a str>,
}

/// A new refresh token as stored: its hash and lifetime.
pub struct NewRefresh<'a> {
    pub hash: &'a [u8],
    pub lifetime_secs: u64,
}

db_row! {
    /// A live session.
    pub struct SessionRow {
        pub id: Uuid = "id",
        pub created_at: DateTime<Utc> = "created_at",
        pub last_used_at: DateTime<Utc> = "last_used_at",
        pub expires_at: DateTime<Utc> = "expires_at",
        pub ip_address: Option<IpAddr> = "ip_address",
        pub user_agent: Option<String> = "user_agent",
    }
}

/// The outcome of exchanging a refresh token.
#[derive(Debug, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// Rotated: the new refresh token is stored, the old one used up.
    Refreshed { user_id: Uuid, session_id: Uuid },
    /// No such token (or one pruned long after its expiry).
    Unknown,
    /// The token expired without being used.
    Expired,
    /// The token was exchanged before: the session (live until then) is
    /// now revoked.
    Reused { session_id: Uuid },
    /// The session was revoked or ended, or its user can no longer log in.
    SessionEnded,
}

/// What [`Datastore::session_check`] found.
pub enum SessionCheck {
    /// The user does not exist or cannot log in.
    NoUser,
    /// The token's session is revoked or ended.
    Ended,
    Live,
}

/// The most sessions listed.
const SESSIONS_LISTED: i64 = 1000;

/// The longest `User-Agent` kept.
pub const USER_AGENT_MAX_CHARS: usize = 512;

const SESSION_CHECK: &str = concat!(
    "SELECT ",
    session_live!("$2", "$3"),
    " AS session_live FROM users u WHERE u.id = $1 AND u.password_hash IS NOT NULL"
);

impl Datastore {
    /// Starts a session for `user_id` with its first refresh token, and
    /// marks the user active, in one statement. Returns the session id.
    pub async fn session_start(
        &self,
        user_id: Uuid,
        client: &ClientSeen<'_>,
        refresh: &NewRefresh<'_>,
        origin: &crate::audit::Origin,
        sso_organization: Option<Uuid>,
    ) -> Result<Uuid, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let session_id = Uuid::new_v4();
        let lifetime = refresh.lifetime_secs as f64;
        tx.execute(
            "WITH s AS ( \
                 INSERT INTO sessions (id, user_id, ip_address, user_agent, expires_at, \
                                       sso_organization_id) \
                 VALUES ($1, $2, $3, $4, now() + make_interval(secs => $6), $7) RETURNING id), \
             t AS ( \
                 INSERT INTO refresh_tokens (token_hash, session_id, expires_at) \
                 SELECT $5, id, now() + make_interval(secs => $6) FROM s RETURNING 1) \
             UPDATE users SET last_active_at = now() WHERE id = $2",
            &[
                &session_id,
                &user_id,
                &client.address,
                &client.user_agent,
                &refresh.hash,
                &lifetime,
                &sso_organization,
            ],
        )
        .await?;
        let event = crate::audit::Event::system("auth.login").target("session", session_id);
        let event = match sso_organization {
            Some(org) => event.details(serde_json::json!({ "sso_organization_id": org })),
            None => event,
        };
        super::audit::record(&tx, origin, &event).await?;
        tx.commit().await?;
        Ok(session_id)
    }

    /// Exchanges the refresh token `old_hash` for `new`, in one
    /// transaction. The old token is used up by a conditional update of its
    /// row: of two exchanges of one token at once, the second waits for the
    /// first's row lock, then finds it used (and so is a reuse).
    pub async fn session_refresh(
        &self,
        old_hash: &[u8],
        new: &NewRefresh<'_>,
        client: &ClientSeen<'_>,
    ) -> Result<RefreshOutcome, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let used = tx
            .query_opt(
                "UPDATE refresh_tokens SET rotated_at = now() \
                 WHERE token_hash = $1 AND rotated_at IS NULL AND expires_at > now() \
                 RETURNING session_id",
                &[&old_hash],
            )
            .await?;
        let Some(used) = used else {
            // Not exchangeable: unknown, expired, or already exchanged.
            let row = tx
                .query_opt(
                    "SELECT session_id, rotated_at IS NOT NULL AS rotated \
                     FROM refresh_tokens WHERE token_hash = $1",
                    &[&old_hash],
                )
                .await?;
            let Some(row) = row else {
                return Ok(RefreshOutcome::Unknown);
            };
            let session_id: Uuid = row.get("session_id");
            if !row.get::<_, bool>("rotated") {
                return Ok(RefreshOutcome::Expired);
            }
            let revoked = tx
                .execute(
                    "UPDATE sessions SET revoked_at = now(), revoked_reason = $2 \
                     WHERE id = $1 AND revoked_at IS NULL AND expires_at > now()",
                    &[&session_id, &RevokeReason::RefreshTokenReused.as_str()],
                )
                .await?;
            tx.commit().await?;
            // A session that had already ended stays as it ended.
            return Ok(if revoked == 1 {
                RefreshOutcome::Reused { session_id }
            } else {
                RefreshOutcome::SessionEnded
            });
        };
        let session_id: Uuid = used.get("session_id");
        let lifetime = new.lifetime_secs as f64;
        let session = tx
            .query_opt(
                "UPDATE sessions s SET last_used_at = now(), ip_address = $2, user_agent = $3, \
                        expires_at = now() + make_interval(secs => $4) \
                 FROM users u \
                 WHERE s.id = $1 AND u.id = s.user_id AND u.password_hash IS NOT NULL \
                   AND s.revoked_at IS NULL AND s.expires_at > now() \
                 RETURNING s.user_id",
                &[&session_id, &client.address, &client.user_agent, &lifetime],
            )
            .await?;
        let Some(session) = session else {
            // Rolled back: the token stays as it was (its session is over
            // anyway).
            return Ok(RefreshOutcome::SessionEnded);
        };
        tx.execute(
            "INSERT INTO refresh_tokens (token_hash, session_id, expires_at) \
             VALUES ($1, $2, now() + make_interval(secs => $3))",
            &[&new.hash, &session_id, &lifetime],
        )
        .await?;
        tx.commit().await?;
        Ok(RefreshOutcome::Refreshed {
            user_id: session.get("user_id"),
            session_id,
        })
    }

    /// Whether the caller's user exists (and can log in) and the token's
    /// session is live, in one statement on a shared connection (for
    /// operations on the caller's own account).
    pub async fn session_check(&self, actor: &Actor) -> Result<SessionCheck, Error> {
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                SESSION_CHECK,
                &[&actor.user_id, &actor.session_id, &actor.issued_at],
            )
            .await?;
        Ok(match row {
            None => SessionCheck::NoUser,
            Some(r) if !r.get::<_, bool>("session_live") => SessionCheck::Ended,
            Some(_) => SessionCheck::Live,
        })
    }

    /// The user's live sessions, newest first.
    pub async fn sessions_list(&self, user_id: Uuid) -> Result<Vec<SessionRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM sessions \
                     WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now() \
                     ORDER BY created_at DESC, id LIMIT $2",
                    SessionRow::COLUMNS
                ),
                &[&user_id, &SESSIONS_LISTED],
            )
            .await?;
        Ok(rows.iter().map(SessionRow::from_row).collect())
    }

    /// Revokes one live session of the user; whether there was one.
    pub async fn session_revoke(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        reason: RevokeReason,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE sessions SET revoked_at = now(), revoked_reason = $3 \
                 WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL AND expires_at > now()",
                &[&session_id, &user_id, &reason.as_str()],
            )
            .await?;
        Ok(n == 1)
    }

    /// Revokes every live session of the user but `keep`; how many.
    pub async fn sessions_revoke_others(
        &self,
        user_id: Uuid,
        keep: Option<Uuid>,
        reason: RevokeReason,
    ) -> Result<u64, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .execute(REVOKE_ALL_BUT, &[&user_id, &keep, &reason.as_str()])
            .await?)
    }
}

/// Deletes sessions that ended more than a day ago (with their refresh
/// tokens), refresh tokens exchanged longer ago than a refresh lifetime
/// (presenting one is then `invalid_refresh_token` rather than a detected
/// reuse: it expired anyway), and password-reset tokens a day past their
/// expiry, on the janitor's connection. Returns the number of rows deleted.
pub(crate) async fn expire(
    conn: &super::Conn,
    refresh_lifetime_secs: u64,
) -> Result<u64, tokio_postgres::Error> {
    let sessions = conn
        .execute(
            "DELETE FROM sessions WHERE expires_at < now() - interval '1 day' \
                OR revoked_at < now() - interval '1 day'",
            &[],
        )
        .await?;
    let lifetime = refresh_lifetime_secs as f64;
    let tokens = conn
        .execute(
            "DELETE FROM refresh_tokens WHERE rotated_at < now() - make_interval(secs => $1)",
            &[&lifetime],
        )
        .await?;
    let resets = conn
        .execute(
            "DELETE FROM password_resets WHERE expires_at < now() - interval '1 day'",
            &[],
        )
        .await?;
    Ok(sessions + tokens + resets)
}

/// Revokes every live session of user `$1` but `$2` (nullable) with the
/// reason `$3`: for a connection or a transaction.
pub(crate) const REVOKE_ALL_BUT: &str = "UPDATE sessions SET revoked_at = now(), revoked_reason = $3 \
     WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now() \
       AND id IS DISTINCT FROM $2";

#[cfg(test)]
mod tests {
    #[test]
    fn the_session_check_names_its_parameters() {
        let sql = session_live!("$3", "$4");
        assert!(sql.contains("s.id = $3::uuid"), "{sql}");
        assert!(sql.contains("to_timestamp($4::int8)"), "{sql}");
        assert!(sql.contains("s.revoked_at IS NULL"), "{sql}");
    }
}
