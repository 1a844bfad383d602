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

/// What the caller may do in one organization: their active membership,
/// role and the role's permission names. Obtained from
/// [`crate::context::ServerContext::authorize`], which every org-scoped
/// handler calls before touching data.
#[derive(Clone, Debug)]
pub struct OrgAccess {
    pub org_id: uuid::Uuid,
    pub user_id: uuid::Uuid,
    pub role_id: uuid::Uuid,
    pub role_name: String,
    pub level: i32,
    pub permissions: Vec<String>,
}

impl OrgAccess {
    pub fn has(&self, permission: &str) -> bool {
        permits(&self.permissions, permission)
    }

    /// `403 forbidden` unless the role grants `permission`.
    pub fn require(&self, permission: &str) -> Result<(), crate::error::Error> {
        if self.has(permission) {
            Ok(())
        } else {
            Err(crate::error::Error::forbidden(format!(
                "your role does not grant the {permission} permission"
            )))
        }
    }

    pub fn is_owner(&self) -> bool {
        self.role_name == "owner" && self.level >= 100
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
