//! Facts about operations that the API trait cannot express, in one place:
//! which are public, which stream, which take multipart bodies, and which
//! error statuses (with which `error_code`s) each can answer. The document
//! patcher ([`crate::openapi_document`]), the client generator (`cargo
//! xtask client`) and the integration tests all read these lists.

/// Operations that need no `Authorization` header. Every other operation
/// requires `Authorization: Bearer <access_token>` and answers 401 without it.
pub const PUBLIC_OPERATIONS: &[&str] = &[
    "healthz",
    "readyz",
    "auth_signup",
    "auth_login",
    "auth_signup_invite",
    // The refresh token, or the reset token, in the body is the credential.
    "auth_refresh",
    "auth_forgot_password",
    "auth_reset_password",
    "invitations_validate",
    "files_download",
    "deployments_chat_completions_preflight",
    "deployments_models_preflight",
    // The chat WebSocket: its single-use ticket is the credential.
    "chat_ws",
    // A chat's share link: its token is the credential (issue #35).
    "chat_shared",
    // MCP: the OAuth redirect target; its single-use `state` is the credential.
    "mcp_callback",
    // MCP gateway: the secret in the path is the credential.
    "mcp_gateway_post",
    "mcp_gateway_get",
    "mcp_gateway_delete",
    // Single sign-on: the person has no token yet (issue #37).
    "auth_sso_start",
    "auth_sso_callback",
];

/// Operations authenticated by a deployment key (`wsk_live_…`) instead of
/// a user's access token, whose errors have OpenAI's shape (the
/// `OpenAiError` schema). Left out of the generated client and CLI: any
/// OpenAI SDK is their client.
pub const DEPLOYMENT_KEY_OPERATIONS: &[&str] =
    &["deployments_chat_completions", "deployments_models"];

/// The SCIM 2.0 service (issue #37, `/scim/v2`): authenticated by an
/// organization's SCIM token (`wscim_…`) instead of a user's access token;
/// bodies and errors are `application/scim+json`, errors the `ScimError`
/// schema with a `scimType` instead of an `error_code`. Left out of the
/// generated client and CLI: any SCIM client (an identity provider) is
/// their client.
pub const SCIM_OPERATIONS: &[&str] = &[
    "scim_search",
    "scim_service_provider_config",
    "scim_resource_types",
    "scim_resource_type",
    "scim_schemas",
    "scim_schema",
    "scim_users_list",
    "scim_users_create",
    "scim_users_get",
    "scim_users_replace",
    "scim_users_patch",
    "scim_users_delete",
    "scim_groups_list",
    "scim_groups_create",
    "scim_groups_get",
    "scim_groups_replace",
    "scim_groups_patch",
    "scim_groups_delete",
];

/// SCIM operations whose request body is a SCIM resource or PATCH
/// (`application/scim+json`), with the schema it follows.
pub const SCIM_BODIES: &[(&str, &str)] = &[
    ("scim_users_create", "ScimUser"),
    ("scim_users_replace", "ScimUser"),
    ("scim_users_patch", "ScimPatchRequest"),
    ("scim_groups_create", "ScimGroup"),
    ("scim_groups_replace", "ScimGroup"),
    ("scim_groups_patch", "ScimPatchRequest"),
];

/// The success answer of each SCIM operation: its status and schema
/// (`None`: no body).
pub const SCIM_ANSWERS: &[(&str, u16, Option<&str>)] = &[
    (
        "scim_service_provider_config",
        200,
        Some("ScimServiceProviderConfig"),
    ),
    ("scim_resource_types", 200, Some("ScimListResponse")),
    ("scim_resource_type", 200, Some("ScimResourceType")),
    ("scim_schemas", 200, Some("ScimListResponse")),
    ("scim_schema", 200, Some("ScimSchema")),
    ("scim_users_list", 200, Some("ScimListResponse")),
    ("scim_users_create", 201, Some("ScimUser")),
    ("scim_users_get", 200, Some("ScimUser")),
    ("scim_users_replace", 200, Some("ScimUser")),
    ("scim_users_patch", 200, Some("ScimUser")),
    ("scim_users_delete", 204, None),
    ("scim_groups_list", 200, Some("ScimListResponse")),
    ("scim_groups_create", 201, Some("ScimGroup")),
    ("scim_groups_get", 200, Some("ScimGroup")),
    ("scim_groups_replace", 200, Some("ScimGroup")),
    ("scim_groups_patch", 200, Some("ScimGroup")),
    ("scim_groups_delete", 204, None),
];

/// Operations whose success response is a Server-Sent Events stream
/// (`text/event-stream`), whose events are the [`STREAM_EVENTS`] schema.
/// progenitor's CLI generator cannot handle them (`todo!()`), so the CLI
/// has hand-written commands for them.
pub const STREAMING_OPERATIONS: &[&str] = &[
    "conversation_stream_chat",
    "conversation_stream",
    "kb_query",
];

/// The component schema of the events of [`STREAMING_OPERATIONS`]
/// ([`crate::conversations::ConversationStreamEvent`]).
pub const STREAM_EVENTS: &str = "ConversationStreamEvent";

/// Chat-area operations whose success response is a Server-Sent Events
/// stream of [`CHAT_STREAM_EVENTS`] (`id:`-numbered for resumption, except
/// `chat_prompt`). Handwritten in the CLI like [`STREAMING_OPERATIONS`].
pub const CHAT_STREAMING_OPERATIONS: &[&str] = &[
    "chat_send_message",
    "chat_edit_message",
    "chat_regenerate",
    "chat_stream",
    "chat_prompt",
];

/// The component schema of the events of [`CHAT_STREAMING_OPERATIONS`]
/// ([`crate::chat::ChatStreamEvent`]).
pub const CHAT_STREAM_EVENTS: &str = "ChatStreamEvent";

/// Operations with `multipart/form-data` bodies. They stay in the published
/// document; progenitor cannot generate code for them (progenitor#402), so
/// they are left out of the generated client and CLI and get hand-written
/// client methods.
pub const MULTIPART_OPERATIONS: &[&str] = &["chat_upload_file"];

/// Operations left out of the generated client, with hand-written methods
/// in `client/src/handwritten.rs`: multipart bodies, and `kb_query`, whose
/// 200 is JSON or an event stream depending on its `stream` field (one
/// response type per operation is all progenitor handles).
pub const CLIENT_HANDWRITTEN_OPERATIONS: &[&str] = &[
    "chat_upload_file",
    "kb_query",
    // A WebSocket: clients connect with their own WebSocket library.
    "chat_ws",
    // JSON or Markdown, streamed ([`CHAT_EXPORT_OPERATIONS`]): read as
    // bytes.
    "chat_export",
    "chat_export_all",
];

/// Operations left out of the generated client without a hand-written
/// method: the OpenAI-compatible surface (OpenAI SDKs are its clients) and
/// the CORS preflights.
pub const CLIENT_SKIPPED_OPERATIONS: &[&str] = &[
    "deployments_chat_completions",
    "deployments_models",
    "deployments_chat_completions_preflight",
    "deployments_models_preflight",
    // MCP: the OAuth redirect target, followed by browsers (a 303).
    "mcp_callback",
    // MCP gateway: any MCP client is its client.
    "mcp_gateway_post",
    "mcp_gateway_get",
    "mcp_gateway_delete",
    // The MCP playground stream: read with any SSE client (items are
    // `PlaygroundItem`).
    "mcp_playground_chat",
    // SCIM (issue #37): any SCIM client is its client.
    "scim_search",
    "scim_service_provider_config",
    "scim_resource_types",
    "scim_resource_type",
    "scim_schemas",
    "scim_schema",
    "scim_users_list",
    "scim_users_create",
    "scim_users_get",
    "scim_users_replace",
    "scim_users_patch",
    "scim_users_delete",
    "scim_groups_list",
    "scim_groups_create",
    "scim_groups_get",
    "scim_groups_replace",
    "scim_groups_patch",
    "scim_groups_delete",
];

/// Operations left out of the generated CLI only (the client still has
/// their methods): progenitor's CLI generator emits `todo!()` for streaming
/// and binary responses, so these have hand-written commands in `cli/`.
pub const CLI_HANDWRITTEN_OPERATIONS: &[&str] = &[
    "conversation_stream_chat",
    // Resuming a conversation answer: read with any SSE client (events are
    // `ConversationStreamEvent`, numbered by `id:` lines).
    "conversation_stream",
    "files_download",
    // Chat area: streams.
    "chat_send_message",
    "chat_edit_message",
    "chat_regenerate",
    "chat_stream",
    "chat_prompt",
    "chat_transcribe",
    "chat_ws",
    // Streams the export to stdout (`workspace account export`).
    "users_export",
    // Chat export (streamed to stdout or a file) and import (a file as the
    // body): `workspace chat export|import`.
    "chat_export",
    "chat_export_all",
    "chat_import",
    // Streams the feedback export to stdout (`workspace feedback export`).
    "org_feedback_export",
    // Streams the audit export to stdout (`workspace audit export`).
    "audit_export",
    // The usage CSV (`workspace usage report --format csv` builds it from
    // the report).
    "org_usage_export",
];

/// Operations whose `200` is one JSON document streamed as it is read
/// (their handlers build raw responses), with the component schema of the
/// document. The generated client reads them as that type; the CLI
/// streams them to stdout (hand-written).
pub const STREAMED_JSON_OPERATIONS: &[(&str, &str)] = &[("users_export", "AccountExport")];

/// The chat exports: their `200` is a `ChatExportDocument` streamed as it
/// is read (`format=json`) or `text/markdown` (`format=markdown`); their
/// handlers build raw responses.
pub const CHAT_EXPORT_OPERATIONS: &[&str] = &["chat_export", "chat_export_all"];

/// Operations that never touch the database (so never answer `503
/// database_unavailable`).
pub const DATABASE_FREE_OPERATIONS: &[&str] = &[
    "healthz",
    "deployments_chat_completions_preflight",
    "deployments_models_preflight",
];

/// Defaults of optional query parameters: (operation, parameter, value).
/// dropshot leaves a field's schema metadata (and so its `default`) out of
/// parameters, so the document patcher writes these in.
pub const QUERY_DEFAULTS: &[(&str, &str, u32)] = &[
    (
        "users_list",
        "limit",
        crate::users::USERS_LIST_DEFAULT_LIMIT,
    ),
    ("users_list", "offset", 0),
    (
        "system_outbox",
        "limit",
        crate::system::OUTBOX_DEFAULT_LIMIT,
    ),
    (
        "conversation_messages",
        "limit",
        crate::conversations::MESSAGES_DEFAULT_LIMIT,
    ),
    ("conversation_messages", "offset", 0),
    (
        "chat_search",
        "limit",
        crate::chat_search::SEARCH_DEFAULT_LIMIT,
    ),
    (
        "org_webhooks_deliveries",
        "limit",
        crate::webhooks::DELIVERIES_DEFAULT_LIMIT,
    ),
];

/// The `error_code`s of 401 answers to a missing, malformed, expired or
/// otherwise invalid bearer token, or one whose session was revoked or
/// ended (every operation not in [`PUBLIC_OPERATIONS`]).
pub const AUTHENTICATION_ERRORS: &[&str] = &[
    "unauthenticated",
    "invalid_token",
    "token_expired",
    "session_revoked",
];

/// Operations a personal access token may not call, whatever its scopes:
/// they need a login (`403 token_not_allowed`). Managing tokens, and
/// changing roles (a token must not widen what tokens can do).
pub const LOGIN_ONLY_OPERATIONS: &[&str] = &[
    "auth_tokens_create",
    "auth_tokens_list",
    "auth_tokens_revoke",
    // The caller's sessions and password.
    "auth_logout",
    "auth_sessions",
    "auth_revoke_session",
    "auth_revoke_other_sessions",
    "auth_change_password",
    // Deleting the account, exporting its data.
    "users_delete_me",
    "users_export",
    "roles_create",
    "roles_update",
    "roles_remove",
    "users_update",
    // Leaving an organization, and handing its ownership over.
    "org_leave",
    "org_transfer_ownership",
    // System administration.
    "roles_create_permission",
    "roles_delete_permission",
    "org_update_features",
    "system_outbox",
    "system_model_deployments",
];

/// The `error_code` of a request the server could not parse: malformed
/// JSON, a missing or mistyped field or query parameter (every operation
/// with parameters or a body).
pub const INVALID_REQUEST: &str = crate::extract::INVALID_REQUEST;

/// An error status an operation can answer, with its possible `error_code`s.
pub type ErrorStatus = (u16, &'static [&'static str]);

/// The error statuses of each operation beyond those every operation shares,
/// with their `error_code`s, as the server code answers them. Added for every
/// operation by the document patcher (see [`error_statuses`]):
/// `400 invalid_request` when it has parameters or a body, `401`
/// ([`AUTHENTICATION_ERRORS`]) unless public, `503 database_unavailable`
/// and `server_busy` unless database-free, and `500 internal_error`.
///
/// Every operation is listed, also those with nothing to add, so a new
/// operation fails the test that compares this table with the trait.
pub const OPERATION_ERRORS: &[(&str, &[ErrorStatus])] = &[
    ("healthz", &[]),
    ("readyz", &[]),
    (
        "system_outbox",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    ("system_model_deployments", &[(403, &["forbidden"])]),
    (
        "auth_signup",
        &[
            (503, &["server_busy"]),
            (429, &["rate_limited"]),
            (400, &["invalid_email", "invalid_name"]),
            (409, &["email_taken"]),
            (422, &["weak_password"]),
        ],
    ),
    (
        "auth_login",
        &[
            (503, &["server_busy"]),
            (429, &["rate_limited"]),
            (401, &["invalid_credentials"]),
            (429, &["too_many_login_attempts"]),
        ],
    ),
    (
        "auth_tokens_create",
        &[
            (400, &["invalid_scope", "invalid_name", "invalid_request"]),
            (409, &["too_many_tokens"]),
        ],
    ),
    ("auth_tokens_list", &[]),
    ("auth_tokens_revoke", &[(404, &["not_found"])]),
    (
        "auth_signup_invite",
        &[
            (503, &["server_busy"]),
            (429, &["rate_limited"]),
            (400, &["invalid_name", "invalid_invitation"]),
            (401, &["invalid_credentials"]),
            (409, &["email_taken"]),
            (
                410,
                &[
                    "invitation_used",
                    "invitation_revoked",
                    "invitation_expired",
                ],
            ),
            (422, &["weak_password"]),
            (429, &["too_many_login_attempts"]),
        ],
    ),
    (
        "auth_refresh",
        &[(
            401,
            &[
                "invalid_refresh_token",
                "refresh_token_reused",
                "session_revoked",
            ],
        )],
    ),
    ("auth_logout", &[]),
    ("auth_sessions", &[]),
    ("auth_revoke_session", &[(404, &["not_found"])]),
    ("auth_revoke_other_sessions", &[]),
    (
        "auth_forgot_password",
        &[(400, &["invalid_email"]), (429, &["rate_limited"])],
    ),
    (
        "auth_reset_password",
        &[
            (503, &["server_busy"]),
            (429, &["rate_limited"]),
            (400, &["invalid_reset_token"]),
            (410, &["reset_token_used", "reset_token_expired"]),
            (422, &["weak_password"]),
        ],
    ),
    (
        "auth_change_password",
        &[
            (503, &["server_busy"]),
            (401, &["invalid_credentials"]),
            (429, &["too_many_login_attempts"]),
            (422, &["weak_password"]),
        ],
    ),
    ("users_me", &[]),
    ("org_list", &[(400, &["invalid_pagination"])]),
    (
        "org_create_org",
        &[
            (400, &["invalid_name"]),
            (403, &["insufficient_scope", "service_account_not_allowed"]),
            (409, &["org_name_taken"]),
        ],
    ),
    (
        "org_add_member",
        &[
            (400, &["invalid_role"]),
            (
                403,
                &[
                    "forbidden",
                    "feature_disabled",
                    "owner_role_not_assignable",
                    "role_level_too_high",
                ],
            ),
            (404, &["not_found"]),
            (409, &["already_member"]),
        ],
    ),
    ("org_features", &[(403, &["forbidden"])]),
    (
        "org_update",
        &[
            (400, &["invalid_name"]),
            (403, &["forbidden"]),
            (409, &["org_name_taken"]),
        ],
    ),
    (
        "org_leave",
        &[
            (403, &["forbidden"]),
            (409, &["last_owner", "personal_organization"]),
        ],
    ),
    (
        "org_service_accounts_create",
        &[
            (400, &["invalid_name", "invalid_role", "invalid_scope"]),
            (
                403,
                &[
                    "forbidden",
                    "owner_role_not_assignable",
                    "role_level_too_high",
                ],
            ),
            (409, &["too_many_service_accounts"]),
        ],
    ),
    ("org_service_accounts_list", &[(403, &["forbidden"])]),
    (
        "org_service_accounts_rotate",
        &[
            (400, &["invalid_scope"]),
            (403, &["forbidden", "role_level_too_high"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "org_service_accounts_delete",
        &[
            (403, &["forbidden", "role_level_too_high"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "org_transfer_ownership",
        &[
            (
                400,
                &[
                    "member_not_active",
                    "cannot_target_self",
                    "role_already_assigned",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["personal_organization"]),
        ],
    ),
    (
        "org_update_features",
        &[
            (400, &["invalid_quota"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "users_update",
        &[
            (
                400,
                &["invalid_role", "member_not_active", "role_already_assigned"],
            ),
            (
                403,
                &[
                    "forbidden",
                    "owner_role_not_assignable",
                    "role_level_too_high",
                ],
            ),
            (404, &["not_found"]),
            (409, &["concurrent_update"]),
        ],
    ),
    (
        "users_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "users_suspend",
        &[
            (400, &["member_not_active", "cannot_target_self"]),
            (403, &["forbidden", "member_level_too_high"]),
            (404, &["not_found"]),
            (409, &["last_owner"]),
        ],
    ),
    (
        "users_reactivate",
        &[
            (400, &["member_not_suspended"]),
            (403, &["forbidden", "member_level_too_high"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "users_remove",
        &[
            (400, &["member_invited", "cannot_target_self"]),
            (403, &["forbidden", "member_level_too_high"]),
            (404, &["not_found"]),
            (409, &["last_owner"]),
        ],
    ),
    (
        "users_invite",
        &[
            (400, &["invalid_email", "invalid_name", "invalid_role"]),
            (
                403,
                &[
                    "forbidden",
                    "owner_role_not_assignable",
                    "role_level_too_high",
                ],
            ),
            (409, &["already_member", "invitation_pending"]),
        ],
    ),
    (
        "roles_create",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_hierarchy_level",
                    "unknown_permission",
                ],
            ),
            (
                403,
                &["forbidden", "role_level_too_high", "permission_not_held"],
            ),
            (409, &["role_name_taken"]),
        ],
    ),
    (
        "roles_update",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_hierarchy_level",
                    "unknown_permission",
                ],
            ),
            (
                403,
                &[
                    "forbidden",
                    "system_role_immutable",
                    "role_level_too_high",
                    "permission_not_held",
                ],
            ),
            (404, &["not_found"]),
            (409, &["role_name_taken"]),
        ],
    ),
    (
        "roles_remove",
        &[
            (
                403,
                &["forbidden", "system_role_immutable", "role_level_too_high"],
            ),
            (404, &["not_found"]),
            (409, &["role_in_use"]),
        ],
    ),
    (
        "roles_list_roles",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    ("roles_list_permissions", &[(400, &["invalid_pagination"])]),
    (
        "roles_create_permission",
        &[
            (400, &["invalid_permission_name"]),
            (403, &["forbidden"]),
            (409, &["permission_exists"]),
        ],
    ),
    (
        "roles_delete_permission",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["permission_protected"]),
        ],
    ),
    (
        "invitations_create",
        &[
            (400, &["invalid_email", "invalid_message", "invalid_role"]),
            (
                403,
                &[
                    "forbidden",
                    "owner_role_not_assignable",
                    "role_level_too_high",
                ],
            ),
            (409, &["already_member", "invitation_pending"]),
        ],
    ),
    (
        "invitations_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "invitations_get",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    ("invitations_validate", &[]),
    (
        "invitations_resend",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (
                409,
                &["invitation_not_pending", "invitation_token_unavailable"],
            ),
            (503, &["mail_unavailable"]),
        ],
    ),
    (
        "invitations_revoke",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["invitation_not_pending"]),
        ],
    ),
    (
        "invitations_bulk_create",
        &[(400, &["invalid_message"]), (403, &["forbidden"])],
    ),
    ("models_list", &[(403, &["forbidden"])]),
    (
        "conversation_create",
        &[(400, &["invalid_title"]), (403, &["forbidden"])],
    ),
    (
        "conversation_create_session",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "conversation_stream_chat",
        &[
            (400, &["invalid_message", "model_unavailable"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (429, &["daily_chat_limit_exceeded", "budget_exceeded"]),
            (503, &["providers_unavailable"]),
        ],
    ),
    (
        "conversation_stream",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "conversation_stop",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "conversation_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "conversation_get_with_sessions",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "conversation_messages",
        &[
            (400, &["invalid_pagination"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    // Knowledge bases. `kb_id`-addressed operations answer 404 for another
    // organization's knowledge base, like a missing one.
    (
        "kb_create",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_source",
                    "unknown_embedding_model",
                ],
            ),
            (403, &["forbidden"]),
        ],
    ),
    (
        "kb_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    ("kb_get", &[(403, &["forbidden"]), (404, &["not_found"])]),
    (
        "kb_update",
        &[
            (400, &["invalid_name", "invalid_description"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    ("kb_delete", &[(403, &["forbidden"]), (404, &["not_found"])]),
    (
        "kb_add_source",
        &[
            (400, &["invalid_source", "too_many_sources"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "kb_list_documents",
        &[
            (400, &["invalid_pagination"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "kb_delete_document",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "kb_retry_document",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["document_not_failed"]),
        ],
    ),
    (
        "kb_search",
        &[
            (400, &["invalid_query"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (503, &["embedder_unavailable"]),
        ],
    ),
    (
        "kb_query",
        &[
            (400, &["invalid_query", "model_unavailable"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (
                503,
                &[
                    "embedder_unavailable",
                    "provider_unavailable",
                    "providers_unavailable",
                    "provider_rate_limited",
                    "provider_rejected",
                    "provider_timeout",
                    "provider_stream_interrupted",
                ],
            ),
        ],
    ),
    (
        "deployments_create",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_origins",
                    "invalid_rate_limit",
                    "invalid_expiry",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["agent_not_ready"]),
        ],
    ),
    (
        "deployments_list",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "deployments_get",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "deployments_update",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_origins",
                    "invalid_rate_limit",
                    "invalid_expiry",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "deployments_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "deployments_regenerate_key",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "deployments_chat_completions",
        &[
            (
                400,
                &[
                    "invalid_messages",
                    "decimal_above_max_value",
                    "decimal_below_min_value",
                    "integer_below_min_value",
                ],
            ),
            (403, &["origin_not_allowed"]),
            (429, &["rate_limited", "budget_exceeded"]),
            (
                502,
                &[
                    "provider_unavailable",
                    "providers_unavailable",
                    "provider_rate_limited",
                    "provider_rejected",
                    "provider_timeout",
                    "provider_stream_interrupted",
                    "agent_step_limit",
                ],
            ),
            (503, &["agent_unavailable"]),
        ],
    ),
    (
        "deployments_models",
        &[(403, &["origin_not_allowed"]), (429, &["rate_limited"])],
    ),
    ("deployments_chat_completions_preflight", &[]),
    ("deployments_models_preflight", &[]),
    (
        "kb_ingestion_status",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    ("chat_available_knowledge_bases", &[(403, &["forbidden"])]),
    (
        "chat_upload_file",
        &[
            (400, &["invalid_upload"]),
            (403, &["forbidden", "feature_disabled"]),
            (413, &["file_too_large"]),
            (415, &["unsupported_file_type"]),
        ],
    ),
    (
        "files_download",
        &[
            (403, &["invalid_signature"]),
            (404, &["not_found"]),
            (410, &["link_expired"]),
        ],
    ),
    // Chat area. A chat is visible to its user only: another user's or
    // organization's chat id is 404, like a missing one.
    (
        "chat_create",
        &[
            // `unknown_folder`: a `folder_id` that is not one of the
            // caller's folders.
            (
                400,
                &["invalid_title", "invalid_settings", "unknown_folder"],
            ),
            (403, &["forbidden"]),
        ],
    ),
    ("chat_get", &[(403, &["forbidden"]), (404, &["not_found"])]),
    (
        "chat_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "chat_update",
        &[
            (400, &["invalid_title", "invalid_settings"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "chat_delete_session",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    ("chat_bulk_delete_sessions", &[(403, &["forbidden"])]),
    (
        "chat_send_message",
        &[
            (
                400,
                &[
                    "invalid_message",
                    "invalid_settings",
                    "model_unavailable",
                    "model_modality_unsupported",
                    "model_lacks_input",
                    "image_too_large",
                    "image_unreadable",
                    "image_unsupported",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["agent_not_active"]),
            (429, &["daily_chat_limit_exceeded", "budget_exceeded"]),
            (503, &["providers_unavailable"]),
        ],
    ),
    (
        "chat_edit_message",
        &[
            (
                400,
                &[
                    "invalid_message",
                    "invalid_settings",
                    "model_unavailable",
                    "model_modality_unsupported",
                    "model_lacks_input",
                    "image_too_large",
                    "image_unreadable",
                    "image_unsupported",
                    "not_a_question",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["agent_not_active"]),
            (429, &["daily_chat_limit_exceeded", "budget_exceeded"]),
            (503, &["providers_unavailable"]),
        ],
    ),
    (
        "chat_regenerate",
        &[
            (
                400,
                &[
                    "invalid_message",
                    "invalid_settings",
                    "model_unavailable",
                    "model_modality_unsupported",
                    "model_lacks_input",
                    "image_too_large",
                    "image_unreadable",
                    "image_unsupported",
                    "not_an_answer",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["agent_not_active"]),
            (429, &["daily_chat_limit_exceeded", "budget_exceeded"]),
            (503, &["providers_unavailable"]),
        ],
    ),
    (
        "chat_switch_branch",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "chat_stream",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    ("chat_stop", &[(403, &["forbidden"]), (404, &["not_found"])]),
    (
        "chat_prompt",
        &[
            (400, &["invalid_message", "model_unavailable"]),
            (403, &["forbidden", "budget_exceeded"]),
            (503, &["providers_unavailable"]),
        ],
    ),
    (
        "chat_transcribe",
        &[
            (
                400,
                &[
                    "invalid_audio",
                    "unsupported_audio_format",
                    "unsupported_language",
                ],
            ),
            (403, &["forbidden"]),
            (413, &["file_too_large"]),
            (503, &["transcription_unavailable", "transcription_failed"]),
        ],
    ),
    ("chat_ws_ticket", &[(403, &["forbidden"])]),
    ("chat_ws", &[]),
    // Share links of chats (issue #35).
    (
        "chat_share_create",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (
                409,
                &["share_too_large", "nothing_to_share", "too_many_shares"],
            ),
        ],
    ),
    (
        "chat_shares_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "chat_share_revoke",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "chat_shared",
        &[(404, &["not_found"]), (429, &["rate_limited"])],
    ),
    // Chat export and import (issue #35).
    (
        "chat_export",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    ("chat_export_all", &[(403, &["forbidden"])]),
    (
        "chat_import",
        &[
            (
                400,
                &[
                    "unrecognized_import_format",
                    "invalid_import_file",
                    "empty_import",
                    "import_limits_exceeded",
                ],
            ),
            (403, &["forbidden"]),
            (413, &["file_too_large"]),
            (503, &["server_busy"]),
        ],
    ),
    // Chat search, pins and folders (issue #35). Folders are private to
    // their user, like chats: another user's folder is 404.
    (
        "chat_search",
        &[
            (
                400,
                &["invalid_query", "invalid_pagination", "invalid_cursor"],
            ),
            (403, &["forbidden"]),
        ],
    ),
    ("chat_folders_list", &[(403, &["forbidden"])]),
    (
        "chat_folders_create",
        &[
            (400, &["invalid_name"]),
            (403, &["forbidden"]),
            (409, &["folder_name_taken", "too_many_folders"]),
        ],
    ),
    (
        "chat_folders_rename",
        &[
            (400, &["invalid_name"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["folder_name_taken"]),
        ],
    ),
    (
        "chat_folders_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "chat_folders_move",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    // Tools and agents. Operations addressed by their own id answer 404 for
    // another organization's object, like a missing one.
    (
        "tools_list_categories",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "tools_create_category",
        &[
            (400, &["invalid_name", "invalid_description"]),
            (403, &["forbidden"]),
            (409, &["category_name_taken"]),
        ],
    ),
    (
        "tools_update_category",
        &[
            (400, &["invalid_name", "invalid_description"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["category_name_taken"]),
        ],
    ),
    (
        "tools_delete_category",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["category_in_use"]),
        ],
    ),
    (
        "tools_create",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_version",
                    "invalid_logo_url",
                    "unknown_category",
                    "invalid_parameter",
                    "duplicate_parameter",
                    "invalid_default",
                    "invalid_function",
                    "empty_code",
                    "invalid_code",
                    "invalid_requirement",
                ],
            ),
            (403, &["forbidden"]),
            (409, &["tool_name_taken"]),
        ],
    ),
    (
        "tools_list_all",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "tools_update",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_version",
                    "invalid_logo_url",
                    "unknown_category",
                    "invalid_parameter",
                    "duplicate_parameter",
                    "invalid_default",
                    "invalid_function",
                    "empty_code",
                    "invalid_code",
                    "invalid_requirement",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["tool_name_taken"]),
        ],
    ),
    ("tools_get", &[(403, &["forbidden"]), (404, &["not_found"])]),
    (
        "tools_delete",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["tool_in_use"]),
        ],
    ),
    (
        "tools_test",
        &[
            (
                400,
                &["invalid_input", "tool_inactive", "tool_requirement_missing"],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (503, &["tool_sandbox_unavailable"]),
        ],
    ),
    (
        "agents_create",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_agent_type",
                    "invalid_params",
                    "invalid_tools",
                    "unknown_tool",
                    "invalid_tool_config",
                    "model_unavailable",
                ],
            ),
            (403, &["forbidden"]),
        ],
    ),
    (
        "agents_list",
        &[(400, &["invalid_pagination"]), (403, &["forbidden"])],
    ),
    (
        "agents_get",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "agents_update",
        &[
            (
                400,
                &[
                    "invalid_name",
                    "invalid_description",
                    "invalid_agent_type",
                    "invalid_params",
                    "invalid_tools",
                    "unknown_tool",
                    "invalid_tool_config",
                    "model_unavailable",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "agents_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "agents_test",
        &[
            (
                400,
                &[
                    "invalid_message",
                    "model_unavailable",
                    "tool_requirement_missing",
                ],
            ),
            (403, &["forbidden", "budget_exceeded"]),
            (404, &["not_found"]),
            (503, &["tool_sandbox_unavailable"]),
        ],
    ),
    // MCP area. Sessions and instances are the caller's own: another
    // user's or organization's ids are 404, like missing ones.
    ("mcp_list_servers", &[(403, &["forbidden"])]),
    (
        "mcp_server_with_tools",
        &[
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (502, &["mcp_server_unavailable"]),
        ],
    ),
    (
        "mcp_connect_account",
        &[
            (400, &["invalid_flow_type"]),
            (402, &["mcp_sessions_quota_exceeded"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (502, &["mcp_server_unavailable"]),
        ],
    ),
    ("mcp_callback", &[]),
    ("mcp_list_instances", &[(403, &["forbidden"])]),
    (
        "mcp_update_instance",
        &[
            (400, &["invalid_name"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "mcp_delete_instance",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "mcp_generate_url",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "mcp_gateway_post",
        &[
            (401, AUTHENTICATION_ERRORS),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["mcp_instance_not_active"]),
            (502, &["mcp_server_unavailable"]),
        ],
    ),
    (
        "mcp_gateway_get",
        &[
            (401, AUTHENTICATION_ERRORS),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["mcp_instance_not_active"]),
            (502, &["mcp_server_unavailable"]),
        ],
    ),
    (
        "mcp_gateway_delete",
        &[
            (401, AUTHENTICATION_ERRORS),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["mcp_instance_not_active"]),
            (502, &["mcp_server_unavailable"]),
        ],
    ),
    (
        "mcp_playground_chat",
        &[
            (
                400,
                &["invalid_message", "invalid_model", "model_unavailable"],
            ),
            (403, &["forbidden", "budget_exceeded"]),
            (404, &["not_found"]),
        ],
    ),
    // Organizations and accounts that end (issue #34).
    (
        "org_delete",
        &[
            (400, &["confirmation_mismatch"]),
            (403, &["forbidden"]),
            (409, &["personal_organization"]),
        ],
    ),
    ("org_deletion_status", &[(404, &["not_found"])]),
    (
        "users_delete_me",
        &[
            (403, &["invalid_password"]),
            (409, &["sole_owner"]),
            (429, &["too_many_login_attempts"]),
            (503, &["server_busy"]),
        ],
    ),
    ("users_export", &[]),
    // Feedback on answers (issue #35).
    ("chat_feedback_rate", FEEDBACK_RATE_ERRORS),
    (
        "chat_feedback_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    ("conversation_feedback_rate", FEEDBACK_RATE_ERRORS),
    (
        "conversation_feedback_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_feedback_list",
        &[
            (400, &["invalid_pagination", "invalid_cursor"]),
            (403, &["forbidden"]),
        ],
    ),
    ("org_feedback_export", &[(403, &["forbidden"])]),
    // ---- Audit log (issue #36) ----
    (
        "audit_list",
        &[
            (400, &["invalid_pagination", "invalid_cursor"]),
            (403, &["forbidden", "token_not_allowed"]),
        ],
    ),
    (
        "audit_export",
        &[(403, &["forbidden", "token_not_allowed"])],
    ),
    (
        "audit_verify",
        &[(403, &["forbidden", "token_not_allowed"])],
    ),
    // Usage, cost and budgets (issue #36).
    (
        "org_usage_report",
        &[(400, &["invalid_range"]), (403, &["forbidden"])],
    ),
    (
        "org_usage_export",
        &[(400, &["invalid_range"]), (403, &["forbidden"])],
    ),
    ("org_budgets_list", &[(403, &["forbidden"])]),
    (
        "org_budgets_create",
        &[
            (400, &["invalid_budget"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
            (409, &["budget_exists"]),
        ],
    ),
    (
        "org_budgets_update",
        &[
            (400, &["invalid_budget"]),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "org_budgets_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    // Webhooks (issue #36).
    (
        "org_webhooks_create",
        &[
            (
                400,
                &[
                    "invalid_url",
                    "url_not_allowed",
                    "invalid_event_types",
                    "invalid_description",
                ],
            ),
            (403, &["forbidden"]),
            (409, &["too_many_webhooks"]),
        ],
    ),
    ("org_webhooks_list", &[(403, &["forbidden"])]),
    (
        "org_webhooks_get",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_webhooks_update",
        &[
            (
                400,
                &[
                    "invalid_url",
                    "url_not_allowed",
                    "invalid_event_types",
                    "invalid_description",
                ],
            ),
            (403, &["forbidden"]),
            (404, &["not_found"]),
        ],
    ),
    (
        "org_sso_get",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_sso_put",
        &[
            (
                400,
                &[
                    "invalid_url",
                    "url_not_allowed",
                    "invalid_request",
                    "invalid_domains",
                    "invalid_role",
                    "sso_issuer_mismatch",
                    "invalid_sso_provider",
                ],
            ),
            (403, &["forbidden"]),
            (409, &["sso_domain_taken"]),
        ],
    ),
    (
        "org_sso_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "auth_sso_start",
        &[
            (
                400,
                &["invalid_redirect_uri", "invalid_email", "invalid_request"],
            ),
            (404, &["not_found"]),
            (429, &["rate_limited"]),
            (502, &["sso_provider_unavailable"]),
        ],
    ),
    (
        "auth_sso_callback",
        &[
            (400, &["invalid_sso_state"]),
            (401, &["sso_failed"]),
            (403, &["sso_not_assigned", "membership_suspended"]),
            (409, &["email_taken"]),
            (429, &["rate_limited"]),
            (502, &["sso_provider_unavailable"]),
        ],
    ),
    (
        "org_webhooks_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_webhooks_rotate_secret",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_webhooks_test",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_webhooks_deliveries",
        &[
            (400, &["invalid_pagination", "invalid_cursor"]),
            (403, &["forbidden"]),
        ],
    ),
    (
        "org_webhooks_replay",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_scim_get",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    (
        "org_scim_put",
        &[
            (400, &["invalid_role", "invalid_request"]),
            (403, &["forbidden"]),
        ],
    ),
    ("org_scim_token", &[(403, &["forbidden"])]),
    (
        "org_scim_delete",
        &[(403, &["forbidden"]), (404, &["not_found"])],
    ),
    // SCIM: the `scimType`s of each status (RFC 7644 §3.12; a status
    // without one sends none).
    ("scim_service_provider_config", &[]),
    ("scim_resource_types", &[]),
    ("scim_resource_type", &[(404, &[])]),
    ("scim_schemas", &[]),
    ("scim_schema", &[(404, &[])]),
    ("scim_search", &[(501, &[])]),
    ("scim_users_list", &[(400, &["invalidFilter"])]),
    ("scim_groups_list", &[(400, &["invalidFilter"])]),
    ("scim_users_create", SCIM_WRITE_ERRORS),
    ("scim_groups_create", SCIM_WRITE_ERRORS),
    ("scim_users_get", &[(404, &[])]),
    ("scim_groups_get", &[(404, &[])]),
    ("scim_users_replace", SCIM_UPDATE_ERRORS),
    ("scim_groups_replace", SCIM_UPDATE_ERRORS),
    ("scim_users_patch", SCIM_UPDATE_ERRORS),
    ("scim_groups_patch", SCIM_UPDATE_ERRORS),
    (
        "scim_users_delete",
        &[(400, &["mutability"]), (404, &[]), (412, &[])],
    ),
    ("scim_groups_delete", &[(404, &[]), (412, &[])]),
];

/// The errors of a SCIM create.
const SCIM_WRITE_ERRORS: &[ErrorStatus] = &[
    (
        400,
        &[
            "invalidSyntax",
            "invalidValue",
            "mutability",
            "invalidPath",
            "noTarget",
        ],
    ),
    (409, &["uniqueness"]),
];

/// The errors of a SCIM replace or PATCH.
const SCIM_UPDATE_ERRORS: &[ErrorStatus] = &[
    (
        400,
        &[
            "invalidSyntax",
            "invalidValue",
            "mutability",
            "invalidPath",
            "noTarget",
        ],
    ),
    (404, &[]),
    (409, &["uniqueness"]),
    (412, &[]),
];

/// The errors of rating an answer (chat and conversation alike).
const FEEDBACK_RATE_ERRORS: &[ErrorStatus] = &[
    (400, &["not_an_answer", "invalid_comment", "invalid_tags"]),
    (403, &["forbidden"]),
    (404, &["not_found"]),
    (409, &["answer_streaming"]),
];

/// Every error status `operation_id` can answer, ascending, each with its
/// `error_code`s: the operation's row of [`OPERATION_ERRORS`] plus the
/// statuses every operation shares. `has_input` says whether the operation
/// takes parameters or a body (then `400 invalid_request` is possible).
/// `None` for an operation missing from the table.
pub fn error_statuses(
    operation_id: &str,
    has_input: bool,
    has_body: bool,
) -> Option<Vec<(u16, Vec<&'static str>)>> {
    let (_, specific) = OPERATION_ERRORS
        .iter()
        .find(|(id, _)| *id == operation_id)?;
    let mut statuses: std::collections::BTreeMap<u16, Vec<&'static str>> = Default::default();
    let mut add = |status: u16, codes: &[&'static str]| {
        let entry = statuses.entry(status).or_default();
        for code in codes {
            if !entry.contains(code) {
                entry.push(code);
            }
        }
    };
    if SCIM_OPERATIONS.contains(&operation_id) {
        // SCIM errors carry a `scimType` (or none), never an `error_code`.
        add(401, &[]);
        for (status, codes) in specific.iter() {
            add(*status, codes);
        }
        if has_body {
            add(408, &["request_timeout"]);
        }
        add(500, &[]);
        add(503, &[]);
        return Some(statuses.into_iter().collect());
    }
    if has_input {
        add(400, &[INVALID_REQUEST]);
    }
    if has_body {
        // A body that does not arrive within `http.body_read_timeout_secs`.
        add(408, &["request_timeout"]);
    }
    if DEPLOYMENT_KEY_OPERATIONS.contains(&operation_id) {
        add(401, &["invalid_api_key"]);
    } else if !PUBLIC_OPERATIONS.contains(&operation_id) {
        add(401, AUTHENTICATION_ERRORS);
    }
    for (status, codes) in specific.iter() {
        add(*status, codes);
    }
    // A personal access token is refused what its scopes leave out
    // wherever a role can be refused (`403 forbidden`), and the operations
    // only a login may call (creating tokens, changing roles).
    let forbidding = specific
        .iter()
        .any(|(status, codes)| *status == 403 && codes.contains(&"forbidden"));
    if forbidding {
        add(403, &["insufficient_scope"]);
        // A credential the organization's single sign-on rules out
        // (issue #37): where a non-member is refused, so is it.
        add(403, &["sso_required"]);
    }
    if LOGIN_ONLY_OPERATIONS.contains(&operation_id) {
        add(403, &["token_not_allowed"]);
    }
    add(500, &["internal_error"]);
    if !DATABASE_FREE_OPERATIONS.contains(&operation_id) {
        // `server_busy`: every pooled connection stayed in use for the
        // pool's whole wait (with `Retry-After`).
        add(503, &["database_unavailable", "server_busy"]);
    }
    Some(statuses.into_iter().collect())
}
