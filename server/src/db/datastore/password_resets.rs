//! Password resets and changes.
//!
//! A reset token is stored as its SHA-256 only, works once and expires.
//! Setting a password (by reset or change) records `password_changed_at`,
//! revokes sessions and ends the user's open reset tokens in one
//! transaction.

use super::Datastore;
use super::sessions::{REVOKE_ALL_BUT, RevokeReason};
use crate::error::Error;
use uuid::Uuid;

/// Who a reset e-mail goes to.
pub struct ResetRecipient {
    pub email: String,
    pub first_name: String,
}

/// A reset token as found.
pub struct ResetToken {
    pub user_id: Uuid,
    pub email_normalized: String,
    pub used: bool,
    pub expired: bool,
}

/// The outcome of a reset.
pub enum ResetOutcome {
    /// The password is set; this many sessions were revoked.
    Done {
        sessions_revoked: u64,
    },
    Unknown,
    Used,
    Expired,
}

impl Datastore {
    /// Stores a reset token for the account with this address, if there is
    /// one (with a password), and returns whom to e-mail it to. For an
    /// address without an account the same statement writes a row with no
    /// user, which can never be redeemed: both cases do the same work.
    pub async fn password_reset_create(
        &self,
        email_normalized: &str,
        token_hash: &[u8],
        lifetime_secs: u64,
    ) -> Result<Option<ResetRecipient>, Error> {
        let conn = self.conn().await?;
        let lifetime = lifetime_secs as f64;
        let row = conn
            .query_opt(
                "WITH u AS ( \
                     SELECT id, email, first_name FROM users \
                     WHERE email_normalized = $1 AND password_hash IS NOT NULL), \
                 ins AS ( \
                     INSERT INTO password_resets (token_hash, user_id, expires_at) \
                     VALUES ($2, (SELECT id FROM u), now() + make_interval(secs => $3)) \
                     RETURNING user_id) \
                 SELECT u.email, u.first_name FROM ins JOIN u ON u.id = ins.user_id",
                &[&email_normalized, &token_hash, &lifetime],
            )
            .await?;
        Ok(row.map(|r| ResetRecipient {
            email: r.get("email"),
            first_name: r.get("first_name"),
        }))
    }

    /// The reset token with this hash (`None`: unknown, or written for an
    /// address without an account).
    pub async fn password_reset_get(&self, token_hash: &[u8]) -> Result<Option<ResetToken>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT r.user_id, u.email_normalized, r.used_at IS NOT NULL AS used, \
                        r.expires_at <= now() AS expired \
                 FROM password_resets r JOIN users u ON u.id = r.user_id \
                 WHERE r.token_hash = $1 AND u.password_hash IS NOT NULL",
                &[&token_hash],
            )
            .await?;
        Ok(row.map(|r| ResetToken {
            user_id: r.get("user_id"),
            email_normalized: r.get("email_normalized"),
            used: r.get("used"),
            expired: r.get("expired"),
        }))
    }

    /// Redeems the reset token and sets the password, in one transaction:
    /// the token is used up by a conditional update (once, also under
    /// concurrent use), every session of the user is revoked, their other
    /// reset tokens are ended and their failed logins cleared.
    pub async fn password_reset_apply(
        &self,
        token_hash: &[u8],
        password_hash: &str,
    ) -> Result<ResetOutcome, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let redeemed = tx
            .query_opt(
                "UPDATE password_resets SET used_at = now() \
                 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() \
                   AND user_id IS NOT NULL \
                 RETURNING user_id",
                &[&token_hash],
            )
            .await?;
        let Some(redeemed) = redeemed else {
            let row = tx
                .query_opt(
                    "SELECT used_at IS NOT NULL AS used FROM password_resets \
                     WHERE token_hash = $1 AND user_id IS NOT NULL",
                    &[&token_hash],
                )
                .await?;
            return Ok(match row {
                None => ResetOutcome::Unknown,
                Some(r) if r.get::<_, bool>("used") => ResetOutcome::Used,
                Some(_) => ResetOutcome::Expired,
            });
        };
        let user_id: Uuid = redeemed.get("user_id");
        let sessions_revoked = set_password(
            &tx,
            user_id,
            password_hash,
            None,
            RevokeReason::PasswordReset,
        )
        .await?;
        let Some(sessions_revoked) = sessions_revoked else {
            return Ok(ResetOutcome::Unknown);
        };
        tx.execute(
            "DELETE FROM login_failures \
             WHERE email_normalized = (SELECT email_normalized FROM users WHERE id = $1)",
            &[&user_id],
        )
        .await?;
        tx.commit().await?;
        Ok(ResetOutcome::Done { sessions_revoked })
    }

    /// Sets the password of `user_id` and revokes every session but
    /// `keep`, in one transaction; how many were revoked (`None`: the user
    /// no longer exists).
    pub async fn password_change(
        &self,
        user_id: Uuid,
        password_hash: &str,
        keep: Option<Uuid>,
    ) -> Result<Option<u64>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let revoked = set_password(
            &tx,
            user_id,
            password_hash,
            keep,
            RevokeReason::PasswordChanged,
        )
        .await?;
        if revoked.is_some() {
            tx.commit().await?;
        }
        Ok(revoked)
    }
}

/// Sets the password, revokes every session but `keep` and ends open
/// reset tokens, in the caller's transaction. `None` when the user does
/// not exist (or has no password).
async fn set_password(
    tx: &super::Tx<'_>,
    user_id: Uuid,
    password_hash: &str,
    keep: Option<Uuid>,
    reason: RevokeReason,
) -> Result<Option<u64>, Error> {
    let changed = tx
        .execute(
            "UPDATE users SET password_hash = $2, password_changed_at = now(), updated_at = now() \
             WHERE id = $1 AND password_hash IS NOT NULL",
            &[&user_id, &password_hash],
        )
        .await?;
    if changed == 0 {
        return Ok(None);
    }
    let revoked = tx
        .execute(REVOKE_ALL_BUT, &[&user_id, &keep, &reason.as_str()])
        .await?;
    tx.execute(
        "UPDATE password_resets SET used_at = now() WHERE user_id = $1 AND used_at IS NULL",
        &[&user_id],
    )
    .await?;
    Ok(Some(revoked))
}
