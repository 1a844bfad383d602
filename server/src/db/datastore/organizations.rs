//! Organizations.

use super::Datastore;
use crate::authz::{Membership, OrgAccess, SYSTEM_ROLES, Scope, SystemAdmin};
use crate::db::enums::MembershipStatus;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// An organization with the caller's role in it.
pub struct OrgRow {
    pub id: Uuid,
    pub name: String,
    pub slug: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub role_id: Uuid,
    pub role_name: String,
    pub role_level: i32,
}

impl OrgRow {
    fn from_row(r: &tokio_postgres::Row) -> OrgRow {
        OrgRow {
            id: r.get("id"),
            name: r.get("name"),
            slug: r.get("slug"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
            role_id: r.get("role_id"),
            role_name: r.get("role_name"),
            role_level: r.get("role_level"),
        }
    }
}

const ORG_WITH_ROLE: &str = "SELECT o.id, o.name, o.slug, o.created_at, o.updated_at, \
        r.id AS role_id, r.name AS role_name, r.hierarchy_level AS role_level \
     FROM memberships m \
     JOIN organizations o ON o.id = m.organization_id \
     JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id";

/// What [`Datastore::access_lookup`] found.
pub enum AccessLookup {
    /// The token's user does not exist (or has no password yet).
    NoUser,
    /// The user is not an active member of the organization (or the
    /// organization or the addressed object does not exist).
    NotMember,
    Member(Membership),
}

/// The authorization statement; `{org}` is the expression that yields the
/// organization id from `$2`.
macro_rules! access_sql {
    ($org:literal) => {
        concat!(
            "SELECT m.organization_id AS org_id, r.id AS role_id, r.name AS role_name, \
                    r.is_system_role AS role_is_system, r.hierarchy_level AS level, \
                    ARRAY(SELECT p.name FROM role_permissions rp \
                          JOIN permissions p ON p.id = rp.permission_id \
                          WHERE rp.role_id = r.id) AS permissions \
             FROM users u \
             LEFT JOIN memberships m ON m.user_id = u.id AND m.status = 'active' \
                  AND NOT EXISTS (SELECT 1 FROM organizations d WHERE d.id = m.organization_id \
                                  AND d.deletion_requested_at IS NOT NULL) \
                  AND m.organization_id = ",
            $org,
            " LEFT JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
             WHERE u.id = $1 AND u.password_hash IS NOT NULL"
        )
    };
}
/// Public for the API benchmark (pgbench runs the same SQL).
pub const ACCESS_BY_ORG: &str = access_sql!("$2");
const ACCESS_BY_INVITATION: &str =
    access_sql!("(SELECT organization_id FROM invitations WHERE id = $2)");
const ACCESS_BY_KB: &str =
    access_sql!("(SELECT organization_id FROM knowledge_bases WHERE id = $2)");
const ACCESS_BY_AGENT: &str = access_sql!("(SELECT organization_id FROM agents WHERE id = $2)");
const ACCESS_BY_CHAT: &str = access_sql!("(SELECT organization_id FROM chats WHERE id = $2)");
const ACCESS_BY_MCP_INSTANCE: &str =
    access_sql!("(SELECT organization_id FROM mcp_instances WHERE id = $2 AND user_id = $1)");
/// The caller's personal organization (`$2` is unused: a nil id).
const ACCESS_BY_PERSONAL: &str = access_sql!(
    "(SELECT o.id FROM organizations o WHERE o.is_personal AND o.created_by = $1 \
      AND o.id <> $2 ORDER BY o.created_at, o.id LIMIT 1)"
);
const ACCESS_BY_DEPLOYMENT: &str =
    access_sql!("(SELECT organization_id FROM agent_deployments WHERE id = $2)");

/// The per-organization overrides of feature gates and quotas (`None`: use
/// the configured default).
#[derive(Default)]
pub struct FeatureOverrides {
    pub team_members: Option<bool>,
    pub file_upload: Option<bool>,
    pub chat_uploads: Option<bool>,
    pub mcp_sessions: Option<i32>,
    pub daily_chat_limit: Option<i32>,
}

/// A membership of one user in one organization, any status.
pub struct MembershipState {
    pub status: MembershipStatus,
    pub role_id: Uuid,
    pub role_name: String,
    pub role_level: i32,
    pub role_is_system: bool,
}

/// Turns a name into a URL slug: lowercase ASCII letters and digits joined
/// by single hyphens, at most 48 characters, never empty.
pub fn slugify(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= 48 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        "org".to_string()
    } else {
        slug
    }
}

impl Datastore {
    /// Organizations where `user_id` is an active member, oldest membership
    /// first.
    pub async fn org_list_for_user(
        &self,
        user_id: Uuid,
        page: super::Page,
    ) -> Result<Vec<OrgRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "{ORG_WITH_ROLE} WHERE m.user_id = $1 AND m.status = $4 \
                     AND o.deletion_requested_at IS NULL \
                     ORDER BY m.created_at, o.id LIMIT $2 OFFSET $3"
                ),
                &[
                    &user_id,
                    &page.limit,
                    &page.offset,
                    &MembershipStatus::Active,
                ],
            )
            .await?;
        Ok(rows.iter().map(OrgRow::from_row).collect())
    }

    /// Creates an organization owned by `owner_id`, refusing a name equal
    /// (case-insensitively) to one of the owner's organizations. The owner's
    /// user row is locked for the check, so concurrent creations by one user
    /// cannot both pass it.
    pub async fn org_create(
        &self,
        owner_id: Uuid,
        name: &str,
        slug_base: &str,
    ) -> Result<OrgRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.query_one("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", &[&owner_id])
            .await?;
        let taken = tx
            .query_opt(
                "SELECT 1 FROM memberships m JOIN organizations o ON o.id = m.organization_id \
                 WHERE m.user_id = $1 AND m.status IN ($3, $4, $5) \
                   AND lower(o.name) = lower($2) AND o.deletion_requested_at IS NULL",
                &[
                    &owner_id,
                    &name,
                    &MembershipStatus::Active,
                    &MembershipStatus::Invited,
                    &MembershipStatus::Suspended,
                ],
            )
            .await?;
        if taken.is_some() {
            return Err(Error::conflict(
                "org_name_taken",
                "you already belong to an organization with this name",
            ));
        }
        let (org_id, _) = insert_with_system_roles(&tx, name, slug_base, owner_id, false).await?;
        let row = tx
            .query_one(
                &format!("{ORG_WITH_ROLE} WHERE m.user_id = $1 AND m.organization_id = $2"),
                &[&owner_id, &org_id],
            )
            .await?;
        tx.commit().await?;
        Ok(OrgRow::from_row(&row))
    }

    /// Whether the organization exists (system administrators address any).
    pub async fn org_exists(&self, _admin: &SystemAdmin, org_id: Uuid) -> Result<bool, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt("SELECT 1 FROM organizations WHERE id = $1", &[&org_id])
            .await?
            .is_some())
    }

    /// The caller's organization's overrides.
    pub async fn org_features(&self, access: &OrgAccess) -> Result<FeatureOverrides, Error> {
        self.features_of(access.org_id()).await
    }

    /// Any organization's overrides, for a system administrator.
    pub async fn org_features_admin(
        &self,
        _admin: &SystemAdmin,
        org_id: Uuid,
    ) -> Result<FeatureOverrides, Error> {
        self.features_of(org_id).await
    }

    async fn features_of(&self, org_id: Uuid) -> Result<FeatureOverrides, Error> {
        // A point lookup (before every message): on a shared pipelined
        // connection, not a pooled one.
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                "SELECT team_members, file_upload, chat_uploads, mcp_sessions, daily_chat_limit \
                 FROM organization_features WHERE organization_id = $1",
                &[&org_id],
            )
            .await?;
        Ok(row
            .map(|r| FeatureOverrides {
                team_members: r.get("team_members"),
                file_upload: r.get("file_upload"),
                chat_uploads: r.get("chat_uploads"),
                mcp_sessions: r.get("mcp_sessions"),
                daily_chat_limit: r.get("daily_chat_limit"),
            })
            .unwrap_or_default())
    }

    /// Replaces the organization's overrides.
    pub async fn org_features_set(
        &self,
        _admin: &SystemAdmin,
        org_id: Uuid,
        f: &FeatureOverrides,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO organization_features \
                 (organization_id, team_members, file_upload, chat_uploads, mcp_sessions, \
                  daily_chat_limit) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (organization_id) DO UPDATE SET \
                 team_members = EXCLUDED.team_members, file_upload = EXCLUDED.file_upload, \
                 chat_uploads = EXCLUDED.chat_uploads, mcp_sessions = EXCLUDED.mcp_sessions, \
                 daily_chat_limit = EXCLUDED.daily_chat_limit, updated_at = now()",
            &[
                &org_id,
                &f.team_members,
                &f.file_upload,
                &f.chat_uploads,
                &f.mcp_sessions,
                &f.daily_chat_limit,
            ],
        )
        .await?;
        Ok(())
    }

    /// `user_id`'s membership in `org_id`, in any status.
    pub async fn membership_get(
        &self,
        access: &OrgAccess,
        user_id: Uuid,
    ) -> Result<Option<MembershipState>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT m.status, r.id, r.name, r.hierarchy_level, r.is_system_role \
                 FROM memberships m \
                 JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
                 WHERE m.organization_id = $1 AND m.user_id = $2",
                &[&org_id, &user_id],
            )
            .await?;
        Ok(row.map(|r| MembershipState {
            status: r.get("status"),
            role_id: r.get("id"),
            role_name: r.get("name"),
            role_level: r.get("hierarchy_level"),
            role_is_system: r.get("is_system_role"),
        }))
    }

    /// Adds `user_id` to `org_id` as an active member with `role_id`, or
    /// activates an `invited` or `deleted` membership with it. An `active`
    /// or `suspended` membership is `409 already_member`.
    pub async fn membership_add(
        &self,
        access: &OrgAccess,
        user_id: Uuid,
        role_id: Uuid,
    ) -> Result<(), Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let changed = conn
            .execute(
                "INSERT INTO memberships (user_id, organization_id, role_id, status) \
                 VALUES ($1, $2, $3, $6) \
                 ON CONFLICT (user_id, organization_id) DO UPDATE \
                     SET status = $6, role_id = EXCLUDED.role_id, updated_at = now() \
                     WHERE memberships.status IN ($4, $5)",
                &[
                    &user_id,
                    &org_id,
                    &role_id,
                    &MembershipStatus::Deleted,
                    &MembershipStatus::Invited,
                    &MembershipStatus::Active,
                ],
            )
            .await?;
        if changed == 0 {
            return Err(Error::conflict(
                "already_member",
                "the user is already a member of this organization",
            ));
        }
        Ok(())
    }

    /// Changes the role of an active member, only if the membership is still
    /// active with the role `expected_role` (so concurrent changes cannot
    /// interleave). Returns whether it changed.
    pub async fn membership_set_role(
        &self,
        access: &OrgAccess,
        user_id: Uuid,
        expected_role: Uuid,
        role_id: Uuid,
    ) -> Result<bool, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE memberships SET role_id = $4, updated_at = now() \
                 WHERE organization_id = $1 AND user_id = $2 AND role_id = $3 AND status = $5",
                &[
                    &org_id,
                    &user_id,
                    &expected_role,
                    &role_id,
                    &MembershipStatus::Active,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// The caller's standing for one request, in one statement: whether
    /// the token's user still exists (and can log in), their active
    /// membership in the scope's organization, its role and the role's
    /// permission names. For an object scope the organization is the
    /// object's, looked up in the same statement.
    pub async fn access_lookup(&self, user_id: Uuid, scope: Scope) -> Result<AccessLookup, Error> {
        let (sql, id) = match scope {
            Scope::Org(id) => (ACCESS_BY_ORG, id),
            Scope::Invitation(id) => (ACCESS_BY_INVITATION, id),
            Scope::Kb(id) => (ACCESS_BY_KB, id),
            Scope::Agent(id) => (ACCESS_BY_AGENT, id),
            Scope::Deployment(id) => (ACCESS_BY_DEPLOYMENT, id),
            Scope::Chat(id) => (ACCESS_BY_CHAT, id),
            Scope::McpInstance(id) => (ACCESS_BY_MCP_INSTANCE, id),
            Scope::PersonalOrg => (ACCESS_BY_PERSONAL, Uuid::nil()),
        };
        let conn = self.quick().await?;
        let Some(row) = conn.query_opt(sql, &[&user_id, &id]).await? else {
            return Ok(AccessLookup::NoUser);
        };
        let Some(org_id) = row.get::<_, Option<Uuid>>("org_id") else {
            return Ok(AccessLookup::NotMember);
        };
        Ok(AccessLookup::Member(Membership {
            org_id,
            role_id: row.get("role_id"),
            role_name: row.get("role_name"),
            role_is_system: row.get("role_is_system"),
            level: row.get("level"),
            permissions: row.get("permissions"),
        }))
    }
}

/// Inserts an organization with a unique slug (derived from `slug_base`,
/// with a random suffix on collision), its four system roles with their
/// permissions, and `owner_id`'s active owner membership. Runs inside the
/// caller's transaction. Returns the organization id and the owner role id.
pub(crate) async fn insert_with_system_roles(
    tx: &super::Tx<'_>,
    name: &str,
    slug_base: &str,
    owner_id: Uuid,
    is_personal: bool,
) -> Result<(Uuid, Uuid), Error> {
    let org_id = Uuid::new_v4();
    let base = slugify(slug_base);
    let mut slug = base.clone();
    for attempt in 0.. {
        let inserted = tx
            .execute(
                "INSERT INTO organizations (id, name, slug, is_personal, created_by) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (slug) DO NOTHING",
                &[&org_id, &name, &slug, &is_personal, &owner_id],
            )
            .await?;
        if inserted == 1 {
            break;
        }
        if attempt >= 20 {
            return Err(Error::internal("could not find a free organization slug"));
        }
        let suffix = Uuid::new_v4().simple().to_string();
        slug = format!("{base}-{}", &suffix[..6]);
    }

    let mut owner_role = None;
    for role in SYSTEM_ROLES {
        let role_id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO roles (id, organization_id, name, description, hierarchy_level, is_system_role) \
             VALUES ($1, $2, $3, $4, $5, true)",
            &[&role_id, &org_id, &role.name, &role.description, &role.level],
        )
        .await?;
        let names: Vec<&str> = role.permissions.to_vec();
        tx.execute(
            "INSERT INTO role_permissions (role_id, permission_id) \
             SELECT $1, id FROM permissions WHERE name = ANY($2)",
            &[&role_id, &names],
        )
        .await?;
        if role.name == "owner" {
            owner_role = Some(role_id);
        }
    }
    let owner_role = owner_role.ok_or_else(|| Error::internal("no owner system role"))?;
    tx.execute(
        "INSERT INTO memberships (user_id, organization_id, role_id, status) \
         VALUES ($1, $2, $3, $4)",
        &[&owner_id, &org_id, &owner_role, &MembershipStatus::Active],
    )
    .await?;
    Ok((org_id, owner_role))
}

#[cfg(test)]
mod tests {
    use super::slugify;

    #[test]
    fn slugs() {
        assert_eq!(slugify("Ada Lovelace's Org"), "ada-lovelace-s-org");
        assert_eq!(slugify("  --Hello__World--  "), "hello-world");
        assert_eq!(slugify("日本"), "org");
        assert_eq!(slugify(""), "org");
        assert!(slugify(&"x".repeat(100)).len() <= 48);
    }
}
