//! The Workspace HTTP API.
//!
//! This crate holds only the dropshot API trait ([`WorkspaceApi`]) and the
//! types of its requests and responses, so that the OpenAPI document
//! (`openapi/workspace.json`) can be generated without compiling the server.
//! See [`openapi_document`].

pub mod auth;
pub mod conversations;
pub mod extract;
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
pub const PUBLIC_OPERATIONS: &[&str] = &["healthz", "readyz", "auth_signup", "auth_login"];

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
    /// Public. Creates, in one transaction, the user, a personal organization
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

    // ---- Users area (/api/users), beyond `users_me` ----

    // ---- Roles area (/api/roles) ----

    // ---- Invitations area (/api/invitations) and signup_invite ----

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
    #[endpoint { method = GET, path = "/api/conversation/list", tags = ["conversations"] }]
    async fn conversation_list(
        rqctx: RequestContext<Self::Context>,
        query: QueryParams<conversations::OrgQuery>,
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
