//! Users and their memberships.

use super::Datastore;
use crate::authz::OrgAccess;
use crate::db::enums::{MembershipStatus, UserListStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct NewUser<'a> {
    pub email: &'a str,
    pub first_name: &'a str,
    pub last_name: &'a str,
    pub password_hash: &'a str,
}

pub struct UserRow {
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub created_at: DateTime<Utc>,
    pub last_active_at: Option<DateTime<Utc>>,
    pub is_system_admin: bool,
}

impl UserRow {
    fn from_row(row: &tokio_postgres::Row) -> UserRow {
        UserRow {
            id: row.get("id"),
            email: row.get("email"),
            first_name: row.get("first_name"),
            last_name: row.get("last_name"),
            created_at: row.get("created_at"),
            last_active_at: row.get("last_active_at"),
            is_system_admin: row.get("is_system_admin"),
        }
    }
}

db_row! {
    /// An active membership: the organization and the member's role.
    pub struct MembershipRow {
        pub organization_id: Uuid = "o.id",
        pub organization_name: String = "o.name",
        pub slug: String = "o.slug",
        pub role_id: Uuid = "r.id",
        pub role_name: String = "r.name",
    }
}

/// What login needs to know about an account.
pub struct Credentials {
    pub id: Uuid,
    pub password_hash: Option<String>,
}

/// `GET /api/users/me` in one statement: the user, then one row per active
/// membership (or one row of NULLs when there is none), each saying whether
/// the caller's session is live. `$caller` names the user: by id (with the
/// access token's `sid` and `iat` as `$2` and `$3`, for the session), or
/// by a personal access token's hash (whose id comes along, to record its
/// use; a token has no session).
macro_rules! user_me_sql {
    ($caller:literal, $which:literal $(, session($sid:literal, $iat:literal))?) => {
        concat!(
            "SELECT u.id, u.email, u.first_name, u.last_name, u.created_at, \
                    u.last_active_at, u.is_system_admin, o.id AS organization_id, \
                    o.name AS organization_name, o.slug AS slug, r.id AS role_id, \
                    r.name AS role_name, ",
            $(super::sessions::session_live!($sid, $iat), " AS session_live, ",)?
            $caller,
            " LEFT JOIN memberships m ON m.user_id = u.id AND m.status = 'active' \
             LEFT JOIN organizations o ON o.id = m.organization_id \
                  AND o.deletion_requested_at IS NULL \
             LEFT JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id ",
            $which,
            " ORDER BY m.created_at, o.id"
        )
    };
}

/// `GET /api/users/me` by the user's id. Public for the API benchmark,
/// which runs the same SQL through pgbench.
pub const USER_ME: &str = user_me_sql!(
    "NULL::uuid AS token_id FROM users u",
    "WHERE u.id = $1 AND u.password_hash IS NOT NULL",
    session("$2", "$3")
);

/// `GET /api/users/me` by a personal access token's hash.
pub const USER_ME_BY_TOKEN: &str = user_me_sql!(
    "t.id AS token_id, true AS session_live \
     FROM personal_access_tokens t JOIN users u ON u.id = t.user_id",
    "WHERE t.secret_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now() \
     AND (u.password_hash IS NOT NULL OR u.service_account_of IS NOT NULL)"
);

/// The advisory lock that orders signups while the first account may
/// still become a system administrator (`auth.first_account_admin`).
const FIRST_ACCOUNT_LOCK: i64 = 0x5753_6669_7273_7400; // "WSfirst\0"

impl Datastore {
    /// Creates the user and their personal organization (with its system
    /// roles and the owner membership) in one transaction. With
    /// `first_admin`, the account is a system administrator when no other
    /// account exists (signups wait for each other on an advisory lock, so
    /// two first signups at once cannot both be first).
    pub async fn user_create_with_personal_org(
        &self,
        user: &NewUser<'_>,
        org_name: &str,
        slug_base: &str,
        first_admin: bool,
    ) -> Result<UserRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if first_admin {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&FIRST_ACCOUNT_LOCK])
                .await?;
        }
        let row = tx
            .query_opt(
                "INSERT INTO users (id, email, email_normalized, first_name, last_name, password_hash, \
                                    is_system_admin) \
                 VALUES ($1, $2, $2, $3, $4, $5, \
                         $6 AND NOT EXISTS (SELECT 1 FROM users WHERE password_hash IS NOT NULL)) \
                 ON CONFLICT (email_normalized) DO UPDATE \
                     SET first_name = EXCLUDED.first_name, last_name = EXCLUDED.last_name, \
                         password_hash = EXCLUDED.password_hash, updated_at = now() \
                     WHERE users.password_hash IS NULL \
                 RETURNING id, email, first_name, last_name, created_at, last_active_at, is_system_admin",
                &[
                    &Uuid::new_v4(),
                    &user.email,
                    &user.first_name,
                    &user.last_name,
                    &user.password_hash,
                    &first_admin,
                ],
            )
            .await?
            .ok_or_else(|| {
                Error::conflict("email_taken", "an account with this e-mail address already exists")
            })?;
        let created = UserRow::from_row(&row);
        super::organizations::insert_with_system_roles(&tx, org_name, slug_base, created.id, true)
            .await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Whether any account (a user with a password) exists.
    pub async fn any_account(&self) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM users WHERE password_hash IS NOT NULL) AS any",
                &[],
            )
            .await?;
        Ok(row.get("any"))
    }

    pub async fn user_credentials(
        &self,
        email_normalized: &str,
    ) -> Result<Option<Credentials>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT id, password_hash FROM users WHERE email_normalized = $1",
                &[&email_normalized],
            )
            .await?;
        Ok(row.map(|r| Credentials {
            id: r.get("id"),
            password_hash: r.get("password_hash"),
        }))
    }

    /// Whether a user with this id exists and can log in (has a password).
    pub async fn user_exists(&self, user_id: Uuid) -> Result<bool, Error> {
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                "SELECT 1 FROM users WHERE id = $1 AND password_hash IS NOT NULL",
                &[&user_id],
            )
            .await?;
        Ok(row.is_some())
    }

    pub async fn user_get(&self, user_id: Uuid) -> Result<UserRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT id, email, first_name, last_name, created_at, last_active_at, is_system_admin \
                 FROM users WHERE id = $1",
                &[&user_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "user" })?;
        Ok(UserRow::from_row(&row))
    }

    /// The caller and their active memberships (oldest first), in one
    /// statement; `None` when the user does not exist or cannot log in,
    /// `401 session_revoked` when the token's session has ended.
    pub async fn user_me(
        &self,
        caller: &super::organizations::Caller,
    ) -> Result<Option<(UserRow, Vec<MembershipRow>, Option<Uuid>)>, Error> {
        use super::organizations::Caller;
        let conn = self.quick().await?;
        let rows = match caller {
            Caller::User(actor) => {
                conn.query(
                    USER_ME,
                    &[&actor.user_id, &actor.session_id, &actor.issued_at],
                )
                .await?
            }
            Caller::Token(hash) => conn.query(USER_ME_BY_TOKEN, &[hash]).await?,
        };
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        if !first.get::<_, bool>("session_live") {
            return Err(crate::authn::session_revoked());
        }
        let user = UserRow::from_row(first);
        let token_id: Option<Uuid> = first.get("token_id");
        let memberships = rows
            .iter()
            .filter_map(|r| {
                r.get::<_, Option<Uuid>>("organization_id")?;
                Some(MembershipRow::from_row(r))
            })
            .collect();
        Ok(Some((user, memberships, token_id)))
    }

    /// The user's active memberships, oldest first.
    pub async fn user_active_memberships(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<MembershipRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} \
                 FROM memberships m \
                 JOIN organizations o ON o.id = m.organization_id \
                 JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
                 WHERE m.user_id = $1 AND m.status = $2 \
                 ORDER BY m.created_at, o.id",
                    MembershipRow::COLUMNS
                ),
                &[&user_id, &MembershipStatus::Active],
            )
            .await?;
        Ok(rows.iter().map(MembershipRow::from_row).collect())
    }
}

/// A row of the users list: a member (active or suspended) or an open
/// invitation.
pub struct UserListRow {
    pub user_id: Option<Uuid>,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub status: UserListStatus,
    pub invite_id: Option<Uuid>,
    pub invited_at: Option<DateTime<Utc>>,
    pub last_active_at: Option<DateTime<Utc>>,
    pub organization_id: Uuid,
    pub organization_name: String,
    pub slug: String,
    pub role_id: Uuid,
    pub role_name: String,
}

/// Active members, then suspended members when `$2` (include them) is
/// true, then open invitations (stored `pending`, whether or not expired,
/// and not for an address that is already a member, active or suspended).
/// Removed members (`deleted`) are not listed.
const USER_LIST_ROWS: &str = "\
    SELECT CASE WHEN m.status = 'active' THEN 0 ELSE 1 END AS grp, u.id AS user_id, u.email, \
           u.first_name, u.last_name, m.status, NULL::uuid AS invite_id, \
           NULL::timestamptz AS invited_at, u.last_active_at, m.created_at AS sort_at, m.role_id \
    FROM memberships m JOIN users u ON u.id = m.user_id \
    WHERE m.organization_id = $1 \
      AND (m.status = 'active' OR ($2::boolean AND m.status = 'suspended')) \
    UNION ALL \
    SELECT 2, NULL, i.email, coalesce(iu.first_name, ''), coalesce(iu.last_name, ''), \
           CASE WHEN i.expires_at <= now() THEN 'expired' ELSE 'pending' END, \
           i.id, i.created_at, NULL, i.created_at, i.role_id \
    FROM invitations i LEFT JOIN users iu ON iu.id = i.invited_user_id \
    WHERE i.organization_id = $1 AND i.status = 'pending' \
      AND NOT EXISTS ( \
          SELECT 1 FROM memberships am JOIN users au ON au.id = am.user_id \
          WHERE am.organization_id = $1 AND am.status IN ('active', 'suspended') \
            AND au.email_normalized = i.email)";

impl Datastore {
    /// One page of the users list of `org_id` (see `users_list` in the API)
    /// and the total number of rows, read in one snapshot.
    pub async fn users_list(
        &self,
        access: &OrgAccess,
        limit: i64,
        skip: i64,
        include_suspended: bool,
    ) -> Result<(Vec<UserListRow>, i64), Error> {
        let org_id = access.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.snapshot().await?;
        let total: i64 = tx
            .query_one(
                &format!("SELECT count(*) AS total FROM ({USER_LIST_ROWS}) AS rows"),
                &[&org_id, &include_suspended],
            )
            .await?
            .get("total");
        let rows = tx
            .query(
                &format!(
                    "SELECT l.user_id, l.email, l.first_name, l.last_name, l.status, l.invite_id, \
                            l.invited_at, l.last_active_at, {} \
                     FROM ({USER_LIST_ROWS}) AS l \
                     JOIN organizations o ON o.id = $1 \
                     JOIN roles r ON r.id = l.role_id AND r.organization_id = $1 \
                     ORDER BY l.grp, l.sort_at DESC, l.email \
                     LIMIT $3 OFFSET $4",
                    MembershipRow::COLUMNS
                ),
                &[&org_id, &include_suspended, &limit, &skip],
            )
            .await?;
        tx.commit().await?;
        Ok((
            rows.iter()
                .map(|r| UserListRow {
                    user_id: r.get("user_id"),
                    email: r.get("email"),
                    first_name: r.get("first_name"),
                    last_name: r.get("last_name"),
                    status: r.get("status"),
                    invite_id: r.get("invite_id"),
                    invited_at: r.get("invited_at"),
                    last_active_at: r.get("last_active_at"),
                    organization_id: r.get("organization_id"),
                    organization_name: r.get("organization_name"),
                    slug: r.get("slug"),
                    role_id: r.get("role_id"),
                    role_name: r.get("role_name"),
                })
                .collect(),
            total,
        ))
    }
}

impl Datastore {
    /// One member's row of the users list (active or suspended; `None`
    /// for any other membership or none).
    pub async fn users_list_member(
        &self,
        access: &OrgAccess,
        user_id: Uuid,
    ) -> Result<Option<UserListRow>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT u.id AS user_id, u.email, u.first_name, u.last_name, m.status, \
                            u.last_active_at, {} \
                     FROM memberships m JOIN users u ON u.id = m.user_id \
                     JOIN organizations o ON o.id = m.organization_id \
                     JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
                     WHERE m.organization_id = $1 AND m.user_id = $2 AND m.status IN ($3, $4)",
                    MembershipRow::COLUMNS
                ),
                &[
                    &access.org_id(),
                    &user_id,
                    &MembershipStatus::Active,
                    &MembershipStatus::Suspended,
                ],
            )
            .await?;
        Ok(row.map(|r| UserListRow {
            user_id: r.get("user_id"),
            email: r.get("email"),
            first_name: r.get("first_name"),
            last_name: r.get("last_name"),
            status: r.get("status"),
            invite_id: None,
            invited_at: None,
            last_active_at: r.get("last_active_at"),
            organization_id: r.get("organization_id"),
            organization_name: r.get("organization_name"),
            slug: r.get("slug"),
            role_id: r.get("role_id"),
            role_name: r.get("role_name"),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_me_selects_the_membership_columns() {
        assert!(USER_ME.contains(MembershipRow::COLUMNS), "{USER_ME}");
    }
}
