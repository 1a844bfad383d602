//! Organizations.

use super::Datastore;
use super::audit;
use crate::audit::Event;
use crate::authz::{
    ChangesMembership, Grant, Membership, OrgAccess, Owner, SYSTEM_ROLES, Scope, SystemAdmin, on,
    perm,
};
use crate::db::enums::MembershipStatus;
use crate::db::row::db_row;
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

/// Who a request's bearer credential names: a user (their access token,
/// verified) or a personal access token (the SHA-256 of its secret, looked
/// up in the authorization's own statement).
pub enum Caller {
    User(crate::authn::Actor),
    Token(Vec<u8>),
}

/// A personal access token found by the authorization statement: its id
/// and scopes.
pub type TokenFound = Option<(Uuid, Vec<String>)>;

/// What [`Datastore::access_lookup`] found.
pub enum AccessLookup {
    /// The token's user does not exist (or has no password yet), or the
    /// personal access token is unknown, revoked or expired.
    NoUser,
    /// The token's session was revoked or has ended.
    SessionEnded,
    /// The user is not an active member of the organization (or the
    /// organization or the addressed object does not exist).
    NotMember { user_id: Uuid, token: TokenFound },
    /// A member, but the credential may not act in the organization: it
    /// came from another organization's single sign-on, or the
    /// organization requires single sign-on and it did not come from
    /// its own.
    SsoRequired { user_id: Uuid, token: TokenFound },
    Member {
        user_id: Uuid,
        token: TokenFound,
        membership: Membership,
    },
}

/// The authorization statement; `$org` is the expression that yields the
/// organization id from `$2` (the caller is `u`), `$caller` where the
/// caller comes from and which of them counts. Made for a user's access
/// token (`$1` is the user's id; `$3` and `$4` are the token's `sid` and
/// `iat` claims: whether its session is live is read in the same
/// statement; no token columns) and for a personal access token (`$1` is
/// the SHA-256 of its secret: the token's id and scopes come with the
/// membership, in the same statement; it has no session).
macro_rules! access_sql {
    (user, $org:literal) => {
        access_sql!(
            "NULL::uuid AS token_id, NULL::text[] AS token_scopes, \
             (SELECT s.sso_organization_id FROM sessions s WHERE s.id = $3) AS sso_org \
             FROM users u",
            $org,
            "WHERE u.id = $1 AND u.password_hash IS NOT NULL",
            session("$3", "$4")
        )
    };
    (token, $org:literal) => {
        access_sql!(
            "t.id AS token_id, t.scopes AS token_scopes, true AS session_live, \
             t.sso_organization_id AS sso_org \
             FROM personal_access_tokens t JOIN users u ON u.id = t.user_id",
            $org,
            "WHERE t.secret_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now() \
             AND (u.password_hash IS NOT NULL OR u.service_account_of IS NOT NULL)"
        )
    };
    ($caller:literal, $org:literal, $which:literal $(, session($sid:literal, $iat:literal))?) => {
        concat!(
            "SELECT u.id AS user_id, m.organization_id AS org_id, r.id AS role_id, \
                    r.name AS role_name, \
                    r.is_system_role AS role_is_system, r.hierarchy_level AS level, \
                    ARRAY(SELECT p.name FROM role_permissions rp \
                          JOIN permissions p ON p.id = rp.permission_id \
                          WHERE rp.role_id = r.id) AS permissions, \
                    (u.service_account_of IS NULL \
                     AND NOT coalesce(r.is_system_role AND r.name = 'owner', false) \
                     AND EXISTS (SELECT 1 FROM sso_providers sp \
                     WHERE sp.organization_id = m.organization_id AND sp.enforced)) \
                     AS sso_enforced, ",
            $(super::sessions::session_live!($sid, $iat), " AS session_live, ",)?
            $caller,
            " LEFT JOIN memberships m ON m.user_id = u.id AND m.status = 'active' \
                  AND NOT EXISTS (SELECT 1 FROM organizations d WHERE d.id = m.organization_id \
                                  AND d.deletion_requested_at IS NOT NULL) \
                  AND m.organization_id = ",
            $org,
            " LEFT JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id ",
            $which
        )
    };
}

/// The organization expressions of the scopes.
macro_rules! access_statements {
    ($kind:ident) => {
        [
            access_sql!($kind, "$2"),
            access_sql!(
                $kind,
                "(SELECT organization_id FROM invitations WHERE id = $2)"
            ),
            access_sql!(
                $kind,
                "(SELECT organization_id FROM knowledge_bases WHERE id = $2)"
            ),
            access_sql!($kind, "(SELECT organization_id FROM agents WHERE id = $2)"),
            access_sql!($kind, "(SELECT organization_id FROM chats WHERE id = $2)"),
            access_sql!(
                $kind,
                "(SELECT organization_id FROM mcp_instances WHERE id = $2 AND user_id = u.id)"
            ),
            // The caller's personal organization (`$2` is unused: a nil id).
            access_sql!(
                $kind,
                "(SELECT o.id FROM organizations o WHERE o.is_personal AND o.created_by = u.id \
                  AND o.id <> $2 ORDER BY o.created_at, o.id LIMIT 1)"
            ),
            access_sql!(
                $kind,
                "(SELECT organization_id FROM agent_deployments WHERE id = $2)"
            ),
        ]
    };
}

/// The authorization statements of a user's access token, by scope (see
/// [`scope_index`]).
const ACCESS_BY_USER: [&str; 8] = access_statements!(user);
/// The same for a personal access token.
const ACCESS_BY_TOKEN: [&str; 8] = access_statements!(token);
/// Public for the API benchmark (pgbench runs the same SQL).
pub const ACCESS_BY_ORG: &str = ACCESS_BY_USER[0];

/// The index of a scope's statement in [`ACCESS_BY_USER`] and
/// [`ACCESS_BY_TOKEN`], and its `$2`.
fn scope_index(scope: Scope) -> (usize, Uuid) {
    match scope {
        Scope::Org(id) => (0, id),
        Scope::Invitation(id) => (1, id),
        Scope::Kb(id) => (2, id),
        Scope::Agent(id) => (3, id),
        Scope::Chat(id) => (4, id),
        Scope::McpInstance(id) => (5, id),
        Scope::PersonalOrg => (6, Uuid::nil()),
        Scope::Deployment(id) => (7, id),
    }
}

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

/// The channel of membership notices, payload `<org_id>:<user_id>`: sent
/// by a trigger on `memberships` (migration V30) at the commit of any
/// change to an active membership (its status or role, or its deletion).
pub const MEMBERSHIP_CHANNEL: &str = "membership_changed";

db_row! {
    /// A membership read under the organization's lifecycle lock.
    #[derive(Clone)]
    pub struct LockedMember {
        pub user_id: Uuid = "m.user_id",
        pub status: MembershipStatus = "m.status",
        pub role_id: Uuid = "r.id",
        pub role_name: String = "r.name",
        pub role_level: i32 = "r.hierarchy_level",
        pub role_is_system: bool = "r.is_system_role",
    }
}

impl LockedMember {
    pub fn is_owner(&self) -> bool {
        crate::authz::is_owner_role(self.role_is_system, &self.role_name)
    }
}

/// What a membership lifecycle change sees, read under the organization's
/// lifecycle lock (so no other lifecycle change of the organization runs
/// between this reading and the change).
pub struct Lifecycle {
    /// The caller's membership now (their role may have changed since the
    /// request was authorized).
    pub actor: Option<LockedMember>,
    /// The membership being changed.
    pub target: Option<LockedMember>,
    /// The organization's active owners, the target included if they are
    /// one.
    pub active_owners: i64,
    pub is_personal: bool,
    /// Who created the organization (a personal organization's account).
    pub created_by: Option<Uuid>,
}

/// What a lifecycle change does to the target's membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifecycleChange {
    /// Sets the status (the role is kept).
    Status(MembershipStatus),
    /// The target becomes the owner and the caller takes the admin system
    /// role.
    TransferOwnership,
}

/// Locks the organization's row for a lifecycle change (`FOR NO KEY
/// UPDATE`: lifecycle changes of one organization wait for each other,
/// while inserts that merely reference the organization do not).
const LIFECYCLE_LOCK: &str = "SELECT is_personal, created_by FROM organizations WHERE id = $1 \
     FOR NO KEY UPDATE";

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
        origin: &crate::audit::Origin,
    ) -> Result<OrgRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let owner = tx
            .query_one(
                "SELECT service_account_of FROM users WHERE id = $1 FOR UPDATE",
                &[&owner_id],
            )
            .await?;
        if owner.get::<_, Option<Uuid>>("service_account_of").is_some() {
            return Err(Error::Forbidden {
                code: "service_account_not_allowed",
                message: "a service account belongs to its one organization and cannot create \
                          others"
                    .to_string(),
            });
        }
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
        audit::record(
            &tx,
            origin,
            &Event::org(org_id, "org.create")
                .target("organization", org_id)
                .details(serde_json::json!({"name": name})),
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
        admin: &SystemAdmin,
        org_id: Uuid,
        f: &FeatureOverrides,
    ) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
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
        let event = Event::org(org_id, "org.features_update").details(serde_json::json!({
            "team_members": f.team_members, "file_upload": f.file_upload,
            "chat_uploads": f.chat_uploads, "mcp_sessions": f.mcp_sessions,
            "daily_chat_limit": f.daily_chat_limit,
        }));
        audit::record(&tx, admin.origin(), &event).await?;
        tx.commit().await?;
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
        grant: &Grant<on::Org, perm::UsersWrite>,
        user_id: Uuid,
        role_id: Uuid,
    ) -> Result<(), Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let changed = tx
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
        let event = Event::org(org_id, "member.add")
            .target("user", user_id)
            .details(serde_json::json!({ "role_id": role_id }));
        audit::record(&tx, grant.origin(), &event).await?;
        let payload = serde_json::json!({
            "user_id": user_id,
            "role_id": role_id,
            "via": "added",
            "by_user_id": grant.user_id(),
        });
        super::webhook_outbox::enqueue(&tx, org_id, "member.joined", &payload, None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Changes the role of an active member, only if the membership is still
    /// active with the role `expected_role` (so concurrent changes cannot
    /// interleave). Returns whether it changed.
    pub async fn membership_set_role(
        &self,
        grant: &Grant<on::Org, Owner<perm::UsersWrite>>,
        user_id: Uuid,
        expected_role: Uuid,
        role_id: Uuid,
    ) -> Result<bool, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
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
        if n == 1 {
            let event = Event::org(org_id, "member.role_change")
                .target("user", user_id)
                .details(serde_json::json!({ "from_role_id": expected_role, "role_id": role_id }));
            audit::record(&tx, grant.origin(), &event).await?;
            tx.commit().await?;
        }
        Ok(n == 1)
    }

    /// Whether the caller's membership in the organization of `access` is
    /// still `active` (re-read by their streams at a membership notice; a
    /// user who no longer exists has none).
    pub async fn membership_is_active(&self, access: &OrgAccess) -> Result<bool, Error> {
        let conn = self.quick().await?;
        Ok(conn
            .query_opt(
                "SELECT 1 FROM memberships WHERE organization_id = $1 AND user_id = $2 \
                   AND status = $3",
                &[
                    &access.org_id(),
                    &access.user_id(),
                    &MembershipStatus::Active,
                ],
            )
            .await?
            .is_some())
    }

    /// Changes `user_id`'s membership in the organization of `access` (see
    /// [`LifecycleChange`]) in one transaction, under the organization's
    /// lifecycle lock: reads the caller's and the target's memberships and
    /// the count of active owners, lets `check` (the app layer's rules)
    /// refuse, then writes. Returns what `check` saw. Statements from the
    /// lock on run after it is taken, each with a fresh snapshot, so the
    /// rules see every change committed before. The notice to the
    /// member's streams is sent by the trigger on `memberships` at commit.
    pub async fn membership_lifecycle(
        &self,
        grant: &impl ChangesMembership,
        user_id: Uuid,
        change: LifecycleChange,
        check: impl FnOnce(&Lifecycle) -> Result<(), Error>,
    ) -> Result<Lifecycle, Error> {
        let access = grant.access();
        let org_id = access.org_id();
        let pair = [access.user_id(), user_id];
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let members_sql = format!(
            "SELECT {} FROM memberships m \
             JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
             WHERE m.organization_id = $1 AND m.user_id = ANY($2)",
            LockedMember::COLUMNS
        );
        let [org, members, owners] = tx
            .pipeline([
                (LIFECYCLE_LOCK, &[&org_id]),
                (&members_sql, &[&org_id, &pair.as_slice()]),
                (
                    "SELECT count(*) AS n FROM memberships m \
                     JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
                     WHERE m.organization_id = $1 AND m.status = $2 \
                       AND r.is_system_role AND r.name = 'owner'",
                    &[&org_id, &MembershipStatus::Active],
                ),
            ])
            .await?;
        let org = org.first().ok_or(Error::NotFound {
            what: "organization",
        })?;
        let members: Vec<LockedMember> = members.iter().map(LockedMember::from_row).collect();
        let find = |id: Uuid| members.iter().find(|m| m.user_id == id).cloned();
        let (actor, target) = (find(access.user_id()), find(user_id));
        let seen = Lifecycle {
            actor,
            target,
            active_owners: owners.first().map_or(0, |r| r.get("n")),
            is_personal: org.get("is_personal"),
            created_by: org.get("created_by"),
        };
        check(&seen)?;
        match change {
            LifecycleChange::Status(status) => {
                tx.execute(
                    "UPDATE memberships SET status = $3, updated_at = now() \
                     WHERE organization_id = $1 AND user_id = $2",
                    &[&org_id, &user_id, &status],
                )
                .await?;
                // The webhook events of a membership that ends or pauses
                // (a reactivation has none).
                let event_type = match status {
                    MembershipStatus::Suspended => Some("member.suspended"),
                    MembershipStatus::Deleted => Some("member.removed"),
                    _ => None,
                };
                if let (Some(event_type), Some(target)) = (event_type, &seen.target)
                    && target.status != status
                {
                    let event = serde_json::json!({
                        "user_id": user_id,
                        "role_id": target.role_id,
                        "role_name": target.role_name,
                        "by_user_id": access.user_id(),
                        "left": access.user_id() == user_id,
                    });
                    super::webhook_outbox::enqueue(&tx, org_id, event_type, &event, None).await?;
                }
            }
            LifecycleChange::TransferOwnership => {
                // Both roles in one statement: the target's becomes the
                // owner system role, the caller's the admin system role.
                tx.execute(
                    "UPDATE memberships m SET role_id = r.id, updated_at = now() \
                     FROM roles r \
                     WHERE m.organization_id = $1 AND r.organization_id = $1 \
                       AND r.is_system_role \
                       AND ((m.user_id = $2 AND r.name = 'owner') \
                         OR (m.user_id = $3 AND r.name = 'admin'))",
                    &[&org_id, &user_id, &access.user_id()],
                )
                .await?;
            }
        }
        audit::record(
            &tx,
            access.origin(),
            &Event::org(
                org_id,
                lifecycle_action(&change, access.user_id() == user_id),
            )
            .target("user", user_id),
        )
        .await?;
        tx.commit().await?;
        Ok(seen)
    }

    /// Renames the organization of `access`, refusing a name equal
    /// (case-insensitively) to another organization the caller belongs to
    /// (`409 org_name_taken`, the rule of [`Self::org_create`]; the
    /// caller's user row is locked for the check, as there). The slug is
    /// kept. Returns the organization with the caller's role.
    pub async fn org_rename(
        &self,
        grant: &Grant<on::Org, perm::OrganizationWrite>,
        name: &str,
    ) -> Result<OrgRow, Error> {
        let org_id = grant.id();
        let user_id = grant.user_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.query_one("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", &[&user_id])
            .await?;
        let taken = tx
            .query_opt(
                "SELECT 1 FROM memberships m JOIN organizations o ON o.id = m.organization_id \
                 WHERE m.user_id = $1 AND m.status IN ($4, $5, $6) \
                   AND o.id <> $3 AND lower(o.name) = lower($2)",
                &[
                    &user_id,
                    &name,
                    &org_id,
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
        tx.execute(
            "UPDATE organizations SET name = $2, updated_at = now() WHERE id = $1",
            &[&org_id, &name],
        )
        .await?;
        let row = tx
            .query_one(
                &format!("{ORG_WITH_ROLE} WHERE m.user_id = $1 AND m.organization_id = $2"),
                &[&user_id, &org_id],
            )
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(org_id, "org.update")
                .target("organization", org_id)
                .details(serde_json::json!({"name": name})),
        )
        .await?;
        tx.commit().await?;
        Ok(OrgRow::from_row(&row))
    }

    /// The organization of `access` with the caller's (current) role.
    pub async fn org_get(&self, access: &OrgAccess) -> Result<OrgRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!("{ORG_WITH_ROLE} WHERE m.user_id = $1 AND m.organization_id = $2"),
                &[&access.user_id(), &access.org_id()],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "organization",
            })?;
        Ok(OrgRow::from_row(&row))
    }

    /// A user's standing in an organization without a credential to check
    /// (an open WebSocket's periodic re-check, authorized by its ticket):
    /// [`Datastore::access_lookup`] for an access token without a session
    /// issued at the end of time (so never older than a password change).
    pub async fn access_lookup_member(
        &self,
        user_id: Uuid,
        scope: Scope,
    ) -> Result<AccessLookup, Error> {
        let actor = crate::authn::Actor {
            user_id,
            session_id: None,
            // 9999-12-31T23:59:59Z.
            issued_at: 253_402_300_799,
            token_id: None,
            scopes: None,
        };
        // The membership alone: which credential the user holds is the
        // caller's to check (it was, when the socket opened).
        self.access_lookup_as(&Caller::User(actor), scope, false)
            .await
    }

    /// The caller's standing for one request, in one statement: whether
    /// the token's user still exists (and can log in) and the token's
    /// session is live, their active
    /// membership in the scope's organization, its role and the role's
    /// permission names. For an object scope the organization is the
    /// object's, looked up in the same statement.
    pub async fn access_lookup(
        &self,
        caller: &Caller,
        scope: Scope,
    ) -> Result<AccessLookup, Error> {
        self.access_lookup_as(caller, scope, true).await
    }

    /// [`Self::access_lookup`]; with `check_sso` false, a member is a
    /// member whatever single sign-on says of the credential.
    async fn access_lookup_as(
        &self,
        caller: &Caller,
        scope: Scope,
        check_sso: bool,
    ) -> Result<AccessLookup, Error> {
        let conn = self.quick().await?;
        access_lookup_on(&conn, caller, scope, check_sso).await
    }

    /// [`Self::access_lookup`] of `org_id` with `read` sent in the same
    /// round trip, on the same shared connection (issue #37's hot path:
    /// one round trip instead of two). `read` reads through a
    /// [`Pending`]; its answer is the caller's to drop unless the access
    /// found grants the request (see
    /// [`crate::context::ServerContext::authorize_with`], the only
    /// caller).
    ///
    /// A read whose statement is ready when it is first polled (prepared
    /// on this connection: every use after the first) joins the
    /// authorization statement: both go out as one batch with one `Sync`,
    /// so PostgreSQL runs them in one implicit transaction and answers
    /// them in one flush, as `pgbench`'s pipeline does. A read that is not
    /// ready by then (its statement not yet prepared, or a deep page on a
    /// pooled connection) runs on its own, concurrently.
    pub async fn access_lookup_with<V>(
        &self,
        caller: &Caller,
        org_id: Uuid,
        read: impl AsyncFnOnce(&Pending<'_>) -> Result<V, Error>,
    ) -> Result<(AccessLookup, Result<V, Error>), Error> {
        let quick = self.quick().await?;
        let scope = Scope::Org(org_id);
        let (sql, ids) = access_statement(caller, scope);
        let statement = quick.prepare(sql).await?;
        let pending = Pending {
            org_id,
            quick: &quick,
            joined: std::sync::Mutex::new(Joined::Open),
        };
        let mut read = std::pin::pin!(read(&pending));
        // The read's first poll: it joins now or runs on its own.
        let early = futures::poll!(read.as_mut());
        let joined = std::mem::replace(&mut *pending.lock(), Joined::Closed);
        let access = async {
            let mut batch = tokio_postgres::Batch::new();
            ids.push_to(&mut batch, &statement)?;
            // The batch's span (while tracing is on), ended with it: one
            // database operation, of one statement or two.
            let (read_rows, _span) = match joined {
                Joined::Read(read, rows, read_sql) => {
                    batch.append(read);
                    (Some(rows), crate::telemetry::batch(&[sql, read_sql]))
                }
                Joined::Open | Joined::Closed => (None, crate::telemetry::statement(sql)),
            };
            match quick.query_batch(batch).await {
                Ok(mut sets) => {
                    if let (Some(rows), Some(read)) = (read_rows, sets.get_mut(1)) {
                        let _ = rows.send(Ok(std::mem::take(read)));
                    }
                    let row = sets.first().and_then(|rows| rows.first());
                    Ok(access_found(row, true))
                }
                Err(failed) => {
                    let error = Error::from(failed.error);
                    match failed.done.first() {
                        // The read failed, not the authorization statement.
                        Some(access) => {
                            if let Some(rows) = read_rows {
                                let _ = rows.send(Err(error));
                            }
                            Ok(access_found(access.first(), true))
                        }
                        // The read did not run: the same error for it (a
                        // 503 either way, logged, never shown).
                        None => {
                            if let Some(rows) = read_rows {
                                let _ = rows.send(Err(Error::internal(
                                    "not run: the authorization statement failed",
                                )));
                            }
                            Err(error)
                        }
                    }
                }
            }
        };
        let (access, read) = match early {
            std::task::Poll::Ready(read) => (access.await, read),
            std::task::Poll::Pending => futures::join!(access, read),
        };
        match access {
            Ok(access) => Ok((access, read)),
            Err(e) => Err(match read {
                // The connection failed under both (the database shut
                // down) while a read that did not join (its statement
                // being prepared, on the same connection, ahead of the
                // authorization statement) waited: PostgreSQL's error went
                // to the read, the authorization statement saw only the
                // connection close. A 503 either way, with the cause
                // logged, never shown.
                Err(cause @ Error::Unavailable { .. })
                    if matches!(e, Error::Unavailable { .. }) =>
                {
                    cause
                }
                _ => e,
            }),
        }
    }
}

/// A read sent together with the authorization statement
/// ([`Datastore::access_lookup_with`]): the organization the caller asks
/// to read, not yet granted, and the shared connection the authorization
/// statement goes out on. Only `access_lookup_with` makes one, and the
/// read's answer reaches a handler only with the grant
/// ([`crate::context::ServerContext::authorize_with`]): refused, it is
/// dropped unseen. So a data function that takes a `Pending` instead of a
/// grant must only read (nothing it does may outlive a refusal), must be
/// filtered by [`Pending::org_id`] like every tenant-scoped statement, and
/// must be short enough for a shared connection
/// ([`crate::db::pipeline`]).
pub struct Pending<'a> {
    org_id: Uuid,
    quick: &'a super::Quick,
    joined: std::sync::Mutex<Joined>,
}

/// Whether a read joins the authorization statement's batch.
enum Joined {
    /// The authorization statement has not gone out: a read may join it.
    Open,
    /// A read joined: its statement, where its rows go, and its SQL.
    Read(
        tokio_postgres::Batch,
        tokio::sync::oneshot::Sender<Result<Vec<tokio_postgres::Row>, Error>>,
        &'static str,
    ),
    /// The authorization statement went out: a read runs on its own.
    Closed,
}

impl Pending<'_> {
    /// The organization asked for.
    pub fn org_id(&self) -> Uuid {
        self.org_id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Joined> {
        self.joined.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `sql` (a short read) on the authorization statement's shared
    /// connection: in its batch when the authorization statement has not
    /// gone out yet, on its own after it.
    pub(crate) async fn query(
        &self,
        sql: &'static str,
        params: super::Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let statement = self.quick.prepare(sql).await?;
        let joined = {
            let mut joined = self.lock();
            if matches!(*joined, Joined::Open) {
                let mut batch = tokio_postgres::Batch::new();
                batch.push(
                    &statement,
                    params
                        .iter()
                        .map(|p| *p as &dyn tokio_postgres::types::ToSql),
                )?;
                let (rows, answer) = tokio::sync::oneshot::channel();
                *joined = Joined::Read(batch, rows, sql);
                Some(answer)
            } else {
                None
            }
        };
        match joined {
            // In the batch's span.
            Some(answer) => answer.await.unwrap_or_else(|_| {
                Err(Error::internal(
                    "the authorization statement ended without answering the read",
                ))
            }),
            None => Ok(self.quick.query(sql, params).await?),
        }
    }
}

/// The authorization statement of `scope` for `caller`, and its
/// parameters.
fn access_statement(caller: &Caller, scope: Scope) -> (&'static str, AccessParams<'_>) {
    let (index, id) = scope_index(scope);
    match caller {
        Caller::User(actor) => (ACCESS_BY_USER[index], AccessParams::User(actor, id)),
        Caller::Token(hash) => (ACCESS_BY_TOKEN[index], AccessParams::Token(hash, id)),
    }
}

/// The parameters of an authorization statement.
enum AccessParams<'a> {
    User(&'a crate::authn::Actor, Uuid),
    Token(&'a Vec<u8>, Uuid),
}

impl AccessParams<'_> {
    fn push_to(
        &self,
        batch: &mut tokio_postgres::Batch,
        statement: &tokio_postgres::Statement,
    ) -> Result<(), tokio_postgres::Error> {
        match self {
            AccessParams::User(actor, id) => batch.push(
                statement,
                [
                    &actor.user_id as &(dyn tokio_postgres::types::ToSql + Sync),
                    id,
                    &actor.session_id,
                    &actor.issued_at,
                ]
                .iter()
                .map(|p| *p as &dyn tokio_postgres::types::ToSql),
            ),
            AccessParams::Token(hash, id) => batch.push(
                statement,
                [hash as &(dyn tokio_postgres::types::ToSql + Sync), id]
                    .iter()
                    .map(|p| *p as &dyn tokio_postgres::types::ToSql),
            ),
        }
    }
}

/// The authorization statement on `conn` (see
/// [`Datastore::access_lookup`]).
async fn access_lookup_on(
    conn: &super::Quick,
    caller: &Caller,
    scope: Scope,
    check_sso: bool,
) -> Result<AccessLookup, Error> {
    let (index, id) = scope_index(scope);
    let row = match caller {
        Caller::User(actor) => {
            conn.query_opt(
                ACCESS_BY_USER[index],
                &[&actor.user_id, &id, &actor.session_id, &actor.issued_at],
            )
            .await?
        }
        Caller::Token(hash) => conn.query_opt(ACCESS_BY_TOKEN[index], &[hash, &id]).await?,
    };
    Ok(access_found(row.as_ref(), check_sso))
}

/// What the authorization statement's row (`None`: no row) says.
fn access_found(row: Option<&tokio_postgres::Row>, check_sso: bool) -> AccessLookup {
    let Some(row) = row else {
        return AccessLookup::NoUser;
    };
    if !row.get::<_, bool>("session_live") {
        return AccessLookup::SessionEnded;
    }
    let user_id: Uuid = row.get("user_id");
    let token = row
        .get::<_, Option<Uuid>>("token_id")
        .map(|id| (id, row.get::<_, Vec<String>>("token_scopes")));
    let Some(org_id) = row.get::<_, Option<Uuid>>("org_id") else {
        return AccessLookup::NotMember { user_id, token };
    };
    let sso_org: Option<Uuid> = row.get("sso_org");
    let enforced: bool = row.get("sso_enforced");
    if check_sso && (sso_org.is_some_and(|o| o != org_id) || (enforced && sso_org != Some(org_id)))
    {
        return AccessLookup::SsoRequired { user_id, token };
    }
    AccessLookup::Member {
        user_id,
        token,
        membership: Membership {
            org_id,
            role_id: row.get("role_id"),
            role_name: row.get("role_name"),
            role_is_system: row.get("role_is_system"),
            level: row.get("level"),
            permissions: row.get("permissions"),
        },
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

/// The audit action of a membership change.
fn lifecycle_action(change: &LifecycleChange, own: bool) -> &'static str {
    match change {
        LifecycleChange::TransferOwnership => "org.transfer_ownership",
        LifecycleChange::Status(MembershipStatus::Suspended) => "member.suspend",
        LifecycleChange::Status(MembershipStatus::Active) => "member.reactivate",
        LifecycleChange::Status(MembershipStatus::Deleted) if own => "member.leave",
        LifecycleChange::Status(MembershipStatus::Deleted) => "member.remove",
        LifecycleChange::Status(_) => "member.status_change",
    }
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
