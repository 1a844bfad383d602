//! The Workspace HTTP API.
//!
//! This crate holds only the dropshot API trait ([`WorkspaceApi`]) and the
//! types of its requests and responses, so that the OpenAPI document
//! (`openapi/workspace.json`) can be generated without compiling the server.
//! See [`openapi_document`].

pub mod auth;
pub mod conversations;
pub mod extract;
pub mod invitations;
pub mod orgs;
pub mod roles;
pub mod system;
pub mod users;

use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk, RequestContext};

use crate::extract::{JsonBody, QueryParams};

/// Title of the OpenAPI document.
pub const API_TITLE: &str = "Workspace API";
/// Version of the OpenAPI document (the interface, not the server build).
pub const API_VERSION: semver::Version = semver::Version::new(0, 1, 0);

/// Operations that need no `Authorization` header. Every other operation
/// requires `Authorization: Bearer <access_token>` and answers 401 without it.
pub const PUBLIC_OPERATIONS: &[&str] = &[
    "healthz",
    "readyz",
    "auth_signup",
    "auth_login",
    "auth_signup_invite",
    "invitations_validate",
];

/// Operations whose success response is a Server-Sent Events stream
/// (`text/event-stream`).
pub const STREAMING_OPERATIONS: &[&str] = &["conversation_stream_chat"];

/// The Workspace API: a multi-tenant backend for AI chat applications.
#[dropshot::api_description {
    tag_config = {
        allow_other_tags = false,
        policy = dropshot::EndpointTagPolicy::ExactlyOne,
        tags = {
            "system" = { description = "Liveness and readiness of the service itself." },
            "auth" = { description = "Registration and login." },
            "orgs" = { description = "Organizations and membership." },
            "users" = { description = "User details, listing, invitation, role change." },
            "roles" = { description = "Roles and permissions." },
            "invitations" = { description = "Organization invitations." },
            "conversations" = { description = "Conversations, model sessions, streamed chat." },
            "chat" = { description = "Chat sessions, messages, uploads, transcription, prompts." },
            "tools" = { description = "Tool categories and tools." },
            "kb" = { description = "Knowledge bases, documents, search, RAG query." },
            "agents" = { description = "Agents." },
            "deployments" = { description = "Deployments of agents." },
            "mcp" = { description = "MCP servers, OAuth connections, instances." },
            "mcp-playground" = { description = "Chat with MCP tools." },
        }
    }
}]
pub trait WorkspaceApi {
    type Context;

    /// Liveness probe.
    ///
    /// Answers `200 {"status": "ok"}` while the process serves HTTP. It does
    /// not touch the database (see `readyz`). Public.
    #[endpoint { method = GET, path = "/healthz", tags = ["system"] }]
    async fn healthz(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<system::HealthStatus>, HttpError>;

    /// Readiness probe.
    ///
    /// Answers `200 {"status": "ok"}` when the database answers a query, and
    /// `503` with `error_code` `database_unavailable` otherwise. Public.
    #[endpoint { method = GET, path = "/readyz", tags = ["system"] }]
    async fn readyz(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<system::HealthStatus>, HttpError>;

    /// Create an account.
    ///
    /// Public. An address pre-created by `POST /api/users/invite` (no
    /// password yet) is taken over: its names and password are set and its
    /// invitations stay open. Creates, in one transaction, the user, a
    /// personal organization
    /// (with a unique URL slug), that organization's four system roles
    /// (owner 100, admin 80, member 20, guest 10) and the user's `active`
    /// owner membership.
    ///
    /// The e-mail address is trimmed and lower-cased; it must look like
    /// `local@domain` (`400 invalid_email`) and be unused, compared
    /// case-insensitively (`409 email_taken`). `first_name` and `last_name`
    /// must be non-empty after trimming and at most 100 characters
    /// (`400 invalid_name`).
    ///
    /// Password policy (`422 weak_password`, the message names the rule):
    /// 1. at least 10 and at most 128 characters;
    /// 2. not one character repeated (`aaaaaaaaaa`);
    /// 3. not the e-mail address, nor its part before `@`, in any case.
    ///
    /// Passwords are stored only as argon2id hashes (OWASP parameters:
    /// 19 MiB memory, 2 iterations, 1 lane).
    ///
    /// The address is also NFC-normalised; control and format characters
    /// (zero-width space, soft hyphen, bidirectional overrides) and local
    /// parts or domain labels whose letters mix scripts (Latin, Greek,
    /// Cyrillic, any other block) are `400 invalid_email`. Signups are
    /// limited per client address and in total (`429 rate_limited`, shared
    /// with `signup_invite`); a hashing backlog is `503 server_busy`.
    #[endpoint { method = POST, path = "/api/auth/signup", tags = ["auth"] }]
    async fn auth_signup(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::SignupRequest>,
    ) -> Result<HttpResponseCreated<auth::SignupResponse>, HttpError>;

    /// Log in with e-mail and password.
    ///
    /// Public. Returns a JWT access token (HS256). Claims: `sub` (user id),
    /// `iat`, `nbf`, `exp` (issue time plus the configured lifetime, one hour
    /// by default), `iss` (`workspace`), `aud` (`workspace-api`) and `jti`
    /// (a unique token id).
    ///
    /// Any wrong credential (unknown e-mail, wrong password) is `401
    /// invalid_credentials`, with no hint of which part was wrong.
    ///
    /// Failed attempts are counted per e-mail address in the database, so
    /// the limit holds across server instances: after 5 failures within 15
    /// minutes (both configurable) further attempts get `429
    /// too_many_login_attempts` with a `Retry-After` header (seconds) until
    /// the oldest failure leaves the window. A successful login clears the
    /// count.
    /// Attempts are counted before the password is checked, so concurrent
    /// attempts verify at most that many passwords.
    ///
    /// Overload: logins are also limited per client address and in total
    /// (`429 rate_limited` with `Retry-After`), and password checks run a
    /// few at a time: when too many wait, `503 server_busy` with
    /// `Retry-After`. An e-mail over 254 characters is `400 invalid_email`,
    /// a password over 128 characters `400 invalid_request`.
    #[endpoint { method = POST, path = "/api/auth/login", tags = ["auth"] }]
    async fn auth_login(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::LoginRequest>,
    ) -> Result<HttpResponseOk<auth::LoginResponse>, HttpError>;

    /// Fetch the current user.
    ///
    /// Any authenticated user. Returns the user with their `active`
    /// memberships only (invited, suspended and deleted memberships are left
    /// out).
    #[endpoint { method = GET, path = "/api/users/me", tags = ["users"] }]
    async fn users_me(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<users::CurrentUser>, HttpError>;

    // ---- Organizations area (/api/org) ----

    /// List the caller's organizations.
    ///
    /// Every organization where the caller has an `active` membership, with
    /// the caller's role (`user_role`), oldest membership first.
    ///
    /// Paged by `limit` (1 to 500, default 100; `400 invalid_pagination`
    /// outside) and `offset` (items to skip, default 0).
    #[endpoint { method = GET, path = "/api/org/list", tags = ["orgs"] }]
    async fn org_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PageQuery>,
    ) -> Result<HttpResponseOk<Vec<orgs::Organization>>, HttpError>;

    /// Create an organization.
    ///
    /// Any authenticated user. In one transaction: the organization (with a
    /// unique slug derived from the name), its four system roles (owner 100,
    /// admin 80, member 20, guest 10) and the caller's `active` owner
    /// membership. The name is trimmed and must be 1 to 100 characters
    /// (`400 invalid_name`). Organizations are isolated, but a caller may not
    /// belong to two organizations with the same name (compared
    /// case-insensitively): `409 org_name_taken`. Answers `201` with the
    /// organization and `user_role` owner.
    #[endpoint { method = POST, path = "/api/org/create_org", tags = ["orgs"] }]
    async fn org_create_org(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::CreateOrgQuery>,
    ) -> Result<HttpResponseCreated<orgs::Organization>, HttpError>;

    /// Add an existing user to an organization.
    ///
    /// Requires `users:write` in the organization and the organization's
    /// `team_members` feature (`403 feature_disabled` without it). The user
    /// must have an account (`404 not_found` otherwise; new people are
    /// invited instead). The role must belong to the organization (`400
    /// invalid_role`),
    /// may not be above the caller's own level (`403 role_level_too_high`)
    /// and may not be the owner role (`403 owner_role_not_assignable`). A
    /// user whose membership is `active` or `suspended` gets `409
    /// already_member`; an `invited` or `deleted` membership is activated
    /// with the given role. The membership becomes `active`.
    #[endpoint { method = POST, path = "/api/org/add_member", tags = ["orgs"] }]
    async fn org_add_member(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<orgs::AddMemberRequest>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Show an organization's feature gates and quotas.
    ///
    /// An addition to the spec. Any active member. Values the organization
    /// has not overridden are the server's configured defaults.
    #[endpoint { method = GET, path = "/api/org/features", tags = ["orgs"] }]
    async fn org_features(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<orgs::OrgFeatures>, HttpError>;

    /// Set an organization's feature gates and quotas.
    ///
    /// An addition to the spec. System administrators only (`403
    /// forbidden` otherwise), since gates and quotas are the operator's
    /// business, not the organization's. Given fields become overrides,
    /// omitted fields are unchanged, fields named in `reset` return to the
    /// server default. `404` for an unknown organization.
    #[endpoint { method = PUT, path = "/api/org/features", tags = ["orgs"] }]
    async fn org_update_features(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<orgs::OrgFeaturesUpdate>,
    ) -> Result<HttpResponseOk<orgs::OrgFeatures>, HttpError>;

    // ---- Users area (/api/users), beyond `users_me` ----

    /// Change a member's role.
    ///
    /// Requires `users:write` and the owner role in the organization: any
    /// other caller gets `403 forbidden` (rule 1). Assigning the owner role
    /// is refused with `403 owner_role_not_assignable` (rule 2), and so is
    /// changing the role of an owner (ownership transfer is not part of this
    /// operation). The target must be a member: `404 not_found` if they have
    /// no membership, `400 member_not_active` if it is not `active` (e.g.
    /// `invited`, rule 3), `400 role_already_assigned` if they already have
    /// the role (rule 3). The role must belong to the organization (`400
    /// invalid_role`).
    #[endpoint { method = PUT, path = "/api/users/update", tags = ["users"] }]
    async fn users_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<users::UpdateUserQuery>,
        body: JsonBody<users::UpdateUserRoleRequest>,
    ) -> Result<HttpResponseOk<users::UpdatedUser>, HttpError>;

    /// List the organization's users and open invitations.
    ///
    /// Permission `users:read` (`403 forbidden` without it, and for callers
    /// who are not active members of `org_id`).
    ///
    /// The list mixes active members (`status` `active`, `id` set,
    /// `invite_id` null) with open invitations of the organization, from
    /// both `POST /api/invitations/create` and `POST /api/users/invite`
    /// (`status` `pending` or `expired`, `id` null, `invite_id` and
    /// `invited_at` set). Accepted and revoked invitations, invitations
    /// replaced by a newer one, and invitations of e-mail addresses that
    /// are already active members are left out. Invited, suspended and
    /// deleted memberships appear only through their invitation row.
    ///
    /// Order: active users first (most recently joined first), then
    /// invitations (newest created first); ties by e-mail. `total` counts
    /// both kinds over all pages.
    ///
    /// Paging: `offset` is a 0-based page number (default 0), `limit` the
    /// page size (default 10, 1 to 100, else `400 invalid_pagination`); the
    /// page holds rows `offset * limit` up to `offset * limit + limit - 1`.
    /// A page past the end is empty (with the true `total`).
    #[endpoint { method = GET, path = "/api/users/list", tags = ["users"] }]
    async fn users_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<users::UserListQuery>,
    ) -> Result<HttpResponseOk<users::UserListResponse>, HttpError>;

    /// Invite a person by name and e-mail (magic link).
    ///
    /// Permission `users:write` (`403 forbidden`). Answers `201` with the
    /// invitation's id and the membership the person is invited to.
    ///
    /// In one transaction: pre-creates the user (no password, so they
    /// cannot log in yet) unless an account with this e-mail exists,
    /// creates an `invited` membership with role `role`, and creates a
    /// `pending` invitation (lifetime 7 days). After the commit an e-mail
    /// with a magic link (`{mail.public_url}/invite/accept?token=...`) is
    /// sent; accepting it is `POST /api/auth/signup_invite`, which sets the
    /// names and password and makes the membership `active`. Revoking the
    /// invitation removes the `invited` membership.
    ///
    /// Rules, as for `POST /api/invitations/create`: the e-mail must be
    /// valid (`400 invalid_email`), names 1 to 100 characters
    /// (`400 invalid_name`); `role` must be a role of this organization
    /// (`400 invalid_role`), never the owner role (`403
    /// owner_role_not_assignable`) nor a role whose `hierarchy_level` is
    /// above the caller's (`403 role_level_too_high`);
    /// `409 already_member` when the address is an active or suspended
    /// member, `409 invitation_pending` when an unexpired invitation for it
    /// is pending (an expired one is replaced).
    ///
    /// A failed e-mail delivery does not fail the request (the invitation
    /// exists; it is logged, and `POST /api/invitations/resend` retries).
    #[endpoint { method = POST, path = "/api/users/invite", tags = ["users"] }]
    async fn users_invite(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<users::UserInviteQuery>,
        body: JsonBody<users::UserInviteRequest>,
    ) -> Result<HttpResponseCreated<users::UserInviteResponse>, HttpError>;

    // ---- Roles area (/api/roles) ----

    /// Create a custom role.
    ///
    /// Requires `roles:write`. The name is trimmed, 1 to 64 characters
    /// (`400 invalid_name`) and unique in the organization, compared
    /// case-insensitively, including the system roles' names (`409
    /// role_name_taken`). `hierarchy_level` must be 0 to 100 (`400
    /// invalid_hierarchy_level`) and not above the caller's own level (`403
    /// role_level_too_high`). Every permission id must exist (`400
    /// unknown_permission`) and be covered by the caller's own permissions,
    /// so nobody can grant what they do not hold (`403
    /// permission_not_held`). Roles created here are never system roles.
    /// Answers `201` with the role and its permissions.
    #[endpoint { method = POST, path = "/api/roles/create", tags = ["roles"] }]
    async fn roles_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<roles::CreateRoleRequest>,
    ) -> Result<HttpResponseCreated<roles::Role>, HttpError>;

    /// Update a custom role.
    ///
    /// Requires `roles:write`. System roles cannot be updated (`403
    /// system_role_immutable`); a role above the caller's level cannot be
    /// touched (`403 role_level_too_high`). Omitted fields are unchanged; a
    /// given `permission_ids` list replaces the permissions. The same rules
    /// as creation apply to the new values. `404` for a role of another
    /// organization.
    #[endpoint { method = PUT, path = "/api/roles/update", tags = ["roles"] }]
    async fn roles_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<roles::RoleQuery>,
        body: JsonBody<roles::UpdateRoleRequest>,
    ) -> Result<HttpResponseOk<roles::Role>, HttpError>;

    /// Delete a custom role.
    ///
    /// Requires `roles:delete` and `roles:write`. System roles cannot be
    /// deleted (`403 system_role_immutable`), nor roles above the caller's
    /// level (`403 role_level_too_high`), nor roles held by any membership in
    /// any state (`409 role_in_use`). Deletion is permanent.
    #[endpoint { method = DELETE, path = "/api/roles/remove", tags = ["roles"] }]
    async fn roles_remove(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<roles::RoleQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// List an organization's roles.
    ///
    /// Requires `roles:read`. System and custom roles, highest level first,
    /// then by name; without `permissions`.
    ///
    /// Paged by `limit` (1 to 500, default 100; `400 invalid_pagination`
    /// outside) and `offset` (items to skip, default 0).
    #[endpoint { method = GET, path = "/api/roles/list_roles", tags = ["roles"] }]
    async fn roles_list_roles(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgPageQuery>,
    ) -> Result<HttpResponseOk<Vec<roles::Role>>, HttpError>;

    /// List the permission catalog.
    ///
    /// Any authenticated user: the catalog is global, not per organization.
    /// Sorted by name.
    ///
    /// Paged by `limit` (1 to 500, default 100; `400 invalid_pagination`
    /// outside) and `offset` (items to skip, default 0).
    #[endpoint { method = GET, path = "/api/roles/list_permissions", tags = ["roles"] }]
    async fn roles_list_permissions(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PageQuery>,
    ) -> Result<HttpResponseOk<Vec<roles::Permission>>, HttpError>;

    /// Create a permission.
    ///
    /// System administrators only (`403 forbidden`): operators listed in the
    /// server configuration (`auth.system_admins` / `WORKSPACE_SYSTEM_ADMINS`)
    /// or flagged `is_system_admin` in the database. The name must be
    /// `resource:action` (lowercase letters and underscores, `*` allowed as
    /// either half; `400 invalid_permission_name`) and new (`409
    /// permission_exists`). `description` is optional. Answers `201`.
    #[endpoint { method = POST, path = "/api/roles/permission", tags = ["roles"] }]
    async fn roles_create_permission(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<roles::CreatePermissionRequest>,
    ) -> Result<HttpResponseCreated<roles::Permission>, HttpError>;

    /// Delete a permission.
    ///
    /// System administrators only (`403 forbidden`). Query: `permission_id`.
    /// The permission is removed from every role that had it. `*:*` (the
    /// owner role's grant) is protected: `409 permission_protected`. `404`
    /// for an unknown id.
    #[endpoint { method = DELETE, path = "/api/roles/permission", tags = ["roles"] }]
    async fn roles_delete_permission(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<roles::PermissionQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    // ---- Invitations area (/api/invitations) and signup_invite ----

    /// Invite an e-mail address to the organization.
    ///
    /// Needs the admin or owner role: an active membership whose role has
    /// `hierarchy_level` 80 or more (`403 forbidden` otherwise, also for
    /// callers who are not members of `org_id`). Answers `201` with the
    /// invitation, `status` `pending`, expiring 7 days after creation.
    ///
    /// The `token` (256 random bits, URL-safe base64) is shown only in this
    /// response and in the e-mail's link: the server keeps only its SHA-256
    /// hash. It is single use.
    ///
    /// Rules:
    /// - `email` is trimmed and lower-cased and must look like
    ///   `local@domain` (`400 invalid_email`); `message` at most 2000
    ///   characters (`400 invalid_message`).
    /// - `role_id` must be a role of this organization (`400 invalid_role`
    ///   otherwise, also for another organization's role). The owner role
    ///   can never be given by invitation (`403 owner_role_not_assignable`),
    ///   nor a role whose `hierarchy_level` is above the caller's own
    ///   (`403 role_level_too_high`).
    /// - `409 already_member` when the address belongs to an active or
    ///   suspended member; `409 invitation_pending` when an unexpired
    ///   invitation for it is pending in this organization. An expired one
    ///   is replaced (it then no longer shows in the users list).
    /// - An invitation may be made for an address that already has an
    ///   account; that person accepts through `POST /api/auth/signup_invite`
    ///   with their current password.
    ///
    /// The e-mail is sent after the invitation is committed. A failed
    /// delivery does not fail the request (it is logged;
    /// `POST /api/invitations/resend` retries).
    #[endpoint { method = POST, path = "/api/invitations/create", tags = ["invitations"] }]
    async fn invitations_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationOrgQuery>,
        body: JsonBody<invitations::InvitationCreateRequest>,
    ) -> Result<HttpResponseCreated<invitations::Invitation>, HttpError>;

    /// List the organization's invitations.
    ///
    /// Admin or owner role (level 80 or more; `403 forbidden`). Newest
    /// first, all states unless `status` filters (an unknown value is
    /// `400 invalid_request`). A `pending` invitation past its `expires_at`
    /// is reported, and filtered, as `expired`. Tokens are never listed.
    ///
    /// Paged by `limit` (1 to 500, default 100; `400 invalid_pagination`
    /// outside) and `offset` (items to skip, default 0).
    #[endpoint { method = GET, path = "/api/invitations/list", tags = ["invitations"] }]
    async fn invitations_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationListQuery>,
    ) -> Result<HttpResponseOk<Vec<invitations::InvitationListItem>>, HttpError>;

    /// Fetch one invitation.
    ///
    /// The invitation's organization is looked up first, then the caller is
    /// authorized there: admin or owner role (level 80 or more). An
    /// invitation of an organization the caller is not an active member of
    /// is `404 not_found`, exactly like a missing one; a member below level
    /// 80 gets `403 forbidden`.
    ///
    /// `token` is the token issued at creation (the one in the e-mail's
    /// link; `resend` keeps it). It is stored sealed with the server's
    /// secrets key (XChaCha20-Poly1305, bound to the invitation) and looked
    /// up by its SHA-256, never kept in clear. It is null only for
    /// invitations created before tokens were kept.
    #[endpoint { method = GET, path = "/api/invitations/get", tags = ["invitations"] }]
    async fn invitations_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationIdQuery>,
    ) -> Result<HttpResponseOk<invitations::Invitation>, HttpError>;

    /// Check an invitation token.
    ///
    /// Public (no `Authorization` header). Always `200`: for the token of a
    /// `pending`, unexpired invitation `valid` is true and `invitation`
    /// holds only `id`, `email`, `organization`, `role`, `invited_by`,
    /// `created_at` and `expires_at` (no message, no token). Unknown,
    /// malformed, accepted, revoked and expired tokens all answer
    /// `{"valid": false, "invitation": null}`, without saying which.
    #[endpoint { method = GET, path = "/api/invitations/validate", tags = ["invitations"] }]
    async fn invitations_validate(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationTokenQuery>,
    ) -> Result<HttpResponseOk<invitations::InvitationValidation>, HttpError>;

    /// Resend an invitation's e-mail, extending its lifetime.
    ///
    /// Authorization as for `get` (404 outside the caller's organizations,
    /// 403 below level 80). Only a `pending`, unexpired invitation can be
    /// resent (`409 invitation_not_pending` otherwise; an expired
    /// invitation is replaced by creating a new one). The expiry becomes 7
    /// days from now.
    ///
    /// The e-mail carries the same token as the first one (the token is
    /// issued at creation only), so every link sent for the invitation
    /// works until it is accepted, revoked or expired. Here a failed
    /// delivery fails the request (`503 mail_unavailable`; the invitation
    /// stays pending with the new expiry, and resending again is safe). An
    /// invitation created before tokens were kept cannot be resent
    /// (`409 invitation_token_unavailable`: revoke it and create a new one).
    #[endpoint { method = POST, path = "/api/invitations/resend", tags = ["invitations"] }]
    async fn invitations_resend(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationIdQuery>,
    ) -> Result<HttpResponseOk<invitations::InvitationResendResponse>, HttpError>;

    /// Revoke an invitation.
    ///
    /// Authorization as for `get` (404 outside the caller's organizations,
    /// 403 below level 80). Only a `pending`, unexpired invitation can be
    /// revoked (`409 invitation_not_pending` otherwise). Its token stops
    /// working at once; an `invited` membership made by
    /// `POST /api/users/invite` is removed with it. Revocation is final.
    #[endpoint { method = DELETE, path = "/api/invitations/revoke", tags = ["invitations"] }]
    async fn invitations_revoke(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationIdQuery>,
    ) -> Result<HttpResponseOk<invitations::InvitationRevokeResponse>, HttpError>;

    /// Invite several e-mail addresses at once.
    ///
    /// Admin or owner role (level 80 or more; `403 forbidden`). 1 to 100
    /// items (`400 invalid_request` otherwise); `message` (at most 2000
    /// characters, `400 invalid_message`) goes to every invitee.
    ///
    /// Each item is checked and created on its own, exactly as
    /// `POST /api/invitations/create` would (in its own transaction, so an
    /// item is either wholly created or not at all), and reported in
    /// request order: `status` `pending` with its `id`, or `failed` with
    /// the `error_code` and reason `create` would have given (e.g. a second
    /// item for the same address fails with `invitation_pending`). The
    /// answer is `200` even when items failed; `success` is true only when
    /// none did. Tokens are sent by e-mail only.
    #[endpoint { method = POST, path = "/api/invitations/bulk_create", tags = ["invitations"] }]
    async fn invitations_bulk_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<invitations::InvitationOrgQuery>,
        body: JsonBody<invitations::InvitationBulkCreateRequest>,
    ) -> Result<HttpResponseOk<invitations::InvitationBulkCreateResponse>, HttpError>;

    /// Create an account by accepting an invitation.
    ///
    /// Public. Answers `201` with the account and an access token (as from
    /// `POST /api/auth/login`). The e-mail address is the invitation's.
    ///
    /// In one transaction, with the invitation row locked: creates the user
    /// (or, for a user pre-created by `POST /api/users/invite`, sets their
    /// names and password), gives them a personal organization like
    /// `signup` does, makes their membership in the inviting organization
    /// `active` with the invited role, and marks the invitation `accepted`.
    /// The token therefore works once, also under concurrent use.
    ///
    /// Errors, in the order checked: names 1 to 100 characters
    /// (`400 invalid_name`); an unknown token `400 invalid_invitation`; an
    /// accepted, revoked or expired invitation `410` with
    /// `invitation_used`, `invitation_revoked` or `invitation_expired`; the
    /// password policy of `signup` (`422 weak_password`).
    ///
    /// When the invited address already has an account with a password, the
    /// invitation is accepted by that account instead: `password` must be
    /// its current password (checked like `login`, with the same failed-login
    /// limit: `401 invalid_credentials`, `429 too_many_login_attempts`), the
    /// names in the request are ignored, no personal organization is
    /// created, and the response carries the account's own names.
    #[endpoint { method = POST, path = "/api/auth/signup_invite", tags = ["auth"] }]
    async fn auth_signup_invite(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<invitations::SignupInviteRequest>,
    ) -> Result<HttpResponseCreated<invitations::SignupInviteResponse>, HttpError>;

    // ---- Conversations area (/api/conversation) and models ----

    /// List the language models an organization can use.
    ///
    /// An addition to the spec, so that clients can find the `model_id` to
    /// pass to `create_session`. Any active member of the organization may
    /// call it (no further permission). Every model configured on the
    /// server is available to every organization; with no provider
    /// configured the list holds only `offline-dev-model` (provider
    /// `offline`), a built-in development model that answers without a
    /// network. Model ids are stable across restarts (models are keyed by
    /// name). Sorted by name.
    #[endpoint { method = GET, path = "/api/models/list", tags = ["conversations"] }]
    async fn models_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<conversations::Model>>, HttpError>;

    /// Create a conversation.
    ///
    /// Permission `conversation:write`. `title` must be 1 to 200 characters
    /// after trimming (`400 invalid_title`); `is_archived` defaults to
    /// false. A conversation belongs to the organization: every member with
    /// `conversation:read` sees it.
    #[endpoint { method = POST, path = "/api/conversation/create", tags = ["conversations"] }]
    async fn conversation_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgQuery>,
        body: JsonBody<conversations::ConversationCreate>,
    ) -> Result<HttpResponseCreated<conversations::Conversation>, HttpError>;

    /// Start a model session in a conversation.
    ///
    /// Permission `conversation:write`. The session starts `active`. A
    /// conversation may hold several sessions, each on its own model (two
    /// sessions may also use the same model). `404 not_found` when the
    /// conversation is not in the organization, or when `model_id` is not a
    /// model offered by this server (see `models_list`).
    #[endpoint { method = POST, path = "/api/conversation/create_session", tags = ["conversations"] }]
    async fn conversation_create_session(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgQuery>,
        body: JsonBody<conversations::ConversationSessionCreate>,
    ) -> Result<HttpResponseCreated<conversations::ConversationSession>, HttpError>;

    /// Send a message in a session and stream the model's answer.
    ///
    /// Permission `conversation:write`. The answer is a Server-Sent Events
    /// stream (`text/event-stream`): lines `data: <json>`, each followed by
    /// a blank line. Events, in order: `{"type":"start","message_id":ID}`
    /// (ID is the assistant message's id), any number of
    /// `{"type":"content","content":TEXT}` (pieces of the answer, in
    /// order), then `{"type":"end"}`.
    ///
    /// Before anything is streamed, errors are ordinary JSON errors: `400
    /// invalid_message` for a blank message or one over 100,000 characters,
    /// `404 not_found` when the session is not in the organization, `400
    /// model_unavailable` when the session's model is no longer configured.
    ///
    /// The user's message is stored (in the session's history) before the
    /// model is called, and the model receives the session's whole history
    /// (earlier messages of this session only, oldest first, including
    /// partial answers), then the new message. The assistant message is
    /// stored with its full text before `end` is sent, so a client that
    /// saw `end` will find it in `messages`.
    ///
    /// Provider failures: connection errors, 429 and 5xx answers are retried
    /// with backoff while nothing of the answer has arrived yet. If the
    /// model still fails, or fails mid-answer (dropped connection, malformed
    /// data, no data for too long), the stream ends with
    /// `{"type":"error","error_code":CODE,"message":TEXT}` and no `end` (an
    /// addition to the spec). Codes: `provider_unavailable`,
    /// `provider_rate_limited`, `provider_rejected` (the provider refused
    /// the request, e.g. a bad key), `provider_stream_interrupted`,
    /// `provider_timeout`, `internal_error`. The text received until then is
    /// kept as the assistant message with `status` `failed`; if the client
    /// disconnects the text is kept with `status` `cancelled` and the
    /// provider request is abandoned.
    ///
    /// Several answers may stream in one session at once; each sees the
    /// history as stored when it started.
    ///
    /// The assistant message is stored with the user's message, empty and
    /// `streaming`, and its text is saved about once a second while it
    /// streams. An answer that reached the client is stored even if the
    /// database is unavailable when it ends: the write is retried until
    /// the database is back. When that takes more than 30 seconds, the
    /// stream ends with an `error` event `database_unavailable` instead of
    /// `end` (the answer is still stored later).
    ///
    /// Every message counts towards the organization's `daily_chat_limit`
    /// (see `GET /api/org/features`; per UTC day, shared by all server
    /// instances). At the limit the request is refused before anything is
    /// stored: `429 daily_chat_limit_exceeded` with `Retry-After` (seconds
    /// until the next UTC day).
    #[endpoint { method = POST, path = "/api/conversation/stream_chat", tags = ["conversations"] }]
    async fn conversation_stream_chat(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgQuery>,
        body: JsonBody<conversations::StreamChatRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// List the organization's conversations.
    ///
    /// Permission `conversation:read`. All conversations of the
    /// organization, archived ones included, most recently updated first
    /// (ties broken by id, so the order is stable).
    ///
    /// Paged by `limit` (1 to 500, default 100; `400 invalid_pagination`
    /// outside) and `offset` (items to skip, default 0).
    #[endpoint { method = GET, path = "/api/conversation/list", tags = ["conversations"] }]
    async fn conversation_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgPageQuery>,
    ) -> Result<HttpResponseOk<Vec<conversations::Conversation>>, HttpError>;

    /// Fetch a conversation with its sessions.
    ///
    /// Permission `conversation:read`. Sessions are oldest first, each with
    /// its `model` (`{id, name, provider}`) instead of `model_id` and
    /// without `updated_at`. `404 not_found` when the conversation is not in
    /// the organization.
    #[endpoint { method = GET, path = "/api/conversation/get_with_sessions", tags = ["conversations"] }]
    async fn conversation_get_with_sessions(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::ConversationQuery>,
    ) -> Result<HttpResponseOk<conversations::ConversationWithSessions>, HttpError>;

    /// List a conversation's messages, a page at a time.
    ///
    /// Permission `conversation:read`. Messages of all the conversation's
    /// sessions, oldest first in the order they were stored (stable across
    /// pages). `limit` is 1 to 100 (default 20), `offset` the number of
    /// messages to skip (default 0); out-of-range values are `400
    /// invalid_pagination`. `total` counts all messages of the conversation.
    /// Each message carries `status` (an addition): `complete`, or
    /// `cancelled`/`failed` for a partial answer. `404 not_found` when the
    /// conversation is not in the organization.
    #[endpoint { method = GET, path = "/api/conversation/messages", tags = ["conversations"] }]
    async fn conversation_messages(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::MessagesQuery>,
    ) -> Result<HttpResponseOk<conversations::ConversationMessagesPage>, HttpError>;
}

/// Builds the published OpenAPI document from the trait alone, then patches
/// what dropshot cannot express: the bearer security scheme (with public
/// operations marked), and `text/event-stream` success responses plus the
/// error responses of streaming operations.
pub fn openapi_document() -> openapiv3::OpenAPI {
    let description =
        workspace_api_mod::stub_api_description().expect("the API trait describes a valid API");
    let mut definition = description.openapi(API_TITLE, API_VERSION);
    definition
        .description(
            "Multi-tenant backend for AI chat applications: accounts, organizations, \
             roles, conversations with language models, tools, knowledge bases, agents \
             and MCP connections. Every operation except those marked public requires \
             `Authorization: Bearer <access_token>`. Errors have the body \
             `{request_id, error_code, message}` with a stable `error_code`.",
        )
        .license_name("MPL-2.0");
    let json = definition.json().expect("the OpenAPI document serialises");
    let mut doc: openapiv3::OpenAPI =
        serde_json::from_value(json).expect("dropshot emits a valid OpenAPI document");
    patch_document(&mut doc);
    doc
}

fn patch_document(doc: &mut openapiv3::OpenAPI) {
    use openapiv3::{
        MediaType, ReferenceOr, Response, Schema, SchemaKind, SecurityRequirement, SecurityScheme,
        StatusCode, Type,
    };

    let components = doc.components.get_or_insert_with(Default::default);
    components.security_schemes.insert(
        "bearer".to_string(),
        ReferenceOr::Item(SecurityScheme::HTTP {
            scheme: "bearer".to_string(),
            bearer_format: Some("JWT".to_string()),
            description: Some("The `access_token` returned by `POST /api/auth/login`.".into()),
            extensions: Default::default(),
        }),
    );
    let bearer: SecurityRequirement = [("bearer".to_string(), Vec::new())].into_iter().collect();
    doc.security = Some(vec![bearer]);

    let error_response = |description: &str| {
        let mut response = Response {
            description: description.to_string(),
            ..Default::default()
        };
        response.content.insert(
            "application/json".to_string(),
            MediaType {
                schema: Some(ReferenceOr::Reference {
                    reference: "#/components/schemas/Error".to_string(),
                }),
                ..Default::default()
            },
        );
        ReferenceOr::Item(response)
    };

    for (_, path_item) in doc.paths.paths.iter_mut() {
        let ReferenceOr::Item(item) = path_item else {
            continue;
        };
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for op in ops.into_iter().flatten() {
            let Some(id) = op.operation_id.clone() else {
                continue;
            };
            if PUBLIC_OPERATIONS.contains(&id.as_str()) {
                op.security = Some(Vec::new());
            }
            if STREAMING_OPERATIONS.contains(&id.as_str()) {
                let mut response = Response {
                    description: "Server-Sent Events: lines of the form `data: <json>`".to_string(),
                    ..Default::default()
                };
                response.content.insert(
                    "text/event-stream".to_string(),
                    MediaType {
                        schema: Some(ReferenceOr::Item(Schema {
                            schema_data: Default::default(),
                            schema_kind: SchemaKind::Type(Type::String(Default::default())),
                        })),
                        ..Default::default()
                    },
                );
                op.responses.default = None;
                op.responses
                    .responses
                    .insert(StatusCode::Code(200), ReferenceOr::Item(response));
            }
            for range in [4u16, 5] {
                op.responses
                    .responses
                    .entry(StatusCode::Range(range))
                    .or_insert_with(|| error_response(&format!("{range}XX error")));
            }
        }
    }
}
