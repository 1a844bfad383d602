//! The Workspace HTTP API.
//!
//! This crate holds only the dropshot API trait ([`WorkspaceApi`]) and the
//! types of its requests and responses, so that the OpenAPI document
//! (`openapi/workspace.json`) can be generated without compiling the server.
//! See [`openapi_document`].

pub mod agents;
pub mod audit;
pub mod auth;
pub mod chat;
pub mod chat_folders;
pub mod chat_search;
pub mod chat_shares;
pub mod chat_transfer;
pub mod conversations;
pub mod deployments;
mod document;
pub mod extract;
pub mod feedback;
pub mod files;
pub mod invitations;
pub mod kb;
pub mod mcp;
pub mod operations;
pub mod orgs;
pub mod roles;
pub mod schema;
pub mod scim;
pub mod service_accounts;
pub mod sso;
pub mod system;
pub mod time;
pub mod tokens;
pub mod tools;
pub mod usage;
pub mod users;
pub mod webhooks;

pub use operations::{
    CLI_HANDWRITTEN_OPERATIONS, CLIENT_HANDWRITTEN_OPERATIONS, CLIENT_SKIPPED_OPERATIONS,
    DEPLOYMENT_KEY_OPERATIONS, MULTIPART_OPERATIONS, OPERATION_ERRORS, PUBLIC_OPERATIONS,
    SCIM_OPERATIONS, STREAMING_OPERATIONS, error_statuses,
};

use dropshot::{
    HttpError, HttpResponseAccepted, HttpResponseCreated, HttpResponseOk, RequestContext,
};

use crate::extract::{JsonBody, QueryParams};

/// Title of the OpenAPI document.
pub const API_TITLE: &str = "Workspace API";
/// Version of the OpenAPI document (the interface, not the server build).
pub const API_VERSION: semver::Version = semver::Version::new(0, 10, 0);

/// The Workspace API: a multi-tenant backend for AI chat applications.
#[dropshot::api_description {
    tag_config = {
        allow_other_tags = false,
        policy = dropshot::EndpointTagPolicy::ExactlyOne,
        tags = {
            "system" = { description = "Liveness and readiness of the service itself." },
            "auth" = { description = "Registration, login, sessions and passwords." },
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
            "audit" = { description = "The audit log." },
            "scim" = { description = "SCIM 2.0 provisioning by an organization's identity provider (RFC 7643/7644), authenticated by its SCIM token." },
        }
    }
}]
pub trait WorkspaceApi {
    type Context;

    /// The root: a redirect (`302`) to `/docs`, so the URL the banner shows
    /// opens the API reference in a browser. Public; unpublished.
    #[endpoint { method = GET, path = "/", unpublished = true }]
    async fn root_redirect(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// The API reference, rendered (Redoc, served from this server: no CDN,
    /// no telemetry, no remote logo: the page asks nothing of any other
    /// host). Public; not part of the document it renders.
    #[endpoint { method = GET, path = "/docs", unpublished = true }]
    async fn docs_page(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// The script of `/docs` (the `redoc` npm package's standalone bundle).
    #[endpoint { method = GET, path = "/docs/redoc.standalone.js", unpublished = true }]
    async fn docs_script(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// The page of an invitation e-mail's link (`/invite/accept?token=…`,
    /// with the default `mail.public_url`): a form that accepts the
    /// invitation through `POST /api/auth/signup_invite`
    /// (`examples/web/invite/`). Public; unpublished.
    #[endpoint { method = GET, path = "/invite/accept", unpublished = true }]
    async fn invite_accept_page(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// The script of `/invite/accept`.
    #[endpoint { method = GET, path = "/invite/accept.js", unpublished = true }]
    async fn invite_accept_script(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// This server's OpenAPI document (the one checked in as
    /// `openapi/workspace.json`). Public.
    #[endpoint { method = GET, path = "/openapi.json", unpublished = true }]
    async fn openapi_json(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

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
    /// `503` otherwise: `database_unavailable` when it does not, and
    /// `server_busy` while the instance drains at shutdown (it still serves
    /// requests for `http.drain_secs`, each answered with `Connection:
    /// close`, so that a load balancer takes it out of rotation first).
    /// Public.
    #[endpoint { method = GET, path = "/readyz", tags = ["system"] }]
    async fn readyz(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<system::HealthStatus>, HttpError>;

    /// Read the e-mail outbox (newest first).
    ///
    /// System administrators only (`auth.system_admins` /
    /// `WORKSPACE_SYSTEM_ADMINS`, `403 forbidden` otherwise). With no SMTP
    /// server configured, e-mails (invitations, user invites) are kept in
    /// the outbox instead of being sent; this reads them, e.g. to follow an
    /// invitation link on a development machine. `limit` 1 to 100 (default
    /// 20; `400 invalid_pagination` otherwise). Bodies carry invitation
    /// links: treat the answer as a secret.
    #[endpoint { method = GET, path = "/api/system/outbox", tags = ["system"] }]
    async fn system_outbox(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<system::OutboxQuery>,
    ) -> Result<HttpResponseOk<system::OutboxPage>, HttpError>;

    /// List the model deployments and their health.
    ///
    /// System administrators only (`auth.system_admins` /
    /// `WORKSPACE_SYSTEM_ADMINS`, `403 forbidden` otherwise), with a login
    /// (a personal access token gets `403 token_not_allowed`). An addition
    /// (0.10.0): every model offered, its fallbacks, and each of its
    /// deployments (upstreams: keys, regions, providers) with its weight,
    /// limits and state as every instance shares it: `healthy`,
    /// `cooling_down` (after repeated failures, a `429`, a `529` or refused
    /// connections; one request probes it when the cooldown ends) or
    /// `disabled` (its provider refused its key with `401`/`403`, also
    /// recorded in the audit log as `model_deployment.disable`; nothing is
    /// sent to it until its configuration changes). Neither keys nor URLs
    /// are shown.
    #[endpoint { method = GET, path = "/api/system/model-deployments", tags = ["system"] }]
    async fn system_model_deployments(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<system::ModelDeploymentsList>, HttpError>;

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
    /// limited per client address (behind a configured trusted proxy, the
    /// address it forwards in `X-Forwarded-For`) and in total (`429
    /// rate_limited`, shared with `signup_invite`); a hashing backlog is
    /// `503 server_busy`.
    #[endpoint { method = POST, path = "/api/auth/signup", tags = ["auth"] }]
    async fn auth_signup(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::SignupRequest>,
    ) -> Result<HttpResponseCreated<auth::SignupResponse>, HttpError>;

    /// Log in with e-mail and password.
    ///
    /// Public. Starts a session and returns its JWT access token (HS256)
    /// and refresh token. Claims: `sub` (user id), `sid` (the session id),
    /// `iat`, `nbf`, `exp` (issue time plus the configured lifetime, 15
    /// minutes by default: `auth.token_lifetime_secs`), `iss`
    /// (`workspace`), `aud` (`workspace-api`) and `jti` (a unique token id).
    /// Additions to the spec's response: `expires_in`, `refresh_token`,
    /// `refresh_expires_in` (30 days by default:
    /// `auth.refresh_token_lifetime_secs`) and `session_id`. When the access
    /// token expires (`401 token_expired`), `POST /api/auth/refresh` with the
    /// refresh token gets the next pair; `POST /api/auth/logout` ends the
    /// session. The session records the client address and `User-Agent`
    /// (see `GET /api/auth/sessions`).
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
    /// Overload: logins are also limited per client address (behind a
    /// configured trusted proxy, the address it forwards in
    /// `X-Forwarded-For`) and in total (`429 rate_limited` with
    /// `Retry-After`), and password checks run a
    /// few at a time: when too many wait, `503 server_busy` with
    /// `Retry-After`. An e-mail over 254 characters is `400 invalid_email`,
    /// a password over 128 characters `400 invalid_request`.
    #[endpoint { method = POST, path = "/api/auth/login", tags = ["auth"] }]
    async fn auth_login(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::LoginRequest>,
    ) -> Result<HttpResponseOk<auth::LoginResponse>, HttpError>;

    /// Create a personal access token.
    ///
    /// An addition to the spec: a bearer token for automation (CI, scripts,
    /// `WORKSPACE_TOKEN` in the CLI, `token` in the TypeScript SDK) that
    /// acts for the caller within its `scopes`. The secret is in the answer
    /// only; it is stored as a SHA-256 hash. It starts with `wsp_` (42
    /// characters with a checksum), so secret scanners can match it.
    ///
    /// At every request the token's scopes are intersected with what its
    /// user's role grants now, in the same statement as the authorization:
    /// a token never does more than its user, a demoted or removed user's
    /// token loses that access at once, a revoked or expired token is `401
    /// invalid_token`. An operation outside the scopes is `403
    /// insufficient_scope`. Whatever the scopes, a token cannot create or
    /// revoke tokens, manage sessions (log out, list or revoke them),
    /// change the password, leave an organization, change roles (creating,
    /// updating or deleting a role, changing a member's role, transferring
    /// ownership) nor administer the
    /// system (the permission catalog, feature gates, the outbox): `403
    /// token_not_allowed`; those need a login. Listing tools across the
    /// caller's organizations needs the `tool:read` scope. Invitations need the `users:write` scope.
    ///
    /// Scopes must be permission names of the catalog or wildcards
    /// (`400 invalid_scope`); a user holds at most 50 live tokens (`409
    /// too_many_tokens`).
    #[endpoint { method = POST, path = "/api/auth/tokens/create", tags = ["auth"] }]
    async fn auth_tokens_create(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<tokens::TokenCreate>,
    ) -> Result<HttpResponseCreated<tokens::TokenCreated>, HttpError>;

    /// List the caller's personal access tokens.
    ///
    /// An addition to the spec: the live (unrevoked, unexpired) tokens,
    /// newest first, without their secrets. Needs a login, not a token
    /// (`403 token_not_allowed`).
    #[endpoint { method = GET, path = "/api/auth/tokens/list", tags = ["auth"] }]
    async fn auth_tokens_list(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<tokens::TokenSummary>>, HttpError>;

    /// Revoke one of the caller's personal access tokens.
    ///
    /// An addition to the spec: the token is refused by every instance from
    /// the next request on. Another user's or an unknown token is `404
    /// not_found`. Needs a login, not a token (`403 token_not_allowed`).
    #[endpoint { method = DELETE, path = "/api/auth/tokens/revoke", tags = ["auth"] }]
    async fn auth_tokens_revoke(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tokens::TokenQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Exchange a refresh token for a new access token and refresh token.
    ///
    /// Public: the refresh token is the credential. Answers like `login`,
    /// with the same session: a new access token and a new refresh token
    /// (rotation). The presented refresh token is used up; the session's
    /// `last_used_at`, address and `User-Agent` are updated and it lasts
    /// `auth.refresh_token_lifetime_secs` from now.
    ///
    /// Reuse detection (RFC 9700 §4.14): presenting a refresh token that was
    /// already exchanged revokes the whole session (`401
    /// refresh_token_reused`): either the client or someone who copied the
    /// token used it before, and the server cannot tell which, so every
    /// access and refresh token of the session stops working. Two refreshes
    /// with one token at once are decided under a row lock: exactly one gets
    /// new tokens, the other is such a reuse. A client must therefore
    /// refresh one request at a time (the SDK and the CLI do).
    ///
    /// Errors: an unknown, malformed or expired refresh token `401
    /// invalid_refresh_token`; one of a revoked or ended session (used or
    /// not), or of a user who can no longer log in, `401 session_revoked`.
    #[endpoint { method = POST, path = "/api/auth/refresh", tags = ["auth"] }]
    async fn auth_refresh(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::RefreshRequest>,
    ) -> Result<HttpResponseOk<auth::LoginResponse>, HttpError>;

    /// Log out: revoke the session of the request's access token.
    ///
    /// Any authenticated user. The session's access tokens are refused on
    /// every instance from the next request on (`401 session_revoked`; the
    /// check is part of each request's authorization statement), and its
    /// refresh token no longer works. Revoking an already revoked session
    /// is not possible (its token is refused first). A token issued before
    /// sessions existed (no `sid` claim) has nothing to revoke: `200` with a
    /// message saying so; it stops working when it expires.
    #[endpoint { method = POST, path = "/api/auth/logout", tags = ["auth"] }]
    async fn auth_logout(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// List the caller's live sessions.
    ///
    /// Any authenticated user: their own sessions that are neither revoked
    /// nor expired, newest first, each with its start, last login or
    /// refresh (`last_used_at`), expiry, client address and `User-Agent`;
    /// `current` marks the session of the request's access token. At most
    /// 1000 (the newest).
    #[endpoint { method = GET, path = "/api/auth/sessions", tags = ["auth"] }]
    async fn auth_sessions(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<Vec<auth::Session>>, HttpError>;

    /// Revoke one of the caller's sessions.
    ///
    /// Any authenticated user, for their own sessions (another user's, an
    /// unknown, revoked or expired one: `404 not_found`). Its access tokens
    /// are refused from the next request on, on every instance, and its
    /// refresh token no longer works. The caller's current session may be
    /// named too (that is a logout).
    #[endpoint { method = DELETE, path = "/api/auth/revoke_session", tags = ["auth"] }]
    async fn auth_revoke_session(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<auth::SessionQuery>,
    ) -> Result<HttpResponseOk<auth::SessionsRevoked>, HttpError>;

    /// Revoke every session of the caller but the current one.
    ///
    /// Any authenticated user ("log out everywhere else"). Answers how many
    /// sessions it revoked. With a token issued before sessions existed
    /// (no `sid` claim) every session is revoked.
    #[endpoint { method = POST, path = "/api/auth/revoke_other_sessions", tags = ["auth"] }]
    async fn auth_revoke_other_sessions(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<HttpResponseOk<auth::SessionsRevoked>, HttpError>;

    /// Ask for a password-reset e-mail.
    ///
    /// Public. Always answers `202` with the same body, whether or not an
    /// account has the address, so the answer reveals nothing (nor does its
    /// timing: both cases run the same statements, and the e-mail is handed
    /// to the mailer after the answer). When an account with a password has
    /// the address, it is sent an e-mail (through the configured SMTP server
    /// or the outbox) with a link `{mail.public_url}/reset-password?token=…`
    /// (by default this server's own small page, which calls
    /// `reset_password`). The token is single-use, stored only as its
    /// SHA-256, and expires after an hour (`auth.password_reset_lifetime_secs`);
    /// asking again does not cancel earlier links (each still works once,
    /// until a reset succeeds, which ends them all).
    ///
    /// Limited per client address (per `rate_limits.window_secs`) and per
    /// e-mail address (per hour), counted in the database so the limits hold
    /// across instances: `429 rate_limited` with `Retry-After`, also for an
    /// address with no account. A malformed address is `202` too (nothing is
    /// sent), except one over 254 characters (`400 invalid_email`).
    #[endpoint { method = POST, path = "/api/auth/forgot_password", tags = ["auth"] }]
    async fn auth_forgot_password(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::ForgotPasswordRequest>,
    ) -> Result<HttpResponseAccepted<auth::ForgotPasswordResponse>, HttpError>;

    /// Set a new password with the token of a reset e-mail.
    ///
    /// Public: the token is the credential. In one transaction: the token is
    /// used up (it works once, also under concurrent use), the password is
    /// set, every session of the user is revoked (their access tokens are
    /// refused from the next request on) and every other reset token of the
    /// user is ended. Failed logins of the address are cleared. The caller
    /// then logs in with the new password.
    ///
    /// Errors, in the order checked: too many attempts from the client
    /// address (`429 rate_limited`, a bound on guessing); an unknown or
    /// malformed token `400 invalid_reset_token`; a used one `410
    /// reset_token_used`, an expired one `410 reset_token_expired`; the
    /// password policy of `signup` (`422 weak_password`); a hashing backlog
    /// `503 server_busy`.
    #[endpoint { method = POST, path = "/api/auth/reset_password", tags = ["auth"] }]
    async fn auth_reset_password(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::ResetPasswordRequest>,
    ) -> Result<HttpResponseOk<auth::SessionsRevoked>, HttpError>;

    /// Change the caller's password.
    ///
    /// Any authenticated user, who proves the current password (checked
    /// like `login`, with the same failed-login limit: `401
    /// invalid_credentials`, `429 too_many_login_attempts`). The new one
    /// follows the password policy of `signup` (`422 weak_password`). In one
    /// transaction the password is set and every other session of the user
    /// is revoked; the caller's own session stays (with a token issued
    /// before sessions existed, every session is revoked and that token is
    /// refused from now on too). Open reset links are ended.
    #[endpoint { method = POST, path = "/api/auth/change_password", tags = ["auth"] }]
    async fn auth_change_password(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<auth::ChangePasswordRequest>,
    ) -> Result<HttpResponseOk<auth::SessionsRevoked>, HttpError>;

    /// The page of a password-reset e-mail's link
    /// (`/reset-password?token=…`): asks for the new password and calls
    /// `POST /api/auth/reset_password`. Public; unpublished.
    #[endpoint { method = GET, path = "/reset-password", unpublished = true }]
    async fn reset_password_page(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// The script of `/reset-password`.
    #[endpoint { method = GET, path = "/reset-password.js", unpublished = true }]
    async fn reset_password_script(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

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
    /// Any authenticated person: a login, or a personal access token with
    /// the `organization:write` scope (`*:write` covers it; any other
    /// token is `403 insufficient_scope`). A service account's token is
    /// `403 service_account_not_allowed` whatever its scopes: a service
    /// account belongs to its one organization. In one transaction: the organization (with a
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

    /// Rename an organization.
    ///
    /// An addition to the spec. Requires `organization:write` (owners and
    /// admins among the system roles). The name follows the rules of
    /// `create_org`: trimmed, 1 to 100 characters, no control characters
    /// (`400 invalid_name`); and as there, the caller may not belong to
    /// two organizations with the same name, compared case-insensitively
    /// (`409 org_name_taken`; renaming to the current name in another case
    /// is allowed). The slug is kept, so links that use it stay valid; a
    /// personal organization may be renamed too. Answers the organization
    /// with the caller's `user_role`.
    #[endpoint { method = PUT, path = "/api/org/update", tags = ["orgs"] }]
    async fn org_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<orgs::UpdateOrgRequest>,
    ) -> Result<HttpResponseOk<orgs::Organization>, HttpError>;

    /// Leave an organization.
    ///
    /// An addition to the spec. Any active member, for themself: the
    /// membership becomes `deleted` (the row is kept, as for `DELETE
    /// /api/users/remove`), access ends at once on every instance,
    /// answers the caller is streaming in the organization end with an
    /// `error` event `membership_revoked`, and its WebSocket closes. What
    /// the caller created there (chats, conversations, knowledge bases,
    /// agents) stays with the organization; their account and other
    /// organizations are untouched. They can be added or invited again.
    ///
    /// The organization's last owner cannot leave (`409 last_owner`:
    /// transfer the ownership first), and nobody leaves their own personal
    /// organization (`409 personal_organization`).
    #[endpoint { method = POST, path = "/api/org/leave", tags = ["orgs"] }]
    async fn org_leave(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Transfer the ownership of an organization.
    ///
    /// An addition to the spec. Requires `users:write` and the owner role
    /// (`403 forbidden` otherwise). In one transaction the target, an
    /// `active` member, receives the owner role and the caller the admin
    /// system role: an organization keeps exactly one owner, and the
    /// previous owner stays to help (they may then leave). This is the
    /// only way an owner's role changes (`PUT /api/users/update` never
    /// touches owners).
    ///
    /// The target must be a member (`404 not_found`), `active` (`400
    /// member_not_active`), not the caller (`400 cannot_target_self`) and
    /// not already an owner (`400 role_already_assigned`). A personal
    /// organization belongs to the account that signed up and cannot be
    /// transferred (`409 personal_organization`). Lifecycle changes of one
    /// organization run one at a time, so two transfers at once cannot
    /// both succeed (the second finds the caller no longer owner: `403
    /// forbidden`). Answers the organization with the caller's new
    /// `user_role` (admin).
    #[endpoint { method = POST, path = "/api/org/transfer_ownership", tags = ["orgs"] }]
    async fn org_transfer_ownership(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<orgs::TransferOwnershipRequest>,
    ) -> Result<HttpResponseOk<orgs::Organization>, HttpError>;

    /// Create a service account with its first token.
    ///
    /// An addition to the spec: a principal for automation (CI, a
    /// provisioning script) that belongs to this organization only, holds
    /// `role_id` there like a member (any role but the owner role, at most
    /// the caller's level: `403 owner_role_not_assignable`,
    /// `role_level_too_high`; `400 invalid_role`) and acts through personal
    /// access tokens (`wsp_…`, as `POST /api/auth/tokens/create` makes
    /// them): at every request the token's scopes are intersected with what
    /// the account's role grants now. It cannot log in, make tokens, change
    /// roles or act in another organization. It is listed by
    /// `users/list` like a member and can be suspended, reactivated or
    /// removed there; it goes with its organization.
    ///
    /// `users:write`, with a login (`403 token_not_allowed` for a token).
    /// At most 100 per organization (`409 too_many_service_accounts`);
    /// scopes as for personal access tokens (`400 invalid_scope`).
    #[endpoint { method = POST, path = "/api/org/service_accounts/create", tags = ["orgs"] }]
    async fn org_service_accounts_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<service_accounts::ServiceAccountCreate>,
    ) -> Result<HttpResponseCreated<service_accounts::ServiceAccountCreated>, HttpError>;

    /// List the organization's service accounts.
    ///
    /// An addition to the spec: every service account of the organization
    /// (active and suspended), oldest first, with its role and live tokens
    /// (never their secrets). `users:read`.
    #[endpoint { method = GET, path = "/api/org/service_accounts/list", tags = ["orgs"] }]
    async fn org_service_accounts_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<service_accounts::ServiceAccount>>, HttpError>;

    /// Give a service account a new token and revoke its others.
    ///
    /// An addition to the spec: in one transaction a new token is made
    /// (with the given scopes, else those of the account's newest live
    /// token) and every other token of the account is revoked: every
    /// instance refuses them from the next request on. `users:write` with a
    /// login, on an account whose role is at most the caller's level (`403
    /// role_level_too_high`); another organization's or an unknown account
    /// is `404 not_found`.
    #[endpoint { method = POST, path = "/api/org/service_accounts/rotate", tags = ["orgs"] }]
    async fn org_service_accounts_rotate(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<service_accounts::ServiceAccountQuery>,
        body: JsonBody<service_accounts::ServiceAccountRotate>,
    ) -> Result<HttpResponseCreated<tokens::TokenCreated>, HttpError>;

    /// Delete a service account.
    ///
    /// An addition to the spec: the account, its membership and its tokens
    /// go at once (its tokens are refused from the next request on); what
    /// it created stays with the organization. `users:write` with a login,
    /// on an account whose role is at most the caller's level (`403
    /// role_level_too_high`); another organization's or an unknown account
    /// is `404 not_found`.
    #[endpoint { method = DELETE, path = "/api/org/service_accounts/delete", tags = ["orgs"] }]
    async fn org_service_accounts_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<service_accounts::ServiceAccountQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    // ---- Users area (/api/users), beyond `users_me` ----

    /// Change a member's role.
    ///
    /// Requires `users:write` and the owner role in the organization: any
    /// other caller gets `403 forbidden` (rule 1). Assigning the owner role
    /// is refused with `403 owner_role_not_assignable` (rule 2), and so is
    /// changing the role of an owner (ownership transfer is not part of this
    /// operation: `POST /api/org/transfer_ownership` is). The target must
    /// be a member: `404 not_found` if they have no membership, `400
    /// member_not_active` if it is not `active` (e.g. `invited`,
    /// `suspended` or removed, rule 3), `400 role_already_assigned` if they already have
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
    /// The list mixes members (`status` `active`; with
    /// `include_suspended=true` also `suspended`, for members suspended by
    /// `POST /api/users/suspend`, an addition to the spec; `id` set,
    /// `invite_id` null) with open invitations of the organization, from
    /// both `POST /api/invitations/create` and `POST /api/users/invite`
    /// (`status` `pending` or `expired`, `id` null, `invite_id` and
    /// `invited_at` set). Accepted and revoked invitations, invitations
    /// replaced by a newer one, and invitations of e-mail addresses that
    /// are already members (active or suspended) are left out. Invited
    /// memberships appear only through their invitation row; removed
    /// members (and those who left) are not listed. Suspended members are
    /// listed only when asked for: clients of the earlier contract, which
    /// knew no `suspended` value, never receive one.
    ///
    /// Order: active users first (most recently joined first), then
    /// suspended members (likewise), then invitations (newest created
    /// first); ties by e-mail. `total` counts every row listed, over all
    /// pages.
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

    /// Suspend a member.
    ///
    /// An addition to the spec (its `suspended` membership status).
    /// Requires `users:write`, and the caller's role must rank above the
    /// member's (`hierarchy_level` strictly greater; `403
    /// member_level_too_high` otherwise); only owners act on owners. The
    /// membership goes from `active` to `suspended` (`400
    /// member_not_active` for any other status, `404 not_found` without a
    /// membership or for a removed one). Nobody suspends themself (`400
    /// cannot_target_self`), and the last owner is never suspended (`409
    /// last_owner`).
    ///
    /// Access ends at once, on every instance: every request of the member
    /// in this organization is `403 forbidden`, answers they are streaming
    /// there end with an `error` event `membership_revoked` (the text so
    /// far is kept, the answer is stored `failed`), and their chat
    /// WebSocket of this organization closes (1008). They keep their
    /// account and other organizations; what they created stays with the
    /// organization. `users/me` and `org/list` leave the organization out;
    /// `users/list?include_suspended=true` shows them with `status`
    /// `suspended`. Answers the member's row as that list shows it.
    #[endpoint { method = POST, path = "/api/users/suspend", tags = ["users"] }]
    async fn users_suspend(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<users::MemberQuery>,
    ) -> Result<HttpResponseOk<users::UserListItem>, HttpError>;

    /// Reactivate a suspended member.
    ///
    /// An addition to the spec. Requires `users:write` and a role ranking
    /// above the member's (`403 member_level_too_high`; only owners act on
    /// owners). The membership goes from `suspended` back to `active` with
    /// its role (`400 member_not_suspended` for any other status, `404
    /// not_found` without a membership or for a removed one). Answers the
    /// member's row as `users/list` shows it.
    #[endpoint { method = POST, path = "/api/users/reactivate", tags = ["users"] }]
    async fn users_reactivate(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<users::MemberQuery>,
    ) -> Result<HttpResponseOk<users::UserListItem>, HttpError>;

    /// Remove a member from the organization.
    ///
    /// An addition to the spec (its `deleted` membership status). Requires
    /// `users:write` and a role ranking above the member's (`403
    /// member_level_too_high`; only owners act on owners). An `active` or
    /// `suspended` membership becomes `deleted`: the row is kept (when
    /// and with which role they left), is no longer listed by `users/list`,
    /// and grants nothing. Access ends at once as for a suspension
    /// (streams end with `membership_revoked`). The person keeps their
    /// account and other organizations; what they created stays with the
    /// organization. Adding (`POST /api/org/add_member`) or inviting them
    /// again makes a removed membership `active` (or `invited`) again.
    ///
    /// `404 not_found` without a membership or for one already removed;
    /// an `invited` membership is ended by revoking its invitation (`400
    /// member_invited`). Nobody removes themself (`400 cannot_target_self`:
    /// `POST /api/org/leave` is for that); the last owner is never removed
    /// (`409 last_owner`).
    #[endpoint { method = DELETE, path = "/api/users/remove", tags = ["users"] }]
    async fn users_remove(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<users::MemberQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

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
    ) -> Result<HttpResponseCreated<roles::RoleWithPermissions>, HttpError>;

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
    ) -> Result<HttpResponseOk<roles::RoleWithPermissions>, HttpError>;

    /// Delete a custom role.
    ///
    /// Requires `roles:delete` and `roles:write`. System roles cannot be
    /// deleted (`403 system_role_immutable`), nor roles above the caller's
    /// level (`403 role_level_too_high`), nor roles held by a membership
    /// that is `invited`, `active` or `suspended` (`409 role_in_use`); the
    /// kept rows of removed members that held the role go with it.
    /// Deletion is permanent.
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
    /// `existing_account` (an addition) says whether accepting joins an
    /// account the invited address already has (its password, no names).
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
    /// Like `login` it starts a session: additions to the spec's response
    /// are `expires_in`, `refresh_token`, `refresh_expires_in` and
    /// `session_id`.
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
    /// stream (`text/event-stream`): each event is a line `id: N` (its
    /// number, from 1; an addition to the spec, for resumption) and a line
    /// `data: <json>`, followed by a blank line. Events, in order:
    /// `{"type":"start","message_id":ID}` (ID is the assistant message's
    /// id), any number of `{"type":"content","content":TEXT}` (pieces of the
    /// answer, in order), then `{"type":"end"}`.
    ///
    /// Before anything is streamed, errors are ordinary JSON errors: `400
    /// invalid_message` for a blank message or one over 100,000 characters,
    /// `404 not_found` when the session is not in the organization, `400
    /// model_unavailable` when the session's model is no longer configured.
    ///
    /// The user's message is stored (in the session's history) before the
    /// model is called, and the model receives the session's history
    /// (earlier messages of this session only, oldest first, including
    /// partial answers), then the new message: the most recent whole turns
    /// that fit the model's context window (the server's `context_tokens`
    /// for the model less the answer's `max_tokens`; at most 200 earlier
    /// messages), the oldest left out first. The assistant message is
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
    /// `provider_timeout`, `internal_error`, and `membership_revoked` when
    /// the caller is suspended or removed from the organization, or leaves
    /// it, meanwhile (on any instance). The text received until then is
    /// kept as the assistant message with `status` `failed`.
    ///
    /// Resumable: the answer is generated by the server, not by the
    /// connection. A client that disconnects does not stop it (the whole
    /// answer is stored); it resumes with `GET /api/conversation/stream` on
    /// any instance, and `POST /api/conversation/stop` ends it (status
    /// `cancelled`, text kept). A client that reads nothing for 5 seconds
    /// is detached (its stream ends without `end`) and resumes the same
    /// way. Every event is stored and announced between instances through
    /// PostgreSQL (`LISTEN/NOTIFY`). The generating instance holds a lease
    /// on the answer (renewed every `streams.heartbeat_secs`): if it dies,
    /// another instance closes the answer once the lease is older than
    /// `streams.lease_secs`, with `status` `failed`, the text so far, and a
    /// last event `{"type":"error","error_code":"answer_interrupted"}`.
    /// An instance that is stopped lets its answers finish for
    /// `http.shutdown_grace_secs` and closes the rest the same way at once.
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

    /// Resume a conversation answer's event stream.
    ///
    /// Permission `conversation:read`: whoever may read the conversation's
    /// messages may follow its answers (`404 not_found` for an answer that
    /// is not in the organization, or is no assistant message). Send the
    /// number of the last event received in the `Last-Event-ID` header (as
    /// browsers' `EventSource` does); without it the stream starts at event
    /// 1 (`400 invalid_request` when it is no event number). The missed
    /// events are replayed from the database, then the live rest follows
    /// (announced between instances by PostgreSQL `LISTEN/NOTIFY`), each
    /// exactly once and in order, with the same `id:` numbers, until `end`
    /// or `error`. Works on any server instance; for a finished answer it
    /// replays and ends (at once and empty when `Last-Event-ID` was its
    /// last event). Events of answers that ended are kept 24 hours: after
    /// that the stream is one unnumbered `{"type":"error","error_code":
    /// "stream_expired"}` (read the answer with `GET
    /// /api/conversation/messages`). An answer whose instance died ends
    /// with `error_code` `answer_interrupted` once its lease expired (see
    /// `stream_chat`); as a last resort, a stream without events for 5
    /// minutes ends with `error_code` `stream_lost`.
    #[endpoint { method = GET, path = "/api/conversation/stream", tags = ["conversations"] }]
    async fn conversation_stream(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::ConversationMessageQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Stop a conversation answer that is streaming.
    ///
    /// Permission `conversation:write` (any member who may write in the
    /// organization's conversations; `404 not_found` for an answer that is
    /// not in the organization, or is no assistant message). Reaches the
    /// generating instance wherever it runs (PostgreSQL `NOTIFY`); the
    /// answer keeps its text so far with status `cancelled` and its stream
    /// ends with `{"type":"end"}`. `stopped` is false when the answer had
    /// already ended.
    #[endpoint { method = POST, path = "/api/conversation/stop", tags = ["conversations"] }]
    async fn conversation_stop(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::ConversationMessageQuery>,
    ) -> Result<HttpResponseOk<conversations::ConversationStopResponse>, HttpError>;

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

    // ---- Knowledge base area (/api/kb), chat uploads and downloads ----

    /// Create a knowledge base.
    ///
    /// Permission `kb:write`. `name` is 1 to 200 characters after trimming
    /// (`400 invalid_name`), `description` at most 2000 (`400
    /// invalid_description`). `embedding_model` names one of the configured
    /// embedders (`all-minilm-l6-v2`, the local default, and any
    /// `[[embedders]]` of the configuration); another name is `400
    /// unknown_embedding_model`. The knowledge base keeps its model.
    ///
    /// `sources` (0 to 20) are `{type, config}`: `file` (`file_ids` of
    /// uploads of the same organization; `400 invalid_source` for an id
    /// that is not one), `web` (`urls`, `http`/`https` only) or
    /// `object_store` (`bucket_name`, `prefix`, `cloud_access_key_id`,
    /// `cloud_secret_access_key`, `cloud_region`, optional `endpoint_url`).
    /// Credentials are stored encrypted and never returned. Every source is
    /// ingested in the background by durable jobs (see
    /// `GET /api/kb/ingestion_status`); the knowledge base is `processing`
    /// until all are done, then `ready`.
    #[endpoint { method = POST, path = "/api/kb/create", tags = ["kb"] }]
    async fn kb_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<kb::KbCreate>,
    ) -> Result<HttpResponseCreated<kb::KbCreated>, HttpError>;

    /// List the organization's knowledge bases.
    ///
    /// Permission `kb:read`. Newest first, a page at a time: `page` from 1,
    /// `limit` 1 to 100 (default 20); out-of-range values are `400
    /// invalid_pagination`. Each with `status` and `document_count`.
    #[endpoint { method = GET, path = "/api/kb/list", tags = ["kb"] }]
    async fn kb_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbListQuery>,
    ) -> Result<HttpResponseOk<Vec<kb::KbSummary>>, HttpError>;

    /// Fetch a knowledge base with its sources.
    ///
    /// Permission `kb:read` in the knowledge base's organization; `404
    /// not_found` when it does not exist or belongs to an organization the
    /// caller is not a member of. Sources show their public configuration
    /// only (never credentials).
    #[endpoint { method = GET, path = "/api/kb/get", tags = ["kb"] }]
    async fn kb_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
    ) -> Result<HttpResponseOk<kb::KbDetail>, HttpError>;

    /// Rename or describe a knowledge base.
    ///
    /// Permission `kb:write`. Absent fields stay; the same limits as
    /// `create` (`400 invalid_name`, `400 invalid_description`). `404
    /// not_found` as for `get`.
    #[endpoint { method = PUT, path = "/api/kb/update", tags = ["kb"] }]
    async fn kb_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
        body: JsonBody<kb::KbUpdate>,
    ) -> Result<HttpResponseOk<kb::KbUpdated>, HttpError>;

    /// Delete a knowledge base and all its contents.
    ///
    /// Permission `kb:delete`. Sources, documents, chunks and pending
    /// ingestion jobs go in one transaction; a worker busy with one of its
    /// documents notices and stops. Uploaded files stay (they belong to
    /// the chat). `404 not_found` as for `get`.
    #[endpoint { method = DELETE, path = "/api/kb/delete", tags = ["kb"] }]
    async fn kb_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
    ) -> Result<HttpResponseOk<kb::KbDeleted>, HttpError>;

    /// Add a source to a knowledge base.
    ///
    /// Permission `kb:write`. The body is one `{type, config}` as in
    /// `create` (`400 invalid_source`); at most 100 sources per knowledge
    /// base (`400 too_many_sources`). The source starts `processing` and is
    /// ingested in the background.
    #[endpoint { method = POST, path = "/api/kb/add_source", tags = ["kb"] }]
    async fn kb_add_source(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
        body: JsonBody<kb::SourceInput>,
    ) -> Result<HttpResponseCreated<kb::SourceAdded>, HttpError>;

    /// List a knowledge base's documents, a page at a time.
    ///
    /// Permission `kb:read`. Oldest first (stable across pages); `page`
    /// from 1, `limit` 1 to 100 (default 20), `400 invalid_pagination`
    /// otherwise. Each document shows its source, title (file name, page
    /// title or object key), URL, size, `status` (`pending`, `processing`,
    /// `completed`, `failed`), `chunk_count` and, when failed, `error`.
    /// `total` counts all documents.
    #[endpoint { method = GET, path = "/api/kb/list_documents", tags = ["kb"] }]
    async fn kb_list_documents(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbDocumentsQuery>,
    ) -> Result<HttpResponseOk<kb::KbDocumentsPage>, HttpError>;

    /// Delete one document of a knowledge base.
    ///
    /// Permission `kb:delete`. Its chunks and pending jobs go with it. `404
    /// not_found` when the knowledge base is not visible or the document is
    /// not one of its documents.
    #[endpoint { method = DELETE, path = "/api/kb/delete_document", tags = ["kb"] }]
    async fn kb_delete_document(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbDocumentQuery>,
    ) -> Result<HttpResponseOk<kb::KbDeleted>, HttpError>;

    /// Retry a failed document of a knowledge base.
    ///
    /// Permission `kb:write`. An addition to the spec: a document whose
    /// ingestion failed (`status: failed`, its `error` says why) is queued
    /// again with a fresh budget of attempts; its source and the knowledge
    /// base are `processing` until it finishes. `409 document_not_failed`
    /// for a document that is not `failed` (pending, processing and
    /// completed documents need no retry). `404 not_found` when the
    /// knowledge base is not visible or the document is not one of its
    /// documents. Answers `{success, message}`.
    #[endpoint { method = POST, path = "/api/kb/retry_document", tags = ["kb"] }]
    async fn kb_retry_document(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbDocumentQuery>,
    ) -> Result<HttpResponseOk<kb::KbDeleted>, HttpError>;

    /// Search a knowledge base.
    ///
    /// Permission `kb:read`. Hybrid retrieval in one SQL statement: the
    /// query is embedded once with the knowledge base's model; the nearest
    /// chunks by cosine distance (pgvector HNSW, with iterative scans so
    /// that filters never yield fewer hits than exist) and the best
    /// full-text matches (`websearch_to_tsquery`, ranked by `ts_rank_cd`;
    /// when more than 2,000 chunks match, 2,000 of them are ranked) are
    /// fused with reciprocal rank fusion (k = 60).
    ///
    /// `score` (0 to 1) fuses the two rankings by reciprocal rank, the
    /// vector side weighted by its cosine similarity `cos`:
    /// `(max(cos, 0) * 61 / (60 + rank_vector) + 61 / (60 + rank_text)) / 2`
    /// (a side the chunk is absent from adds 0). So 1 is a chunk ranked
    /// first by both with the query's meaning, a chunk ranked first by
    /// keywords alone scores 0.5, and the nearest of unrelated chunks
    /// scores about half its (low) similarity: the default threshold drops
    /// those. Scores compare hits of one query, not across queries.
    /// Nothing of a knowledge base is held in the server's memory: every
    /// search is one statement over PostgreSQL's indexes.
    /// Results below `score_threshold` (default 0.1) are dropped; `limit`
    /// 1 to 50 (default 10). `filters` narrow to documents, sources, a
    /// source type or chunks whose metadata contains a JSON object.
    /// `query` is 1 to 2000 characters (`400 invalid_query`).
    #[endpoint { method = POST, path = "/api/kb/search", tags = ["kb"] }]
    async fn kb_search(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
        body: JsonBody<kb::KbSearchRequest>,
    ) -> Result<HttpResponseOk<kb::KbSearchResponse>, HttpError>;

    /// Answer a question from a knowledge base (retrieval-augmented).
    ///
    /// Permission `kb:read`. Retrieves as `search` does (`limit`, default
    /// 10, threshold 0.1), then asks the model (`model_id`, default the
    /// first of `GET /api/models/list`; `400 model_unavailable`) to answer
    /// from the numbered excerpts, citing them as `[n]`. Without `stream`
    /// the answer is JSON `{answer, sources}`; `sources[i].index` is the
    /// number cited. With `"stream": true`, or with `Accept:
    /// text/event-stream` and no `stream` field, it is Server-Sent Events in the
    /// conversation stream's vocabulary: `{"type":"sources","sources":[...]}`
    /// first, then `start`, `content` pieces and `end`
    /// (`{"type":"error","error_code":...}` if the model fails mid-answer).
    /// `temperature` 0 to 1, `max_tokens` 1 to 32000. A model failure
    /// before the answer begins is a `503` with the provider's error code
    /// (`provider_unavailable`, `provider_rate_limited`, ...); a knowledge
    /// base without chunks is answered with no sources.
    #[endpoint { method = POST, path = "/api/kb/query", tags = ["kb"] }]
    async fn kb_query(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
        body: JsonBody<kb::KbQueryRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Ingestion progress of a knowledge base.
    ///
    /// Permission `kb:read`. The knowledge base's `status`, document counts
    /// (`documents_done` counts completed and failed documents) and each
    /// source's progress.
    #[endpoint { method = GET, path = "/api/kb/ingestion_status", tags = ["kb"] }]
    async fn kb_ingestion_status(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<kb::KbQuery>,
    ) -> Result<HttpResponseOk<kb::KbIngestionStatus>, HttpError>;

    /// Knowledge bases usable in chat.
    ///
    /// Permissions `chats:read` and `kb:read`. The organization's knowledge
    /// bases that are `ready` and hold at least one document, by name; at
    /// most 100.
    #[endpoint { method = GET, path = "/api/chat/available_knowledge_bases", tags = ["chat"] }]
    async fn chat_available_knowledge_bases(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<kb::AvailableKnowledgeBase>>, HttpError>;

    /// Upload a file for a chat.
    ///
    /// Permission `chats:write`, and the organization's `file_upload` and
    /// `chat_uploads` gates (`403 feature_disabled`). A
    /// `multipart/form-data` body with one part named `file` (`400
    /// invalid_upload` otherwise). The type is decided by sniffing the
    /// content, not by the part's header; allowed: PDF, TXT, DOCX, XLSX,
    /// CSV, MD, JPG, PNG, GIF, WebP, SVG, MP3, WAV, M4A, OGG, FLAC, MP4,
    /// WebM, MOV, AVI (`415 unsupported_file_type`). Larger than
    /// `files.max_upload_bytes` (50 MB by default): `413 file_too_large`.
    /// The bytes stream to the object store; the text of documents is
    /// extracted. `url` downloads the file for 7 days (presigned for S3, a
    /// signed server URL for the local store). `filename` is the part's
    /// file name, reduced to its last path component (at most 255 bytes).
    #[endpoint {
        method = POST,
        path = "/api/chat/upload_file",
        tags = ["chat"],
        content_type = "multipart/form-data",
    }]
    async fn chat_upload_file(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<files::UploadQuery>,
        body: files::MultipartForm,
    ) -> Result<HttpResponseCreated<files::Upload>, HttpError>;

    /// Download an uploaded file through a signed link.
    ///
    /// Public: the signature is the credential. The links handed out by
    /// `upload_file` for the local store; `403 invalid_signature` when the
    /// signature does not match, `410 link_expired` after its expiry.
    #[endpoint { method = GET, path = "/api/files/download", tags = ["chat"] }]
    async fn files_download(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<files::DownloadQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    // ---- Chat area (/api/chat): sessions, send_message, streams ----

    /// Create a chat session.
    ///
    /// Permission `chats:write`. All fields optional: `title` (1 to 200
    /// characters after trimming, default `New Chat`; `400 invalid_title`),
    /// `status` (default `ACTIVE`), `settings` (`temperature` 0 to 1,
    /// `max_tokens` 1 to 32000, `top_p` 0 to 1; `400 invalid_settings`).
    /// `send_message` applies `temperature` and `max_tokens`; `top_p` is
    /// stored for clients (the model clients here do not send it).
    /// Additions: `pinned` (default `false`) and `folder_id` (one of the
    /// caller's folders, `GET /api/chat/folders`; `400 unknown_folder` for
    /// any other id, nothing created).
    ///
    /// Visibility (the spec leaves it open): a chat belongs to its
    /// organization and to the user who created it, and only that user
    /// sees or changes it, through every chat operation (organization
    /// owners and admins included: chats are personal, conversations are
    /// the organization's shared area). Another user's or organization's
    /// chat id is `404 not_found`.
    #[endpoint { method = POST, path = "/api/chat", tags = ["chat"] }]
    async fn chat_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat::ChatWrite>,
    ) -> Result<HttpResponseCreated<chat::ChatIdResponse>, HttpError>;

    /// Fetch a chat session with its messages and uploads.
    ///
    /// Permission `chats:read`; the caller's own chats only (`404
    /// not_found` otherwise). `messages` is the chat's active path, first
    /// message first (a chat whose messages were never edited or
    /// regenerated has one path: all of them); each message has its
    /// `sibling_position`, `sibling_count` and neighbouring siblings'
    /// ids for switching (`POST /api/chat/switch_branch`). Each answer carries
    /// `status` (`streaming`, `complete`, `stopped`, `failed`), its
    /// `model_id`, and in `metadata` its `usage`. `uploads` are the files
    /// uploaded with this `chat_id`, with fresh 7-day download links.
    #[endpoint { method = GET, path = "/api/chat", tags = ["chat"] }]
    async fn chat_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatQuery>,
    ) -> Result<HttpResponseOk<chat::ChatSessionDetail>, HttpError>;

    /// List the caller's chat sessions.
    ///
    /// Permission `chats:read`. The caller's chats in the organization:
    /// pinned chats first (most recently pinned first), then the others,
    /// most recently updated first (ties by id). `status` filters to one
    /// state; without it `ACTIVE` and `ARCHIVED` chats are listed (not
    /// `DELETED` ones). Additions: `folder_id` keeps the chats of that
    /// folder of the caller's (none for another id), `pinned` the pinned
    /// (`true`) or the unpinned (`false`) ones. `limit` 1 to 500 (default
    /// 100), `offset` default 0 (`400 invalid_pagination`).
    #[endpoint { method = GET, path = "/api/chat/list", tags = ["chat"] }]
    async fn chat_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatListQuery>,
    ) -> Result<HttpResponseOk<Vec<chat::ChatSession>>, HttpError>;

    /// Rename, archive or reconfigure a chat session.
    ///
    /// Permission `chats:write`. Absent fields stay; the same rules as
    /// create. `status` `DELETED` hides the chat from the default list
    /// (it is kept until `delete_session`). `404 not_found` as for `get`,
    /// and for a `folder_id` that is not one of the caller's folders
    /// (nothing changed).
    ///
    /// Additions: `pinned` pins (`true`; a pinned chat keeps its
    /// `pinned_at`) or unpins (`false`) the chat; `folder_id` puts it into
    /// that folder (`POST /api/chat/folders/move` with `folder_id: null`
    /// takes chats out). A body with only these two fields leaves
    /// `updated_at` alone: organizing a chat does not make it recent.
    #[endpoint { method = PUT, path = "/api/chat", tags = ["chat"] }]
    async fn chat_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatQuery>,
        body: JsonBody<chat::ChatWrite>,
    ) -> Result<HttpResponseOk<chat::ChatIdResponse>, HttpError>;

    /// Delete a chat session.
    ///
    /// Permission `chats:delete` in the chat's organization (the spec
    /// gives only `session_id`; the organization is the chat's). Removes
    /// the chat, its messages, their stream events and its uploads (rows
    /// and stored bytes). An answer still streaming is stopped. `404
    /// not_found` for a chat that is not the caller's.
    #[endpoint { method = DELETE, path = "/api/chat/delete_session", tags = ["chat"] }]
    async fn chat_delete_session(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::DeleteSessionQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Delete several chat sessions.
    ///
    /// Permission `chats:delete`. `chat_ids`: 1 to 100 ids (`400
    /// invalid_request` otherwise; duplicates count once). Deletes as
    /// `delete_session` does, in one transaction, and answers one outcome
    /// per distinct id in request order: `deleted`, or `not_found` for an
    /// id that is not one of the caller's chats in the organization (never
    /// revealing whether it exists elsewhere). Always `200`.
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = POST, path = "/api/chat/bulk_delete_sessions", tags = ["chat"] }]
    async fn chat_bulk_delete_sessions(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PersonalOrgQuery>,
        body: JsonBody<chat::BulkDeleteRequest>,
    ) -> Result<HttpResponseOk<chat::BulkDeleteResponse>, HttpError>;

    /// Send a message and stream the answer (resumable).
    ///
    /// Permission `chats:write` (and `kb:read` with `knowledge_base_ids`,
    /// `agent:execute` with `agent_id`). Without `chat_id` a new chat is
    /// created. Server-Sent Events, each `id: N` (numbered from 1) and
    /// `data: <ChatStreamEvent>`: `start` (`chat_id`, `user_message_id`,
    /// `message_id`), `sources` (when knowledge bases were searched), any
    /// `reasoning` and `content` pieces (the model's thinking, when it shows
    /// it, comes before the answer's content and between tool calls, and is
    /// stored as the answer's `reasoning`; with an agent also
    /// `tool_started` and `tool_finished`), `usage`, `title` (first answer
    /// of a new chat only), and last `{"type":"end","message":"DONE",
    /// "finish_reason":"stop"}`; or `{"type":"error","error_code","message"}` (the text so
    /// far is kept as the answer, `failed`; `error_code`
    /// `membership_revoked` when the caller is suspended or removed from
    /// the organization, or leaves it, while the answer streams).
    ///
    /// Prompt: an agent's system prompt; the most recent whole turns of the
    /// chat's history that fit the model's context window beside the rest
    /// (oldest first; at most 200 earlier messages, as in conversations);
    /// then the user's message preceded by the retrieved excerpts (each
    /// knowledge base searched with `limit` 10 and `score_threshold` 0.1,
    /// numbered `[n]` for citation; `sources[].index` is that number) and
    /// the given uploads, always sent. Uploads reach the model in its
    /// provider's own format when the model takes them (`input` in `GET
    /// /api/models/list`): PNG, JPEG, WebP and GIF (first frame) as images,
    /// prepared once (downscaled to at most 1568 pixels on the long edge
    /// and 1.15 megapixels, re-encoded without metadata) and kept, so the
    /// images of earlier turns are sent again, within the context window
    /// (counted with the provider's image-token formula) and at most 32 a
    /// request, without being decoded again; PDFs whole (at most 32 MiB
    /// and 100 pages; larger ones as text) to a model with `pdf` input;
    /// every other upload, and PDFs to other models, as extracted text.
    /// Settings: the request's, else the chat's; `reasoning_effort` and
    /// `reasoning_budget_tokens` apply to models whose `reasoning` is
    /// `effort` or `budget`, bounded by the model's `max_output_tokens`.
    ///
    /// The title of a new chat is generated after its first answer (a
    /// short model call; the offline model answers with the first words
    /// of the message), stored, sent as `title` and broadcast to the
    /// caller's WebSocket clients (`GET /api/chat/ws`).
    ///
    /// Every message counts towards `daily_chat_limit` as in conversations
    /// (`429 daily_chat_limit_exceeded` with `Retry-After`, atomically,
    /// before anything is stored); token usage is added to the chat's
    /// `metadata.usage`. Provider errors are retried with backoff before
    /// the first piece arrives (as in conversations), later ones end the
    /// stream with `error`.
    ///
    /// An agent answers through the agent runtime with its own model,
    /// system prompt, settings and tools; it must have passed its test
    /// (`ready`) or be `deployed`/`active`: otherwise `409
    /// agent_not_active`. Every configured model is a chat model, so
    /// `model_modality_unsupported` (400) is reserved for image or video
    /// generation models and not answered today.
    ///
    /// Errors before the stream (nothing is stored): `400
    /// invalid_message`, `400 invalid_settings`, `400 model_unavailable`
    /// (no such model), `400 model_lacks_input` (an image to a model
    /// without `image` input: the message names the model and the file),
    /// `400 image_too_large` (over 20 MiB or 50 megapixels: a decompression
    /// bomb is refused from its header), `400 image_unreadable` (a
    /// truncated or corrupt image), `400 image_unsupported` (an SVG, or
    /// content that is no PNG, JPEG, WebP or GIF whatever its name), `404
    /// not_found` (chat, agent, knowledge base or upload not visible).
    ///
    /// Resumable: the answer is generated by the server, not by the
    /// connection. A client that disconnects does not stop it; it resumes
    /// with `GET /api/chat/stream` on any instance. `POST /api/chat/stop`
    /// ends it. A client that reads nothing for 5 seconds is detached
    /// (its stream ends without `end`) and resumes the same way. The
    /// generating instance holds a lease on the answer, renewed every
    /// `streams.heartbeat_secs`; if it dies, another instance closes the
    /// answer (see `GET /api/chat/stream`).
    #[endpoint { method = POST, path = "/api/chat/send_message", tags = ["chat"] }]
    async fn chat_send_message(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat::SendMessageRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Edit a question: a new version of it, answered (a branch).
    ///
    /// Permissions as `send_message` (`chats:write`; `kb:read` with
    /// `knowledge_base_ids`, `agent:execute` with `agent_id`). `message_id`
    /// is a question (`USER` message) of one of the caller's chats (`404
    /// not_found` otherwise; `400 not_a_question` for an answer). The new
    /// question is a sibling of the edited one (same parent: its
    /// `sibling_count` grows); it and its answer end the chat's active
    /// path. The earlier version and everything below it stay, reachable
    /// with `POST /api/chat/switch_branch`.
    ///
    /// The model is sent the active path above the edited question (as
    /// `send_message` sends the history), then the new text. Defaults:
    /// the edited question's model (while it is offered), its uploads;
    /// knowledge bases and agents are used only when given again (they
    /// need their own permissions). The new messages' `metadata` has
    /// `edited_from`. The stream, resume, stop, the daily limit (an edit
    /// counts as a message) and the live notices are those of
    /// `send_message`; `start.user_message_id` is the new question.
    #[endpoint { method = POST, path = "/api/chat/edit_message", tags = ["chat"] }]
    async fn chat_edit_message(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat::EditMessageRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Regenerate an answer: another answer to the same question (a
    /// branch).
    ///
    /// Permissions as `send_message`. `message_id` is an answer (`MODEL`
    /// message) of one of the caller's chats (`404 not_found` otherwise;
    /// `400 not_an_answer` for a question). The new answer is a sibling of
    /// it, asked with the history above the question, the question (with
    /// its uploads' text) and, when given, another model, agent, knowledge
    /// bases or settings; default: the regenerated answer's model while it
    /// is offered. It ends the chat's active path; the earlier answers
    /// stay (`switch_branch`). An answer still streaming may be
    /// regenerated: it goes on, off the path (stop it first to end it).
    /// Its `metadata` has `regenerated_from`. Stream, resume, stop, the
    /// daily limit (a regeneration counts as a message) and live notices
    /// as `send_message`; `start.user_message_id` is the existing question.
    #[endpoint { method = POST, path = "/api/chat/regenerate", tags = ["chat"] }]
    async fn chat_regenerate(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat::RegenerateRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Switch a chat's branch: show another version of a message.
    ///
    /// Permission `chats:write`; the caller's own chat (`404 not_found` for
    /// a chat or message that is not). `message_id` (any message of the
    /// chat, typically a `previous_sibling_id` or `next_sibling_id`) and
    /// its ancestors become the active path, which goes on below it the
    /// way it was last shown (at each level the child most recently on the
    /// path) down to a last message, the chat's new leaf. The next
    /// `send_message` continues from that leaf, and the model sees only
    /// that path. Answers the chat as `GET /api/chat` shows it, and tells
    /// the caller's WebSocket clients (`branch`, with the new leaf).
    /// Atomic with sends and edits of the same chat, on any instance.
    #[endpoint { method = POST, path = "/api/chat/switch_branch", tags = ["chat"] }]
    async fn chat_switch_branch(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatQuery>,
        body: JsonBody<chat::SwitchBranchRequest>,
    ) -> Result<HttpResponseOk<chat::ChatSessionDetail>, HttpError>;

    /// Resume an answer's event stream.
    ///
    /// Permission `chats:read`, the caller's own chats only (`404
    /// not_found`). Send the number of the last event received in the
    /// `Last-Event-ID` header (as browsers' `EventSource` does); without it
    /// the stream starts at event 1. The missed events are replayed from
    /// the database, then the live rest follows (announced between
    /// instances by PostgreSQL `LISTEN/NOTIFY`), each exactly once and in
    /// order, with the same `id:` numbers, until `end` or `error`. Works on
    /// any server instance; for a finished answer it replays and ends (at
    /// once and empty when `Last-Event-ID` was its last event).
    /// Events of answers that ended are kept 24 hours: after that the
    /// stream is one unnumbered `{"type":"error","error_code":
    /// "stream_expired"}` (read the answer with `GET /api/chat`). An
    /// answer whose instance died mid-answer is closed by another instance
    /// once its lease expired (`streams.lease_secs`, default 30 s): status
    /// `failed`, the text saved so far kept, and a last event
    /// `{"type":"error","error_code":"answer_interrupted"}`; an instance
    /// that is stopped closes the answers it still generates the same way
    /// once `http.shutdown_grace_secs` passed. As a last resort, a stream
    /// without events for 5 minutes ends with `error_code` `stream_lost`.
    #[endpoint { method = GET, path = "/api/chat/stream", tags = ["chat"] }]
    async fn chat_stream(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatMessageQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Stop an answer that is streaming.
    ///
    /// Permission `chats:write`, the caller's own chats only (`404
    /// not_found`). Reaches the generating instance wherever it runs
    /// (PostgreSQL `NOTIFY`); the answer keeps its text so far with
    /// status `stopped` and its stream ends with `end` (`finish_reason`
    /// `stopped`). `stopped` is false when the answer had already ended.
    #[endpoint { method = POST, path = "/api/chat/stop", tags = ["chat"] }]
    async fn chat_stop(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatMessageQuery>,
    ) -> Result<HttpResponseOk<chat::StopResponse>, HttpError>;

    /// Generate prompt suggestions from a text.
    ///
    /// Permission `chats:write`. `text` 1 to 10,000 characters (`400
    /// invalid_message`); `model_id` as in `send_message`. Server-Sent
    /// Events: `content` pieces of three suggested prompts, one per line,
    /// then `{"type":"end","message":"DONE","finish_reason":"stop"}` (or
    /// `error`). Not stored, not counted against `daily_chat_limit`.
    #[endpoint { method = POST, path = "/api/chat/prompt", tags = ["chat"] }]
    async fn chat_prompt(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat::PromptRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Transcribe speech to text.
    ///
    /// Permission `chats:write`. The body is either `multipart/form-data`
    /// with a part named `file`, or the raw audio bytes with the
    /// `content_type` query parameter (the document shows the raw form).
    /// Formats: MP3, WAV, M4A, OGG, FLAC, WebM, decided by sniffing the
    /// bytes (a declared type is checked too, never trusted): `400
    /// unsupported_audio_format` otherwise, `400 invalid_audio` for an
    /// empty body or a form without `file`. `language` is one of `en-US`,
    /// `en-GB`, `es-ES`, `fr-FR`, `de-DE`, `it-IT`, `pt-BR`, `ja-JP`,
    /// `ko-KR`, `zh-CN` (`400 unsupported_language`); absent, the service
    /// detects it. At most `transcription.max_bytes` (25 MB; `413
    /// file_too_large`). Answers `{text, language}`.
    ///
    /// The audio goes to the configured OpenAI-compatible
    /// `/audio/transcriptions` service (OpenAI, Groq, a whisper.cpp or
    /// faster-whisper server). None configured: `503
    /// transcription_unavailable`, whose message says how to configure
    /// one; the service failing: `503 transcription_failed`.
    #[endpoint {
        method = POST,
        path = "/api/chat/transcribe",
        tags = ["chat"],
        request_body_max_bytes = 27_262_976,
    }]
    async fn chat_transcribe(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::TranscribeQuery>,
        body: dropshot::UntypedBody,
    ) -> Result<HttpResponseOk<chat::TranscribeResponse>, HttpError>;

    /// Get a ticket that opens the chat WebSocket.
    ///
    /// Permission `chats:read`. The ticket opens `GET /api/chat/ws` once,
    /// within 60 seconds, for the caller in this organization; it is
    /// stored hashed in PostgreSQL, so any instance accepts it. This keeps
    /// the bearer token out of URLs (browsers cannot set headers on a
    /// WebSocket).
    #[endpoint { method = POST, path = "/api/chat/ws_ticket", tags = ["chat"] }]
    async fn chat_ws_ticket(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseCreated<chat::WsTicket>, HttpError>;

    /// Live chat updates over a WebSocket.
    ///
    /// Public: the single-use `ticket` (see `POST /api/chat/ws_ticket`) is
    /// the credential; an invalid, used or expired ticket, or one of
    /// another organization, closes the socket with code 1008. Then the
    /// server sends JSON text frames (`ChatLiveEvent`) about the caller's
    /// own chats in the organization: first `{"type":"ready","org_id",
    /// "user_id"}`, then `{"type":"title","chat_id","title"}` when a chat
    /// gets its generated title or is renamed, and `{"type":"message",
    /// "chat_id","message_id","status"}` when an answer ends. Events from
    /// every server instance arrive (PostgreSQL `LISTEN/NOTIFY`). This
    /// channel is the spec's "sync to an external realtime store": clients
    /// (or a bridge to such a store) subscribe here. Client frames are
    /// ignored (pings are answered). The user's membership and
    /// `chats:read` are checked when the socket opens and every 30
    /// seconds; losing them closes it (1008). An instance that shuts down
    /// closes its sockets with 1001 (going away): reconnect with a new
    /// ticket, and another instance serves the same events.
    #[channel { protocol = WEBSOCKETS, path = "/api/chat/ws", tags = ["chat"] }]
    async fn chat_ws(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::WsQuery>,
        upgraded: dropshot::WebsocketConnection,
    ) -> dropshot::WebsocketChannelResult;

    // ---- Share links of chats (issue #35) ----

    /// Make a share link of a chat: a read-only snapshot of its active path.
    ///
    /// An addition to the spec. Permission `chats:write` (a link publishes
    /// the chat: it is made, like a message, not read); the caller's own
    /// chat only (`404 not_found` otherwise, another user's chat as an
    /// unknown one). The snapshot is taken now and never changes: the
    /// messages of the chat's active path, oldest first, each with only
    /// `role`, `content`, `created_at`, `status` and, on an answer, the
    /// model's name (`model`), and the chat's title. Nothing else of the
    /// chat is copied: no prompt data (knowledge-base excerpts, upload
    /// ids), no metadata, no message, upload, model, agent or user ids.
    /// An answer still streaming is left out, and so is the rest of the
    /// path after it; a message without text (an answer that failed or was
    /// stopped before its first word) is left out; an answer that failed
    /// or was stopped with some text keeps it, with `status` `failed` or
    /// `stopped`.
    ///
    /// Bounds: at most 500 messages and 1 MiB of message text on the path
    /// (`409 share_too_large`); a chat without messages is `409
    /// nothing_to_share`; a user holds at most 100 live links per
    /// organization (`409 too_many_shares`: revoke one).
    ///
    /// The answer carries the link's `token` (`wsshare_…`, 256 random
    /// bits), its page `path` (`/share/<token>`) and whole `url` (the
    /// server's `mail.public_url`, else its own address, then the path).
    /// They are shown only here: the server keeps only the token's
    /// SHA-256. Anyone with the link reads the snapshot with `GET
    /// /api/shared`, without an account, until the link is revoked, the
    /// chat or the account is deleted, the owner leaves or is removed from
    /// (or suspended in) the organization, or the organization is deleted.
    #[endpoint { method = POST, path = "/api/chat/share", tags = ["chat"] }]
    async fn chat_share_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatQuery>,
    ) -> Result<HttpResponseCreated<chat_shares::ChatShareCreated>, HttpError>;

    /// List the caller's share links.
    ///
    /// An addition to the spec. Permission `chats:read`. The caller's links
    /// in the organization (of one chat with `chat_id`), newest first,
    /// live and revoked (`revoked_at`), with their read count (`views`);
    /// never their tokens. `limit` 1 to 500 (default 100), `offset` default
    /// 0 (`400 invalid_pagination`).
    #[endpoint { method = GET, path = "/api/chat/shares/list", tags = ["chat"] }]
    async fn chat_shares_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_shares::ChatSharesQuery>,
    ) -> Result<HttpResponseOk<Vec<chat_shares::ChatShare>>, HttpError>;

    /// Revoke one of the caller's share links.
    ///
    /// An addition to the spec. Permission `chats:write`. From this answer
    /// on, every instance answers the link `404 not_found` (the link is
    /// looked up in the database at every read, nothing is cached); its
    /// snapshot is erased, the row stays in the list with `revoked_at`.
    /// Another user's, an unknown or an already revoked link is `404
    /// not_found`.
    #[endpoint { method = DELETE, path = "/api/chat/share/revoke", tags = ["chat"] }]
    async fn chat_share_revoke(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_shares::ChatShareQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Read a shared chat.
    ///
    /// An addition to the spec. Public: the link's token (query `token`)
    /// is the credential; send no `Authorization` header. Answers the
    /// snapshot (`title`, `created_at`, `messages`). An unknown, malformed
    /// or revoked token, a deleted chat or account, an owner who is no
    /// longer an active member of the organization, a deleted organization:
    /// all the same `404 not_found`, so the answer tells nothing about
    /// which. Rate limited per client address like `login`
    /// (`rate_limits.shared_chat_per_address` per `rate_limits.window_secs`,
    /// counted in the database so the limit holds across instances, every
    /// request counted, found or not): `429 rate_limited` with
    /// `Retry-After`. Answers (errors too) carry `Cache-Control: no-store`,
    /// `Referrer-Policy: no-referrer` and `X-Robots-Tag: noindex`. The
    /// server's logs show the token as `[redacted]`.
    #[endpoint { method = GET, path = "/api/shared", tags = ["chat"] }]
    async fn chat_shared(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_shares::SharedQuery>,
    ) -> Result<dropshot::HttpResponseHeaders<HttpResponseOk<chat_shares::SharedChat>>, HttpError>;

    /// The page of a share link (`/share/<token>`): reads `GET
    /// /api/shared` and shows the chat. Public; unpublished.
    #[endpoint { method = GET, path = "/share/{token}", unpublished = true }]
    async fn share_page(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<chat_shares::SharePagePath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// The script of `/share/<token>`.
    #[endpoint { method = GET, path = "/share.js", unpublished = true }]
    async fn share_script(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    // ---- Chat export and import (issue #35) ----

    /// Export one chat: its whole tree as JSON, or its active path as Markdown.
    ///
    /// An addition to the spec. Permission `chats:read`; the caller's own
    /// chats only (`404 not_found` otherwise). `format=json` (default)
    /// answers a `ChatExportDocument` (`format` `workspace.chat.v1`) with
    /// this one chat: every message of its tree (id, `parent_id`, role,
    /// content verbatim, status, `model_id` and `model_name`,
    /// `created_at`), parents before their children, and the chat's
    /// `leaf_id` (the active path's end), title, status, settings and
    /// times; `POST /api/chat/import` reads it back into the same tree.
    /// `format=markdown` answers `text/markdown`: `# <title>`, then each
    /// message of the active path, first to last, under `### User` or
    /// `### Assistant (<model name>)` (`### Assistant` when no model is
    /// known), its content verbatim.
    ///
    /// Sent with `Content-Disposition: attachment` and streamed as it is
    /// read, one page of messages at a time (as `GET /api/users/me/export`):
    /// a failure after the first bytes ends the response early, leaving
    /// the document incomplete rather than silently shorter.
    #[endpoint { method = GET, path = "/api/chat/export", tags = ["chat"] }]
    async fn chat_export(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_transfer::ChatExportQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Export all of the caller's chats in an organization.
    ///
    /// An addition to the spec. Permission `chats:read`: the caller's own
    /// chats in the organization, in every state (`ACTIVE`, `ARCHIVED`,
    /// `DELETED`), never another member's. `format=json` (default): one
    /// `ChatExportDocument` holding every chat as `GET /api/chat/export`
    /// writes it; `format=markdown`: each chat's Markdown, separated by a
    /// line `---`.
    ///
    /// Streamed as it is read: the server pages through the chats (100 at
    /// a time) and their messages (50 at a time) and holds one page at a
    /// time, whatever the number of chats; a slow reader holds up only its
    /// own download, and no database connection. The pages are separate
    /// reads: a chat changed during the export is written as it was when
    /// its page was read.
    #[endpoint { method = GET, path = "/api/chat/export_all", tags = ["chat"] }]
    async fn chat_export_all(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_transfer::ChatExportAllQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Import chats from an export of this service, ChatGPT, Open WebUI, Claude or LibreChat.
    ///
    /// An addition to the spec. Permission `chats:write`. The body is the
    /// exported JSON file, either raw (any `Content-Type`, e.g.
    /// `application/json`) or as the part named `file` of a
    /// `multipart/form-data` form. At most 50 MiB (`413 file_too_large`,
    /// answered from `Content-Length` before the body is read, or as soon
    /// as the bytes read pass the limit), arriving within 5 minutes (or
    /// `http.body_read_timeout_secs` if longer; `408 request_timeout`).
    /// An instance runs four imports at once; another waits up to a
    /// minute for its turn, then `503 server_busy`.
    ///
    /// `format` (default `auto`, recognised from the file's shape):
    /// `workspace` (`GET /api/chat/export`'s JSON: the same tree, leaf,
    /// title, status and settings), `chatgpt` (`conversations.json`: every
    /// node of `mapping` with a user or assistant message becomes a
    /// message under its parent, branches kept; system, tool and hidden
    /// messages and empty nodes are left out and their children follow the
    /// nearest message kept above them; the active path ends at
    /// `current_node`), `openwebui` (the tree of `chat.history`, leaf
    /// `currentId`), `claude` (`chat_messages`, by `parent_message_uuid`
    /// when present, else in order) or `librechat` (`messages` by
    /// `parentMessageId`). A file of none of these shapes, or not of the
    /// given one: `400 unrecognized_import_format`, whose message names the
    /// formats expected; not JSON, or nested 128 levels deep or more
    /// anywhere: `400 invalid_import_file`; no chat at all: `400 empty_import`. When the
    /// leaf the file names is not a message kept (or none is named), the
    /// newest message is; a leaf with children continues to its newest
    /// child.
    ///
    /// Bounds: at most 1,000 chats and 100,000 messages in the file (`400
    /// import_limits_exceeded`, before anything is written); a message
    /// larger than 1 MB or deeper than 10,000 levels, two messages with
    /// one id, a parent outside the chat or a cycle of parents skip that
    /// chat, reported in `skipped`. Each chat is written in its own
    /// transaction, so a broken chat does not stop the others: the answer
    /// lists what was `imported` (new chat ids, titles, message counts) and
    /// `skipped` (position in the file, source id, reason). Imports do not
    /// count towards `daily_chat_limit` (no model is called); the bounds
    /// above are their limit.
    ///
    /// Every chat created is the caller's, in the given organization:
    /// ids in the file are never used (every chat and message gets a new
    /// id), nor are users or organizations it names. Imported messages are
    /// `complete` (a `workspace` file's `stopped` and `failed` messages
    /// keep their status; `streaming` ones become `stopped`); `model_id` is
    /// set only when the message's model is one of this service's (by id
    /// in a `workspace` file, else by name), and `metadata` keeps
    /// `imported_from` and the original `model` name. Titles are cut to 200
    /// characters (`Imported chat` when there is none); times come from
    /// the file (never later than the import).
    #[endpoint {
        method = POST,
        path = "/api/chat/import",
        tags = ["chat"],
        request_body_max_bytes = 54_525_952,
    }]
    async fn chat_import(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_transfer::ChatImportQuery>,
        body: dropshot::StreamingBody,
    ) -> Result<HttpResponseOk<chat_transfer::ChatImportResult>, HttpError>;

    // ---- Feedback on answers (issue #35) ----

    /// Rate an answer of one of your chats.
    ///
    /// An addition to the spec. Permission `chats:write`. Body:
    /// `message_id` (an answer, role `MODEL`, of one of the caller's own
    /// chats: any other id, another user's answer included, is `404
    /// not_found`), `rating` `up` or `down`, `comment` (optional, 1 to 2000
    /// characters; a blank one counts as none) and `tags` (optional, at
    /// most 10, each 1 to 40 ASCII letters, digits, `_` or `-` starting
    /// with a letter or digit; stored lowercased, a repeated tag once;
    /// `400 invalid_tags` otherwise). Answers the stored `MessageFeedback`.
    ///
    /// One rating per person per answer: rating again replaces the whole
    /// feedback (rating, comment and tags; `created_at` stays,
    /// `updated_at` moves); `DELETE /api/chat/feedback` removes it. Any
    /// answer of the chat's tree may be rated, on the active path or not;
    /// `stopped` and `failed` answers too. A question (role `USER`) is
    /// `400 not_an_answer`; an answer still being generated is `409
    /// answer_streaming` (rate it once it ended). A comment over 2000
    /// characters is `400 invalid_comment`.
    ///
    /// Sharing: rating an answer shares that exchange (the question and
    /// the answer's text, the model and knowledge bases used) and the
    /// rating with the organization's admins (`GET
    /// /api/org/feedback/list`), although chats are otherwise private.
    /// Deleting the rating, or the chat, withdraws it.
    #[endpoint { method = POST, path = "/api/chat/feedback", tags = ["chat"] }]
    async fn chat_feedback_rate(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<feedback::ChatFeedbackWrite>,
    ) -> Result<HttpResponseOk<feedback::MessageFeedback>, HttpError>;

    /// Remove your rating of an answer of one of your chats.
    ///
    /// An addition to the spec. Permission `chats:write`. `message_id`:
    /// an answer of one of the caller's chats (`404 not_found` otherwise,
    /// as for rating). `deleted` is false when the caller had not rated
    /// it (deleting twice is harmless).
    #[endpoint { method = DELETE, path = "/api/chat/feedback", tags = ["chat"] }]
    async fn chat_feedback_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat::ChatMessageQuery>,
    ) -> Result<HttpResponseOk<feedback::FeedbackDeleted>, HttpError>;

    /// Rate an answer of a conversation.
    ///
    /// An addition to the spec. Permission `conversation:write` (whoever
    /// may write in the organization's conversations may rate their
    /// answers). `message_id`: an assistant message of one of the
    /// organization's conversations (`404 not_found` otherwise); the rest
    /// of the body and the rules are those of `POST /api/chat/feedback`:
    /// one rating per person per answer, replaced whole when given again;
    /// a user message is `400 not_an_answer`, an answer still streaming
    /// `409 answer_streaming`; `400 invalid_comment`, `400 invalid_tags`.
    ///
    /// Sharing: rating an answer shares that exchange (the question and
    /// the answer) and the rating, with the rater's name and e-mail, with
    /// the organization's admins (`GET /api/org/feedback/list`).
    #[endpoint { method = POST, path = "/api/conversation/feedback", tags = ["conversations"] }]
    async fn conversation_feedback_rate(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgQuery>,
        body: JsonBody<feedback::ConversationFeedbackWrite>,
    ) -> Result<HttpResponseOk<feedback::MessageFeedback>, HttpError>;

    /// Remove your rating of a conversation's answer.
    ///
    /// An addition to the spec. Permission `conversation:write`.
    /// `message_id`: an assistant message of one of the organization's
    /// conversations (`404 not_found` otherwise). Removes the caller's own
    /// rating only; `deleted` is false when there was none.
    #[endpoint { method = DELETE, path = "/api/conversation/feedback", tags = ["conversations"] }]
    async fn conversation_feedback_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::ConversationMessageQuery>,
    ) -> Result<HttpResponseOk<feedback::FeedbackDeleted>, HttpError>;

    /// List the feedback given on answers in the organization.
    ///
    /// An addition to the spec, for the organization's admins: a role of
    /// level 80 or more (admin, owner, or a custom role at that level)
    /// that grants `feedback:read` (the admin and owner system roles do,
    /// through `*:read` and `*:*`); anyone else is `403 forbidden`, and a
    /// personal access token needs the `feedback:read` scope. Each item is
    /// one rating with the exchange it is about: the question (the text of
    /// the message the answer replies to), the answer's text, the model
    /// (id and name), the knowledge bases the answer was given with (a
    /// chat answer's `metadata.knowledge_base_ids`, with their names), the
    /// rater (id, e-mail, name), the comment, tags and times. Members
    /// share this by rating: chat answers are otherwise private to their
    /// user.
    ///
    /// Filters (all optional, combined): `rating`, `model_id`, `user_id`
    /// (the rater), `area` (`chat` or `conversation`), `tag` (one tag,
    /// case-insensitive), `from` (inclusive) and `to` (exclusive), RFC 3339
    /// times compared with when each answer was first rated
    /// (`created_at`).
    ///
    /// Newest first by `created_at` (ties by id), in pages of `limit` (1 to
    /// 200, default 50; `400 invalid_pagination`): pass a page's
    /// `next_cursor` as `cursor` for the next one (`null` on the last
    /// page). The cursor is opaque (a position in that order, valid with
    /// any filters; a malformed one is `400 invalid_cursor`): pages do not
    /// overlap or skip while ratings are added, changed or removed (a
    /// changed rating keeps its place; a new one appears on the first
    /// page).
    #[endpoint { method = GET, path = "/api/org/feedback/list", tags = ["orgs"] }]
    async fn org_feedback_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<feedback::FeedbackListQuery>,
    ) -> Result<HttpResponseOk<feedback::FeedbackPage>, HttpError>;

    /// Export the feedback given on answers in the organization.
    ///
    /// An addition to the spec, for the organization's admins (as `GET
    /// /api/org/feedback/list`, with the same filters). The whole filtered
    /// set, newest first, streamed as it is read (the server reads 200
    /// ratings at a time by the list's cursor and holds no more, whatever
    /// the size of the export), as a download (`Content-Disposition:
    /// attachment`):
    ///
    /// - `format=csv`: `text/csv; charset=utf-8`, RFC 4180 (a header row,
    ///   fields quoted where needed, CRLF line ends). Columns: `id`,
    ///   `created_at`, `updated_at`, `area`, `rating`, `user_id`,
    ///   `user_email`, `user_name`, `model_id`, `model_name`, `chat_id`,
    ///   `conversation_id`, `message_id`, `knowledge_base_ids` and
    ///   `knowledge_base_names` (each `;`-separated), `tags`
    ///   (`;`-separated), `comment`, `question`, `answer`. Against formula
    ///   injection in spreadsheets, a cell that starts with `=`, `+`, `-`,
    ///   `@`, a tab or a carriage return gets a leading apostrophe (`'`).
    /// - `format=jsonl`: `application/jsonl`, JSON Lines: one
    ///   `FeedbackListItem` per line.
    ///
    /// A failure after the first bytes (the database going away) ends the
    /// response early, so a cut export is visible as such (an incomplete
    /// last line) rather than silently shorter.
    #[endpoint { method = GET, path = "/api/org/feedback/export", tags = ["orgs"] }]
    async fn org_feedback_export(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<feedback::FeedbackExportQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;
    // ---- Chat search, pins and folders (issue #35) ----

    /// Search the caller's chats.
    ///
    /// Permission `chats:read`. Looks through the caller's own chats in the
    /// organization (never another user's: chats are private): their titles
    /// and the text of every message, on any branch. `status` filters to one
    /// state; without it `ACTIVE` and `ARCHIVED` chats are searched, not
    /// `DELETED` ones. `folder_id` keeps the chats of that folder.
    ///
    /// `q` (1 to 200 characters after trimming, not blank, without NUL;
    /// `400 invalid_query` otherwise) matches a text, case-insensitively in
    /// every script (`Straße`, `ПРИВЕТ`, `ΣΟΦΙΑ`), when either
    /// - its words match: PostgreSQL full text search with the `simple`
    ///   configuration (no stemming, no stop words, so every language
    ///   alike) and web-search syntax: words in any order, `"a phrase"`,
    ///   `or`, `-word` to exclude; or
    /// - the text contains `q` as typed (trimmed): parts of words,
    ///   Japanese or Chinese without spaces (`天気`), emoji, punctuation.
    ///
    /// One result per chat, with its best matching message (`message_id`,
    /// `null` when only the title matches) and a `snippet` around the match.
    /// Order: chats whose title matches first; then better matches first
    /// (the text contains `q` as typed, then the full-text rank
    /// `ts_rank_cd`); then the most recently updated.
    ///
    /// `snippet` and `title_highlight` are HTML: the text is escaped
    /// (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`) and each match is
    /// wrapped in `<mark>`…`</mark>`, the only markup; `…` marks a cut.
    ///
    /// Paged by an opaque cursor: `limit` 1 to 50 (default 20; `400
    /// invalid_pagination`), and `cursor` the `next_cursor` of the previous
    /// page (`null` on the last page). A cursor belongs to its query: one
    /// that the server did not issue, or issued for another `q`, `status`
    /// or `folder_id`, is `400 invalid_cursor`. Pages follow one another
    /// without repeats while the chats do not change; a chat updated
    /// between two pages can move.
    #[endpoint { method = GET, path = "/api/chat/search", tags = ["chat"] }]
    async fn chat_search(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_search::ChatSearchQuery>,
    ) -> Result<HttpResponseOk<chat_search::ChatSearchPage>, HttpError>;

    /// List the caller's chat folders.
    ///
    /// Permission `chats:read`. The caller's folders in the organization
    /// (folders are private to their user, as chats are), by name
    /// (case-insensitively), then id; each with `chat_count`, its chats
    /// that are not `DELETED`. At most 1,000 folders exist per user and
    /// organization.
    #[endpoint { method = GET, path = "/api/chat/folders", tags = ["chat"] }]
    async fn chat_folders_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<chat_folders::ChatFolder>>, HttpError>;

    /// Create a chat folder.
    ///
    /// Permission `chats:write`. `name` 1 to 100 characters after trimming
    /// (`400 invalid_name`), unique among the caller's folders in the
    /// organization, case-insensitively in every script (`409
    /// folder_name_taken`); at most 1,000 folders (`409
    /// too_many_folders`). Put chats into it with `PUT /api/chat`
    /// (`folder_id`) or `POST /api/chat/folders/move`.
    #[endpoint { method = POST, path = "/api/chat/folders", tags = ["chat"] }]
    async fn chat_folders_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat_folders::ChatFolderWrite>,
    ) -> Result<HttpResponseCreated<chat_folders::ChatFolder>, HttpError>;

    /// Rename a chat folder.
    ///
    /// Permission `chats:write`. The rules of create apply (`400
    /// invalid_name`, `409 folder_name_taken`); renaming a folder to its
    /// own name in another case is allowed. `404 not_found` for a folder
    /// that is not the caller's.
    #[endpoint { method = PUT, path = "/api/chat/folders", tags = ["chat"] }]
    async fn chat_folders_rename(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_folders::ChatFolderQuery>,
        body: JsonBody<chat_folders::ChatFolderWrite>,
    ) -> Result<HttpResponseOk<chat_folders::ChatFolder>, HttpError>;

    /// Delete a chat folder.
    ///
    /// Permission `chats:write` (no chat is deleted: its chats move out of
    /// it, into no folder; `chats_moved` counts them). `404 not_found` for
    /// a folder that is not the caller's.
    #[endpoint { method = DELETE, path = "/api/chat/folders", tags = ["chat"] }]
    async fn chat_folders_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<chat_folders::ChatFolderQuery>,
    ) -> Result<HttpResponseOk<chat_folders::ChatFolderDeleted>, HttpError>;

    /// Move chats into a folder, or out of any.
    ///
    /// Permission `chats:write`. `chat_ids`: 1 to 100 of the caller's chats
    /// (`400 invalid_request` otherwise; duplicates count once);
    /// `folder_id`: one of the caller's folders, or `null` to take the
    /// chats out of their folders. All or nothing: a chat or folder that is
    /// not the caller's is `404 not_found` and nothing moves. A chat's
    /// `updated_at` does not change (nor does a pin).
    #[endpoint { method = POST, path = "/api/chat/folders/move", tags = ["chat"] }]
    async fn chat_folders_move(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<chat_folders::ChatMoveRequest>,
    ) -> Result<HttpResponseOk<chat_folders::ChatMoveResponse>, HttpError>;

    // ---- Tools area (/api/tools) ----

    /// List tool categories.
    ///
    /// Permission `tool:read`. The spec gives this operation no `org_id`;
    /// it is optional here. With `org_id`: that organization's categories
    /// (the caller needs `tool:read` there). Without it: the categories of
    /// every organization where the caller is an active member whose role
    /// grants `tool:read` (any authenticated user; possibly an empty list).
    /// Categories belong to one organization; each carries its `org_id`.
    /// Ordered by name, then id. `limit` 1 to 500 (default 100), `offset`
    /// default 0 (`400 invalid_pagination` otherwise).
    #[endpoint { method = GET, path = "/api/tools/list_categories", tags = ["tools"] }]
    async fn tools_list_categories(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::ToolListQuery>,
    ) -> Result<HttpResponseOk<Vec<tools::ToolCategory>>, HttpError>;

    /// Create a tool category.
    ///
    /// Permission `tool:write`. `name` 1 to 100 characters after trimming
    /// (`400 invalid_name`), unique in the organization, case-insensitively
    /// (`409 category_name_taken`); `description` at most 2,000 characters
    /// (`400 invalid_description`).
    #[endpoint { method = POST, path = "/api/tools/create_category", tags = ["tools"] }]
    async fn tools_create_category(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<tools::CategoryCreate>,
    ) -> Result<HttpResponseCreated<tools::ToolCategory>, HttpError>;

    /// Update a tool category.
    ///
    /// Permission `tool:write`. Omitted fields keep their value; the rules
    /// of `create_category` apply. `404 not_found` when the category is not
    /// the organization's.
    #[endpoint { method = PUT, path = "/api/tools/update_category", tags = ["tools"] }]
    async fn tools_update_category(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::CategoryQuery>,
        body: JsonBody<tools::CategoryUpdate>,
    ) -> Result<HttpResponseOk<tools::ToolCategory>, HttpError>;

    /// Delete a tool category.
    ///
    /// Permission `tool:delete`. A category that still holds tools is not
    /// deleted (`409 category_in_use`); move or delete its tools first.
    /// `404 not_found` when the category is not the organization's.
    #[endpoint { method = DELETE, path = "/api/tools/delete_category", tags = ["tools"] }]
    async fn tools_delete_category(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::CategoryQuery>,
    ) -> Result<HttpResponseOk<tools::SuccessResponse>, HttpError>;

    /// Create a tool.
    ///
    /// Permission `tool:write`. The tool belongs to the organization; with
    /// `is_public` every organization can see, test and use it (read-only).
    ///
    /// Validation (`400`, nothing stored): `invalid_name` (1 to 100
    /// characters), `tool_name_taken` (409, unique per organization,
    /// case-insensitively), `invalid_description` (at most 2,000),
    /// `invalid_version` (1 to 32), `invalid_logo_url` (at most 2,000,
    /// `http(s)://`), `unknown_category` (not a category of this
    /// organization), `invalid_parameter` (a name that is not a Python
    /// identifier, a description over 2,000 characters, more than 50
    /// parameters), `duplicate_parameter` (two inputs, or two configuration
    /// values, with one name), `invalid_default` (a `default` that does not
    /// parse as its `type`), `empty_code` (blank `function_info.code`),
    /// `invalid_code` (over 100,000 characters), `invalid_function`
    /// (`function_info.name` not a Python identifier),
    /// `invalid_requirement` (more than 50, or not a package name).
    ///
    /// Example body: `{"name": "adder", "description": "Adds", "category_id":
    /// "…", "version": "1.0.0", "configuration": [], "inputs": [{"name":
    /// "a", "type": "int", "description": "", "required": true, "default":
    /// null}], "outputs": {"type": "int", "description": "the sum"},
    /// "settings": {"function_info": {"name": "run", "is_async": false,
    /// "description": "", "code": "def run(a):\n    return a + 1"},
    /// "requirements": [], "deployment": {"framework": "python",
    /// "toolkit_class": false, "standalone_function": true}}}`.
    #[endpoint { method = POST, path = "/api/tools", tags = ["tools"] }]
    async fn tools_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<tools::ToolCreate>,
    ) -> Result<HttpResponseCreated<tools::ToolCreated>, HttpError>;

    /// List tools.
    ///
    /// Permission `tool:read`. Like `list_categories`, `org_id` is
    /// optional: with it, the organization's tools plus every public tool;
    /// without it, the tools of every organization where the caller may read
    /// tools, plus every public tool. Private tools of other organizations
    /// never appear. Each item has `category {id, name}` and no `settings`.
    /// Ordered by name, then id; `limit` 1 to 500 (default 100), `offset`
    /// default 0.
    #[endpoint { method = GET, path = "/api/tools/list_all", tags = ["tools"] }]
    async fn tools_list_all(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::ToolListQuery>,
    ) -> Result<HttpResponseOk<Vec<tools::ToolListItem>>, HttpError>;

    /// Update a tool.
    ///
    /// Permission `tool:write`. Accepts every field of `POST /api/tools`;
    /// omitted fields keep their value, and the same validation applies
    /// (all in one transaction). Only the owning organization updates a
    /// tool: a public tool of another organization is `404 not_found` here.
    #[endpoint { method = PUT, path = "/api/tools", tags = ["tools"] }]
    async fn tools_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::ToolQuery>,
        body: JsonBody<tools::ToolUpdate>,
    ) -> Result<HttpResponseOk<tools::ToolUpdated>, HttpError>;

    /// Fetch a tool with its settings.
    ///
    /// Permission `tool:read`. A tool of the organization, or a public tool
    /// of any organization; anything else is `404 not_found`.
    #[endpoint { method = GET, path = "/api/tools/get", tags = ["tools"] }]
    async fn tools_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::ToolQuery>,
    ) -> Result<HttpResponseOk<tools::Tool>, HttpError>;

    /// Delete a tool.
    ///
    /// Permission `tool:delete`. Only the owning organization deletes a
    /// tool (`404 not_found` otherwise). A tool that an agent uses is not
    /// deleted (`409 tool_in_use`); remove it from the agents first.
    #[endpoint { method = DELETE, path = "/api/tools/delete", tags = ["tools"] }]
    async fn tools_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::ToolQuery>,
    ) -> Result<HttpResponseOk<tools::SuccessResponse>, HttpError>;

    /// Run a tool once, in the sandbox.
    ///
    /// Permission `tool:execute`. A tool of the organization or a public
    /// one. The tool's `settings.function_info.code` runs in a `python3`
    /// process under bubblewrap (never in the server): no network, a
    /// read-only root file system, a private `/tmp`, its own PID namespace,
    /// an unprivileged user, and limits of CPU time, memory, processes,
    /// output size and wall-clock time (see the README's `[sandbox]`
    /// configuration). The function is called with the inputs (defaults
    /// filled in) and configuration values as keyword arguments; its
    /// return value must be JSON-serialisable.
    ///
    /// Before running: `400 invalid_input` (an unknown input name, a missing
    /// required input, a value not of the declared type), `400
    /// tool_inactive` (`is_active` false), `400 tool_requirement_missing`
    /// (a package of `requirements` is not installed in the sandbox; nothing
    /// is installed at run time), `503 tool_sandbox_unavailable`
    /// (bubblewrap or python3 is missing: code never runs unsandboxed).
    /// A run that fails is a `200` with `success: false` and `error` naming
    /// the cause (see the schema).
    #[endpoint { method = POST, path = "/api/tools/test", tags = ["tools"] }]
    async fn tools_test(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<tools::ToolQuery>,
        body: JsonBody<tools::ToolTestRequest>,
    ) -> Result<HttpResponseOk<tools::ToolTestResult>, HttpError>;

    // ---- Agents area (/api/agents) ----

    /// Create an agent.
    ///
    /// Permission `agent:write`. Validation (`400`, nothing stored):
    /// `invalid_name` (1 to 100), `invalid_description` (at most 2,000),
    /// `invalid_agent_type` (1 to 32), `model_unavailable` (not a model of
    /// `GET /api/models/list`), `invalid_params` (`temperature` outside 0
    /// to 1, `max_tokens` not above 0 or above 1,000,000, a system prompt
    /// over 20,000 characters), `invalid_tools` (more than 20, or one tool
    /// twice), `unknown_tool` (not a tool of the organization nor a public
    /// one), `invalid_tool_config` (a config name that is not one of the
    /// tool's `configuration` names, or a value not of its type).
    ///
    /// `status` (an addition; the spec's lifecycle made visible):
    /// `created` (no tools and no system prompt yet), `configured` (tools
    /// or settings given), `testing` (while `POST /api/agents/test` runs),
    /// `ready` (the last test passed), `deployed` (has deployments, none
    /// has served a request since it was (re)deployed), `active` (a
    /// deployment is serving requests). Moves: create → created or
    /// configured; update of a created/configured/testing/ready agent →
    /// configured (or created); test → testing → ready (passed) or
    /// configured (failed); deployments (`/api/agent_deploy`): the first
    /// deployment of a `ready` agent → deployed (an agent must be `ready`
    /// to be deployed), a request through a deployment's key → active,
    /// every deployment paused → deployed, the last deployment deleted →
    /// ready. A deployed or active agent keeps its state when updated or
    /// tested.
    ///
    /// Example body: `{"name": "helper", "description": "", "agent_type":
    /// "chat", "model_id": "…", "params": {"system_prompt": "Be brief",
    /// "temperature": 0.2, "max_tokens": 512}, "tools": [{"tool_id": "…",
    /// "config": [{"name": "offset", "value": 1}]}]}`.
    #[endpoint { method = POST, path = "/api/agents", tags = ["agents"] }]
    async fn agents_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<agents::AgentCreate>,
    ) -> Result<HttpResponseCreated<agents::AgentSummary>, HttpError>;

    /// List the organization's agents.
    ///
    /// Permission `agent:read`. Newest first; each with `model {id, name}`
    /// and `deployments_count`. `limit` 1 to 500 (default 100), `offset`
    /// default 0.
    #[endpoint { method = GET, path = "/api/agents/list", tags = ["agents"] }]
    async fn agents_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentListQuery>,
    ) -> Result<HttpResponseOk<Vec<agents::AgentListItem>>, HttpError>;

    /// Fetch an agent with its tools and deployments.
    ///
    /// Permission `agent:read` in the agent's organization; an agent of
    /// another organization is `404 not_found`. Tools that are no longer
    /// visible to the organization (a public tool made private) are left
    /// out.
    #[endpoint { method = GET, path = "/api/agents/get", tags = ["agents"] }]
    async fn agents_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentQuery>,
    ) -> Result<HttpResponseOk<agents::AgentDetail>, HttpError>;

    /// Update an agent.
    ///
    /// Permission `agent:write`. Every field of create, all optional;
    /// `tools`, when given, replaces the agent's tools. The validation of
    /// create applies, in one transaction. Returns the agent's summary
    /// (with its new `status`). `404 not_found` for another organization's
    /// agent.
    #[endpoint { method = PUT, path = "/api/agents/update", tags = ["agents"] }]
    async fn agents_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentQuery>,
        body: JsonBody<agents::AgentUpdate>,
    ) -> Result<HttpResponseOk<agents::AgentSummary>, HttpError>;

    /// Delete an agent.
    ///
    /// Permission `agent:delete`. Deletes the agent and its deployments
    /// (their keys stop working at once), in any state. Returns `{success,
    /// message}`. `404 not_found` for another organization's agent.
    #[endpoint { method = DELETE, path = "/api/agents/delete", tags = ["agents"] }]
    async fn agents_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentQuery>,
    ) -> Result<HttpResponseOk<tools::SuccessResponse>, HttpError>;

    /// Test an agent with one message.
    ///
    /// Permission `agent:execute`. Runs the agent runtime once (model,
    /// system prompt, params, tools in the sandbox) and returns the answer
    /// with every tool call. A passing run (the model answered) moves the
    /// agent to `ready`, a failing one back to `configured` (a deployed or
    /// active agent keeps its state). With the offline development model a
    /// message `/tool NAME {json}` makes the model call tool NAME with
    /// those arguments (see the README).
    #[endpoint { method = POST, path = "/api/agents/test", tags = ["agents"] }]
    async fn agents_test(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentQuery>,
        body: JsonBody<agents::AgentTestRequest>,
    ) -> Result<HttpResponseOk<agents::AgentTestResult>, HttpError>;

    // ---- Agent deployments area (/api/agent_deploy) ----

    /// Deploy an agent.
    ///
    /// Permission `agent:write` in the agent's organization (`404
    /// not_found` elsewhere). The agent must have passed a test (`status`
    /// `ready`, `deployed` or `active`; else `409 agent_not_ready`): the
    /// spec's lifecycle moves a `ready` agent to `deployed`.
    ///
    /// Body: `name` (1 to 100), `description` (at most 2,000), `channel`
    /// (`widget`, `api`, `sdk`, `iframe`), `allowed_origins` (web origins
    /// allowed to call from a browser, CORS; at least one for `widget` and
    /// `iframe`, at most 20), `rate_limit_per_minute` (1 to 100,000,
    /// default 60, shared by every server instance), `expires_at` (the
    /// key's expiry, in the future; unset: never). Validation: `400
    /// invalid_name`, `invalid_description`, `invalid_origins`,
    /// `invalid_rate_limit`, `invalid_expiry`.
    ///
    /// The response carries `api_key` (`wsk_live_` + 256 random bits,
    /// base64url): it is stored only as its SHA-256 and never shown again
    /// (`regenerate_key` issues a new one). `embed` shows how to use the
    /// channel. Example body: `{"name": "site widget", "channel":
    /// "widget", "allowed_origins": ["https://example.com"],
    /// "rate_limit_per_minute": 30}`.
    #[endpoint { method = POST, path = "/api/agent_deploy/create", tags = ["deployments"] }]
    async fn deployments_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentQuery>,
        body: JsonBody<deployments::DeploymentCreate>,
    ) -> Result<HttpResponseCreated<deployments::DeploymentWithKey>, HttpError>;

    /// List an agent's deployments.
    ///
    /// Permission `agent:read`. Oldest first; keys are never shown (see
    /// `key_prefix`).
    #[endpoint { method = GET, path = "/api/agent_deploy/list", tags = ["deployments"] }]
    async fn deployments_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<agents::AgentQuery>,
    ) -> Result<HttpResponseOk<Vec<deployments::Deployment>>, HttpError>;

    /// Fetch a deployment with its usage.
    ///
    /// Permission `agent:read` in the deployment's organization (`404
    /// not_found` elsewhere). `usage` counts requests and tokens served
    /// through the deployment; `last_used_at` is the last accepted request.
    #[endpoint { method = GET, path = "/api/agent_deploy/get", tags = ["deployments"] }]
    async fn deployments_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<deployments::DeploymentQuery>,
    ) -> Result<HttpResponseOk<deployments::Deployment>, HttpError>;

    /// Update a deployment (pause or resume it).
    ///
    /// Permission `agent:write`. Every field optional: `name`,
    /// `description`, `allowed_origins` (replaced), `rate_limit_per_minute`,
    /// `status` (`paused`: the key is refused at once with `401`; `active`:
    /// accepted again), `expires_at` (a new expiry in the future) or
    /// `clear_expiry: true`. The validation of create applies. When no
    /// deployment of the agent is active any more, an `active` agent goes
    /// back to `deployed` (the spec's "pause or stop").
    #[endpoint { method = PUT, path = "/api/agent_deploy/update", tags = ["deployments"] }]
    async fn deployments_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<deployments::DeploymentQuery>,
        body: JsonBody<deployments::DeploymentUpdate>,
    ) -> Result<HttpResponseOk<deployments::Deployment>, HttpError>;

    /// Delete a deployment.
    ///
    /// Permission `agent:delete`. Its key stops working at once. When it
    /// was the agent's last deployment, the agent goes back to `ready`.
    /// Returns `{success, message}`.
    #[endpoint { method = DELETE, path = "/api/agent_deploy/delete", tags = ["deployments"] }]
    async fn deployments_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<deployments::DeploymentQuery>,
    ) -> Result<HttpResponseOk<tools::SuccessResponse>, HttpError>;

    /// Issue a new key for a deployment.
    ///
    /// Permission `agent:write`. The old key stops working at once; the new
    /// one (in `api_key`, shown only here) keeps the deployment's expiry
    /// setting unless the deployment had expired, in which case it never
    /// expires until `update` sets `expires_at`.
    #[endpoint { method = POST, path = "/api/agent_deploy/regenerate_key", tags = ["deployments"] }]
    async fn deployments_regenerate_key(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<deployments::DeploymentQuery>,
    ) -> Result<HttpResponseOk<deployments::DeploymentWithKey>, HttpError>;

    /// Chat with a deployed agent (OpenAI Chat Completions).
    ///
    /// Authenticated by a deployment key only (`Authorization: Bearer
    /// wsk_live_…` or `X-API-Key: wsk_live_…`); a user's access token is
    /// refused (`401`), and a deployment key is refused by every other
    /// operation. Any OpenAI SDK works with `base_url` set to
    /// `<server>/api/agent_deploy/v1` and the key as its API key.
    ///
    /// The agent runs through the agent runtime with its model, system
    /// prompt, params and tools (tool calls happen on the server; the
    /// client sees the answer). `messages`: the conversation, oldest first;
    /// `system`/`developer` messages are added to the agent's system
    /// prompt; the last message must be `user`. `model` is ignored (the
    /// deployment serves one agent). `temperature` and `max_tokens`
    /// override the agent's params within its limits.
    ///
    /// `stream: false` (default): a `chat.completion` JSON object. `stream:
    /// true`: `text/event-stream` of `data: <chat.completion.chunk>` lines,
    /// the first with `delta.role`, then `delta.content` pieces, a chunk
    /// with `finish_reason`, a last chunk with `usage` and empty `choices`,
    /// then `data: [DONE]`. A failure mid-stream sends `data: {"error":
    /// {...}}` and ends without `[DONE]`.
    ///
    /// Errors have OpenAI's shape `{"error": {message, type, param, code}}`:
    /// `401 invalid_api_key` (missing, unknown, paused, deleted or expired
    /// key), `403 origin_not_allowed` (a browser `Origin` not in the
    /// deployment's `allowed_origins`), `429 rate_limited` with
    /// `Retry-After` (the deployment's per-minute limit over a sliding
    /// minute, counted across instances; `Retry-After` is the wait until
    /// one more request fits), `400 invalid_request`/`invalid_messages`, `503
    /// agent_unavailable` (the agent's model is no longer offered). Every
    /// accepted request counts in the deployment's `usage`, sets
    /// `last_used_at` and makes a `deployed` agent `active`.
    ///
    /// CORS: for a request with an `Origin` in `allowed_origins` the answer
    /// carries `Access-Control-Allow-Origin: <origin>`; preflights are
    /// answered by the `OPTIONS` operations of these paths.
    #[endpoint { method = POST, path = "/api/agent_deploy/v1/chat/completions", tags = ["deployments"] }]
    async fn deployments_chat_completions(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<deployments::ChatCompletionRequest>,
    ) -> Result<http::Response<dropshot::Body>, deployments::OpenAiHttpError>;

    /// List the deployment's model (OpenAI Models).
    ///
    /// Authenticated by a deployment key (as `chat/completions`). One
    /// model, `agent-<agent id>`, owned by the agent's organization. Errors
    /// in OpenAI's shape.
    #[endpoint { method = GET, path = "/api/agent_deploy/v1/models", tags = ["deployments"] }]
    async fn deployments_models(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, deployments::OpenAiHttpError>;

    /// CORS preflight of `chat/completions`.
    ///
    /// Public (browsers send preflights without credentials). Answers `204`
    /// allowing the request's `Origin`, methods `GET, POST, OPTIONS` and
    /// headers `authorization, x-api-key, content-type`; whether the origin
    /// may really call is decided on the request itself, by the
    /// deployment's `allowed_origins` (`403 origin_not_allowed`).
    #[endpoint { method = OPTIONS, path = "/api/agent_deploy/v1/chat/completions", tags = ["deployments"] }]
    async fn deployments_chat_completions_preflight(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// CORS preflight of `models`.
    ///
    /// Public; as the preflight of `chat/completions`.
    #[endpoint { method = OPTIONS, path = "/api/agent_deploy/v1/models", tags = ["deployments"] }]
    async fn deployments_models_preflight(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    // MCP area. Every operation takes the organization (`org_id`); an
    // instance and its session belong to one (organization, user): nobody
    // else ever sees or uses them (`404 not_found`, as for a missing id).

    /// List the MCP servers of the catalog.
    ///
    /// Permission `mcp:read`. The servers configured by the operator
    /// (`[[mcp_servers]]`), by name; ids are stable across restarts.
    /// `server_instance_count` counts the caller's instances of each server
    /// in the organization.
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = GET, path = "/api/mcp/list_servers", tags = ["mcp"] }]
    async fn mcp_list_servers(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PersonalOrgQuery>,
    ) -> Result<HttpResponseOk<mcp::McpServerList>, HttpError>;

    /// Fetch an MCP server with its tools.
    ///
    /// Permission `mcp:read`. The tools are listed over MCP streamable HTTP
    /// and cached in the database for `mcp.tools_cache_ttl_secs`, shared by
    /// every instance of the service. The listing is unauthenticated; a
    /// server that requires authorization is listed with the caller's own
    /// active instance's token when they have one. A server that cannot be
    /// listed (unreachable, or authorization required and the caller has
    /// no instance) while nothing is cached answers `502
    /// mcp_server_unavailable`; a stale cache entry is served when the
    /// server fails. `404 not_found` for an id not in the catalog.
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = GET, path = "/api/mcp/server_with_tools", tags = ["mcp"] }]
    async fn mcp_server_with_tools(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<mcp::ServerQuery>,
    ) -> Result<HttpResponseOk<mcp::McpServerWithTools>, HttpError>;

    /// Start connecting the caller's account to an MCP server.
    ///
    /// Permission `mcp:write`. The organization's `mcp_sessions` quota
    /// counts its active and unexpired pending sessions (all users): when
    /// exhausted, `402 mcp_sessions_quota_exceeded`. A server with `auth =
    /// "none"`: the session is `active` at once, its instance is created,
    /// and `redirect_url` is the frontend's callback page. An OAuth server:
    /// a `pending` session; `redirect_url` is the authorization server's
    /// authorization endpoint (found by RFC 9728 then RFC 8414 discovery,
    /// the client registered by RFC 7591 when none is configured) with PKCE
    /// S256 and a single-use `state` bound to the session, expiring after
    /// `mcp.state_ttl_secs`. `502 mcp_server_unavailable` when discovery or
    /// registration fails. `flow_type`: 1 to 50 of `[A-Za-z0-9_-]` (`400
    /// invalid_flow_type`).
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = POST, path = "/api/mcp/connect_account", tags = ["mcp"] }]
    async fn mcp_connect_account(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PersonalOrgQuery>,
        body: JsonBody<mcp::ConnectAccount>,
    ) -> Result<HttpResponseOk<mcp::ConnectionStart>, HttpError>;

    /// OAuth redirect target of MCP connections.
    ///
    /// Public: called by the browser coming back from the authorization
    /// server. Validates the single-use `state` (unknown, replayed or
    /// expired: nothing is created), exchanges the `code` with the PKCE
    /// verifier, stores the tokens sealed at rest, sets the session
    /// `active`, creates the instance, then answers `303 See Other` to
    /// `{frontend_url}/mcp/callback?mcp_server_id=…&mcp_session_id=…&flow_type=…`.
    /// Every failure also redirects there, with an `error` parameter
    /// (`invalid_state`, `access_denied` or the provider's error,
    /// `token_exchange_failed`) instead of the ids.
    #[endpoint { method = GET, path = "/api/mcp/callback", tags = ["mcp"] }]
    async fn mcp_callback(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<mcp::CallbackQuery>,
    ) -> Result<dropshot::HttpResponseSeeOther, HttpError>;

    /// List the caller's MCP instances.
    ///
    /// Permission `mcp:read`. The caller's own instances in the
    /// organization (never another user's), oldest first; `server_id`
    /// filters to one server.
    #[endpoint { method = GET, path = "/api/mcp/list_instances", tags = ["mcp"] }]
    async fn mcp_list_instances(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<mcp::InstanceListQuery>,
    ) -> Result<HttpResponseOk<mcp::McpInstanceList>, HttpError>;

    /// Rename an MCP instance.
    ///
    /// Permission `mcp:write`. `name` 1 to 100 characters after trimming,
    /// without control characters (`400 invalid_name`). `404 not_found`
    /// unless the instance is the caller's in the organization.
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = PUT, path = "/api/mcp/instance", tags = ["mcp"] }]
    async fn mcp_update_instance(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<mcp::InstanceQuery>,
        body: JsonBody<mcp::InstanceRename>,
    ) -> Result<HttpResponseOk<mcp::McpInstance>, HttpError>;

    /// Delete an MCP instance.
    ///
    /// Permission `mcp:write`. Irreversible: removes the instance and its
    /// session with the sealed tokens (its gateway URL stops working).
    /// OAuth tokens are revoked at the provider (RFC 7009) when it declares
    /// a revocation endpoint; a failing revocation is logged and does not
    /// keep the instance. `404 not_found` unless the instance is the
    /// caller's in the organization.
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = DELETE, path = "/api/mcp/instance", tags = ["mcp"] }]
    async fn mcp_delete_instance(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<mcp::InstanceQuery>,
    ) -> Result<HttpResponseOk<mcp::McpDeleted>, HttpError>;

    /// Generate the MCP gateway URL of an instance.
    ///
    /// Permission `mcp:write`. `session_id` must be the caller's session of
    /// `server_id` in the organization with an instance (`404 not_found`).
    /// Each call makes a new unguessable secret (the previous URL stops
    /// working): `mcp_url` is `{api_public_url}/api/mcp/gateway/{secret}`;
    /// only the secret's SHA-256 is stored. `status` is the session's.
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = POST, path = "/api/mcp/generate_url", tags = ["mcp"] }]
    async fn mcp_generate_url(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PersonalOrgQuery>,
        body: JsonBody<mcp::GenerateUrl>,
    ) -> Result<HttpResponseOk<mcp::McpUrl>, HttpError>;

    /// MCP gateway: send a message (MCP streamable HTTP).
    ///
    /// Public: the secret of the URL made by `generate_url` is the
    /// credential (only its SHA-256 is stored). Any MCP client uses
    /// `{api_public_url}/api/mcp/gateway/{secret}` as a streamable HTTP
    /// endpoint: the request (its body and the `Content-Type`, `Accept`,
    /// `Mcp-Session-Id`, `Mcp-Protocol-Version`, `Last-Event-ID` headers)
    /// is forwarded to the instance's MCP server with the user's OAuth
    /// access token, and the answer (JSON or an event stream) is streamed
    /// back with its status and MCP headers. `404 not_found` for an unknown
    /// secret, `409 mcp_instance_not_active` when the session needs a new
    /// authorization, `502 mcp_server_unavailable` when the server cannot
    /// be reached or rejects the stored credentials.
    ///
    /// Alternatively a client holding the user's access token uses
    /// `/api/mcp/gateway/{instance_id}` with `Authorization: Bearer
    /// <token>` (permission `mcp:write`; the caller's own instance, else
    /// `404 not_found`; `401` for a bad token). The header is not
    /// forwarded to the MCP server.
    #[endpoint {
        method = POST,
        path = "/api/mcp/gateway/{secret}",
        tags = ["mcp"],
        request_body_max_bytes = 4_194_304,
    }]
    async fn mcp_gateway_post(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<mcp::GatewayPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// MCP gateway: open the server's event stream.
    ///
    /// As `POST /api/mcp/gateway/{secret}`, for the streamable HTTP `GET`
    /// (server-initiated messages, resumption with `Last-Event-ID`).
    #[endpoint { method = GET, path = "/api/mcp/gateway/{secret}", tags = ["mcp"] }]
    async fn mcp_gateway_get(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<mcp::GatewayPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// MCP gateway: end the MCP session.
    ///
    /// As `POST /api/mcp/gateway/{secret}`, for the streamable HTTP
    /// `DELETE` that ends an `Mcp-Session-Id`.
    #[endpoint { method = DELETE, path = "/api/mcp/gateway/{secret}", tags = ["mcp"] }]
    async fn mcp_gateway_delete(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<mcp::GatewayPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Chat with MCP tools (Server-Sent Events).
    ///
    /// Permission `mcp:write`. Streams `data: <json>` items: message
    /// tokens `{message, tool: null}`, a tool call started `{message: "",
    /// tool: {id, name, input, output: null}}` and completed (`successful`,
    /// `error`, `output` added), `{mcp: {server_ids}, message: "", tool:
    /// null}` recommendations, then `{message: "DONE", tool: null}`; a
    /// failure (an unreachable server, an expired grant, the model
    /// provider) streams `{error}` as the last item instead.
    ///
    /// With `mcp_instance_ids` (Direct MCP mode) the tools of those
    /// instances (the caller's own in the organization, else `404
    /// not_found` before the stream starts) are offered to the model as
    /// `{toolkit_slug}_{tool}`, called through the instance's server with
    /// the user's token, by the agent runtime's tool loop. Without them
    /// (Intelligent Discovery) the catalog is ranked for the message, and
    /// the matching servers' ids are recommended, best first. When the
    /// model (`model`, else `mcp.playground_model`, else the first
    /// configured model) is a real provider's, it is asked (15 s at most):
    /// it gets the catalog as numbered lines (each server's name, toolkit
    /// and its cached tools' first sentences) and answers with the numbers
    /// of the servers that help, best first, which are recommended as they
    /// are (`[]`: none). Otherwise, or when that model fails or answers
    /// anything but such a list: by meaning when the local embedding model
    /// is provisioned (cosine similarity of the message with each server's
    /// text, plus 0.1 per shared word up to three, at least 0.25), else by
    /// the words the message shares with them.
    ///
    /// Pagination hints: when a tool's output (`structuredContent`, or a
    /// JSON text content) carries `nextPageToken` (and
    /// `resultSizeEstimate`), it is remembered per user, instance and tool
    /// (an output without one forgets it). In later requests the tool's
    /// description tells the model the remembered `pageToken`, and when the
    /// message asks for more (`more`, `next`, `continue`, `further`,
    /// `remaining`, `rest`) and the model calls the tool without a
    /// `pageToken` its schema accepts, the remembered one is filled in, so
    /// "show me more" continues where the last page ended.
    ///
    /// `400 invalid_message` (empty or longer than 32,000
    /// characters), `400 invalid_model` (a name without a known prefix),
    /// `400 model_unavailable` (not offered here).
    ///
    /// `org_id` is optional (the spec lists no organization here): without
    /// it the caller's personal organization is used, with it the given
    /// one. An unauthenticated call is `401` either way.
    #[endpoint { method = POST, path = "/api/mcp_playground/chat", tags = ["mcp-playground"] }]
    async fn mcp_playground_chat(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::PersonalOrgQuery>,
        body: JsonBody<mcp::PlaygroundChat>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    // ---- Organizations and accounts that end (issue #34) ----

    /// Delete an organization and everything it holds.
    ///
    /// An addition to the spec. The organization's owners only (the owner
    /// system role with `organization:admin`; anyone else `403 forbidden`),
    /// confirmed by the organization's exact name in `confirm_name` (`400
    /// confirmation_mismatch`). A personal organization is deleted with its
    /// account only (`409 personal_organization`; see `POST
    /// /api/users/me/delete`).
    ///
    /// The organization is unusable as soon as this answers: every
    /// operation on it answers as for an organization the caller does not
    /// belong to (`403`, or `404` for its objects), on every instance; it
    /// leaves `GET /api/org/list`; its deployment keys, MCP gateway URLs,
    /// pending OAuth callbacks, invitations, WebSocket tickets and file
    /// download links stop working; its queued and running ingestion jobs
    /// are cancelled (a worker in the middle of one writes nothing more);
    /// its answers being generated are stopped (their streams end with
    /// `finish_reason` `stopped`).
    ///
    /// Its contents are then deleted by a durable background job, in
    /// bounded batches (`deletion.batch_rows` rows per transaction), which
    /// any instance's deletion workers claim and which resumes where it
    /// was after a crash or restart: the MCP grants of its members are
    /// revoked at their providers (RFC 7009) and their tokens deleted; its
    /// stored files are deleted from the file store (local or S3); its
    /// vectors, documents, sources, knowledge bases, chats, conversations
    /// with their messages and stream events, deployments, agents, tools
    /// (and the uses of its public tools by other organizations' agents),
    /// MCP sessions and invitations are deleted; last its row, with what
    /// remains (roles, memberships, quotas), and anything left in the file
    /// store under its folder.
    ///
    /// Answers `202` with the job (follow it with `GET
    /// /api/org/deletion_status`).
    #[endpoint { method = DELETE, path = "/api/org/delete", tags = ["orgs"] }]
    async fn org_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<orgs::OrgDeleteRequest>,
    ) -> Result<dropshot::HttpResponseAccepted<orgs::OrgDeletion>, HttpError>;

    /// Follow the deletion of an organization.
    ///
    /// An addition to the spec. The one who requested the deletion only
    /// (the organization itself no longer admits anyone): `404 not_found`
    /// for anyone else, and for an organization whose deletion was not
    /// requested. Answered from the database by any instance, during the
    /// deletion and after it (`state` `done`).
    #[endpoint { method = GET, path = "/api/org/deletion_status", tags = ["orgs"] }]
    async fn org_deletion_status(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<orgs::OrgDeletion>, HttpError>;

    /// Delete one's own account.
    ///
    /// An addition to the spec. The password is re-entered (`403
    /// invalid_password`; failures count towards the login lock-out, `429
    /// too_many_login_attempts`). Refused with `409 sole_owner`, naming the
    /// organizations, while the account is the only owner of an
    /// organization that has other members (active, suspended or invited):
    /// transfer ownership or remove them first.
    ///
    /// Otherwise, at once and in one transaction: the organizations the
    /// account alone belongs to as their owner (its personal organization
    /// among them) are deleted as by `DELETE /api/org/delete` (each with its
    /// job); every membership of the account is removed; its MCP gateway
    /// URLs and WebSocket tickets stop working and its chat answers being
    /// generated stop; its e-mail, names and password are erased, so no
    /// token of it is accepted any more (`401`) and the address can sign up
    /// again.
    ///
    /// A durable job then revokes its MCP grants at their providers and
    /// deletes their tokens, deletes its chats (private to it) with their
    /// messages and uploads, and last the account's row. What organizations
    /// that remain keep is theirs: the conversations the account started
    /// there and their messages stay, without their author (export them
    /// first with `GET /api/users/me/export`); so do its uploads outside
    /// chats (knowledge-base files).
    ///
    /// Answers `202` with the jobs; the account cannot follow them
    /// afterwards (it no longer authenticates).
    #[endpoint { method = POST, path = "/api/users/me/delete", tags = ["users"] }]
    async fn users_delete_me(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<users::AccountDeleteRequest>,
    ) -> Result<dropshot::HttpResponseAccepted<users::AccountDeletion>, HttpError>;

    /// Export one's own data as one JSON document.
    ///
    /// An addition to the spec. Any authenticated user, for their own
    /// account: the profile, every membership (any state), the account's
    /// chat sessions with their messages, the conversations it started
    /// with all their messages, and its uploads listed (name, type, size,
    /// SHA-256, ids; not their bytes). The document is an `AccountExport`.
    ///
    /// Streamed as it is read: the server holds at most one page of rows
    /// at a time (50 messages, or 100 chats, conversations or uploads), so
    /// an account with a very long history costs the server no more memory
    /// than a short one, and a slow reader holds up only its own download.
    /// A failure after the first bytes (the database going away) ends the
    /// response early, leaving the document incomplete (not valid JSON)
    /// rather than silently shorter.
    #[endpoint { method = GET, path = "/api/users/me/export", tags = ["users"] }]
    async fn users_export(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    // ---- Audit log (issue #36) ----

    /// List audit events.
    ///
    /// An addition to the spec. Every change of state or access and every
    /// security event is one event: logins (succeeded or failed), personal
    /// access tokens, service accounts and deployment keys created,
    /// rotated or revoked, roles, memberships and invitations, the
    /// permission catalog, settings and feature gates, MCP accounts
    /// connected, organizations created, renamed or deleted, and every
    /// administrative operation a member was refused (`authz.denied`). An
    /// event is written in the same transaction as the change it records:
    /// a change rolled back leaves none, a committed one always has one.
    /// Events never hold a secret (no token, key, password or their
    /// hashes).
    ///
    /// With `org_id`: the organization's events, for its admins (a role of
    /// level 80 or more that grants `audit:read`; the admin and owner
    /// system roles do through `*:read` and `*:*`), or a system
    /// administrator; anyone else is `403 forbidden` (and the refusal is
    /// itself recorded), a personal access token needs the `audit:read`
    /// scope. Without `org_id`: every event, system-level ones (`org_id:
    /// null`: logins, personal tokens, the permission catalog) included,
    /// for system administrators only (a login).
    ///
    /// Filters (optional, combined): `actor_id` (the user, token or
    /// deployment, or the user behind a token), `action` (exact, or a
    /// prefix when it ends with `*`: `role.*`), `target_kind`,
    /// `target_id`, `outcome`, `from` (inclusive) and `to` (exclusive).
    /// Newest first (by `id`), in pages of `limit` (1 to 500, default 50;
    /// `400 invalid_pagination`): pass `next_cursor` as `cursor` for the
    /// next page (opaque; a malformed one is `400 invalid_cursor`). Pages
    /// neither overlap nor skip while events are added.
    #[endpoint { method = GET, path = "/api/audit/events", tags = ["audit"] }]
    async fn audit_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<audit::AuditListQuery>,
    ) -> Result<HttpResponseOk<audit::AuditPage>, HttpError>;

    /// Export audit events as JSON Lines.
    ///
    /// An addition to the spec, with the access and filters of `GET
    /// /api/audit/events`. The whole filtered set, newest first, one
    /// `AuditEvent` per line (`application/jsonl`, a download), streamed
    /// as it is read (500 events at a time: the server holds no more,
    /// whatever the size of the log). A failure after the first bytes ends
    /// the response early, so a cut export shows as such (an incomplete
    /// last line).
    #[endpoint { method = GET, path = "/api/audit/export", tags = ["audit"] }]
    async fn audit_export(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<audit::AuditExportQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// Verify the audit log's hash chains.
    ///
    /// An addition to the spec, with the access of `GET
    /// /api/audit/events` (`org_id`: that organization's chain; without
    /// it, every chain, for system administrators). Each organization's
    /// events form a chain (system-level events one of their own): event
    /// `seq` n carries the SHA-256 of event n−1's hash, n and its own
    /// columns. Verification reads the chain in order and recomputes every
    /// hash from the stored columns: an event changed by hand (even with
    /// the append-only trigger disabled) or removed breaks the chain, and
    /// `first_broken_seq` names the first broken `seq` (`ok: false`).
    /// Retention drops whole months and records where the remaining chain
    /// starts, so it breaks nothing.
    #[endpoint { method = GET, path = "/api/audit/verify", tags = ["audit"] }]
    async fn audit_verify(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<audit::AuditVerifyQuery>,
    ) -> Result<HttpResponseOk<audit::AuditVerification>, HttpError>;
    // ---- Usage, cost and budgets (issue #36) ----

    /// Report the organization's model usage and cost.
    ///
    /// An addition to the spec, for the organization's admins: a role of
    /// level 80 or more that grants `usage:read` (the admin and owner
    /// system roles do, through `*:read` and `*:*`); anyone else is `403
    /// forbidden`, and a personal access token needs the `usage:read`
    /// scope.
    ///
    /// Every model call is recorded: chat answers and prompt suggestions,
    /// conversations, agent tests, deployments, the MCP playground,
    /// transcriptions and the embeddings of ingestion and search. Each
    /// record has the tokens in and out (the provider's figures when it
    /// reports them, else estimated as characters / 4: `estimated_calls`
    /// counts those), and its cost from the server's price table
    /// (`[usage.prices]`: USD per million tokens by model) in micro-dollars,
    /// computed when it was recorded. Records are written in batches within
    /// about 100 ms of a call's end.
    ///
    /// Grouped by `group_by` (`day` in UTC, `user`, `model`, `deployment`,
    /// `token`, `kind`), between `from` (inclusive; default 30 days before
    /// `to`) and `to` (exclusive; default now), with the totals of all
    /// groups. `from` after `to` is `400 invalid_range`.
    #[endpoint { method = GET, path = "/api/org/usage/report", tags = ["orgs"] }]
    async fn org_usage_report(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<usage::UsageReportQuery>,
    ) -> Result<HttpResponseOk<usage::UsageReport>, HttpError>;

    /// Export the organization's usage report as CSV.
    ///
    /// As `GET /api/org/usage/report` (same permission and query), as a
    /// download (`text/csv; charset=utf-8`, `Content-Disposition:
    /// attachment`): RFC 4180 with CRLF line ends, a header row `key`,
    /// `label`, `calls`, `input_tokens`, `output_tokens`, `total_tokens`,
    /// `cost_micros`, `cost_usd`, `estimated_calls`, `unfinished_calls`,
    /// one row per group and a last row whose key is `total`. A cell that
    /// starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a
    /// leading apostrophe (against formula injection).
    #[endpoint { method = GET, path = "/api/org/usage/export", tags = ["orgs"] }]
    async fn org_usage_export(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<usage::UsageReportQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// List the organization's budgets.
    ///
    /// For the organization's admins (a role of level 80 or more that
    /// grants `usage:read`). Each budget with its current period: `spent`
    /// (what finished calls used), `reserved` (what running calls hold)
    /// and `reset_at`.
    #[endpoint { method = GET, path = "/api/org/budgets/list", tags = ["orgs"] }]
    async fn org_budgets_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<usage::BudgetList>, HttpError>;

    /// Create a budget.
    ///
    /// For the organization's admins (a role of level 80 or more that
    /// grants `usage:write`). A limit on tokens (input plus output) or cost
    /// (micro-dollars, from the price table) per UTC day or month, for the
    /// whole organization, one member (`subject_id`: a user of the
    /// organization), one personal access token (of a member) or one
    /// deployment key (a deployment of the organization); an unknown
    /// subject is `404 not_found`, a `subject_id` with `organization` or
    /// none with another scope `400 invalid_budget`. One budget per scope,
    /// subject, metric and period (`409 budget_exists`).
    ///
    /// Checked before every model call of those it applies to (chat,
    /// prompt suggestions, conversations, agent tests, deployments, the
    /// playground): a call is admitted while what was spent plus what the
    /// running calls reserved is below the limit, and reserves its
    /// estimate (its input as characters / 4 plus its `max_tokens`, or
    /// the server's `usage.reserve_output_tokens`), replaced by what it
    /// used when it ends. The check and the reservation are one statement
    /// on the database: across instances, a budget is exceeded by no more
    /// than the calls already running when it was reached. Refused calls
    /// are `429 budget_exceeded` with `Retry-After` (seconds until the
    /// period resets) and the reset time in the message; the deployment
    /// endpoint answers in OpenAI's error shape. `agents/test`,
    /// `chat/prompt` and `mcp_playground/chat`, released without a `429`
    /// answer, refuse with `403 budget_exceeded` (same message) so that
    /// strict clients of the released document keep decoding them. The organization's
    /// `daily_chat_limit` quota applies as before, independently.
    ///
    /// With `threshold_percent`, the organization's admins are e-mailed
    /// once per period when that share of the limit is spent.
    #[endpoint { method = POST, path = "/api/org/budgets/create", tags = ["orgs"] }]
    async fn org_budgets_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<usage::BudgetCreate>,
    ) -> Result<HttpResponseCreated<usage::Budget>, HttpError>;

    /// Change a budget's limit and threshold.
    ///
    /// For the organization's admins (`usage:write`). The current period's
    /// spending is kept; a threshold already notified in this period is not
    /// notified again.
    #[endpoint { method = PUT, path = "/api/org/budgets/update", tags = ["orgs"] }]
    async fn org_budgets_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<usage::BudgetQuery>,
        body: JsonBody<usage::BudgetUpdate>,
    ) -> Result<HttpResponseOk<usage::Budget>, HttpError>;

    /// Delete a budget.
    ///
    /// For the organization's admins (`usage:write`). Calls it applied to
    /// are no longer limited by it.
    #[endpoint { method = DELETE, path = "/api/org/budgets/delete", tags = ["orgs"] }]
    async fn org_budgets_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<usage::BudgetQuery>,
    ) -> Result<HttpResponseOk<usage::BudgetDeleted>, HttpError>;
    // ---- Webhooks (issue #36) ----

    /// Subscribe an endpoint to the organization's events.
    ///
    /// An addition to the spec, for the organization's admins: a role of
    /// level 80 or more that grants `webhooks:write` (the admin and owner
    /// system roles do); anyone else is `403 forbidden`, and a personal
    /// access token needs the `webhooks:write` scope. At most
    /// `webhooks.max_endpoints` endpoints (20 by default) per organization
    /// (`409 too_many_webhooks`).
    ///
    /// `url`: `https://` (`http://` only where the server's configuration
    /// allows it), at most 2000 bytes, no credentials (`400 invalid_url`);
    /// never a private, loopback, link-local or metadata address, literal
    /// or resolved (`400 url_not_allowed`; checked again at every
    /// connection). `event_types`: 1 to 50 event types
    /// (`answer.completed`, `document.ingested`, `document.failed`,
    /// `member.joined`, `member.suspended`, `member.removed`,
    /// `budget.threshold_reached`, `audit.<action>`), prefixes ending in
    /// `.*` (`audit.*`, `member.*`) or `*` (`400 invalid_event_types`).
    /// `description`: at most 200 characters (`400 invalid_description`).
    ///
    /// Answers the endpoint and its signing secret (`whsec_` and base64 of
    /// 32 random bytes), shown this once: deliveries are signed as the
    /// Standard Webhooks specification says (headers `webhook-id`,
    /// `webhook-timestamp`, `webhook-signature`), so its libraries verify
    /// them. The body is `{"id", "type", "timestamp", "organization_id",
    /// "data"}`. Deliveries are at least once (receivers drop a repeated
    /// `webhook-id`), retried with backoff for about a day (5 s, 5 min,
    /// 30 min, 2 h, 5 h, 10 h, 10 h by default); an endpoint whose
    /// deliveries keep failing is disabled and the organization's admins
    /// are told by e-mail.
    #[endpoint { method = POST, path = "/api/org/webhooks/create", tags = ["orgs"] }]
    async fn org_webhooks_create(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<webhooks::WebhookEndpointCreate>,
    ) -> Result<HttpResponseCreated<webhooks::WebhookEndpointCreated>, HttpError>;

    /// List the organization's webhook endpoints.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:read`). Oldest first; never their secrets.
    #[endpoint { method = GET, path = "/api/org/webhooks/list", tags = ["orgs"] }]
    async fn org_webhooks_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<webhooks::WebhookEndpoint>>, HttpError>;

    /// Get a webhook endpoint.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:read`). Another organization's or an unknown endpoint is
    /// `404 not_found`.
    #[endpoint { method = GET, path = "/api/org/webhooks/get", tags = ["orgs"] }]
    async fn org_webhooks_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookEndpointQuery>,
    ) -> Result<HttpResponseOk<webhooks::WebhookEndpoint>, HttpError>;

    /// Change a webhook endpoint.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:write`). The fields given change, checked as at creation.
    /// `enabled: false` disables it (its pending deliveries fail; replay
    /// them later); `enabled: true` enables it again and resets its
    /// failure count. `404 not_found` for another organization's endpoint.
    #[endpoint { method = PUT, path = "/api/org/webhooks/update", tags = ["orgs"] }]
    async fn org_webhooks_update(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookEndpointQuery>,
        body: JsonBody<webhooks::WebhookEndpointUpdate>,
    ) -> Result<HttpResponseOk<webhooks::WebhookEndpoint>, HttpError>;

    /// Delete a webhook endpoint.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:write`). The endpoint goes with its delivery log; nothing
    /// more is sent to it. `404 not_found` for another organization's.
    #[endpoint { method = DELETE, path = "/api/org/webhooks/delete", tags = ["orgs"] }]
    async fn org_webhooks_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookEndpointQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Give a webhook endpoint a new signing secret.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:write`). Answers the new secret, shown this once. The
    /// secret it replaces stays valid for `webhooks.rotation_overlap_secs`
    /// (24 hours by default, `previous_secret_expires_at`): meanwhile every
    /// delivery carries two signatures in `webhook-signature`, so a
    /// receiver verifies with either secret while it is updated.
    #[endpoint { method = POST, path = "/api/org/webhooks/rotate_secret", tags = ["orgs"] }]
    async fn org_webhooks_rotate_secret(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookEndpointQuery>,
    ) -> Result<HttpResponseOk<webhooks::WebhookSecretRotated>, HttpError>;

    /// Send a test event to a webhook endpoint.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:write`). Queues a `webhook.test` event for this endpoint
    /// alone, whatever it subscribes to, and answers its delivery (follow
    /// it in `GET /api/org/webhooks/deliveries`). A disabled endpoint's
    /// test delivery fails.
    #[endpoint { method = POST, path = "/api/org/webhooks/test", tags = ["orgs"] }]
    async fn org_webhooks_test(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookEndpointQuery>,
    ) -> Result<HttpResponseAccepted<webhooks::WebhookDelivery>, HttpError>;

    /// List the organization's webhook deliveries.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:read`): the delivery log, newest first, each delivery with
    /// its `webhook_id`, state, attempts, next attempt, and the last
    /// attempt's HTTP status, latency, first bytes of the answer (at most
    /// 4 KiB by default) and error. Filters: `endpoint_id`, `status`,
    /// `event_type` (exact). Pages of `limit` (1 to 200, default 50; `400
    /// invalid_pagination`); pass `next_cursor` as `cursor` for the next
    /// (`400 invalid_cursor` for anything else).
    #[endpoint { method = GET, path = "/api/org/webhooks/deliveries", tags = ["orgs"] }]
    async fn org_webhooks_deliveries(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookDeliveriesQuery>,
    ) -> Result<HttpResponseOk<webhooks::WebhookDeliveryPage>, HttpError>;

    /// Send a webhook delivery again.
    ///
    /// An addition to the spec, for the organization's admins (level 80 and
    /// `webhooks:write`). Queues a new delivery of the same event to the
    /// same endpoint (`replay_of` names the original) with a new
    /// `webhook_id`, so a receiver that dropped the original as a repeat
    /// takes it; it is sent with the endpoint's current secret, retried as
    /// any delivery. `404 not_found` for another organization's delivery.
    #[endpoint { method = POST, path = "/api/org/webhooks/deliveries/replay", tags = ["orgs"] }]
    async fn org_webhooks_replay(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<webhooks::WebhookDeliveryQuery>,
    ) -> Result<HttpResponseAccepted<webhooks::WebhookDelivery>, HttpError>;

    // ---- SCIM provisioning (issue #37) ----

    /// Show the organization's SCIM provisioning.
    ///
    /// An addition to the spec, for the organization's admins (level 80
    /// and `organization:admin`): the base URL to give the identity
    /// provider, whether a token is issued (never the token), the
    /// group-to-role mappings and how many Users and Groups are
    /// provisioned. `404 not_found` when provisioning is off.
    #[endpoint { method = GET, path = "/api/org/scim", tags = ["orgs"] }]
    async fn org_scim_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<scim::ScimConfig>, HttpError>;

    /// Set how provisioned groups map to roles.
    ///
    /// An addition to the spec, for the organization's admins (level 80
    /// and `organization:admin`); turns provisioning on when it was off
    /// (it works once a token is issued). A provisioned member's role is
    /// the role of the first mapping naming one of their Groups (by
    /// `displayName`), else `default_role`; every provisioned member's
    /// role is set again now, in the same transaction. Owners keep their
    /// role. Each role must be a role of the organization other than
    /// `owner` (`400 invalid_role`). Audited as `scim.configured`.
    ///
    /// What provisioning does (`/scim/v2`, RFC 7643/7644): a User stands
    /// for the account of its primary e-mail address (else its first, else
    /// `userName` when it is an address): a member of the organization
    /// (or an invitee) with that address, or a new account made now (with
    /// no usable password: the person signs in with the organization's
    /// single sign-on or resets a password). An address of an account
    /// outside the organization is refused (`409 uniqueness`): invite it
    /// first. A User without an address is kept but stands for nobody
    /// until it gets one. `active: false`, or deleting the User, suspends
    /// the membership at once (its sessions and tokens are refused in the
    /// organization from the next request); `active: true` makes it active
    /// again. An owner cannot be deactivated by provisioning.
    #[endpoint { method = PUT, path = "/api/org/scim", tags = ["orgs"] }]
    async fn org_scim_put(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<scim::ScimConfigInput>,
    ) -> Result<HttpResponseOk<scim::ScimConfig>, HttpError>;

    /// Issue the organization's SCIM token.
    ///
    /// An addition to the spec, for the organization's admins (level 80
    /// and `organization:admin`); turns provisioning on (role mappings
    /// empty, default role `member`) when it was off. The token
    /// (`wscim_…`, 256 random bits) is answered once and stored only as
    /// its SHA-256; the previous token stops working at once. Audited as
    /// `scim.token_issued`.
    #[endpoint { method = POST, path = "/api/org/scim/token", tags = ["orgs"] }]
    async fn org_scim_token(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<scim::ScimTokenIssued>, HttpError>;

    /// Turn the organization's SCIM provisioning off.
    ///
    /// An addition to the spec, for the organization's admins (level 80
    /// and `organization:admin`). The token stops working and the
    /// provisioned Users and Groups are forgotten; the members they made
    /// stay as they are (suspend or remove them with the member
    /// operations). `404 not_found` when it is off. Audited as
    /// `scim.removed`.
    #[endpoint { method = DELETE, path = "/api/org/scim", tags = ["orgs"] }]
    async fn org_scim_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// SCIM: what this service provider supports.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// RFC 7644 §4: PATCH and filters supported (at most 200 results a page),
    /// ETags supported, no bulk, no sorting, no password change.
    #[endpoint { method = GET, path = "/scim/v2/ServiceProviderConfig", tags = ["scim"] }]
    async fn scim_service_provider_config(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: the resource types (User, Group).
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    #[endpoint { method = GET, path = "/scim/v2/ResourceTypes", tags = ["scim"] }]
    async fn scim_resource_types(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: one resource type.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// An unknown id: `404`.
    #[endpoint { method = GET, path = "/scim/v2/ResourceTypes/{id}", tags = ["scim"] }]
    async fn scim_resource_type(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: the schemas of the attributes kept.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The core User schema (without `password`, `photos`, `addresses`,
    /// `ims`, `entitlements`, `roles` and `x509Certificates`), the enterprise
    /// User extension and the core Group schema, with each attribute's
    /// characteristics.
    #[endpoint { method = GET, path = "/scim/v2/Schemas", tags = ["scim"] }]
    async fn scim_schemas(
        rqctx: RequestContext<Self::Context>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: one schema.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// An unknown id: `404`.
    #[endpoint { method = GET, path = "/scim/v2/Schemas/{id}", tags = ["scim"] }]
    async fn scim_schema(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: search several resource types at once (not supported).
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`); errors are `ScimError`. Always
    /// `501`: search each type with `GET /scim/v2/Users` or
    /// `GET /scim/v2/Groups` and a `filter`.
    #[endpoint { method = POST, path = "/scim/v2/.search", tags = ["scim"] }]
    async fn scim_search(
        rqctx: RequestContext<Self::Context>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: list or filter the provisioned Users.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// A `ScimListResponse` of `ScimUser`s, oldest first: `filter` (RFC 7644
    /// §3.4.2.2, every operator, `and`/`or`/`not`, value paths such as
    /// `emails[type eq "work"]`; at most 4,096 bytes; an invalid one is `400
    /// invalidFilter`), `startIndex` (1-based), `count` (at most 200),
    /// `attributes`/`excludedAttributes`. `totalResults` counts every match.
    #[endpoint { method = GET, path = "/scim/v2/Users", tags = ["scim"] }]
    async fn scim_users_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<scim::ScimListQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: provision a User.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The body is a `ScimUser`; read-only and unknown attributes are ignored.
    /// Answers `201` with the `ScimUser`, its `ETag` and `Location`. A taken
    /// `userName` (compared without case), or an address of an account outside
    /// the organization: `409 uniqueness`. See `PUT /api/org/scim` for what a
    /// User does to the organization's members.
    #[endpoint { method = POST, path = "/scim/v2/Users", tags = ["scim"] }]
    async fn scim_users_create(
        rqctx: RequestContext<Self::Context>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: read a User.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// `attributes`/`excludedAttributes` as in the list. With `If-None-Match`
    /// naming its current version: `304`. An unknown id: `404`.
    #[endpoint { method = GET, path = "/scim/v2/Users/{id}", tags = ["scim"] }]
    async fn scim_users_get(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
        query: QueryParams<scim::ScimResourceQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: replace a User.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The body is a whole `ScimUser`: attributes it leaves out are removed.
    /// With `If-Match` naming another version: `412`. Answers the `ScimUser`.
    #[endpoint { method = PUT, path = "/scim/v2/Users/{id}", tags = ["scim"] }]
    async fn scim_users_replace(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: change some attributes of a User.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The body is a `ScimPatchRequest` (RFC 7644 §3.5.2): `add`, `replace`,
    /// `remove` with attribute paths, sub-attributes, value filters and
    /// extension URNs, applied in order, all or none (a path naming nothing:
    /// `400 noTarget`; a read-only attribute: `400 mutability`). With
    /// `If-Match` naming another version: `412`. Answers the `ScimUser`.
    #[endpoint { method = PATCH, path = "/scim/v2/Users/{id}", tags = ["scim"] }]
    async fn scim_users_patch(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: deprovision a User.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// Answers `204`. The person's membership is suspended at once (their
    /// sessions and tokens are refused in the organization from the next
    /// request); their account and data stay. They leave their Groups.
    #[endpoint { method = DELETE, path = "/scim/v2/Users/{id}", tags = ["scim"] }]
    async fn scim_users_delete(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: list or filter the provisioned Groups.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// A `ScimListResponse` of `ScimGroup`s, oldest first: `filter` (RFC 7644
    /// §3.4.2.2, every operator, `and`/`or`/`not`, value paths such as
    /// `emails[type eq "work"]`; at most 4,096 bytes; an invalid one is `400
    /// invalidFilter`), `startIndex` (1-based), `count` (at most 200),
    /// `attributes`/`excludedAttributes`. `totalResults` counts every match.
    #[endpoint { method = GET, path = "/scim/v2/Groups", tags = ["scim"] }]
    async fn scim_groups_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<scim::ScimListQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: provision a Group.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The body is a `ScimGroup`; read-only and unknown attributes are ignored.
    /// Answers `201` with the `ScimGroup`, its `ETag` and `Location`. Every member must
    /// be a provisioned User (or Group) of the organization (`400 invalidValue`);
    /// members get the role the Group's `displayName` maps to.
    #[endpoint { method = POST, path = "/scim/v2/Groups", tags = ["scim"] }]
    async fn scim_groups_create(
        rqctx: RequestContext<Self::Context>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: read a Group.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// `attributes`/`excludedAttributes` as in the list. With `If-None-Match`
    /// naming its current version: `304`. An unknown id: `404`.
    #[endpoint { method = GET, path = "/scim/v2/Groups/{id}", tags = ["scim"] }]
    async fn scim_groups_get(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
        query: QueryParams<scim::ScimResourceQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: replace a Group.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The body is a whole `ScimGroup`: attributes it leaves out are removed.
    /// With `If-Match` naming another version: `412`. Answers the `ScimGroup`.
    #[endpoint { method = PUT, path = "/scim/v2/Groups/{id}", tags = ["scim"] }]
    async fn scim_groups_replace(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: change some attributes of a Group.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// The body is a `ScimPatchRequest` (RFC 7644 §3.5.2): `add`, `replace`,
    /// `remove` with attribute paths, sub-attributes, value filters and
    /// extension URNs, applied in order, all or none (a path naming nothing:
    /// `400 noTarget`; a read-only attribute: `400 mutability`). With
    /// `If-Match` naming another version: `412`. Answers the `ScimGroup`.
    #[endpoint { method = PATCH, path = "/scim/v2/Groups/{id}", tags = ["scim"] }]
    async fn scim_groups_patch(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    /// SCIM: deprovision a Group.
    ///
    /// SCIM 2.0 (RFC 7644), authenticated by the organization's SCIM token
    /// (`Authorization: Bearer wscim_…`, `POST /api/org/scim/token`); answers and
    /// errors are `application/scim+json` (errors: `ScimError`). Any SCIM client
    /// is its client: it is not in the generated client or the CLI.
    ///
    /// Answers `204`. Its members get the role their other Groups map to.
    #[endpoint { method = DELETE, path = "/scim/v2/Groups/{id}", tags = ["scim"] }]
    async fn scim_groups_delete(
        rqctx: RequestContext<Self::Context>,
        path: dropshot::Path<scim::ScimIdPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError>;

    // ---- Single sign-on (issue #37) ----

    /// Show the organization's single sign-on provider.
    ///
    /// An addition to the spec, for the organization's admins (a role of
    /// level 80 or more that grants `organization:admin`). Never the client
    /// secret. `404 not_found` when there is none.
    #[endpoint { method = GET, path = "/api/org/sso", tags = ["orgs"] }]
    async fn org_sso_get(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<sso::SsoConfig>, HttpError>;

    /// Register or replace the organization's single sign-on provider.
    ///
    /// An addition to the spec, for the organization's admins (level 80
    /// and `organization:admin`). OpenID Connect: the provider's discovery
    /// document is read now and must name exactly `issuer` (`400
    /// sso_issuer_mismatch`; unreachable or not a discovery document: `400
    /// invalid_sso_provider`); `issuer` must be `https://` (`http://` for
    /// loopback, or where `fetch.allow_private_networks` is set; `400
    /// invalid_url`). `client_secret` is required the first time (`400
    /// invalid_request`), stored sealed and never answered. `domains`: 1 to
    /// 20 lowercase domain names (`400 invalid_domains`), none vouched for
    /// by another organization (`409 sso_domain_taken`). Each mapping's
    /// and `default_role`'s role must be a role of the organization other
    /// than `owner` (`400 invalid_role`). Audited as `sso.configured`.
    ///
    /// Sign-in (`POST /api/auth/sso/start`, then the provider, then
    /// `POST /api/auth/sso/callback`): authorization code with PKCE (S256),
    /// `state` and `nonce`; the ID token's signature (the provider's
    /// current keys, read at each sign-in, so rotated keys are picked up),
    /// issuer, audience, expiry and nonce are checked, and RFC 9207's `iss`
    /// where the provider sends it. The person is found by the provider's
    /// subject; the first time, by e-mail address among the organization's
    /// members (the address verified by the provider and in `domains`), or
    /// created with a membership (just in time). Every sign-in sets a
    /// member's role from their groups (`role_mappings`, else
    /// `default_role`); an owner keeps their role. The session it starts
    /// is the same as a password login's, but acts in this organization
    /// only (`403 sso_required` elsewhere).
    #[endpoint { method = PUT, path = "/api/org/sso", tags = ["orgs"] }]
    async fn org_sso_put(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
        body: JsonBody<sso::SsoConfigInput>,
    ) -> Result<HttpResponseOk<sso::SsoConfig>, HttpError>;

    /// Remove the organization's single sign-on provider.
    ///
    /// An addition to the spec, for the organization's admins (level 80
    /// and `organization:admin`). Its domains are released and sign-ins
    /// under way end; sessions it started go on until they end (revoke
    /// them with the members' sessions). `404 not_found` when
    /// there is none. Audited as `sso.removed`.
    #[endpoint { method = DELETE, path = "/api/org/sso", tags = ["orgs"] }]
    async fn org_sso_delete(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<orgs::OrgQuery>,
    ) -> Result<HttpResponseOk<orgs::MessageResponse>, HttpError>;

    /// Start a single sign-on.
    ///
    /// An addition to the spec; public. Finds the organization by the
    /// domain of `email` (or by `organization_id`) and answers the
    /// provider's authorization URL (authorization code, PKCE S256,
    /// `state`, `nonce`, scope `openid email profile`) for `redirect_uri`.
    /// The sign-in is kept in the database for 10 minutes, so any server
    /// instance finishes it. No provider for the domain or organization:
    /// `404 not_found`; a `redirect_uri` that is not `https://`
    /// (or `http://` on a loopback address): `400 invalid_redirect_uri`;
    /// the provider unreachable: `502 sso_provider_unavailable`. Limited
    /// per client address like logins (`429 rate_limited`).
    #[endpoint { method = POST, path = "/api/auth/sso/start", tags = ["auth"] }]
    async fn auth_sso_start(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<sso::SsoStartRequest>,
    ) -> Result<HttpResponseOk<sso::SsoStart>, HttpError>;

    /// Finish a single sign-on.
    ///
    /// An addition to the spec; public (the single-use `state` and the
    /// provider's `code` are the credential). Exchanges the code (with the
    /// PKCE verifier) at the provider, checks the ID token, finds or
    /// creates the person and their membership (see `PUT /api/org/sso`)
    /// and answers the same tokens as `POST /api/auth/login`. An unknown,
    /// used or expired `state`: `400 invalid_sso_state`; an `iss` other
    /// than the provider's, a refused code, an ID token that fails a check,
    /// an address the provider has not verified or outside the
    /// organization's domains: `401 sso_failed` (the reason in the
    /// message, never the provider's answer); an address of an account
    /// that is not a member of the organization: `409 email_taken`; no
    /// role for the person's groups: `403 sso_not_assigned`; a suspended
    /// member: `403 membership_suspended`.
    #[endpoint { method = POST, path = "/api/auth/sso/callback", tags = ["auth"] }]
    async fn auth_sso_callback(
        rqctx: RequestContext<Self::Context>,
        body: JsonBody<sso::SsoCallbackRequest>,
    ) -> Result<HttpResponseOk<auth::LoginResponse>, HttpError>;
}

/// Builds the published OpenAPI document from the trait alone, then patches
/// what dropshot cannot express (see [`operations`]): the server, the bearer
/// security scheme (with public operations marked), each operation's error
/// statuses with their `error_code`s and headers (`Retry-After`,
/// `WWW-Authenticate`), the `text/event-stream` responses with their event
/// schema, and `type` beside `nullable` references.
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
    document::patch_document(&mut doc);
    kb::patch_document(&mut doc);
    feedback::patch_document(&mut doc);
    audit::patch_document(&mut doc);
    usage::patch_document(&mut doc);
    doc
}
