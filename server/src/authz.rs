//! Permissions and their wildcard matching.
//!
//! Permission names are `resource:action`. A granted permission matches a
//! required one when each half is equal or the granted half is `*`: `*:*`
//! matches everything, `*:read` every read, `kb:*` every action on knowledge
//! bases. This is the only place that decides whether a permission grants
//! another.

/// Whether the granted permission `granted` covers `required`.
pub fn permission_matches(granted: &str, required: &str) -> bool {
    let (Some((g_res, g_act)), Some((r_res, r_act))) =
        (granted.split_once(':'), required.split_once(':'))
    else {
        return false;
    };
    (g_res == "*" || g_res == r_res) && (g_act == "*" || g_act == r_act)
}

/// Whether any of `granted` covers `required`.
pub fn permits<S: AsRef<str>>(granted: &[S], required: &str) -> bool {
    granted
        .iter()
        .any(|g| permission_matches(g.as_ref(), required))
}

/// A system role created in every organization.
pub struct SystemRole {
    pub name: &'static str,
    pub description: &'static str,
    pub level: i32,
    pub permissions: &'static [&'static str],
}

/// The four system roles and their permission sets.
///
/// - owner (100): everything.
/// - admin (80): everything but `*:admin` actions (which are kept for
///   owners, e.g. deleting the organization).
/// - member (20): uses the organization's AI features; reads users and roles.
/// - guest (10): read-only access to content.
pub const SYSTEM_ROLES: &[SystemRole] = &[
    SystemRole {
        name: "owner",
        description: "Full control of the organization",
        level: 100,
        permissions: &["*:*"],
    },
    SystemRole {
        name: "admin",
        description: "Manages members, roles and all content",
        level: 80,
        permissions: &["*:read", "*:write", "*:delete", "*:execute"],
    },
    SystemRole {
        name: "member",
        description: "Uses conversations, chats, knowledge bases, agents and tools",
        level: 20,
        permissions: &[
            "organization:read",
            "users:read",
            "roles:read",
            "conversation:*",
            "chats:*",
            "kb:read",
            "kb:write",
            "agent:read",
            "agent:execute",
            "tool:read",
            "tool:execute",
            "mcp:read",
            "mcp:write",
        ],
    },
    SystemRole {
        name: "guest",
        description: "Read-only access to the organization's content",
        level: 10,
        permissions: &[
            "organization:read",
            "conversation:read",
            "chats:read",
            "kb:read",
            "agent:read",
            "tool:read",
        ],
    },
];

/// Typed permission names. Handlers name the permission they require with
/// one of these constants, never with a string.
pub mod perm {
    /// A permission name, `resource:action`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Permission(&'static str);

    impl Permission {
        pub const fn name(self) -> &'static str {
            self.0
        }
    }

    impl std::fmt::Display for Permission {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    pub const ORGANIZATION_READ: Permission = Permission("organization:read");
    pub const ORGANIZATION_ADMIN: Permission = Permission("organization:admin");
    pub const USERS_READ: Permission = Permission("users:read");
    pub const USERS_WRITE: Permission = Permission("users:write");
    pub const ROLES_READ: Permission = Permission("roles:read");
    pub const ROLES_WRITE: Permission = Permission("roles:write");
    pub const ROLES_DELETE: Permission = Permission("roles:delete");
    pub const CONVERSATION_READ: Permission = Permission("conversation:read");
    pub const CONVERSATION_WRITE: Permission = Permission("conversation:write");
    pub const CHATS_READ: Permission = Permission("chats:read");
    pub const CHATS_WRITE: Permission = Permission("chats:write");
    pub const CHATS_DELETE: Permission = Permission("chats:delete");
    pub const KB_READ: Permission = Permission("kb:read");
    pub const KB_WRITE: Permission = Permission("kb:write");
    pub const KB_DELETE: Permission = Permission("kb:delete");
    pub const AGENT_READ: Permission = Permission("agent:read");
    pub const AGENT_WRITE: Permission = Permission("agent:write");
    pub const AGENT_DELETE: Permission = Permission("agent:delete");
    pub const AGENT_EXECUTE: Permission = Permission("agent:execute");
    pub const TOOL_READ: Permission = Permission("tool:read");
    pub const TOOL_WRITE: Permission = Permission("tool:write");
    pub const TOOL_DELETE: Permission = Permission("tool:delete");
    pub const TOOL_EXECUTE: Permission = Permission("tool:execute");
    pub const MCP_READ: Permission = Permission("mcp:read");
    pub const MCP_WRITE: Permission = Permission("mcp:write");
}

use perm::Permission;

/// The level of the admin system role: the lowest that manages invitations.
pub const ADMIN_LEVEL: i32 = 80;
/// The level of the owner system role.
pub const OWNER_LEVEL: i32 = 100;

/// What an operation requires of the caller in an organization, on top of
/// an active membership. Every org-scoped handler states it in its one call
/// to [`crate::context::ServerContext::authorize`].
#[derive(Clone, Copy, Debug)]
pub enum Require {
    /// An active membership only.
    Member,
    /// A role that grants the permission.
    Perm(Permission),
    /// A role that grants every one of the permissions.
    AllOf(&'static [Permission]),
    /// The permission, and the owner role (changing a member's role).
    OwnerWith(Permission),
    /// A role at or above the level (invitations: [`ADMIN_LEVEL`]).
    Level(i32),
}

/// Where the organization of a request comes from: its `org_id`, or the
/// organization of an object addressed by its own id. For an object the
/// organization is looked up in the same statement as the membership, and
/// a caller who is not a member there gets `404 not_found` (as for an
/// object that does not exist), so ids of other organizations reveal
/// nothing.
#[derive(Clone, Copy, Debug)]
pub enum Scope {
    Org(uuid::Uuid),
    Invitation(uuid::Uuid),
    /// A knowledge base, authorized through its organization.
    Kb(uuid::Uuid),
    Agent(uuid::Uuid),
    Deployment(uuid::Uuid),
    /// A chat session, authorized through its organization (the chat's
    /// owner is checked by every chat query).
    Chat(uuid::Uuid),
    /// An MCP instance, authorized through its organization; only its own
    /// user's (anybody else's is `404`).
    McpInstance(uuid::Uuid),
    /// The caller's personal organization (operations whose `org_id` is
    /// optional).
    PersonalOrg,
}

impl Scope {
    /// `org_id` when given, else the caller's personal organization.
    pub fn org_or_personal(org_id: Option<uuid::Uuid>) -> Scope {
        org_id.map_or(Scope::PersonalOrg, Scope::Org)
    }
}

impl Scope {
    /// The `404` of an object scope, `None` for an organization.
    pub fn not_found(self) -> Option<crate::error::Error> {
        match self {
            Scope::Org(_) | Scope::PersonalOrg => None,
            Scope::Invitation(_) => Some(crate::error::Error::NotFound { what: "invitation" }),
            Scope::Kb(_) => Some(crate::error::Error::NotFound {
                what: "knowledge base",
            }),
            Scope::Agent(_) => Some(crate::error::Error::NotFound { what: "agent" }),
            Scope::Deployment(_) => Some(crate::error::Error::NotFound { what: "deployment" }),
            Scope::Chat(_) => Some(crate::error::Error::NotFound { what: "chat" }),
            Scope::McpInstance(_) => Some(crate::error::Error::NotFound {
                what: "MCP instance",
            }),
        }
    }
}

/// Whether a role is the owner system role. The one definition of "owner".
pub fn is_owner_role(is_system_role: bool, name: &str) -> bool {
    is_system_role && name == "owner"
}

/// What the caller may do in one organization: their active membership,
/// role and the role's permission names, and the request's logger.
///
/// Only [`crate::context::ServerContext::authorize`] makes one (the fields
/// are private), after checking the operation's [`Require`]; tenant-scoped
/// datastore functions take it instead of a bare organization id, so a
/// query that is not scoped to an authorized organization does not compile.
#[derive(Clone, Debug)]
pub struct OrgAccess {
    org_id: uuid::Uuid,
    user_id: uuid::Uuid,
    role_id: uuid::Uuid,
    role_name: String,
    role_is_system: bool,
    level: i32,
    permissions: Vec<String>,
    log: slog::Logger,
}

/// Proof that the caller is a system administrator, made only by
/// [`crate::context::ServerContext::authorize_system_admin`]. System-level
/// datastore functions (the permission catalog, any organization's feature
/// gates) take it.
#[derive(Clone, Debug)]
pub struct SystemAdmin {
    user_id: uuid::Uuid,
    log: slog::Logger,
}

impl SystemAdmin {
    pub(crate) fn grant(user_id: uuid::Uuid, log: &slog::Logger) -> SystemAdmin {
        SystemAdmin {
            user_id,
            log: log.new(slog::o!("user_id" => user_id.to_string(), "system_admin" => true)),
        }
    }
    pub fn user_id(&self) -> uuid::Uuid {
        self.user_id
    }
    pub fn log(&self) -> &slog::Logger {
        &self.log
    }
}

/// The membership row read by the authorization statement.
pub struct Membership {
    pub org_id: uuid::Uuid,
    pub role_id: uuid::Uuid,
    pub role_name: String,
    pub role_is_system: bool,
    pub level: i32,
    pub permissions: Vec<String>,
}

/// What a deployment key grants: acting for its deployment's agent in its
/// organization (the OpenAI-compatible operations). Made only by
/// [`crate::context::ServerContext::authorize_deployment_key`].
#[derive(Clone, Debug)]
pub struct DeploymentAccess {
    org_id: uuid::Uuid,
    deployment_id: uuid::Uuid,
    agent_id: uuid::Uuid,
}

impl DeploymentAccess {
    pub(crate) fn grant(
        org_id: uuid::Uuid,
        deployment_id: uuid::Uuid,
        agent_id: uuid::Uuid,
    ) -> DeploymentAccess {
        DeploymentAccess {
            org_id,
            deployment_id,
            agent_id,
        }
    }

    pub fn org_id(&self) -> uuid::Uuid {
        self.org_id
    }

    pub fn deployment_id(&self) -> uuid::Uuid {
        self.deployment_id
    }

    pub fn agent_id(&self) -> uuid::Uuid {
        self.agent_id
    }
}

/// A redeemed WebSocket ticket: the member it was issued to, in the
/// organization it was issued for (the live channel's notices). Made only
/// by [`crate::context::ServerContext::authorize_ws_ticket`].
#[derive(Clone, Debug)]
pub struct LiveAccess {
    org_id: uuid::Uuid,
    user_id: uuid::Uuid,
}

impl LiveAccess {
    pub(crate) fn grant(org_id: uuid::Uuid, user_id: uuid::Uuid) -> LiveAccess {
        LiveAccess { org_id, user_id }
    }

    pub fn org_id(&self) -> uuid::Uuid {
        self.org_id
    }

    pub fn user_id(&self) -> uuid::Uuid {
        self.user_id
    }
}

/// A download link whose signature and expiry were checked: it grants
/// reading the one file it names. Made only by
/// [`crate::context::ServerContext::authorize_download`].
#[derive(Clone, Copy, Debug)]
pub struct DownloadGrant {
    file_id: uuid::Uuid,
}

impl DownloadGrant {
    pub(crate) fn grant(file_id: uuid::Uuid) -> DownloadGrant {
        DownloadGrant { file_id }
    }

    pub fn file_id(&self) -> uuid::Uuid {
        self.file_id
    }
}

/// An MCP gateway secret that matched an instance: it grants forwarding
/// requests to that instance's server with its owner's tokens. Made only
/// by [`crate::context::ServerContext::authorize_gateway_secret`].
#[derive(Clone, Copy, Debug)]
pub struct GatewayAccess {
    instance_id: uuid::Uuid,
}

impl GatewayAccess {
    pub(crate) fn grant(instance_id: uuid::Uuid) -> GatewayAccess {
        GatewayAccess { instance_id }
    }

    pub fn instance_id(&self) -> uuid::Uuid {
        self.instance_id
    }
}

/// An OAuth callback whose `state` matched a pending, unexpired MCP
/// session (the state is single-use: it was taken): it grants finishing
/// or failing that session. Made only by
/// [`crate::context::ServerContext::authorize_oauth_state`].
#[derive(Clone, Copy, Debug)]
pub struct OAuthCallbackGrant {
    session_id: uuid::Uuid,
}

impl OAuthCallbackGrant {
    pub(crate) fn grant(session_id: uuid::Uuid) -> OAuthCallbackGrant {
        OAuthCallbackGrant { session_id }
    }

    pub fn session_id(&self) -> uuid::Uuid {
        self.session_id
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::OrgAccess {}
    impl Sealed for super::DeploymentAccess {}
}

/// An organization the caller was authorized in, by a member's token
/// ([`OrgAccess`]) or a deployment key ([`DeploymentAccess`]): what the
/// datastore's reads shared by both take instead of a bare organization id.
/// Sealed: nothing else is a scope.
pub trait OrgScope: sealed::Sealed + Sync {
    /// The authorized organization.
    fn scope_org_id(&self) -> uuid::Uuid;
}

impl OrgScope for OrgAccess {
    fn scope_org_id(&self) -> uuid::Uuid {
        self.org_id
    }
}

impl OrgScope for DeploymentAccess {
    fn scope_org_id(&self) -> uuid::Uuid {
        self.org_id
    }
}

impl OrgAccess {
    /// Checks `require` against a membership and grants access.
    pub(crate) fn grant(
        user_id: uuid::Uuid,
        membership: Membership,
        require: Require,
        log: &slog::Logger,
    ) -> Result<OrgAccess, crate::error::Error> {
        let access = OrgAccess {
            org_id: membership.org_id,
            user_id,
            role_id: membership.role_id,
            role_name: membership.role_name,
            role_is_system: membership.role_is_system,
            level: membership.level,
            permissions: membership.permissions,
            // Formatted only if a line is logged.
            log: {
                let org_id = membership.org_id;
                log.new(slog::o!(
                    "org_id" => slog::FnValue(move |_: &slog::Record<'_>| org_id.to_string()),
                    "user_id" => slog::FnValue(move |_: &slog::Record<'_>| user_id.to_string())
                ))
            },
        };
        access.check(require)?;
        Ok(access)
    }

    fn check(&self, require: Require) -> Result<(), crate::error::Error> {
        use crate::error::Error;
        let lacks = |p: Permission| {
            Error::forbidden(format!("your role does not grant the {p} permission"))
        };
        match require {
            Require::Member => Ok(()),
            Require::Perm(p) => self.has(p).then_some(()).ok_or_else(|| lacks(p)),
            Require::AllOf(ps) => match ps.iter().find(|p| !self.has(**p)) {
                Some(p) => Err(lacks(*p)),
                None => Ok(()),
            },
            Require::OwnerWith(p) => {
                if !self.has(p) {
                    Err(lacks(p))
                } else if !self.is_owner() {
                    Err(Error::forbidden(
                        "only the organization's owners can do this",
                    ))
                } else {
                    Ok(())
                }
            }
            Require::Level(level) => {
                if self.level >= level {
                    Ok(())
                } else {
                    Err(Error::forbidden(format!(
                        "this needs a role of level {level} or more (admin or owner)"
                    )))
                }
            }
        }
    }

    pub fn org_id(&self) -> uuid::Uuid {
        self.org_id
    }
    pub fn user_id(&self) -> uuid::Uuid {
        self.user_id
    }
    pub fn role_id(&self) -> uuid::Uuid {
        self.role_id
    }
    pub fn role_name(&self) -> &str {
        &self.role_name
    }
    /// The hierarchy level of the caller's role.
    pub fn level(&self) -> i32 {
        self.level
    }
    /// The request's logger, with its request id, organization and user.
    pub fn log(&self) -> &slog::Logger {
        &self.log
    }

    /// Whether the caller's role grants `permission`. For rules about
    /// *what* is granted (a role may only grant what its creator holds),
    /// not for deciding whether an operation may run: that is [`Require`].
    pub fn has(&self, permission: Permission) -> bool {
        permits(&self.permissions, permission.name())
    }

    /// Whether the caller's role grants the permission named `name`.
    pub fn grants(&self, name: &str) -> bool {
        permits(&self.permissions, name)
    }

    pub fn is_owner(&self) -> bool {
        is_owner_role(self.role_is_system, &self.role_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_wildcard_matching() {
        assert!(permission_matches("kb:read", "kb:read"));
        assert!(!permission_matches("kb:read", "kb:write"));
        assert!(!permission_matches("kb:read", "conversation:read"));
        assert!(permission_matches("*:read", "kb:read"));
        assert!(permission_matches("*:read", "users:read"));
        assert!(!permission_matches("*:read", "kb:write"));
        assert!(permission_matches("kb:*", "kb:delete"));
        assert!(!permission_matches("kb:*", "agent:delete"));
        assert!(permission_matches("*:*", "roles:delete"));
        assert!(permission_matches("*:admin", "organization:admin"));
        assert!(!permission_matches("*:admin", "organization:read"));
    }

    #[test]
    fn malformed_names_never_match() {
        assert!(!permission_matches("kb", "kb:read"));
        assert!(!permission_matches("kb:read", "kb"));
        assert!(!permission_matches("*", "kb:read"));
        assert!(!permission_matches("", ""));
        // A wildcard in the required permission is not a grant.
        assert!(!permission_matches("kb:read", "kb:*"));
    }

    #[test]
    fn permits_any_of_the_granted() {
        assert!(permits(&["kb:read", "chats:*"], "chats:delete"));
        assert!(!permits(&["kb:read", "chats:read"], "chats:delete"));
        assert!(!permits::<&str>(&[], "kb:read"));
    }

    #[test]
    fn system_role_sets() {
        let role = |name: &str| SYSTEM_ROLES.iter().find(|r| r.name == name).unwrap();
        assert!(permits(role("owner").permissions, "organization:admin"));
        assert!(!permits(role("admin").permissions, "organization:admin"));
        assert!(permits(role("admin").permissions, "roles:delete"));
        assert!(permits(role("member").permissions, "conversation:write"));
        assert!(!permits(role("member").permissions, "users:write"));
        assert!(permits(role("guest").permissions, "kb:read"));
        assert!(!permits(role("guest").permissions, "kb:write"));
        let levels: Vec<i32> = SYSTEM_ROLES.iter().map(|r| r.level).collect();
        assert_eq!(levels, [100, 80, 20, 10]);
    }
}
