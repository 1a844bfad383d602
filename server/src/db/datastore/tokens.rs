//! Personal access tokens: created and listed by their user, found by the
//! hash of their secret.

use super::Datastore;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The most live tokens one user holds.
pub const TOKENS_PER_USER_MAX: i64 = 50;

/// A token as stored, without its hash.
pub struct TokenRow {
    pub id: Uuid,
    pub name: String,
    pub prefix: String,
    pub scopes: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

pub(super) const TOKEN_COLUMNS: &str =
    "id, name, prefix, scopes, created_at, expires_at, last_used_at";

impl TokenRow {
    pub(super) fn from_row(row: &tokio_postgres::Row) -> TokenRow {
        TokenRow {
            id: row.get("id"),
            name: row.get("name"),
            prefix: row.get("prefix"),
            scopes: row.get("scopes"),
            created_at: row.get("created_at"),
            expires_at: row.get("expires_at"),
            last_used_at: row.get("last_used_at"),
        }
    }
}

/// A token to create.
pub struct NewToken<'a> {
    pub name: &'a str,
    pub prefix: &'a str,
    pub secret_hash: &'a [u8],
    pub scopes: &'a [String],
    pub lifetime_days: i32,
    /// The session the token is made in: a token made in a single
    /// sign-on session acts in that organization only.
    pub session_id: Option<Uuid>,
}

impl Datastore {
    /// The user, id and scopes of a live token (unrevoked, unexpired, of a
    /// user who can still log in).
    pub async fn token_user(
        &self,
        secret_hash: &[u8],
    ) -> Result<Option<(Uuid, Uuid, Vec<String>)>, Error> {
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                "SELECT t.user_id, t.id, t.scopes FROM personal_access_tokens t \
                 JOIN users u ON u.id = t.user_id \
                 WHERE t.secret_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now() \
                   AND (u.password_hash IS NOT NULL OR u.service_account_of IS NOT NULL)",
                &[&secret_hash],
            )
            .await?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
    }

    /// Records that a token was used now.
    pub async fn token_touch(&self, token_id: Uuid) -> Result<(), Error> {
        let conn = self.quick().await?;
        conn.execute(
            "UPDATE personal_access_tokens SET last_used_at = date_trunc('minute', now()) \
             WHERE id = $1",
            &[&token_id],
        )
        .await?;
        Ok(())
    }

    /// Creates a token for `user_id` unless they hold
    /// [`TOKENS_PER_USER_MAX`] live ones (`None`); the user's row is locked
    /// for the count, so concurrent creations cannot pass the limit.
    pub async fn token_create(
        &self,
        user_id: Uuid,
        new: &NewToken<'_>,
        origin: &crate::audit::Origin,
    ) -> Result<Option<TokenRow>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", &[&user_id])
            .await?;
        let live: i64 = tx
            .query_one(
                "SELECT count(*) FROM personal_access_tokens \
                 WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now()",
                &[&user_id],
            )
            .await?
            .get(0);
        if live >= TOKENS_PER_USER_MAX {
            return Ok(None);
        }
        let row = insert_token(&tx, user_id, new).await?;
        let event = crate::audit::Event::system("token.create")
            .target("token", row.id)
            .details(serde_json::json!({
                "name": row.name, "scopes": row.scopes, "user_id": user_id,
            }));
        super::audit::record(&tx, origin, &event).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    /// The user's live tokens, newest first.
    pub async fn token_list(&self, user_id: Uuid) -> Result<Vec<TokenRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {TOKEN_COLUMNS} FROM personal_access_tokens \
                     WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now() \
                     ORDER BY created_at DESC, id"
                ),
                &[&user_id],
            )
            .await?;
        Ok(rows.iter().map(TokenRow::from_row).collect())
    }

    /// Revokes one of the user's live tokens; `false` when there is none.
    pub async fn token_revoke(
        &self,
        user_id: Uuid,
        token_id: Uuid,
        origin: &crate::audit::Origin,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "UPDATE personal_access_tokens SET revoked_at = now() \
                 WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL AND expires_at > now()",
                &[&token_id, &user_id],
            )
            .await?;
        if n == 1 {
            let event = crate::audit::Event::system("token.revoke").target("token", token_id);
            super::audit::record(&tx, origin, &event).await?;
            tx.commit().await?;
        }
        Ok(n == 1)
    }
}

/// Inserts a token of `user_id` in the transaction.
pub(super) async fn insert_token(
    tx: &super::Tx<'_>,
    user_id: Uuid,
    new: &NewToken<'_>,
) -> Result<TokenRow, Error> {
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO personal_access_tokens \
                     (id, user_id, name, prefix, secret_hash, scopes, expires_at, \
                      sso_organization_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(days => $7), \
                         (SELECT sso_organization_id FROM sessions WHERE id = $8)) \
                 RETURNING {TOKEN_COLUMNS}"
            ),
            &[
                &Uuid::new_v4(),
                &user_id,
                &new.name,
                &new.prefix,
                &new.secret_hash,
                &new.scopes,
                &new.lifetime_days,
                &new.session_id,
            ],
        )
        .await?;
    Ok(TokenRow::from_row(&row))
}
