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

/// Typed permissions. Each permission is a type of its own (`perm::KbRead`)
/// with a constant of that type (`perm::KB_READ`): handlers name what they
/// require with the constant, and the grant that
/// [`crate::context::ServerContext::authorize`] returns carries the type,
/// so a datastore function that deletes a knowledge base takes a
/// `Grant<on::Kb, perm::KbDelete>` and a grant checked for `kb:read` does
/// not type-check there.
pub mod perm {
    /// A permission's name, `resource:action`, for checks made at run time
    /// (a role may only grant what its creator holds).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Name(&'static str);

    impl Name {
        pub const fn name(self) -> &'static str {
            self.0
        }
    }

    impl std::fmt::Display for Name {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    /// A permission as a type. Sealed: only the ones below exist.
    pub trait Permission:
        super::sealed::Sealed + Copy + std::fmt::Debug + Send + Sync + 'static
    {
        const NAME: Name;
        fn name(self) -> &'static str {
            Self::NAME.0
        }
    }

    macro_rules! permissions {
        ($($ty:ident $konst:ident = $name:literal;)*) => {
            $(
                #[doc = concat!("The `", $name, "` permission.")]
                #[derive(Clone, Copy, Debug, PartialEq, Eq)]
                pub struct $ty;
                impl super::sealed::Sealed for $ty {}
                impl Permission for $ty {
                    const NAME: Name = Name($name);
                }
                impl super::Requirement for $ty {
                    type Grants = $ty;
                    fn check(self, access: &super::OrgAccess) -> Result<(), crate::error::Error> {
                        access.require(Self::NAME)
                    }
                    fn administrative(self) -> bool {
                        super::is_administrative($name)
                    }
                }
                #[doc = concat!("The `", $name, "` permission.")]
                pub const $konst: $ty = $ty;
            )*
        };
    }

    permissions! {
        OrganizationRead ORGANIZATION_READ = "organization:read";
        OrganizationWrite ORGANIZATION_WRITE = "organization:write";
        OrganizationAdmin ORGANIZATION_ADMIN = "organization:admin";
        UsersRead USERS_READ = "users:read";
        UsersWrite USERS_WRITE = "users:write";
        RolesRead ROLES_READ = "roles:read";
        RolesWrite ROLES_WRITE = "roles:write";
        RolesDelete ROLES_DELETE = "roles:delete";
        ConversationRead CONVERSATION_READ = "conversation:read";
        ConversationWrite CONVERSATION_WRITE = "conversation:write";
        ChatsRead CHATS_READ = "chats:read";
        ChatsWrite CHATS_WRITE = "chats:write";
        ChatsDelete CHATS_DELETE = "chats:delete";
        KbRead KB_READ = "kb:read";
        KbWrite KB_WRITE = "kb:write";
        KbDelete KB_DELETE = "kb:delete";
        AgentRead AGENT_READ = "agent:read";
        AgentWrite AGENT_WRITE = "agent:write";
        AgentDelete AGENT_DELETE = "agent:delete";
        AgentExecute AGENT_EXECUTE = "agent:execute";
        ToolRead TOOL_READ = "tool:read";
        ToolWrite TOOL_WRITE = "tool:write";
        ToolDelete TOOL_DELETE = "tool:delete";
        ToolExecute TOOL_EXECUTE = "tool:execute";
        McpRead MCP_READ = "mcp:read";
        McpWrite MCP_WRITE = "mcp:write";
        FeedbackRead FEEDBACK_READ = "feedback:read";
        AuditRead AUDIT_READ = "audit:read";
        UsageRead USAGE_READ = "usage:read";
        UsageWrite USAGE_WRITE = "usage:write";
        WebhooksRead WEBHOOKS_READ = "webhooks:read";
        WebhooksWrite WEBHOOKS_WRITE = "webhooks:write";
    }
}

/// What an authorization is about: the object a request addresses. Each
/// target names where its organization comes from ([`Scope`]) and becomes
/// the grant's object once the caller was authorized.
pub mod on {
    use uuid::Uuid;

    /// An addressed object: what a [`super::Grant`] is bound to.
    pub trait Object: Copy + std::fmt::Debug + Send + Sync + 'static {
        /// The object's id (an organization's for [`Org`]).
        fn id(self) -> Uuid;
    }

    /// What a handler asks to be authorized on.
    pub trait Target: Copy {
        type Object: Object;
        /// Where the organization comes from.
        fn scope(self) -> super::Scope;
        /// The object, once the organization is known.
        fn object(self, org_id: Uuid) -> Self::Object;
    }

    /// An organization, by its id.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Org(pub Uuid);

    /// The organization `Some(id)` names, else the caller's personal one
    /// (operations whose `org_id` is optional). Granted as an [`Org`].
    #[derive(Clone, Copy, Debug)]
    pub struct OrgOrPersonal(pub Option<Uuid>);

    impl Object for Org {
        fn id(self) -> Uuid {
            self.0
        }
    }

    impl Target for Org {
        type Object = Org;
        fn scope(self) -> super::Scope {
            super::Scope::Org(self.0)
        }
        fn object(self, org_id: Uuid) -> Org {
            Org(org_id)
        }
    }

    impl Target for OrgOrPersonal {
        type Object = Org;
        fn scope(self) -> super::Scope {
            super::Scope::org_or_personal(self.0)
        }
        fn object(self, org_id: Uuid) -> Org {
            Org(org_id)
        }
    }

    macro_rules! objects {
        ($($(#[$doc:meta])* $ty:ident => $scope:ident;)*) => {
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug, PartialEq, Eq)]
                pub struct $ty(pub Uuid);
                impl Object for $ty {
                    fn id(self) -> Uuid {
                        self.0
                    }
                }
                impl Target for $ty {
                    type Object = $ty;
                    fn scope(self) -> super::Scope {
                        super::Scope::$scope(self.0)
                    }
                    fn object(self, _org_id: Uuid) -> $ty {
                        self
                    }
                }
            )*
        };
    }

    objects! {
        /// A knowledge base, authorized through its organization.
        Kb => Kb;
        /// An agent.
        Agent => Agent;
        /// An agent deployment.
        Deployment => Deployment;
        /// A chat session (its owner is checked by every chat query).
        Chat => Chat;
        /// An MCP instance (only its own user's).
        McpInstance => McpInstance;
        /// An invitation.
        Invitation => Invitation;
    }
}

/// What an operation requires of the caller in an organization, on top of
/// an active membership: a permission (`perm::KB_READ`), or one of the
/// forms below. Every org-scoped handler states it in its one call to
/// [`crate::context::ServerContext::authorize`]; `Grants` is what the
/// grant carries in its type.
pub trait Requirement: Copy + Send + Sync + 'static {
    type Grants: Copy + std::fmt::Debug + Send + Sync + 'static;
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error>;
    /// Whether this is an administrative requirement (managing the
    /// organization, its members and roles, reading its admin data): a
    /// member refused by it is recorded in the audit log.
    fn administrative(self) -> bool {
        false
    }
}

/// Whether a permission is administrative (see
/// [`Requirement::administrative`]): any but a read of `organization`,
/// `users` and `roles`, and reading the audit log or the feedback.
pub fn is_administrative(permission: &str) -> bool {
    let (resource, action) = permission.split_once(':').unwrap_or((permission, ""));
    (matches!(resource, "organization" | "users" | "roles") && action != "read")
        || matches!(permission, "audit:read" | "feedback:read")
}

/// An active membership only.
#[derive(Clone, Copy, Debug)]
pub struct Member;

impl Requirement for Member {
    type Grants = Member;
    fn check(self, _: &OrgAccess) -> Result<(), crate::error::Error> {
        Ok(())
    }
}

/// The permission, and the owner role (changing a member's role). Grants
/// `Owner<P>`: what only owners may do takes that, not `P` alone.
#[derive(Clone, Copy, Debug)]
pub struct Owner<P>(pub P);

impl<P: perm::Permission> Requirement for Owner<P> {
    type Grants = Owner<P>;
    fn administrative(self) -> bool {
        true
    }
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error> {
        access.require(P::NAME)?;
        // Owners' operations change roles: a login only.
        if access.via_token() {
            return Err(token_not_allowed());
        }
        if access.is_owner() {
            Ok(())
        } else {
            Err(crate::error::Error::forbidden(
                "only the organization's owners can do this",
            ))
        }
    }
}

use perm::Permission as _;

/// A role at or above the admin level ([`ADMIN_LEVEL`]): the spec's
/// "admin or owner roles" (invitations).
#[derive(Clone, Copy, Debug)]
pub struct AdminRole;

impl Requirement for AdminRole {
    type Grants = AdminRole;
    fn administrative(self) -> bool {
        true
    }
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error> {
        if access.level >= ADMIN_LEVEL {
            // A token manages invitations with the `users:write` scope.
            if let Some(scopes) = &access.scopes
                && !permits(scopes, perm::UsersWrite::NAME.name())
            {
                return Err(insufficient_scope(perm::UsersWrite::NAME.name()));
            }
            Ok(())
        } else {
            Err(crate::error::Error::forbidden(format!(
                "this needs a role of level {ADMIN_LEVEL} or more (admin or owner)"
            )))
        }
    }
}

/// A role at or above the admin level ([`ADMIN_LEVEL`]) that also grants
/// the permission `P` (and, with a personal access token, a scope that
/// covers it): what the organization's admins do with the members' data
/// (reading the feedback given on answers, `feedback:read`). The admin and
/// owner system roles grant every read through `*:read` and `*:*`; a
/// custom role needs both the level and the permission, so a role below
/// the admin level never qualifies, whatever wildcards it holds. Grants
/// `Admin<P>`.
#[derive(Clone, Copy, Debug)]
pub struct Admin<P>(pub P);

impl<P: perm::Permission> Requirement for Admin<P> {
    type Grants = Admin<P>;
    fn administrative(self) -> bool {
        true
    }
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error> {
        if access.level < ADMIN_LEVEL {
            return Err(crate::error::Error::forbidden(format!(
                "this needs a role of level {ADMIN_LEVEL} or more (admin or owner)"
            )));
        }
        access.require(P::NAME)
    }
}

/// The permission `P`, and every one of `also` (checked at run time: a
/// request whose body decides what else it needs, as sending a message
/// with an agent needs `agent:execute`). Grants `P`.
#[derive(Clone, Copy, Debug)]
pub struct Also<P>(pub P, pub &'static [perm::Name]);

impl<P: perm::Permission> Requirement for Also<P> {
    type Grants = P;
    fn administrative(self) -> bool {
        is_administrative(P::NAME.name())
    }
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error> {
        access.require(P::NAME)?;
        self.1.iter().try_for_each(|p| access.require(*p))
    }
}

/// The permission `P` with a login: a personal access token is `403
/// token_not_allowed` whatever its scopes (what makes tokens or
/// principals). Grants `P`.
#[derive(Clone, Copy, Debug)]
pub struct Login<P>(pub P);

impl<P: perm::Permission> Requirement for Login<P> {
    type Grants = P;
    fn administrative(self) -> bool {
        is_administrative(P::NAME.name())
    }
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error> {
        if access.via_token() {
            return Err(token_not_allowed());
        }
        access.require(P::NAME)
    }
}

/// Both permissions; grants both (`Grant::first`, `Grant::second`).
impl<A: perm::Permission, B: perm::Permission> Requirement for (A, B) {
    type Grants = (A, B);
    fn administrative(self) -> bool {
        is_administrative(A::NAME.name()) || is_administrative(B::NAME.name())
    }
    fn check(self, access: &OrgAccess) -> Result<(), crate::error::Error> {
        access.require(A::NAME)?;
        access.require(B::NAME)
    }
}

/// What the caller may do with one object: the organization's
/// [`OrgAccess`] (which it dereferences to, for reads), the object it was
/// authorized on and, in its type, what was checked. Made only by
/// [`crate::context::ServerContext::authorize`]: datastore functions that
/// change a tenant's object take the grant of that object and permission
/// (`Grant<on::Kb, perm::KbDelete>`), so a grant for another object kind
/// or a lesser permission does not compile there.
///
/// Checked by the doc tests below (`cargo xtask check` runs them): the
/// delete grant of a knowledge base type-checks in `kb_delete`, a read
/// grant of it does not, nor does the delete grant of an agent.
///
/// ```no_run
/// use workspace_server::authz::{Grant, on, perm};
/// async fn delete(ds: &workspace_server::db::Datastore, g: &Grant<on::Kb, perm::KbDelete>) {
///     let _ = ds.kb_delete(g).await;
/// }
/// ```
///
/// ```compile_fail,E0308
/// use workspace_server::authz::{Grant, on, perm};
/// async fn delete(ds: &workspace_server::db::Datastore, g: &Grant<on::Kb, perm::KbRead>) {
///     let _ = ds.kb_delete(g).await;
/// }
/// ```
///
/// ```compile_fail,E0308
/// use workspace_server::authz::{Grant, on, perm};
/// async fn delete(ds: &workspace_server::db::Datastore, g: &Grant<on::Agent, perm::KbDelete>) {
///     let _ = ds.kb_delete(g).await;
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Grant<O, R> {
    access: OrgAccess,
    object: O,
    _granted: std::marker::PhantomData<R>,
}

impl<O: on::Object, R> Grant<O, R> {
    pub(crate) fn new(access: OrgAccess, object: O) -> Grant<O, R> {
        Grant {
            access,
            object,
            _granted: std::marker::PhantomData,
        }
    }

    /// The object this grant is for.
    pub fn object(&self) -> O {
        self.object
    }

    /// The object's id (the organization's for an organization).
    pub fn id(&self) -> uuid::Uuid {
        self.object.id()
    }

    /// The organization's access this grant was made from.
    pub fn access(&self) -> &OrgAccess {
        &self.access
    }
}

impl<O: on::Object, A, B> Grant<O, (A, B)> {
    /// The grant of the first of two permissions.
    pub fn first(&self) -> Grant<O, A> {
        Grant::new(self.access.clone(), self.object)
    }
    /// The grant of the second of two permissions.
    pub fn second(&self) -> Grant<O, B> {
        Grant::new(self.access.clone(), self.object)
    }
}

/// The grants that invite people into an organization: the invitations
/// area's (admin or owner roles) and `POST /api/users/invite`'s
/// (`users:write`).
pub trait Invites: sealed::Sealed + Sync {
    /// The organization's access the grant was made from.
    fn access(&self) -> &OrgAccess;
}

impl Invites for Grant<on::Org, AdminRole> {
    fn access(&self) -> &OrgAccess {
        &self.access
    }
}

impl Invites for Grant<on::Org, perm::UsersWrite> {
    fn access(&self) -> &OrgAccess {
        &self.access
    }
}

/// The grants that change a membership's status or its owner role:
/// suspending, reactivating and removing a member (`users:write`), leaving
/// (a membership), transferring ownership (an owner's `users:write`).
pub trait ChangesMembership: sealed::Sealed + Sync {
    /// The organization's access the grant was made from.
    fn access(&self) -> &OrgAccess;
}

impl ChangesMembership for Grant<on::Org, perm::UsersWrite> {
    fn access(&self) -> &OrgAccess {
        &self.access
    }
}

impl ChangesMembership for Grant<on::Org, Member> {
    fn access(&self) -> &OrgAccess {
        &self.access
    }
}

impl ChangesMembership for Grant<on::Org, Owner<perm::UsersWrite>> {
    fn access(&self) -> &OrgAccess {
        &self.access
    }
}

impl<O, R> std::ops::Deref for Grant<O, R> {
    type Target = OrgAccess;
    fn deref(&self) -> &OrgAccess {
        &self.access
    }
}

/// The level of the admin system role: the lowest that manages invitations.
pub const ADMIN_LEVEL: i32 = 80;
/// The level of the owner system role.
pub const OWNER_LEVEL: i32 = 100;

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
/// are private), after checking the operation's [`Requirement`], inside a
/// [`Grant`]; tenant-scoped datastore functions that read take it (a
/// grant dereferences to it) instead of a bare organization id, so a query
/// that is not scoped to an authorized organization does not compile;
/// those that change an object take the [`Grant`] itself.
#[derive(Clone, Debug)]
pub struct OrgAccess {
    org_id: uuid::Uuid,
    user_id: uuid::Uuid,
    role_id: uuid::Uuid,
    role_name: String,
    role_is_system: bool,
    level: i32,
    permissions: Vec<String>,
    /// The scopes of the personal access token the request presented
    /// (`None`: a login's access token, limited by the role alone).
    scopes: Option<Vec<String>>,
    /// The personal access token the request presented, if any.
    token_id: Option<uuid::Uuid>,
    log: slog::Logger,
    /// Who made the request and from where: what the audit log records.
    origin: crate::audit::Origin,
}

/// `403 token_not_allowed`: what only a login may do (managing tokens,
/// changing roles), asked with a personal access token.
pub fn token_not_allowed() -> crate::error::Error {
    crate::error::Error::Forbidden {
        code: "token_not_allowed",
        message: "a personal access token cannot do this; log in instead".to_string(),
    }
}

/// `403 insufficient_scope`: the personal access token's scopes do not
/// cover the permission.
pub fn insufficient_scope(permission: &str) -> crate::error::Error {
    crate::error::Error::Forbidden {
        code: "insufficient_scope",
        message: format!("the token's scopes do not include {permission}"),
    }
}

/// Proof that the caller is a system administrator, made only by
/// [`crate::context::ServerContext::authorize_system_admin`]. System-level
/// datastore functions (the permission catalog, any organization's feature
/// gates) take it.
#[derive(Clone, Debug)]
pub struct SystemAdmin {
    user_id: uuid::Uuid,
    log: slog::Logger,
    origin: crate::audit::Origin,
}

impl SystemAdmin {
    pub(crate) fn grant(
        user_id: uuid::Uuid,
        log: &slog::Logger,
        origin: crate::audit::Origin,
    ) -> SystemAdmin {
        SystemAdmin {
            user_id,
            log: log.new(slog::o!("user_id" => user_id.to_string(), "system_admin" => true)),
            origin,
        }
    }
    /// Who made the request and from where (the audit log's origin).
    pub fn origin(&self) -> &crate::audit::Origin {
        &self.origin
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

/// A SCIM bearer token that matched an organization's (issue #37): the
/// organization's identity provider, provisioning its Users and Groups.
/// Made only by [`crate::context::ServerContext::authorize_scim`].
#[derive(Clone, Debug)]
pub struct ScimGrant {
    org_id: uuid::Uuid,
    origin: crate::audit::Origin,
}

impl ScimGrant {
    pub(crate) fn grant(org_id: uuid::Uuid, origin: crate::audit::Origin) -> ScimGrant {
        ScimGrant { org_id, origin }
    }

    pub fn org_id(&self) -> uuid::Uuid {
        self.org_id
    }

    /// Where the request came from (the audit log's origin; the actor is
    /// the server acting for the provider).
    pub fn origin(&self) -> &crate::audit::Origin {
        &self.origin
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
    impl<O, R> Sealed for super::Grant<O, R> {}
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

impl<O: Sync, R: Sync> OrgScope for Grant<O, R> {
    fn scope_org_id(&self) -> uuid::Uuid {
        self.access.org_id
    }
}

impl OrgScope for DeploymentAccess {
    fn scope_org_id(&self) -> uuid::Uuid {
        self.org_id
    }
}

impl OrgAccess {
    /// Checks `require` against a membership and grants access to the
    /// target's object.
    pub(crate) fn grant<T: on::Target, R: Requirement>(
        user_id: uuid::Uuid,
        membership: Membership,
        token: Option<(uuid::Uuid, Vec<String>)>,
        target: T,
        require: R,
        log: &slog::Logger,
        origin: crate::audit::Origin,
    ) -> Result<Grant<T::Object, R::Grants>, crate::error::Error> {
        let (token_id, scopes) = match token {
            Some((id, scopes)) => (Some(id), Some(scopes)),
            None => (None, None),
        };
        let access = OrgAccess {
            org_id: membership.org_id,
            user_id,
            role_id: membership.role_id,
            role_name: membership.role_name,
            role_is_system: membership.role_is_system,
            level: membership.level,
            permissions: membership.permissions,
            scopes,
            token_id,
            // Formatted only if a line is logged.
            log: {
                let org_id = membership.org_id;
                log.new(slog::o!(
                    "org_id" => slog::FnValue(move |_: &slog::Record<'_>| org_id.to_string()),
                    "user_id" => slog::FnValue(move |_: &slog::Record<'_>| user_id.to_string())
                ))
            },
            origin,
        };
        require.check(&access)?;
        let object = target.object(access.org_id);
        Ok(Grant::new(access, object))
    }

    /// `403 forbidden` unless the role grants the permission; with a
    /// personal access token, also `403 insufficient_scope` unless its
    /// scopes cover it, and `403 token_not_allowed` for changing roles
    /// (`roles:write`, `roles:delete`), which needs a login.
    fn require(&self, p: perm::Name) -> Result<(), crate::error::Error> {
        if !permits(&self.permissions, p.name()) {
            return Err(crate::error::Error::forbidden(format!(
                "your role does not grant the {p} permission"
            )));
        }
        let Some(scopes) = &self.scopes else {
            return Ok(());
        };
        if matches!(p.name(), "roles:write" | "roles:delete") {
            return Err(token_not_allowed());
        }
        if permits(scopes, p.name()) {
            Ok(())
        } else {
            Err(insufficient_scope(p.name()))
        }
    }

    /// Whether the request came with a personal access token.
    pub fn via_token(&self) -> bool {
        self.scopes.is_some()
    }

    /// Whether the caller's role grants the permission named `name` (and
    /// the token's scopes, with a personal access token).
    pub fn grants(&self, name: &str) -> bool {
        permits(&self.permissions, name) && self.scopes.as_ref().is_none_or(|s| permits(s, name))
    }

    pub fn org_id(&self) -> uuid::Uuid {
        self.org_id
    }
    pub fn user_id(&self) -> uuid::Uuid {
        self.user_id
    }
    /// The personal access token the request presented, if it did.
    pub fn token_id(&self) -> Option<uuid::Uuid> {
        self.token_id
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

    pub fn is_owner(&self) -> bool {
        is_owner_role(self.role_is_system, &self.role_name)
    }

    /// Who made the request and from where (the audit log's origin).
    pub fn origin(&self) -> &crate::audit::Origin {
        &self.origin
    }
}

/// `403 sso_required`: the credential may not act in the organization (a
/// single sign-on session, or a token made in one, outside its
/// organization; a password credential in an organization that requires
/// single sign-on).
pub fn sso_required() -> crate::error::Error {
    crate::error::Error::Forbidden {
        code: "sso_required",
        message: "this organization requires its single sign-on for this credential \
                  (or the credential belongs to another organization's single sign-on); \
                  sign in with POST /api/auth/sso/start"
            .to_string(),
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
