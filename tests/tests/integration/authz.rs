//! The exhaustive authorization test: every operation of the API is listed
//! here with how it is protected, and each is exercised as an
//! unauthenticated caller, as a non-member of the organization and as a
//! member whose role grants nothing. The observed outcome of every
//! operation is compared with the golden file
//! `tests/output/authz-coverage.txt`, so an operation added to the API
//! without an entry here fails the build (its line reads `UNCOVERED`).

use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;
use workspace_tests::TestContext;

/// How an operation is protected.
#[derive(Clone, Copy)]
enum Scope {
    /// No token needed.
    Public,
    /// A deployment key only: no token and a user's token are both 401.
    DeploymentKey,
    /// An organization's SCIM token only (issue #37): no token and a
    /// user's token are both 401 (in SCIM's error shape).
    ScimToken,
    /// Any authenticated user; not organization-scoped.
    Authenticated,
    /// System administrators only.
    SystemAdmin,
    /// Organization-scoped; `Some(p)` needs permission `p`, `None` needs
    /// membership only.
    Org(Option<&'static str>),
    /// Organization-scoped, for roles of at least this level (invitations:
    /// "admin or owner roles").
    OrgLevel(i32),
}

/// Ids a request may refer to: all in the target organization.
struct Fixture {
    org: Uuid,
    custom_role: Uuid,
    member_role: Uuid,
    member_user: Uuid,
    permission: Uuid,
    invitation: Uuid,
    model: Uuid,
    conversation: Uuid,
    session: Uuid,
    kb: Uuid,
    category: Uuid,
    tool: Uuid,
    agent: Uuid,
    deployment: Uuid,
    chat: Uuid,
    chat_answer: Uuid,
}

struct Call {
    method: Method,
    path: &'static str,
    query: Vec<(&'static str, String)>,
    body: Option<Value>,
}

fn call(
    method: Method,
    path: &'static str,
    query: Vec<(&'static str, String)>,
    body: Option<Value>,
) -> Call {
    Call {
        method,
        path,
        query,
        body,
    }
}

/// The multipart operation: its probe sends a small form.
const UPLOAD_PATH: &str = "/api/chat/upload_file";

/// The protection and a well-formed request of every operation.
fn operation(id: &str, f: &Fixture) -> Option<(Scope, Call)> {
    use Method as M;
    let org = f.org.to_string();
    let q_org = || vec![("org_id", org.clone())];
    let q_endpoint = || {
        vec![
            ("org_id", org.clone()),
            ("endpoint_id", Uuid::nil().to_string()),
        ]
    };
    let kb = f.kb.to_string();
    let q_kb = || vec![("kb_id", kb.clone())];
    Some(match id {
        "healthz" => (Scope::Public, call(M::GET, "/healthz", vec![], None)),
        "readyz" => (Scope::Public, call(M::GET, "/readyz", vec![], None)),
        "auth_signup" => (
            Scope::Public,
            call(M::POST, "/api/auth/signup", vec![], Some(json!({}))),
        ),
        "auth_login" => (
            Scope::Public,
            call(M::POST, "/api/auth/login", vec![], Some(json!({}))),
        ),
        "auth_tokens_create" => (
            Scope::Authenticated,
            call(
                M::POST,
                "/api/auth/tokens/create",
                vec![],
                Some(json!({"name": "probe", "scopes": ["kb:read"]})),
            ),
        ),
        "auth_tokens_list" => (
            Scope::Authenticated,
            call(M::GET, "/api/auth/tokens/list", vec![], None),
        ),
        "auth_tokens_revoke" => (
            Scope::Authenticated,
            call(
                M::DELETE,
                "/api/auth/tokens/revoke",
                vec![("token_id", Uuid::new_v4().to_string())],
                None,
            ),
        ),
        "auth_refresh" => (
            Scope::Public,
            call(M::POST, "/api/auth/refresh", vec![], Some(json!({}))),
        ),
        "auth_forgot_password" => (
            Scope::Public,
            call(
                M::POST,
                "/api/auth/forgot_password",
                vec![],
                Some(json!({})),
            ),
        ),
        "auth_sso_start" => (
            Scope::Public,
            call(M::POST, "/api/auth/sso/start", vec![], Some(json!({}))),
        ),
        "auth_sso_callback" => (
            Scope::Public,
            call(M::POST, "/api/auth/sso/callback", vec![], Some(json!({}))),
        ),
        "auth_reset_password" => (
            Scope::Public,
            call(M::POST, "/api/auth/reset_password", vec![], Some(json!({}))),
        ),
        // The caller's own sessions and password: any authenticated user
        // (only probed without a token here, so nothing is revoked).
        "auth_logout" => (
            Scope::Authenticated,
            call(M::POST, "/api/auth/logout", vec![], None),
        ),
        "auth_sessions" => (
            Scope::Authenticated,
            call(M::GET, "/api/auth/sessions", vec![], None),
        ),
        "auth_revoke_session" => (
            Scope::Authenticated,
            call(
                M::DELETE,
                "/api/auth/revoke_session",
                vec![("session_id", Uuid::nil().to_string())],
                None,
            ),
        ),
        "auth_revoke_other_sessions" => (
            Scope::Authenticated,
            call(M::POST, "/api/auth/revoke_other_sessions", vec![], None),
        ),
        "auth_change_password" => (
            Scope::Authenticated,
            call(
                M::POST,
                "/api/auth/change_password",
                vec![],
                Some(json!({"current_password": "x", "new_password": "y"})),
            ),
        ),
        "users_me" => (
            Scope::Authenticated,
            call(M::GET, "/api/users/me", vec![], None),
        ),
        "org_list" => (
            Scope::Authenticated,
            call(M::GET, "/api/org/list", vec![], None),
        ),
        "org_create_org" => (
            Scope::Authenticated,
            call(
                M::POST,
                "/api/org/create_org",
                vec![("name", "x".into())],
                None,
            ),
        ),
        "roles_list_permissions" => (
            Scope::Authenticated,
            call(M::GET, "/api/roles/list_permissions", vec![], None),
        ),
        "system_outbox" => (
            Scope::SystemAdmin,
            call(M::GET, "/api/system/outbox", vec![], None),
        ),
        "system_model_deployments" => (
            Scope::SystemAdmin,
            call(M::GET, "/api/system/model-deployments", vec![], None),
        ),
        "roles_create_permission" => (
            Scope::SystemAdmin,
            call(
                M::POST,
                "/api/roles/permission",
                vec![],
                Some(json!({"name": "authz_probe:read"})),
            ),
        ),
        "roles_delete_permission" => (
            Scope::SystemAdmin,
            call(
                M::DELETE,
                "/api/roles/permission",
                vec![("permission_id", f.permission.to_string())],
                None,
            ),
        ),
        "org_update_features" => (
            Scope::SystemAdmin,
            call(
                M::PUT,
                "/api/org/features",
                q_org(),
                Some(json!({"team_members": true})),
            ),
        ),
        "org_features" => (
            Scope::Org(None),
            call(M::GET, "/api/org/features", q_org(), None),
        ),
        "org_add_member" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/org/add_member",
                vec![],
                Some(
                    json!({"organization_id": f.org, "user_id": f.member_user, "role_id": f.member_role}),
                ),
            ),
        ),
        "users_update" => (
            Scope::Org(Some("users:write")),
            call(
                M::PUT,
                "/api/users/update",
                vec![
                    ("org_id", org.clone()),
                    ("user_id", f.member_user.to_string()),
                ],
                Some(json!({"role_id": f.member_role})),
            ),
        ),
        "users_suspend" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/users/suspend",
                vec![
                    ("org_id", org.clone()),
                    ("user_id", f.member_user.to_string()),
                ],
                None,
            ),
        ),
        "users_reactivate" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/users/reactivate",
                vec![
                    ("org_id", org.clone()),
                    ("user_id", f.member_user.to_string()),
                ],
                None,
            ),
        ),
        "users_remove" => (
            Scope::Org(Some("users:write")),
            call(
                M::DELETE,
                "/api/users/remove",
                vec![
                    ("org_id", org.clone()),
                    ("user_id", f.member_user.to_string()),
                ],
                None,
            ),
        ),
        "org_update" => (
            Scope::Org(Some("organization:write")),
            call(
                M::PUT,
                "/api/org/update",
                q_org(),
                Some(json!({"name": "renamed by a probe"})),
            ),
        ),
        "org_transfer_ownership" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/org/transfer_ownership",
                q_org(),
                Some(json!({"user_id": f.member_user})),
            ),
        ),
        "org_service_accounts_create" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/org/service_accounts/create",
                q_org(),
                Some(json!({"name": "probe", "role_id": f.member_role, "scopes": ["kb:read"]})),
            ),
        ),
        "org_service_accounts_list" => (
            Scope::Org(Some("users:read")),
            call(M::GET, "/api/org/service_accounts/list", q_org(), None),
        ),
        "org_service_accounts_rotate" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/org/service_accounts/rotate",
                vec![
                    ("org_id", org.clone()),
                    ("service_account_id", Uuid::new_v4().to_string()),
                ],
                Some(json!({})),
            ),
        ),
        "org_service_accounts_delete" => (
            Scope::Org(Some("users:write")),
            call(
                M::DELETE,
                "/api/org/service_accounts/delete",
                vec![
                    ("org_id", org.clone()),
                    ("service_account_id", Uuid::new_v4().to_string()),
                ],
                None,
            ),
        ),
        // Any member may leave: the member probe does (and is added back).
        "org_leave" => (
            Scope::Org(None),
            call(M::POST, "/api/org/leave", q_org(), None),
        ),
        "roles_create" => (
            Scope::Org(Some("roles:write")),
            call(
                M::POST,
                "/api/roles/create",
                q_org(),
                Some(json!({"name": "probe", "hierarchy_level": 1, "permission_ids": []})),
            ),
        ),
        "roles_update" => (
            Scope::Org(Some("roles:write")),
            call(
                M::PUT,
                "/api/roles/update",
                vec![
                    ("org_id", org.clone()),
                    ("role_id", f.custom_role.to_string()),
                ],
                Some(json!({"description": "probe"})),
            ),
        ),
        "roles_remove" => (
            Scope::Org(Some("roles:delete")),
            call(
                M::DELETE,
                "/api/roles/remove",
                vec![
                    ("org_id", org.clone()),
                    ("role_id", f.custom_role.to_string()),
                ],
                None,
            ),
        ),
        "auth_signup_invite" => (
            Scope::Public,
            call(M::POST, "/api/auth/signup_invite", vec![], Some(json!({}))),
        ),
        "invitations_validate" => (
            Scope::Public,
            call(
                M::GET,
                "/api/invitations/validate",
                vec![("token", "x".into())],
                None,
            ),
        ),
        "users_list" => (
            Scope::Org(Some("users:read")),
            call(M::GET, "/api/users/list", q_org(), None),
        ),
        "users_invite" => (
            Scope::Org(Some("users:write")),
            call(
                M::POST,
                "/api/users/invite",
                q_org(),
                Some(
                    json!({"email": "probe@example.com", "first_name": "P", "last_name": "R",
                            "role": f.member_role}),
                ),
            ),
        ),
        "invitations_create" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/invitations/create",
                q_org(),
                Some(json!({"email": "probe2@example.com", "role_id": f.member_role})),
            ),
        ),
        "invitations_bulk_create" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/invitations/bulk_create",
                q_org(),
                Some(
                    json!({"invitations": [{"email": "probe3@example.com", "role_id": f.member_role}]}),
                ),
            ),
        ),
        "invitations_list" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/invitations/list", q_org(), None),
        ),
        "invitations_get" => (
            Scope::OrgLevel(80),
            call(
                M::GET,
                "/api/invitations/get",
                vec![("invitation_id", f.invitation.to_string())],
                None,
            ),
        ),
        "invitations_resend" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/invitations/resend",
                vec![("invitation_id", f.invitation.to_string())],
                None,
            ),
        ),
        "invitations_revoke" => (
            Scope::OrgLevel(80),
            call(
                M::DELETE,
                "/api/invitations/revoke",
                vec![("invitation_id", f.invitation.to_string())],
                None,
            ),
        ),
        "models_list" => (
            Scope::Org(None),
            call(M::GET, "/api/models/list", q_org(), None),
        ),
        "conversation_create" => (
            Scope::Org(Some("conversation:write")),
            call(
                M::POST,
                "/api/conversation/create",
                q_org(),
                Some(json!({"title": "probe"})),
            ),
        ),
        "conversation_create_session" => (
            Scope::Org(Some("conversation:write")),
            call(
                M::POST,
                "/api/conversation/create_session",
                q_org(),
                Some(json!({"conversation_id": f.conversation, "model_id": f.model})),
            ),
        ),
        "conversation_stream_chat" => (
            Scope::Org(Some("conversation:write")),
            call(
                M::POST,
                "/api/conversation/stream_chat",
                q_org(),
                Some(json!({"chat_session_id": f.session, "message": "probe"})),
            ),
        ),
        // Authorization comes first: any answer id will do.
        "conversation_stream" => (
            Scope::Org(Some("conversation:read")),
            call(
                M::GET,
                "/api/conversation/stream",
                vec![
                    ("org_id", org.clone()),
                    ("message_id", f.session.to_string()),
                ],
                None,
            ),
        ),
        "conversation_stop" => (
            Scope::Org(Some("conversation:write")),
            call(
                M::POST,
                "/api/conversation/stop",
                vec![
                    ("org_id", org.clone()),
                    ("message_id", f.session.to_string()),
                ],
                None,
            ),
        ),
        "conversation_list" => (
            Scope::Org(Some("conversation:read")),
            call(M::GET, "/api/conversation/list", q_org(), None),
        ),
        "conversation_get_with_sessions" => (
            Scope::Org(Some("conversation:read")),
            call(
                M::GET,
                "/api/conversation/get_with_sessions",
                vec![
                    ("org_id", org.clone()),
                    ("conversation_id", f.conversation.to_string()),
                ],
                None,
            ),
        ),
        "conversation_messages" => (
            Scope::Org(Some("conversation:read")),
            call(
                M::GET,
                "/api/conversation/messages",
                vec![
                    ("org_id", org.clone()),
                    ("conversation_id", f.conversation.to_string()),
                ],
                None,
            ),
        ),
        "kb_create" => (
            Scope::Org(Some("kb:write")),
            call(
                M::POST,
                "/api/kb/create",
                q_org(),
                Some(
                    json!({"name": "probe", "description": "", "embedding_model": "all-minilm-l6-v2", "sources": []}),
                ),
            ),
        ),
        "kb_list" => (
            Scope::Org(Some("kb:read")),
            call(M::GET, "/api/kb/list", q_org(), None),
        ),
        "kb_get" => (
            Scope::Org(Some("kb:read")),
            call(M::GET, "/api/kb/get", q_kb(), None),
        ),
        "kb_update" => (
            Scope::Org(Some("kb:write")),
            call(
                M::PUT,
                "/api/kb/update",
                q_kb(),
                Some(json!({"name": "probe"})),
            ),
        ),
        "kb_delete" => (
            Scope::Org(Some("kb:delete")),
            call(M::DELETE, "/api/kb/delete", q_kb(), None),
        ),
        "kb_add_source" => (
            Scope::Org(Some("kb:write")),
            call(
                M::POST,
                "/api/kb/add_source",
                q_kb(),
                Some(json!({"type": "web", "config": {"urls": ["http://127.0.0.1:9/"]}})),
            ),
        ),
        "kb_list_documents" => (
            Scope::Org(Some("kb:read")),
            call(M::GET, "/api/kb/list_documents", q_kb(), None),
        ),
        "kb_delete_document" => (
            Scope::Org(Some("kb:delete")),
            call(
                M::DELETE,
                "/api/kb/delete_document",
                vec![
                    ("kb_id", kb.clone()),
                    ("document_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        "kb_retry_document" => (
            Scope::Org(Some("kb:write")),
            call(
                M::POST,
                "/api/kb/retry_document",
                vec![
                    ("kb_id", kb.clone()),
                    ("document_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        "kb_search" => (
            Scope::Org(Some("kb:read")),
            call(
                M::POST,
                "/api/kb/search",
                q_kb(),
                Some(json!({"query": "probe"})),
            ),
        ),
        "kb_query" => (
            Scope::Org(Some("kb:read")),
            call(
                M::POST,
                "/api/kb/query",
                q_kb(),
                Some(json!({"query": "probe"})),
            ),
        ),
        "kb_ingestion_status" => (
            Scope::Org(Some("kb:read")),
            call(M::GET, "/api/kb/ingestion_status", q_kb(), None),
        ),
        "chat_available_knowledge_bases" => (
            Scope::Org(Some("chats:read+kb:read")),
            call(M::GET, "/api/chat/available_knowledge_bases", q_org(), None),
        ),
        "chat_upload_file" => (
            Scope::Org(Some("chats:write")),
            call(M::POST, UPLOAD_PATH, q_org(), None),
        ),
        // Chat area.
        "chat_create" => (
            Scope::Org(Some("chats:write")),
            call(M::POST, "/api/chat", q_org(), Some(json!({}))),
        ),
        "chat_get" => (
            Scope::Org(Some("chats:read")),
            call(
                M::GET,
                "/api/chat",
                vec![("org_id", org.clone()), ("chat_id", f.chat.to_string())],
                None,
            ),
        ),
        "chat_list" => (
            Scope::Org(Some("chats:read")),
            call(M::GET, "/api/chat/list", q_org(), None),
        ),
        "chat_update" => (
            Scope::Org(Some("chats:write")),
            call(
                M::PUT,
                "/api/chat",
                vec![("org_id", org.clone()), ("chat_id", f.chat.to_string())],
                Some(json!({"title": "probe"})),
            ),
        ),
        "chat_delete_session" => (
            Scope::Org(Some("chats:delete")),
            call(
                M::DELETE,
                "/api/chat/delete_session",
                vec![("session_id", f.chat.to_string())],
                None,
            ),
        ),
        "chat_bulk_delete_sessions" => (
            Scope::Org(Some("chats:delete")),
            call(
                M::POST,
                "/api/chat/bulk_delete_sessions",
                q_org(),
                Some(json!({"chat_ids": [f.chat]})),
            ),
        ),
        "chat_send_message" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/send_message",
                q_org(),
                Some(json!({"chat_id": f.chat, "content": "probe"})),
            ),
        ),
        "chat_edit_message" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/edit_message",
                q_org(),
                Some(json!({"message_id": f.chat_answer, "content": "probe"})),
            ),
        ),
        "chat_regenerate" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/regenerate",
                q_org(),
                Some(json!({"message_id": f.chat_answer})),
            ),
        ),
        "chat_switch_branch" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/switch_branch",
                vec![("org_id", org.clone()), ("chat_id", f.chat.to_string())],
                Some(json!({"message_id": f.chat_answer})),
            ),
        ),
        "chat_stream" => (
            Scope::Org(Some("chats:read")),
            call(
                M::GET,
                "/api/chat/stream",
                vec![
                    ("org_id", org.clone()),
                    ("message_id", f.chat_answer.to_string()),
                ],
                None,
            ),
        ),
        "chat_stop" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/stop",
                vec![
                    ("org_id", org.clone()),
                    ("message_id", f.chat_answer.to_string()),
                ],
                None,
            ),
        ),
        "chat_transcribe" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/transcribe",
                vec![
                    ("org_id", org.clone()),
                    ("content_type", "audio/wav".into()),
                ],
                None,
            ),
        ),
        "chat_ws_ticket" => (
            Scope::Org(Some("chats:read")),
            call(M::POST, "/api/chat/ws_ticket", q_org(), None),
        ),
        // Chat export and import (issue #35).
        "chat_export" => (
            Scope::Org(Some("chats:read")),
            call(
                M::GET,
                "/api/chat/export",
                vec![("org_id", org.clone()), ("chat_id", f.chat.to_string())],
                None,
            ),
        ),
        "chat_export_all" => (
            Scope::Org(Some("chats:read")),
            call(M::GET, "/api/chat/export_all", q_org(), None),
        ),
        "chat_import" => (
            Scope::Org(Some("chats:write")),
            call(M::POST, "/api/chat/import", q_org(), Some(json!([]))),
        ),
        "chat_ws" => (
            Scope::Public,
            call(
                M::GET,
                "/api/chat/ws",
                vec![("org_id", org.clone()), ("ticket", "x".into())],
                None,
            ),
        ),
        "chat_prompt" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/prompt",
                q_org(),
                Some(json!({"text": "probe"})),
            ),
        ),
        // Share links of chats (issue #35).
        "chat_share_create" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/share",
                vec![("org_id", org.clone()), ("chat_id", f.chat.to_string())],
                None,
            ),
        ),
        "chat_shares_list" => (
            Scope::Org(Some("chats:read")),
            call(M::GET, "/api/chat/shares/list", q_org(), None),
        ),
        "chat_share_revoke" => (
            Scope::Org(Some("chats:write")),
            call(
                M::DELETE,
                "/api/chat/share/revoke",
                vec![
                    ("org_id", org.clone()),
                    ("share_id", Uuid::new_v4().to_string()),
                ],
                None,
            ),
        ),
        "chat_shared" => (
            Scope::Public,
            call(
                M::GET,
                "/api/shared",
                vec![("token", "wsshare_probe".into())],
                None,
            ),
        ),
        // Chat search, pins and folders (issue #35).
        "chat_search" => (
            Scope::Org(Some("chats:read")),
            call(
                M::GET,
                "/api/chat/search",
                vec![("org_id", org.clone()), ("q", "probe".into())],
                None,
            ),
        ),
        "chat_folders_list" => (
            Scope::Org(Some("chats:read")),
            call(M::GET, "/api/chat/folders", q_org(), None),
        ),
        "chat_folders_create" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/folders",
                q_org(),
                Some(json!({"name": "probe"})),
            ),
        ),
        "chat_folders_rename" => (
            Scope::Org(Some("chats:write")),
            call(
                M::PUT,
                "/api/chat/folders",
                vec![
                    ("org_id", org.clone()),
                    ("folder_id", Uuid::new_v4().to_string()),
                ],
                Some(json!({"name": "probe"})),
            ),
        ),
        "chat_folders_delete" => (
            Scope::Org(Some("chats:write")),
            call(
                M::DELETE,
                "/api/chat/folders",
                vec![
                    ("org_id", org.clone()),
                    ("folder_id", Uuid::new_v4().to_string()),
                ],
                None,
            ),
        ),
        "chat_folders_move" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/folders/move",
                q_org(),
                Some(json!({"chat_ids": [f.chat], "folder_id": null})),
            ),
        ),
        "files_download" => (
            Scope::Public,
            call(
                M::GET,
                "/api/files/download",
                vec![
                    ("file_id", Uuid::nil().to_string()),
                    ("expires", "0".into()),
                    ("signature", "0".repeat(64)),
                ],
                None,
            ),
        ),
        "roles_list_roles" => (
            Scope::Org(Some("roles:read")),
            call(M::GET, "/api/roles/list_roles", q_org(), None),
        ),
        "tools_list_categories" => (
            Scope::Org(Some("tool:read")),
            call(M::GET, "/api/tools/list_categories", q_org(), None),
        ),
        "tools_list_all" => (
            Scope::Org(Some("tool:read")),
            call(M::GET, "/api/tools/list_all", q_org(), None),
        ),
        "tools_create_category" => (
            Scope::Org(Some("tool:write")),
            call(
                M::POST,
                "/api/tools/create_category",
                q_org(),
                Some(json!({"name": "probe", "description": ""})),
            ),
        ),
        "tools_update_category" => (
            Scope::Org(Some("tool:write")),
            call(
                M::PUT,
                "/api/tools/update_category",
                vec![
                    ("org_id", org.clone()),
                    ("category_id", f.category.to_string()),
                ],
                Some(json!({"description": "probe"})),
            ),
        ),
        "tools_delete_category" => (
            Scope::Org(Some("tool:delete")),
            call(
                M::DELETE,
                "/api/tools/delete_category",
                vec![
                    ("org_id", org.clone()),
                    ("category_id", f.category.to_string()),
                ],
                None,
            ),
        ),
        "tools_create" => (
            Scope::Org(Some("tool:write")),
            call(
                M::POST,
                "/api/tools",
                q_org(),
                Some(crate::tools::tool_body(
                    "probe",
                    f.category,
                    crate::tools::ADDER,
                )),
            ),
        ),
        "tools_update" => (
            Scope::Org(Some("tool:write")),
            call(
                M::PUT,
                "/api/tools",
                vec![("org_id", org.clone()), ("tool_id", f.tool.to_string())],
                Some(json!({"description": "probe"})),
            ),
        ),
        "tools_get" => (
            Scope::Org(Some("tool:read")),
            call(
                M::GET,
                "/api/tools/get",
                vec![("org_id", org.clone()), ("tool_id", f.tool.to_string())],
                None,
            ),
        ),
        "tools_delete" => (
            Scope::Org(Some("tool:delete")),
            call(
                M::DELETE,
                "/api/tools/delete",
                vec![("org_id", org.clone()), ("tool_id", f.tool.to_string())],
                None,
            ),
        ),
        "tools_test" => (
            Scope::Org(Some("tool:execute")),
            call(
                M::POST,
                "/api/tools/test",
                vec![("org_id", org.clone()), ("tool_id", f.tool.to_string())],
                Some(json!({"inputs": {"a": 1}})),
            ),
        ),
        "agents_create" => (
            Scope::Org(Some("agent:write")),
            call(
                M::POST,
                "/api/agents",
                q_org(),
                Some(crate::agents::agent_body(f.model, json!([]))),
            ),
        ),
        "agents_list" => (
            Scope::Org(Some("agent:read")),
            call(M::GET, "/api/agents/list", q_org(), None),
        ),
        "agents_get" => (
            Scope::Org(Some("agent:read")),
            call(
                M::GET,
                "/api/agents/get",
                vec![("agent_id", f.agent.to_string())],
                None,
            ),
        ),
        "agents_update" => (
            Scope::Org(Some("agent:write")),
            call(
                M::PUT,
                "/api/agents/update",
                vec![("agent_id", f.agent.to_string())],
                Some(json!({"description": "probe"})),
            ),
        ),
        "agents_delete" => (
            Scope::Org(Some("agent:delete")),
            call(
                M::DELETE,
                "/api/agents/delete",
                vec![("agent_id", f.agent.to_string())],
                None,
            ),
        ),
        "agents_test" => (
            Scope::Org(Some("agent:execute")),
            call(
                M::POST,
                "/api/agents/test",
                vec![("agent_id", f.agent.to_string())],
                Some(json!({"message": "probe"})),
            ),
        ),
        "deployments_create" => (
            Scope::Org(Some("agent:write")),
            call(
                M::POST,
                "/api/agent_deploy/create",
                vec![("agent_id", f.agent.to_string())],
                Some(json!({"name": "authz", "channel": "api"})),
            ),
        ),
        "deployments_list" => (
            Scope::Org(Some("agent:read")),
            call(
                M::GET,
                "/api/agent_deploy/list",
                vec![("agent_id", f.agent.to_string())],
                None,
            ),
        ),
        "deployments_get" => (
            Scope::Org(Some("agent:read")),
            call(
                M::GET,
                "/api/agent_deploy/get",
                vec![("deployment_id", f.deployment.to_string())],
                None,
            ),
        ),
        "deployments_update" => (
            Scope::Org(Some("agent:write")),
            call(
                M::PUT,
                "/api/agent_deploy/update",
                vec![("deployment_id", f.deployment.to_string())],
                Some(json!({"name": "renamed"})),
            ),
        ),
        "deployments_delete" => (
            Scope::Org(Some("agent:delete")),
            call(
                M::DELETE,
                "/api/agent_deploy/delete",
                vec![("deployment_id", f.deployment.to_string())],
                None,
            ),
        ),
        "deployments_regenerate_key" => (
            Scope::Org(Some("agent:write")),
            call(
                M::POST,
                "/api/agent_deploy/regenerate_key",
                vec![("deployment_id", f.deployment.to_string())],
                None,
            ),
        ),
        "deployments_chat_completions" => (
            Scope::DeploymentKey,
            call(
                M::POST,
                "/api/agent_deploy/v1/chat/completions",
                vec![],
                Some(json!({"messages": [{"role": "user", "content": "hi"}]})),
            ),
        ),
        "deployments_models" => (
            Scope::DeploymentKey,
            call(M::GET, "/api/agent_deploy/v1/models", vec![], None),
        ),
        "deployments_chat_completions_preflight" => (
            Scope::Public,
            call(
                M::OPTIONS,
                "/api/agent_deploy/v1/chat/completions",
                vec![],
                None,
            ),
        ),
        "deployments_models_preflight" => (
            Scope::Public,
            call(M::OPTIONS, "/api/agent_deploy/v1/models", vec![], None),
        ),
        // MCP area (ids need not exist: authorization comes first).
        "mcp_list_servers" => (
            Scope::Org(Some("mcp:read")),
            call(M::GET, "/api/mcp/list_servers", q_org(), None),
        ),
        "mcp_server_with_tools" => (
            Scope::Org(Some("mcp:read")),
            call(
                M::GET,
                "/api/mcp/server_with_tools",
                vec![
                    ("org_id", org.clone()),
                    ("server_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        "mcp_connect_account" => (
            Scope::Org(Some("mcp:write")),
            call(
                M::POST,
                "/api/mcp/connect_account",
                q_org(),
                Some(json!({"server_id": Uuid::nil()})),
            ),
        ),
        "mcp_callback" => (
            Scope::Public,
            call(
                M::GET,
                "/api/mcp/callback",
                vec![("state", "x".into())],
                None,
            ),
        ),
        "mcp_list_instances" => (
            Scope::Org(Some("mcp:read")),
            call(M::GET, "/api/mcp/list_instances", q_org(), None),
        ),
        "mcp_update_instance" => (
            Scope::Org(Some("mcp:write")),
            call(
                M::PUT,
                "/api/mcp/instance",
                vec![
                    ("org_id", org.clone()),
                    ("instance_id", Uuid::nil().to_string()),
                ],
                Some(json!({"name": "probe"})),
            ),
        ),
        "mcp_delete_instance" => (
            Scope::Org(Some("mcp:write")),
            call(
                M::DELETE,
                "/api/mcp/instance",
                vec![
                    ("org_id", org.clone()),
                    ("instance_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        "mcp_generate_url" => (
            Scope::Org(Some("mcp:write")),
            call(
                M::POST,
                "/api/mcp/generate_url",
                q_org(),
                Some(json!({"server_id": Uuid::nil(), "session_id": Uuid::nil()})),
            ),
        ),
        "mcp_gateway_post" => (
            Scope::Public,
            call(M::POST, "/api/mcp/gateway/x", vec![], Some(json!({}))),
        ),
        "mcp_gateway_get" => (
            Scope::Public,
            call(M::GET, "/api/mcp/gateway/x", vec![], None),
        ),
        "mcp_gateway_delete" => (
            Scope::Public,
            call(M::DELETE, "/api/mcp/gateway/x", vec![], None),
        ),
        "mcp_playground_chat" => (
            Scope::Org(Some("mcp:write")),
            call(
                M::POST,
                "/api/mcp_playground/chat",
                q_org(),
                Some(json!({"content": "probe"})),
            ),
        ),
        // Organizations and accounts that end (issue #34): no probe deletes
        // anything (a wrong name, a wrong password).
        "org_delete" => (
            Scope::Org(Some("organization:admin")),
            call(
                M::DELETE,
                "/api/org/delete",
                q_org(),
                Some(json!({"confirm_name": "not the name"})),
            ),
        ),
        "org_deletion_status" => (
            Scope::Authenticated,
            call(M::GET, "/api/org/deletion_status", q_org(), None),
        ),
        "users_delete_me" => (
            Scope::Authenticated,
            call(
                M::POST,
                "/api/users/me/delete",
                vec![],
                Some(json!({"password": "not the password"})),
            ),
        ),
        "users_export" => (
            Scope::Authenticated,
            call(M::GET, "/api/users/me/export", vec![], None),
        ),
        // Feedback on answers (issue #35).
        "chat_feedback_rate" => (
            Scope::Org(Some("chats:write")),
            call(
                M::POST,
                "/api/chat/feedback",
                q_org(),
                Some(json!({"message_id": f.chat_answer, "rating": "up"})),
            ),
        ),
        "chat_feedback_delete" => (
            Scope::Org(Some("chats:write")),
            call(
                M::DELETE,
                "/api/chat/feedback",
                vec![
                    ("org_id", org.clone()),
                    ("message_id", f.chat_answer.to_string()),
                ],
                None,
            ),
        ),
        "conversation_feedback_rate" => (
            Scope::Org(Some("conversation:write")),
            call(
                M::POST,
                "/api/conversation/feedback",
                q_org(),
                Some(json!({"message_id": Uuid::nil().to_string(), "rating": "down"})),
            ),
        ),
        "conversation_feedback_delete" => (
            Scope::Org(Some("conversation:write")),
            call(
                M::DELETE,
                "/api/conversation/feedback",
                vec![
                    ("org_id", org.clone()),
                    ("message_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        // The organization's admins (level 80 and `feedback:read`).
        "org_feedback_list" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/feedback/list", q_org(), None),
        ),
        "org_feedback_export" => (
            Scope::OrgLevel(80),
            call(
                M::GET,
                "/api/org/feedback/export",
                vec![("org_id", org.clone()), ("format", "csv".into())],
                None,
            ),
        ),
        // ---- Audit log (issue #36): the organization's admins (level 80
        // and `audit:read`); without `org_id`, system administrators.
        "audit_list" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/audit/events", q_org(), None),
        ),
        "audit_export" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/audit/export", q_org(), None),
        ),
        "audit_verify" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/audit/verify", q_org(), None),
        ),
        // Usage and budgets: the organization's admins (level 80 and
        // `usage:read` / `usage:write`).
        "org_usage_report" => (
            Scope::OrgLevel(80),
            call(
                M::GET,
                "/api/org/usage/report",
                vec![("org_id", org.clone()), ("group_by", "day".into())],
                None,
            ),
        ),
        "org_usage_export" => (
            Scope::OrgLevel(80),
            call(
                M::GET,
                "/api/org/usage/export",
                vec![("org_id", org.clone()), ("group_by", "model".into())],
                None,
            ),
        ),
        "org_budgets_list" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/budgets/list", q_org(), None),
        ),
        "org_budgets_create" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/org/budgets/create",
                q_org(),
                Some(
                    json!({"scope": "organization", "metric": "tokens", "period": "day", "limit": 1000000}),
                ),
            ),
        ),
        "org_budgets_update" => (
            Scope::OrgLevel(80),
            call(
                M::PUT,
                "/api/org/budgets/update",
                vec![
                    ("org_id", org.clone()),
                    ("budget_id", Uuid::nil().to_string()),
                ],
                Some(json!({"limit": 5})),
            ),
        ),
        "org_budgets_delete" => (
            Scope::OrgLevel(80),
            call(
                M::DELETE,
                "/api/org/budgets/delete",
                vec![
                    ("org_id", org.clone()),
                    ("budget_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        // Webhooks (issue #36): the organization's admins (level 80 and
        // `webhooks:read` / `webhooks:write`).
        "org_webhooks_create" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/org/webhooks/create",
                q_org(),
                Some(json!({"url": "https://example.com/hook", "event_types": ["*"]})),
            ),
        ),
        "org_webhooks_list" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/webhooks/list", q_org(), None),
        ),
        "org_webhooks_get" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/webhooks/get", q_endpoint(), None),
        ),
        "org_webhooks_update" => (
            Scope::OrgLevel(80),
            call(
                M::PUT,
                "/api/org/webhooks/update",
                q_endpoint(),
                Some(json!({"enabled": false})),
            ),
        ),
        "org_scim_get" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/scim", q_org(), None),
        ),
        "org_scim_put" => (
            Scope::OrgLevel(80),
            call(
                M::PUT,
                "/api/org/scim",
                q_org(),
                Some(json!({"role_mappings": [], "default_role": "member"})),
            ),
        ),
        "org_scim_token" => (
            Scope::OrgLevel(80),
            call(M::POST, "/api/org/scim/token", q_org(), None),
        ),
        "org_scim_delete" => (
            Scope::OrgLevel(80),
            call(M::DELETE, "/api/org/scim", q_org(), None),
        ),
        "scim_service_provider_config" => (
            Scope::ScimToken,
            call(M::GET, "/scim/v2/ServiceProviderConfig", vec![], None),
        ),
        "scim_resource_types" => (
            Scope::ScimToken,
            call(M::GET, "/scim/v2/ResourceTypes", vec![], None),
        ),
        "scim_resource_type" => (
            Scope::ScimToken,
            call(M::GET, "/scim/v2/ResourceTypes/User", vec![], None),
        ),
        "scim_search" => (
            Scope::ScimToken,
            call(M::POST, "/scim/v2/.search", vec![], Some(json!({}))),
        ),
        "scim_schemas" => (
            Scope::ScimToken,
            call(M::GET, "/scim/v2/Schemas", vec![], None),
        ),
        "scim_schema" => (
            Scope::ScimToken,
            call(
                M::GET,
                "/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:User",
                vec![],
                None,
            ),
        ),
        "scim_users_list" => (
            Scope::ScimToken,
            call(M::GET, "/scim/v2/Users", vec![], None),
        ),
        "scim_users_create" => (
            Scope::ScimToken,
            call(
                M::POST,
                "/scim/v2/Users",
                vec![],
                Some(
                    json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "probe"}),
                ),
            ),
        ),
        "scim_users_get" => (
            Scope::ScimToken,
            call(
                M::GET,
                "/scim/v2/Users/00000000-0000-0000-0000-000000000000",
                vec![],
                None,
            ),
        ),
        "scim_users_replace" => (
            Scope::ScimToken,
            call(
                M::PUT,
                "/scim/v2/Users/00000000-0000-0000-0000-000000000000",
                vec![],
                Some(
                    json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "probe"}),
                ),
            ),
        ),
        "scim_users_patch" => (
            Scope::ScimToken,
            call(
                M::PATCH,
                "/scim/v2/Users/00000000-0000-0000-0000-000000000000",
                vec![],
                Some(
                    json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": []}),
                ),
            ),
        ),
        "scim_users_delete" => (
            Scope::ScimToken,
            call(
                M::DELETE,
                "/scim/v2/Users/00000000-0000-0000-0000-000000000000",
                vec![],
                None,
            ),
        ),
        "scim_groups_list" => (
            Scope::ScimToken,
            call(M::GET, "/scim/v2/Groups", vec![], None),
        ),
        "scim_groups_create" => (
            Scope::ScimToken,
            call(
                M::POST,
                "/scim/v2/Groups",
                vec![],
                Some(
                    json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "probe"}),
                ),
            ),
        ),
        "scim_groups_get" => (
            Scope::ScimToken,
            call(
                M::GET,
                "/scim/v2/Groups/00000000-0000-0000-0000-000000000000",
                vec![],
                None,
            ),
        ),
        "scim_groups_replace" => (
            Scope::ScimToken,
            call(
                M::PUT,
                "/scim/v2/Groups/00000000-0000-0000-0000-000000000000",
                vec![],
                Some(
                    json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "probe"}),
                ),
            ),
        ),
        "scim_groups_patch" => (
            Scope::ScimToken,
            call(
                M::PATCH,
                "/scim/v2/Groups/00000000-0000-0000-0000-000000000000",
                vec![],
                Some(
                    json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": []}),
                ),
            ),
        ),
        "scim_groups_delete" => (
            Scope::ScimToken,
            call(
                M::DELETE,
                "/scim/v2/Groups/00000000-0000-0000-0000-000000000000",
                vec![],
                None,
            ),
        ),
        "org_sso_get" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/sso", q_org(), None),
        ),
        "org_sso_put" => (
            Scope::OrgLevel(80),
            call(
                M::PUT,
                "/api/org/sso",
                q_org(),
                Some(
                    json!({"issuer": "https://idp.example.com", "client_id": "probe",
                            "client_secret": "probe", "domains": ["example.com"]}),
                ),
            ),
        ),
        "org_sso_delete" => (
            Scope::OrgLevel(80),
            call(M::DELETE, "/api/org/sso", q_org(), None),
        ),
        "org_webhooks_delete" => (
            Scope::OrgLevel(80),
            call(M::DELETE, "/api/org/webhooks/delete", q_endpoint(), None),
        ),
        "org_webhooks_rotate_secret" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/org/webhooks/rotate_secret",
                q_endpoint(),
                None,
            ),
        ),
        "org_webhooks_test" => (
            Scope::OrgLevel(80),
            call(M::POST, "/api/org/webhooks/test", q_endpoint(), None),
        ),
        "org_webhooks_deliveries" => (
            Scope::OrgLevel(80),
            call(M::GET, "/api/org/webhooks/deliveries", q_org(), None),
        ),
        "org_webhooks_replay" => (
            Scope::OrgLevel(80),
            call(
                M::POST,
                "/api/org/webhooks/deliveries/replay",
                vec![
                    ("org_id", org.clone()),
                    ("delivery_id", Uuid::nil().to_string()),
                ],
                None,
            ),
        ),
        _ => return None,
    })
}

/// The probe of `c`, with `token` when given.
fn probe(cx: &TestContext, token: Option<&str>, c: &Call) -> reqwest::RequestBuilder {
    let mut request = workspace_tests::http()
        .request(c.method.clone(), format!("{}{}", cx.base_url, c.path))
        .query(&c.query);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = &c.body {
        request = request.json(body);
    }
    if c.path == UPLOAD_PATH {
        request = request
            .header(
                "content-type",
                "multipart/form-data; boundary=probe-boundary",
            )
            .body(
                "--probe-boundary\r\nContent-Disposition: form-data; name=\"file\"; \
                 filename=\"p.txt\"\r\n\r\nprobe\r\n--probe-boundary--\r\n",
            );
    }
    request
}

async fn status(cx: &TestContext, token: Option<&str>, c: &Call) -> u16 {
    probe(cx, token, c)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

/// A request's status and `error_code`.
async fn refusal(cx: &TestContext, token: &str, c: &Call) -> (u16, String) {
    let response = probe(cx, Some(token), c).send().await.expect("request");
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (
        status,
        body["error_code"].as_str().unwrap_or("").to_string(),
    )
}

/// Operations that are not `GET` but only read: a token with read scopes
/// may call them. Every other operation that is not `GET` changes
/// something, and a token with only `*:read` is refused it.
const READS_NOT_GET: &[&str] = &[
    // Searching and asking a knowledge base (`kb:read`).
    "kb_search",
    "kb_query",
    // A ticket for the chat WebSocket, which only reads (`chats:read`).
    "chat_ws_ticket",
];

/// Whether a token that holds only read scopes must be refused `id`.
fn is_write(id: &str, c: &Call) -> bool {
    c.method != Method::GET && !READS_NOT_GET.contains(&id)
}

#[tokio::test]
async fn every_operation_is_protected() {
    let cx = TestContext::new("authz_every_operation").await;
    let owner = cx.user("authz-owner").await;
    let outsider = cx.user("authz-outsider").await;
    let powerless = cx.user("authz-powerless").await;
    let target = cx.user("authz-target").await;

    let org = owner.personal_org().await;
    let roles = owner
        .client
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    let member_role = roles.iter().find(|r| r.name == "member").unwrap().id;
    // A role that grants nothing at all.
    let nothing = owner
        .client
        .roles_create()
        .org_id(org)
        .body(
            workspace_client::types::CreateRoleRequest::builder()
                .name("nothing".to_string())
                .hierarchy_level(0)
                .permission_ids(Vec::new()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    owner.add_member(org, powerless.id, nothing.id).await;
    owner.add_member(org, target.id, member_role).await;
    let permission = owner
        .client
        .roles_list_permissions()
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|p| p.name == "kb:read")
        .unwrap()
        .id;
    let invitation = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(
            workspace_client::types::InvitationCreateRequest::builder()
                .email("invited@example.com".to_string())
                .role_id(member_role),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let model = owner
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()[0]
        .id;
    let conversation = owner
        .client
        .conversation_create()
        .org_id(org)
        .body(workspace_client::types::ConversationCreate::builder().title("fixture".to_string()))
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let session = owner
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            workspace_client::types::ConversationSessionCreate::builder()
                .conversation_id(conversation)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let kb = owner
        .client
        .kb_create()
        .org_id(org)
        .body(
            workspace_client::types::KbCreate::builder()
                .name("fixture".to_string())
                .description(String::new())
                .embedding_model("all-minilm-l6-v2".to_string())
                .sources(Vec::new()),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let category = crate::tools::category(&cx, &owner.token, org, "fixture").await;
    let tool = crate::tools::tool(
        &cx,
        &owner.token,
        org,
        crate::tools::tool_body("fixture", category, crate::tools::ADDER),
    )
    .await;
    let agent = crate::agents::agent(
        &cx,
        &owner.token,
        org,
        crate::agents::agent_body(model, json!([])),
    )
    .await;
    let (s, tested) = workspace_tests::req(
        &cx.base_url,
        &owner.token,
        Method::POST,
        "/api/agents/test",
        &[("agent_id", agent.to_string())],
        Some(json!({"message": "hello"})),
    )
    .await;
    assert_eq!(s, 200, "{tested}");
    let (s, deployed) = workspace_tests::req(
        &cx.base_url,
        &owner.token,
        Method::POST,
        "/api/agent_deploy/create",
        &[("agent_id", agent.to_string())],
        Some(json!({"name": "fixture", "channel": "api"})),
    )
    .await;
    assert_eq!(s, 201, "{deployed}");
    let deployment: Uuid = deployed["id"].as_str().unwrap().parse().unwrap();
    let (chat, chat_answer) = crate::chat::fixture_chat(&cx, &owner.token, org).await;
    let fixture = Fixture {
        chat,
        chat_answer,
        kb,
        agent,
        deployment,
        category,
        tool,
        model,
        conversation,
        session,
        org,
        custom_role: nothing.id,
        member_role,
        member_user: target.id,
        permission,
        invitation,
    };

    // The owner's own token with every read scope and nothing else: the
    // owner's role allows every write, so only the token's scopes (or the
    // operation's refusal of tokens) stand between it and each write.
    let (s, created) = workspace_tests::req(
        &cx.base_url,
        &owner.token,
        Method::POST,
        "/api/auth/tokens/create",
        &[],
        Some(json!({"name": "read-only", "scopes": ["*:read"]})),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let read_token = created["token"].as_str().unwrap().to_string();

    let doc = workspace_api::openapi_document();
    let mut ids: Vec<String> = doc
        .paths
        .paths
        .values()
        .flat_map(|item| {
            item.as_item()
                .unwrap()
                .iter()
                .map(|(_, op)| op.operation_id.clone().unwrap())
        })
        .collect();
    ids.sort();

    let mut lines = BTreeMap::new();
    for id in &ids {
        let Some((scope, c)) = operation(id, &fixture) else {
            lines.insert(
                id.clone(),
                "UNCOVERED: add it to tests/tests/integration/authz.rs".to_string(),
            );
            continue;
        };
        let line = match scope {
            Scope::Public => {
                assert!(
                    workspace_api::PUBLIC_OPERATIONS.contains(&id.as_str()),
                    "{id} is not public"
                );
                "public".to_string()
            }
            Scope::DeploymentKey => {
                let anon = status(&cx, None, &c).await;
                let user = status(&cx, Some(&owner.token), &c).await;
                assert_eq!(anon, 401, "{id} without a key");
                assert_eq!(user, 401, "{id} with a user's token");
                format!("deployment-key: unauthenticated={anon} user-token={user}")
            }
            Scope::ScimToken => {
                let anon = status(&cx, None, &c).await;
                let user = status(&cx, Some(&owner.token), &c).await;
                assert_eq!(anon, 401, "{id} without a SCIM token");
                assert_eq!(user, 401, "{id} with a user's token");
                format!("scim-token: unauthenticated={anon} user-token={user}")
            }
            Scope::Authenticated => {
                let anon = status(&cx, None, &c).await;
                assert_eq!(anon, 401, "{id} unauthenticated");
                format!("authenticated: unauthenticated={anon}")
            }
            Scope::SystemAdmin => {
                let anon = status(&cx, None, &c).await;
                let owner_status = status(&cx, Some(&owner.token), &c).await;
                assert_eq!(anon, 401, "{id} unauthenticated");
                assert_eq!(
                    owner_status, 403,
                    "{id}: an organization owner is no system admin"
                );
                format!("system-admin: unauthenticated={anon} org-owner={owner_status}")
            }
            Scope::Org(permission) => {
                let anon = status(&cx, None, &c).await;
                let out = status(&cx, Some(&outsider.token), &c).await;
                let weak = status(&cx, Some(&powerless.token), &c).await;
                assert_eq!(anon, 401, "{id} unauthenticated");
                assert!(out == 403 || out == 404, "{id}: a non-member got {out}");
                match permission {
                    Some(p) => {
                        assert_eq!(weak, 403, "{id}: a member without {p} got {weak}");
                        format!(
                            "org({p}): unauthenticated={anon} non-member={out} member-without-permission={weak}"
                        )
                    }
                    None => {
                        assert!((200..300).contains(&weak), "{id}: a member got {weak}");
                        format!(
                            "org(membership): unauthenticated={anon} non-member={out} member={weak}"
                        )
                    }
                }
            }
            Scope::OrgLevel(level) => {
                let anon = status(&cx, None, &c).await;
                let out = status(&cx, Some(&outsider.token), &c).await;
                let weak = status(&cx, Some(&powerless.token), &c).await;
                assert_eq!(anon, 401, "{id} unauthenticated");
                assert!(out == 403 || out == 404, "{id}: a non-member got {out}");
                assert_eq!(weak, 403, "{id}: a member below level {level} got {weak}");
                format!(
                    "org(level>={level}): unauthenticated={anon} non-member={out} member-below-level={weak}"
                )
            }
        };
        // A token with read scopes only, on every operation that writes
        // (the credential-bound scopes above take no user token).
        let line = match scope {
            Scope::Public | Scope::DeploymentKey | Scope::ScimToken => line,
            _ if !is_write(id, &c) => line,
            _ => {
                let (status, code) = refusal(&cx, &read_token, &c).await;
                assert_eq!(
                    status, 403,
                    "{id}: a token with only *:read got {status} {code}"
                );
                assert!(
                    code == "insufficient_scope" || code == "token_not_allowed",
                    "{id}: a token with only *:read was refused with {code:?}"
                );
                format!("{line} read-token={status} {code}")
            }
        };
        lines.insert(id.clone(), line);
        if id == "org_leave" {
            // The member without permissions left: back for the next probes.
            owner.add_member(org, powerless.id, nothing.id).await;
        }
    }
    let report: String = lines
        .iter()
        .map(|(id, line)| format!("{id:<32} {line}\n"))
        .collect();
    expectorate::assert_contents("output/authz-coverage.txt", &report);
    cx.teardown().await;
}
