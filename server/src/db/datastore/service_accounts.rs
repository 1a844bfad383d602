//! Organization service accounts: a `users` row that cannot log in
//! (`service_account_of` names its organization), its membership there and
//! its personal access tokens.

use super::tokens::{NewToken, TOKEN_COLUMNS, TokenRow, insert_token};
use super::{Datastore, audit};
use crate::audit::Event;
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::MembershipStatus;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;
use workspace_api::service_accounts::SERVICE_ACCOUNTS_PER_ORG_MAX;

/// A service account with its role and membership.
pub struct ServiceAccountRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub name: String,
    pub role_id: Uuid,
    pub role_name: String,
    pub role_level: i32,
    pub status: MembershipStatus,
    pub created_by: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

const ACCOUNT_COLUMNS: &str = "u.id, m.organization_id AS org_id, u.first_name AS name, \
     r.id AS role_id, r.name AS role_name, r.hierarchy_level AS role_level, m.status, \
     u.created_by, u.created_at";

/// The service accounts of `$1` (and `$2`, when given, that one only).
const ACCOUNTS: &str = "FROM users u \
     JOIN memberships m ON m.user_id = u.id AND m.organization_id = u.service_account_of \
     JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
     WHERE u.service_account_of = $1";

impl ServiceAccountRow {
    fn from_row(row: &tokio_postgres::Row) -> ServiceAccountRow {
        ServiceAccountRow {
            id: row.get("id"),
            org_id: row.get("org_id"),
            name: row.get("name"),
            role_id: row.get("role_id"),
            role_name: row.get("role_name"),
            role_level: row.get("role_level"),
            status: row.get("status"),
            created_by: row.get("created_by"),
            created_at: row.get("created_at"),
        }
    }
}

impl Datastore {
    /// Creates a service account of the grant's organization with the
    /// role (checked assignable by the caller) and its first token, in one
    /// transaction; `None` when the organization holds
    /// [`SERVICE_ACCOUNTS_PER_ORG_MAX`] already (counted under the
    /// organization's row lock).
    pub async fn service_account_create(
        &self,
        grant: &Grant<on::Org, perm::UsersWrite>,
        name: &str,
        role_id: Uuid,
        token: &NewToken<'_>,
    ) -> Result<Option<(ServiceAccountRow, TokenRow)>, Error> {
        let org_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.query_one(
            "SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE",
            &[&org_id],
        )
        .await?;
        let held: i64 = tx
            .query_one(
                "SELECT count(*) FROM users WHERE service_account_of = $1",
                &[&org_id],
            )
            .await?
            .get(0);
        if held >= SERVICE_ACCOUNTS_PER_ORG_MAX {
            return Ok(None);
        }
        let id = Uuid::new_v4();
        // Not an e-mail address (no dot in its domain): no signup,
        // invitation or login can name it.
        let address = format!("{id}@service-account");
        tx.execute(
            "INSERT INTO users (id, email, email_normalized, first_name, last_name, \
                                password_hash, service_account_of, created_by) \
             VALUES ($1, $2, $2, $3, '', NULL, $4, $5)",
            &[&id, &address, &name, &org_id, &grant.user_id()],
        )
        .await?;
        tx.execute(
            "INSERT INTO memberships (user_id, organization_id, role_id, status) \
             VALUES ($1, $2, $3, $4)",
            &[&id, &org_id, &role_id, &MembershipStatus::Active],
        )
        .await?;
        let token = insert_token(&tx, id, token).await?;
        let account = tx
            .query_one(
                &format!("SELECT {ACCOUNT_COLUMNS} {ACCOUNTS} AND u.id = $2"),
                &[&org_id, &id],
            )
            .await?;
        let event = Event::org(org_id, "service_account.create")
            .target("service_account", id)
            .details(serde_json::json!({
                "name": name, "role_id": role_id, "token_id": token.id, "scopes": token.scopes,
            }));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(Some((ServiceAccountRow::from_row(&account), token)))
    }

    /// The organization's service accounts, oldest first, each with its
    /// live tokens (newest first).
    pub async fn service_account_list(
        &self,
        access: &OrgAccess,
    ) -> Result<Vec<(ServiceAccountRow, Vec<TokenRow>)>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let accounts = conn
            .query(
                &format!(
                    "SELECT {ACCOUNT_COLUMNS} {ACCOUNTS} AND m.status IN ($2, $3) \
                     ORDER BY u.created_at, u.id"
                ),
                &[
                    &org_id,
                    &MembershipStatus::Active,
                    &MembershipStatus::Suspended,
                ],
            )
            .await?;
        let tokens = conn
            .query(
                &format!(
                    "SELECT t.user_id, {} FROM personal_access_tokens t \
                     JOIN users u ON u.id = t.user_id \
                     WHERE u.service_account_of = $1 AND t.revoked_at IS NULL \
                       AND t.expires_at > now() \
                     ORDER BY t.created_at DESC, t.id",
                    TOKEN_COLUMNS
                        .split(", ")
                        .map(|c| format!("t.{c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &[&org_id],
            )
            .await?;
        Ok(accounts
            .iter()
            .map(ServiceAccountRow::from_row)
            .map(|account| {
                let held = tokens
                    .iter()
                    .filter(|t| t.get::<_, Uuid>("user_id") == account.id)
                    .map(TokenRow::from_row)
                    .collect();
                (account, held)
            })
            .collect())
    }

    /// One service account of the grant's organization.
    pub async fn service_account_get(
        &self,
        access: &OrgAccess,
        account_id: Uuid,
    ) -> Result<Option<ServiceAccountRow>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt(
                &format!("SELECT {ACCOUNT_COLUMNS} {ACCOUNTS} AND u.id = $2"),
                &[&access.org_id(), &account_id],
            )
            .await?
            .as_ref()
            .map(ServiceAccountRow::from_row))
    }

    /// The scopes of the account's newest live token.
    pub async fn service_account_scopes(
        &self,
        account_id: Uuid,
    ) -> Result<Option<Vec<String>>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt(
                "SELECT scopes FROM personal_access_tokens \
                 WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now() \
                 ORDER BY created_at DESC, id LIMIT 1",
                &[&account_id],
            )
            .await?
            .map(|r| r.get(0)))
    }

    /// Gives the organization's service account a new token and revokes
    /// its others, in one transaction; `None` when the account is not the
    /// organization's.
    pub async fn service_account_rotate(
        &self,
        grant: &Grant<on::Org, perm::UsersWrite>,
        account_id: Uuid,
        token: &NewToken<'_>,
    ) -> Result<Option<TokenRow>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let found = tx
            .query_opt(
                "SELECT 1 FROM users WHERE id = $1 AND service_account_of = $2 FOR UPDATE",
                &[&account_id, &grant.id()],
            )
            .await?;
        if found.is_none() {
            return Ok(None);
        }
        tx.execute(
            "UPDATE personal_access_tokens SET revoked_at = now() \
             WHERE user_id = $1 AND revoked_at IS NULL",
            &[&account_id],
        )
        .await?;
        let row = insert_token(&tx, account_id, token).await?;
        let event = Event::org(grant.id(), "service_account.rotate")
            .target("service_account", account_id)
            .details(serde_json::json!({ "token_id": row.id, "scopes": row.scopes }));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    /// Deletes the organization's service account (its membership and
    /// tokens cascade); whether there was one.
    pub async fn service_account_delete(
        &self,
        grant: &Grant<on::Org, perm::UsersWrite>,
        account_id: Uuid,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM users WHERE id = $1 AND service_account_of = $2",
                &[&account_id, &grant.id()],
            )
            .await?;
        if n == 1 {
            let event = Event::org(grant.id(), "service_account.delete")
                .target("service_account", account_id);
            audit::record(&tx, grant.origin(), &event).await?;
            tx.commit().await?;
        }
        Ok(n == 1)
    }
}
