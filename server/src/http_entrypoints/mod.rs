//! The HTTP entry points: the implementation of [`WorkspaceApi`], one
//! module per API area. Each handler makes one authorization call
//! (`ServerContext::authorize`, `authorize_system_admin` or, for the
//! caller's own account, `authenticate`), calls the app layer and maps the
//! result; no business rule lives here. The trait implementation below only
//! delegates to the area modules.

mod agents;
mod audit;
mod auth;
mod chat;
mod chat_organize;
mod chat_shares;
mod chat_transfer;
mod conversations;
mod deletion;
mod deployments;
mod feedback;
mod invitations;
mod kb;
mod mcp;
mod orgs;
mod roles;
mod scim;
mod service_accounts;
mod sso;
mod system;
mod tokens;
mod tools;
mod usage;
mod users;
mod webhooks;

use crate::context::ServerContext;
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk, RequestContext};
use workspace_api::WorkspaceApi;
use workspace_api::auth::{
    ChangePasswordRequest, ForgotPasswordRequest, ForgotPasswordResponse, LoginRequest,
    LoginResponse, RefreshRequest, ResetPasswordRequest, Session, SessionQuery, SessionsRevoked,
    SignupRequest, SignupResponse,
};
use workspace_api::conversations::{
    Conversation, ConversationCreate, ConversationMessagesPage, ConversationQuery,
    ConversationSession, ConversationSessionCreate, ConversationWithSessions, MessagesQuery, Model,
    StreamChatRequest,
};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::invitations::{
    Invitation, InvitationBulkCreateRequest, InvitationBulkCreateResponse, InvitationCreateRequest,
    InvitationIdQuery, InvitationListItem, InvitationListQuery, InvitationOrgQuery,
    InvitationResendResponse, InvitationRevokeResponse, InvitationTokenQuery, InvitationValidation,
    SignupInviteRequest, SignupInviteResponse,
};
use workspace_api::orgs::{
    AddMemberRequest, CreateOrgQuery, MessageResponse, OrgFeatures, OrgFeaturesUpdate,
    OrgPageQuery, OrgQuery, Organization, PageQuery, TransferOwnershipRequest, UpdateOrgRequest,
};
use workspace_api::roles::{
    CreatePermissionRequest, CreateRoleRequest, Permission, PermissionQuery, Role, RoleQuery,
    RoleWithPermissions, UpdateRoleRequest,
};
use workspace_api::system::HealthStatus;
use workspace_api::users::{
    CurrentUser, MemberQuery, UpdateUserQuery, UpdateUserRoleRequest, UpdatedUser, UserInviteQuery,
    UserInviteRequest, UserInviteResponse, UserListItem, UserListQuery, UserListResponse,
};

pub enum WorkspaceImpl {}

type Ctx = RequestContext<ServerContext>;

/// The request's client address: the TCP peer, or what a trusted proxy
/// forwarded (see `http.trusted_proxies`).
fn client_address(rqctx: &Ctx) -> std::net::IpAddr {
    let forwarded = rqctx
        .request
        .headers()
        .get_all("x-forwarded-for")
        .into_iter()
        // A value that is not text stops the walk, like any garbage.
        .map(|v| v.to_str().unwrap_or(""));
    rqctx
        .context()
        .config
        .http
        .client_address(rqctx.request.remote_addr().ip(), forwarded)
}

/// The audit log's origin of a request by an authenticated `actor` (the
/// operations on one's own account; org-scoped grants carry theirs).
fn origin(rqctx: &Ctx, actor: &crate::authn::Actor) -> crate::audit::Origin {
    rqctx.context().origin(
        rqctx,
        crate::audit::Actor::user(actor.user_id, actor.token_id),
    )
}

/// Watches one request: records its status and latency in the metrics and
/// logs every 5xx at error level, with its `error_code`, the whole
/// internal error chain and (through the request's logger) its request id.
struct Probe {
    started: std::time::Instant,
    operation: String,
    log: slog::Logger,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// The request's span while tracing is on.
    trace: Option<crate::telemetry::RequestSpan>,
}

/// The status of a handler's result.
trait Status {
    fn status(&self) -> u16;
}

impl<T: serde::Serialize + schemars::JsonSchema + Send + Sync + 'static> Status
    for HttpResponseOk<T>
{
    fn status(&self) -> u16 {
        200
    }
}

impl<T: serde::Serialize + schemars::JsonSchema + Send + Sync + 'static> Status
    for HttpResponseCreated<T>
{
    fn status(&self) -> u16 {
        201
    }
}

impl<T: serde::Serialize + schemars::JsonSchema + Send + Sync + 'static> Status
    for dropshot::HttpResponseAccepted<T>
{
    fn status(&self) -> u16 {
        202
    }
}

impl<T: serde::Serialize + schemars::JsonSchema + Send + Sync + 'static> Status
    for dropshot::HttpResponseHeaders<HttpResponseOk<T>>
{
    fn status(&self) -> u16 {
        200
    }
}

impl Status for dropshot::HttpResponseSeeOther {
    fn status(&self) -> u16 {
        303
    }
}

impl Status for http::Response<dropshot::Body> {
    fn status(&self) -> u16 {
        http::Response::status(self).as_u16()
    }
}

impl Probe {
    fn new(rqctx: &Ctx) -> Probe {
        let operation = &rqctx.endpoint.operation_id;
        let trace = crate::telemetry::request_span(
            rqctx.request.headers(),
            crate::telemetry::route_of(operation),
        );
        // Log lines about the request carry its trace, dropshot's
        // "request completed" line too.
        let log = match &trace {
            Some(span) => {
                let trace_id = span.trace_id();
                let _ = rqctx.trace_id.set(trace_id.clone());
                rqctx.log.new(slog::o!("trace_id" => trace_id))
            }
            None => rqctx.log.clone(),
        };
        Probe {
            started: std::time::Instant::now(),
            operation: operation.clone(),
            log,
            metrics: rqctx.context().metrics.clone(),
            trace,
        }
    }

    /// Runs the request's handler in its span's context.
    fn traced<F: std::future::Future>(
        &self,
        handler: F,
    ) -> futures::future::Either<F, opentelemetry::trace::WithContext<F>> {
        crate::telemetry::in_span(self.trace.as_ref(), handler)
    }

    /// Ends the request's span with its status.
    fn end_span(&mut self, status: u16) {
        if let Some(span) = self.trace.take() {
            span.end(status);
        }
    }

    fn done<T: Status>(mut self, result: Result<T, HttpError>) -> Result<T, HttpError> {
        let status = match &result {
            Ok(response) => response.status(),
            Err(error) => {
                let status = error.status_code.as_u16();
                if error.error_code.as_deref() == Some("server_busy") {
                    // An overload is the operator's to size, said once per
                    // interval, not an error per refused request.
                    if let Some(refused) = self.metrics.refused_busy(std::time::Instant::now()) {
                        slog::warn!(self.log, "refusing requests: the server is busy";
                            "refused_since_last_warning" => refused,
                            "cause" => &error.internal_message,
                            "operation" => &self.operation);
                    }
                } else if status >= 500 {
                    slog::error!(self.log, "request failed";
                        "operation" => &self.operation,
                        "status" => status,
                        "error_code" => error.error_code.as_deref().unwrap_or_default(),
                        "error" => &error.internal_message);
                }
                status
            }
        };
        self.metrics
            .request(&self.operation, status, self.started.elapsed());
        self.end_span(status);
        result
    }

    /// [`Probe::done`] for the OpenAI-compatible operations.
    fn done_openai<T: Status>(
        mut self,
        result: Result<T, workspace_api::deployments::OpenAiHttpError>,
    ) -> Result<T, workspace_api::deployments::OpenAiHttpError> {
        let status = match &result {
            Ok(response) => response.status(),
            Err(error) => {
                let status = error.status.as_u16();
                if status >= 500 {
                    slog::error!(self.log, "request failed";
                        "operation" => &self.operation,
                        "status" => status,
                        "error_code" => &error.error.code,
                        "error" => &error.error.message);
                }
                status
            }
        };
        self.metrics
            .request(&self.operation, status, self.started.elapsed());
        self.end_span(status);
        result
    }
}

fn message(message: String) -> HttpResponseOk<MessageResponse> {
    HttpResponseOk(MessageResponse { message })
}

/// One endpoint whose handler only delegates: times it, counts it in
/// `/metrics` and logs its outcome ([`Probe`]), then calls the area's
/// handler with the same arguments.
macro_rules! delegate {
    (fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $target:path) => {
        async fn $name(rqctx: Ctx, $($arg: $ty),*) -> Result<$ret, HttpError> {
            let probe = Probe::new(&rqctx);
            let result = probe.traced($target(rqctx, $($arg),*)).await;
            probe.done(result)
        }
    };
}

impl WorkspaceApi for WorkspaceImpl {
    type Context = ServerContext;

    delegate!(fn root_redirect() -> http::Response<dropshot::Body> => system::root_redirect);
    delegate!(fn docs_page() -> http::Response<dropshot::Body> => system::docs_page);
    delegate!(fn docs_script() -> http::Response<dropshot::Body> => system::docs_script);
    delegate!(fn invite_accept_page() -> http::Response<dropshot::Body> => system::invite_accept_page);
    delegate!(fn invite_accept_script() -> http::Response<dropshot::Body> => system::invite_accept_script);
    delegate!(fn openapi_json() -> http::Response<dropshot::Body> => system::openapi_json);

    async fn healthz(_rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
        let probe = Probe::new(&_rqctx);
        probe.done(system::healthz(_rqctx).await)
    }

    delegate!(fn system_outbox(query: QueryParams<workspace_api::system::OutboxQuery>) -> HttpResponseOk<workspace_api::system::OutboxPage> => system::outbox);
    delegate!(fn system_model_deployments() -> HttpResponseOk<workspace_api::system::ModelDeploymentsList> => system::model_deployments);
    delegate!(fn readyz() -> HttpResponseOk<HealthStatus> => system::readyz);
    delegate!(fn auth_signup(body: JsonBody<SignupRequest>) -> HttpResponseCreated<SignupResponse> => auth::signup);
    delegate!(fn auth_login(body: JsonBody<LoginRequest>) -> HttpResponseOk<LoginResponse> => auth::login);
    delegate!(fn auth_tokens_create(body: JsonBody<workspace_api::tokens::TokenCreate>) -> HttpResponseCreated<workspace_api::tokens::TokenCreated> => tokens::create);
    delegate!(fn auth_tokens_list() -> HttpResponseOk<Vec<workspace_api::tokens::TokenSummary>> => tokens::list);
    delegate!(fn auth_tokens_revoke(query: QueryParams<workspace_api::tokens::TokenQuery>) -> HttpResponseOk<MessageResponse> => tokens::revoke);
    delegate!(fn auth_refresh(body: JsonBody<RefreshRequest>) -> HttpResponseOk<LoginResponse> => auth::refresh);
    delegate!(fn auth_logout() -> HttpResponseOk<MessageResponse> => auth::logout);
    delegate!(fn auth_sessions() -> HttpResponseOk<Vec<Session>> => auth::sessions);
    delegate!(fn auth_revoke_session(query: QueryParams<SessionQuery>) -> HttpResponseOk<SessionsRevoked> => auth::revoke_session);
    delegate!(fn auth_revoke_other_sessions() -> HttpResponseOk<SessionsRevoked> => auth::revoke_other_sessions);
    delegate!(fn auth_forgot_password(body: JsonBody<ForgotPasswordRequest>) -> dropshot::HttpResponseAccepted<ForgotPasswordResponse> => auth::forgot_password);
    delegate!(fn auth_reset_password(body: JsonBody<ResetPasswordRequest>) -> HttpResponseOk<SessionsRevoked> => auth::reset_password);
    delegate!(fn auth_change_password(body: JsonBody<ChangePasswordRequest>) -> HttpResponseOk<SessionsRevoked> => auth::change_password);
    delegate!(fn reset_password_page() -> http::Response<dropshot::Body> => auth::reset_password_page);
    delegate!(fn reset_password_script() -> http::Response<dropshot::Body> => auth::reset_password_script);
    delegate!(fn users_me() -> HttpResponseOk<CurrentUser> => users::me);
    delegate!(fn org_list(query: QueryParams<PageQuery>) -> HttpResponseOk<Vec<Organization>> => orgs::list);
    delegate!(fn org_create_org(query: QueryParams<CreateOrgQuery>) -> HttpResponseCreated<Organization> => orgs::create_org);
    delegate!(fn org_add_member(body: JsonBody<AddMemberRequest>) -> HttpResponseOk<MessageResponse> => orgs::add_member);
    delegate!(fn org_features(query: QueryParams<OrgQuery>) -> HttpResponseOk<OrgFeatures> => orgs::features);
    delegate!(fn org_update_features(query: QueryParams<OrgQuery>, body: JsonBody<OrgFeaturesUpdate>) -> HttpResponseOk<OrgFeatures> => orgs::update_features);
    delegate!(fn org_update(query: QueryParams<OrgQuery>, body: JsonBody<UpdateOrgRequest>) -> HttpResponseOk<Organization> => orgs::update);
    delegate!(fn org_leave(query: QueryParams<OrgQuery>) -> HttpResponseOk<MessageResponse> => orgs::leave);
    delegate!(fn org_transfer_ownership(query: QueryParams<OrgQuery>, body: JsonBody<TransferOwnershipRequest>) -> HttpResponseOk<Organization> => orgs::transfer_ownership);
    delegate!(fn org_service_accounts_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::service_accounts::ServiceAccountCreate>) -> HttpResponseCreated<workspace_api::service_accounts::ServiceAccountCreated> => service_accounts::create);
    delegate!(fn org_service_accounts_list(query: QueryParams<OrgQuery>) -> HttpResponseOk<Vec<workspace_api::service_accounts::ServiceAccount>> => service_accounts::list);
    delegate!(fn org_service_accounts_rotate(query: QueryParams<workspace_api::service_accounts::ServiceAccountQuery>, body: JsonBody<workspace_api::service_accounts::ServiceAccountRotate>) -> HttpResponseCreated<workspace_api::tokens::TokenCreated> => service_accounts::rotate);
    delegate!(fn org_service_accounts_delete(query: QueryParams<workspace_api::service_accounts::ServiceAccountQuery>) -> HttpResponseOk<MessageResponse> => service_accounts::delete);
    delegate!(fn users_update(query: QueryParams<UpdateUserQuery>, body: JsonBody<UpdateUserRoleRequest>) -> HttpResponseOk<UpdatedUser> => users::update);
    delegate!(fn users_list(query: QueryParams<UserListQuery>) -> HttpResponseOk<UserListResponse> => users::list);
    delegate!(fn users_invite(query: QueryParams<UserInviteQuery>, body: JsonBody<UserInviteRequest>) -> HttpResponseCreated<UserInviteResponse> => users::invite);
    delegate!(fn users_suspend(query: QueryParams<MemberQuery>) -> HttpResponseOk<UserListItem> => users::suspend);
    delegate!(fn users_reactivate(query: QueryParams<MemberQuery>) -> HttpResponseOk<UserListItem> => users::reactivate);
    delegate!(fn users_remove(query: QueryParams<MemberQuery>) -> HttpResponseOk<MessageResponse> => users::remove);
    delegate!(fn roles_create(query: QueryParams<OrgQuery>, body: JsonBody<CreateRoleRequest>) -> HttpResponseCreated<RoleWithPermissions> => roles::create);
    delegate!(fn roles_update(query: QueryParams<RoleQuery>, body: JsonBody<UpdateRoleRequest>) -> HttpResponseOk<RoleWithPermissions> => roles::update);
    delegate!(fn roles_remove(query: QueryParams<RoleQuery>) -> HttpResponseOk<MessageResponse> => roles::remove);
    delegate!(fn roles_list_roles(query: QueryParams<OrgPageQuery>) -> HttpResponseOk<Vec<Role>> => roles::list_roles);
    delegate!(fn roles_list_permissions(query: QueryParams<PageQuery>) -> HttpResponseOk<Vec<Permission>> => roles::list_permissions);
    delegate!(fn roles_create_permission(body: JsonBody<CreatePermissionRequest>) -> HttpResponseCreated<Permission> => roles::create_permission);
    delegate!(fn roles_delete_permission(query: QueryParams<PermissionQuery>) -> HttpResponseOk<MessageResponse> => roles::delete_permission);
    delegate!(fn invitations_create(query: QueryParams<InvitationOrgQuery>, body: JsonBody<InvitationCreateRequest>) -> HttpResponseCreated<Invitation> => invitations::create);
    delegate!(fn invitations_list(query: QueryParams<InvitationListQuery>) -> HttpResponseOk<Vec<InvitationListItem>> => invitations::list);
    delegate!(fn invitations_get(query: QueryParams<InvitationIdQuery>) -> HttpResponseOk<Invitation> => invitations::get);
    delegate!(fn invitations_validate(query: QueryParams<InvitationTokenQuery>) -> HttpResponseOk<InvitationValidation> => invitations::validate);
    delegate!(fn invitations_resend(query: QueryParams<InvitationIdQuery>) -> HttpResponseOk<InvitationResendResponse> => invitations::resend);
    delegate!(fn invitations_revoke(query: QueryParams<InvitationIdQuery>) -> HttpResponseOk<InvitationRevokeResponse> => invitations::revoke);
    delegate!(fn invitations_bulk_create(query: QueryParams<InvitationOrgQuery>, body: JsonBody<InvitationBulkCreateRequest>) -> HttpResponseOk<InvitationBulkCreateResponse> => invitations::bulk_create);
    delegate!(fn auth_signup_invite(body: JsonBody<SignupInviteRequest>) -> HttpResponseCreated<SignupInviteResponse> => auth::signup_invite);
    delegate!(fn models_list(query: QueryParams<OrgQuery>) -> HttpResponseOk<Vec<Model>> => conversations::models_list);
    delegate!(fn conversation_create(query: QueryParams<OrgQuery>, body: JsonBody<ConversationCreate>) -> HttpResponseCreated<Conversation> => conversations::create);
    delegate!(fn conversation_create_session(query: QueryParams<OrgQuery>, body: JsonBody<ConversationSessionCreate>) -> HttpResponseCreated<ConversationSession> => conversations::create_session);
    delegate!(fn conversation_stream_chat(query: QueryParams<OrgQuery>, body: JsonBody<StreamChatRequest>) -> http::Response<dropshot::Body> => conversations::stream_chat);
    delegate!(fn conversation_stream(query: QueryParams<workspace_api::conversations::ConversationMessageQuery>) -> http::Response<dropshot::Body> => conversations::stream);
    delegate!(fn conversation_stop(query: QueryParams<workspace_api::conversations::ConversationMessageQuery>) -> HttpResponseOk<workspace_api::conversations::ConversationStopResponse> => conversations::stop);
    delegate!(fn conversation_list(query: QueryParams<OrgPageQuery>) -> HttpResponseOk<Vec<Conversation>> => conversations::list);
    delegate!(fn conversation_get_with_sessions(query: QueryParams<ConversationQuery>) -> HttpResponseOk<ConversationWithSessions> => conversations::get_with_sessions);
    delegate!(fn conversation_messages(query: QueryParams<MessagesQuery>) -> HttpResponseOk<ConversationMessagesPage> => conversations::messages);
    async fn kb_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::kb::KbCreate>,
    ) -> Result<HttpResponseCreated<workspace_api::kb::KbCreated>, HttpError> {
        let probe = Probe::new(&rqctx);
        let result = probe.traced(kb::create(rqctx, query, body)).await;

        probe.done(result)
    }

    delegate!(fn kb_list(query: QueryParams<workspace_api::kb::KbListQuery>) -> HttpResponseOk<Vec<workspace_api::kb::KbSummary>> => kb::list);
    delegate!(fn kb_get(query: QueryParams<workspace_api::kb::KbQuery>) -> HttpResponseOk<workspace_api::kb::KbDetail> => kb::get);
    delegate!(fn kb_update(query: QueryParams<workspace_api::kb::KbQuery>, body: JsonBody<workspace_api::kb::KbUpdate>) -> HttpResponseOk<workspace_api::kb::KbUpdated> => kb::update);
    delegate!(fn kb_delete(query: QueryParams<workspace_api::kb::KbQuery>) -> HttpResponseOk<workspace_api::kb::KbDeleted> => kb::delete);
    delegate!(fn kb_add_source(query: QueryParams<workspace_api::kb::KbQuery>, body: JsonBody<workspace_api::kb::SourceInput>) -> HttpResponseCreated<workspace_api::kb::SourceAdded> => kb::add_source);
    delegate!(fn kb_list_documents(query: QueryParams<workspace_api::kb::KbDocumentsQuery>) -> HttpResponseOk<workspace_api::kb::KbDocumentsPage> => kb::list_documents);
    delegate!(fn kb_delete_document(query: QueryParams<workspace_api::kb::KbDocumentQuery>) -> HttpResponseOk<workspace_api::kb::KbDeleted> => kb::delete_document);
    delegate!(fn kb_retry_document(query: QueryParams<workspace_api::kb::KbDocumentQuery>) -> HttpResponseOk<workspace_api::kb::KbDeleted> => kb::retry_document);
    delegate!(fn kb_search(query: QueryParams<workspace_api::kb::KbQuery>, body: JsonBody<workspace_api::kb::KbSearchRequest>) -> HttpResponseOk<workspace_api::kb::KbSearchResponse> => kb::search);
    delegate!(fn kb_query(query: QueryParams<workspace_api::kb::KbQuery>, body: JsonBody<workspace_api::kb::KbQueryRequest>) -> http::Response<dropshot::Body> => kb::query);
    delegate!(fn kb_ingestion_status(query: QueryParams<workspace_api::kb::KbQuery>) -> HttpResponseOk<workspace_api::kb::KbIngestionStatus> => kb::ingestion_status);
    delegate!(fn chat_available_knowledge_bases(query: QueryParams<OrgQuery>) -> HttpResponseOk<Vec<workspace_api::kb::AvailableKnowledgeBase>> => kb::available_knowledge_bases);
    delegate!(fn chat_upload_file(query: QueryParams<workspace_api::files::UploadQuery>, body: workspace_api::files::MultipartForm) -> HttpResponseCreated<workspace_api::files::Upload> => kb::upload_file);
    delegate!(fn files_download(query: QueryParams<workspace_api::files::DownloadQuery>) -> http::Response<dropshot::Body> => kb::download);

    // ---- Chat area ----

    delegate!(fn chat_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat::ChatWrite>) -> HttpResponseCreated<workspace_api::chat::ChatIdResponse> => chat::create);
    delegate!(fn chat_get(query: QueryParams<workspace_api::chat::ChatQuery>) -> HttpResponseOk<workspace_api::chat::ChatSessionDetail> => chat::get);
    delegate!(fn chat_list(query: QueryParams<workspace_api::chat::ChatListQuery>) -> HttpResponseOk<Vec<workspace_api::chat::ChatSession>> => chat::list);
    delegate!(fn chat_update(query: QueryParams<workspace_api::chat::ChatQuery>, body: JsonBody<workspace_api::chat::ChatWrite>) -> HttpResponseOk<workspace_api::chat::ChatIdResponse> => chat::update);
    delegate!(fn chat_delete_session(query: QueryParams<workspace_api::chat::DeleteSessionQuery>) -> HttpResponseOk<MessageResponse> => chat::delete_session);
    delegate!(fn chat_bulk_delete_sessions(query: QueryParams<workspace_api::orgs::PersonalOrgQuery>, body: JsonBody<workspace_api::chat::BulkDeleteRequest>) -> HttpResponseOk<workspace_api::chat::BulkDeleteResponse> => chat::bulk_delete);
    delegate!(fn chat_send_message(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat::SendMessageRequest>) -> http::Response<dropshot::Body> => chat::send_message);
    delegate!(fn chat_edit_message(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat::EditMessageRequest>) -> http::Response<dropshot::Body> => chat::edit_message);
    delegate!(fn chat_regenerate(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat::RegenerateRequest>) -> http::Response<dropshot::Body> => chat::regenerate);
    delegate!(fn chat_switch_branch(query: QueryParams<workspace_api::chat::ChatQuery>, body: JsonBody<workspace_api::chat::SwitchBranchRequest>) -> HttpResponseOk<workspace_api::chat::ChatSessionDetail> => chat::switch_branch);
    delegate!(fn chat_stream(query: QueryParams<workspace_api::chat::ChatMessageQuery>) -> http::Response<dropshot::Body> => chat::stream);
    delegate!(fn chat_stop(query: QueryParams<workspace_api::chat::ChatMessageQuery>) -> HttpResponseOk<workspace_api::chat::StopResponse> => chat::stop);
    delegate!(fn chat_prompt(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat::PromptRequest>) -> http::Response<dropshot::Body> => chat::prompt);
    delegate!(fn chat_transcribe(query: QueryParams<workspace_api::chat::TranscribeQuery>, body: dropshot::UntypedBody) -> HttpResponseOk<workspace_api::chat::TranscribeResponse> => chat::transcribe);
    delegate!(fn chat_ws_ticket(query: QueryParams<OrgQuery>) -> HttpResponseCreated<workspace_api::chat::WsTicket> => chat::ws_ticket);

    // A WebSocket runs after the upgrade (101): no status to probe.
    async fn chat_ws(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::WsQuery>,
        upgraded: dropshot::WebsocketConnection,
    ) -> dropshot::WebsocketChannelResult {
        chat::ws(rqctx, query, upgraded).await
    }

    // ---- Share links of chats (issue #35) ----

    delegate!(fn chat_share_create(query: QueryParams<workspace_api::chat::ChatQuery>) -> HttpResponseCreated<workspace_api::chat_shares::ChatShareCreated> => chat_shares::create);
    delegate!(fn chat_shares_list(query: QueryParams<workspace_api::chat_shares::ChatSharesQuery>) -> HttpResponseOk<Vec<workspace_api::chat_shares::ChatShare>> => chat_shares::list);
    delegate!(fn chat_share_revoke(query: QueryParams<workspace_api::chat_shares::ChatShareQuery>) -> HttpResponseOk<MessageResponse> => chat_shares::revoke);
    delegate!(fn chat_shared(query: QueryParams<workspace_api::chat_shares::SharedQuery>) -> dropshot::HttpResponseHeaders<HttpResponseOk<workspace_api::chat_shares::SharedChat>> => chat_shares::read);
    delegate!(fn share_page(path: dropshot::Path<workspace_api::chat_shares::SharePagePath>) -> http::Response<dropshot::Body> => chat_shares::page);
    delegate!(fn share_script() -> http::Response<dropshot::Body> => chat_shares::script);
    // ---- Chat export and import (issue #35) ----

    delegate!(fn chat_export(query: QueryParams<workspace_api::chat_transfer::ChatExportQuery>) -> http::Response<dropshot::Body> => chat_transfer::export);
    delegate!(fn chat_export_all(query: QueryParams<workspace_api::chat_transfer::ChatExportAllQuery>) -> http::Response<dropshot::Body> => chat_transfer::export_all);
    delegate!(fn chat_import(query: QueryParams<workspace_api::chat_transfer::ChatImportQuery>, body: dropshot::StreamingBody) -> HttpResponseOk<workspace_api::chat_transfer::ChatImportResult> => chat_transfer::import);
    // ---- Feedback on answers (issue #35) ----

    delegate!(fn chat_feedback_rate(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::feedback::ChatFeedbackWrite>) -> HttpResponseOk<workspace_api::feedback::MessageFeedback> => feedback::rate_chat);
    delegate!(fn chat_feedback_delete(query: QueryParams<workspace_api::chat::ChatMessageQuery>) -> HttpResponseOk<workspace_api::feedback::FeedbackDeleted> => feedback::delete_chat);
    delegate!(fn conversation_feedback_rate(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::feedback::ConversationFeedbackWrite>) -> HttpResponseOk<workspace_api::feedback::MessageFeedback> => feedback::rate_conversation);
    delegate!(fn conversation_feedback_delete(query: QueryParams<workspace_api::conversations::ConversationMessageQuery>) -> HttpResponseOk<workspace_api::feedback::FeedbackDeleted> => feedback::delete_conversation);
    delegate!(fn org_feedback_list(query: QueryParams<workspace_api::feedback::FeedbackListQuery>) -> HttpResponseOk<workspace_api::feedback::FeedbackPage> => feedback::list);
    delegate!(fn org_feedback_export(query: QueryParams<workspace_api::feedback::FeedbackExportQuery>) -> http::Response<dropshot::Body> => feedback::export);
    // ---- Chat search, pins and folders (issue #35) ----
    delegate!(fn chat_search(query: QueryParams<workspace_api::chat_search::ChatSearchQuery>) -> HttpResponseOk<workspace_api::chat_search::ChatSearchPage> => chat_organize::search);
    delegate!(fn chat_folders_list(query: QueryParams<OrgQuery>) -> HttpResponseOk<Vec<workspace_api::chat_folders::ChatFolder>> => chat_organize::folders_list);
    delegate!(fn chat_folders_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat_folders::ChatFolderWrite>) -> HttpResponseCreated<workspace_api::chat_folders::ChatFolder> => chat_organize::folders_create);
    delegate!(fn chat_folders_rename(query: QueryParams<workspace_api::chat_folders::ChatFolderQuery>, body: JsonBody<workspace_api::chat_folders::ChatFolderWrite>) -> HttpResponseOk<workspace_api::chat_folders::ChatFolder> => chat_organize::folders_rename);
    delegate!(fn chat_folders_delete(query: QueryParams<workspace_api::chat_folders::ChatFolderQuery>) -> HttpResponseOk<workspace_api::chat_folders::ChatFolderDeleted> => chat_organize::folders_delete);
    delegate!(fn chat_folders_move(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::chat_folders::ChatMoveRequest>) -> HttpResponseOk<workspace_api::chat_folders::ChatMoveResponse> => chat_organize::folders_move);

    // ---- Tools area ----

    delegate!(fn tools_list_categories(query: QueryParams<workspace_api::tools::ToolListQuery>) -> HttpResponseOk<Vec<workspace_api::tools::ToolCategory>> => tools::list_categories);
    delegate!(fn tools_create_category(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::tools::CategoryCreate>) -> HttpResponseCreated<workspace_api::tools::ToolCategory> => tools::create_category);
    delegate!(fn tools_update_category(query: QueryParams<workspace_api::tools::CategoryQuery>, body: JsonBody<workspace_api::tools::CategoryUpdate>) -> HttpResponseOk<workspace_api::tools::ToolCategory> => tools::update_category);
    delegate!(fn tools_delete_category(query: QueryParams<workspace_api::tools::CategoryQuery>) -> HttpResponseOk<workspace_api::tools::SuccessResponse> => tools::delete_category);
    delegate!(fn tools_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::tools::ToolCreate>) -> HttpResponseCreated<workspace_api::tools::ToolCreated> => tools::create);
    delegate!(fn tools_list_all(query: QueryParams<workspace_api::tools::ToolListQuery>) -> HttpResponseOk<Vec<workspace_api::tools::ToolListItem>> => tools::list_all);
    delegate!(fn tools_update(query: QueryParams<workspace_api::tools::ToolQuery>, body: JsonBody<workspace_api::tools::ToolUpdate>) -> HttpResponseOk<workspace_api::tools::ToolUpdated> => tools::update);
    delegate!(fn tools_get(query: QueryParams<workspace_api::tools::ToolQuery>) -> HttpResponseOk<workspace_api::tools::Tool> => tools::get);
    delegate!(fn tools_delete(query: QueryParams<workspace_api::tools::ToolQuery>) -> HttpResponseOk<workspace_api::tools::SuccessResponse> => tools::delete);
    delegate!(fn tools_test(query: QueryParams<workspace_api::tools::ToolQuery>, body: JsonBody<workspace_api::tools::ToolTestRequest>) -> HttpResponseOk<workspace_api::tools::ToolTestResult> => tools::test);

    // ---- Agents area ----

    delegate!(fn agents_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::agents::AgentCreate>) -> HttpResponseCreated<workspace_api::agents::AgentSummary> => agents::create);
    delegate!(fn agents_list(query: QueryParams<workspace_api::agents::AgentListQuery>) -> HttpResponseOk<Vec<workspace_api::agents::AgentListItem>> => agents::list);
    delegate!(fn agents_get(query: QueryParams<workspace_api::agents::AgentQuery>) -> HttpResponseOk<workspace_api::agents::AgentDetail> => agents::get);
    delegate!(fn agents_update(query: QueryParams<workspace_api::agents::AgentQuery>, body: JsonBody<workspace_api::agents::AgentUpdate>) -> HttpResponseOk<workspace_api::agents::AgentSummary> => agents::update);
    delegate!(fn agents_delete(query: QueryParams<workspace_api::agents::AgentQuery>) -> HttpResponseOk<workspace_api::tools::SuccessResponse> => agents::delete);
    delegate!(fn agents_test(query: QueryParams<workspace_api::agents::AgentQuery>, body: JsonBody<workspace_api::agents::AgentTestRequest>) -> HttpResponseOk<workspace_api::agents::AgentTestResult> => agents::test);
    delegate!(fn deployments_create(query: QueryParams<workspace_api::agents::AgentQuery>, body: JsonBody<workspace_api::deployments::DeploymentCreate>) -> HttpResponseCreated<workspace_api::deployments::DeploymentWithKey> => deployments::create);
    delegate!(fn deployments_list(query: QueryParams<workspace_api::agents::AgentQuery>) -> HttpResponseOk<Vec<workspace_api::deployments::Deployment>> => deployments::list);
    delegate!(fn deployments_get(query: QueryParams<workspace_api::deployments::DeploymentQuery>) -> HttpResponseOk<workspace_api::deployments::Deployment> => deployments::get);
    delegate!(fn deployments_update(query: QueryParams<workspace_api::deployments::DeploymentQuery>, body: JsonBody<workspace_api::deployments::DeploymentUpdate>) -> HttpResponseOk<workspace_api::deployments::Deployment> => deployments::update);
    delegate!(fn deployments_delete(query: QueryParams<workspace_api::deployments::DeploymentQuery>) -> HttpResponseOk<workspace_api::tools::SuccessResponse> => deployments::delete);
    delegate!(fn deployments_regenerate_key(query: QueryParams<workspace_api::deployments::DeploymentQuery>) -> HttpResponseOk<workspace_api::deployments::DeploymentWithKey> => deployments::regenerate_key);

    async fn deployments_chat_completions(
        rqctx: Ctx,
        body: JsonBody<workspace_api::deployments::ChatCompletionRequest>,
    ) -> Result<http::Response<dropshot::Body>, workspace_api::deployments::OpenAiHttpError> {
        let probe = Probe::new(&rqctx);
        let result = probe
            .traced(deployments::chat_completions(rqctx, body))
            .await;

        probe.done_openai(result)
    }

    async fn deployments_models(
        rqctx: Ctx,
    ) -> Result<http::Response<dropshot::Body>, workspace_api::deployments::OpenAiHttpError> {
        let probe = Probe::new(&rqctx);
        let result = probe.traced(deployments::models(rqctx)).await;

        probe.done_openai(result)
    }

    delegate!(fn deployments_chat_completions_preflight() -> http::Response<dropshot::Body> => deployments::preflight);
    delegate!(fn deployments_models_preflight() -> http::Response<dropshot::Body> => deployments::preflight);

    // MCP area.

    delegate!(fn mcp_list_servers(query: QueryParams<workspace_api::orgs::PersonalOrgQuery>) -> HttpResponseOk<workspace_api::mcp::McpServerList> => mcp::list_servers);
    delegate!(fn mcp_server_with_tools(query: QueryParams<workspace_api::mcp::ServerQuery>) -> HttpResponseOk<workspace_api::mcp::McpServerWithTools> => mcp::server_with_tools);
    delegate!(fn mcp_connect_account(query: QueryParams<workspace_api::orgs::PersonalOrgQuery>, body: JsonBody<workspace_api::mcp::ConnectAccount>) -> HttpResponseOk<workspace_api::mcp::ConnectionStart> => mcp::connect_account);
    delegate!(fn mcp_callback(query: QueryParams<workspace_api::mcp::CallbackQuery>) -> dropshot::HttpResponseSeeOther => mcp::callback);
    delegate!(fn mcp_list_instances(query: QueryParams<workspace_api::mcp::InstanceListQuery>) -> HttpResponseOk<workspace_api::mcp::McpInstanceList> => mcp::list_instances);
    delegate!(fn mcp_update_instance(query: QueryParams<workspace_api::mcp::InstanceQuery>, body: JsonBody<workspace_api::mcp::InstanceRename>) -> HttpResponseOk<workspace_api::mcp::McpInstance> => mcp::update_instance);
    delegate!(fn mcp_delete_instance(query: QueryParams<workspace_api::mcp::InstanceQuery>) -> HttpResponseOk<workspace_api::mcp::McpDeleted> => mcp::delete_instance);
    delegate!(fn mcp_generate_url(query: QueryParams<workspace_api::orgs::PersonalOrgQuery>, body: JsonBody<workspace_api::mcp::GenerateUrl>) -> HttpResponseOk<workspace_api::mcp::McpUrl> => mcp::generate_url);

    async fn mcp_gateway_post(
        rqctx: Ctx,
        path: dropshot::Path<workspace_api::mcp::GatewayPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        let body = bytes::Bytes::copy_from_slice(body.as_bytes());
        let result = probe
            .traced(mcp::gateway(rqctx, path, reqwest::Method::POST, body))
            .await;

        probe.done(result)
    }

    async fn mcp_gateway_get(
        rqctx: Ctx,
        path: dropshot::Path<workspace_api::mcp::GatewayPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        let result = probe
            .traced(mcp::gateway(
                rqctx,
                path,
                reqwest::Method::GET,
                bytes::Bytes::new(),
            ))
            .await;

        probe.done(result)
    }

    async fn mcp_gateway_delete(
        rqctx: Ctx,
        path: dropshot::Path<workspace_api::mcp::GatewayPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        let result = probe
            .traced(mcp::gateway(
                rqctx,
                path,
                reqwest::Method::DELETE,
                bytes::Bytes::new(),
            ))
            .await;

        probe.done(result)
    }

    delegate!(fn mcp_playground_chat(query: QueryParams<workspace_api::orgs::PersonalOrgQuery>, body: JsonBody<workspace_api::mcp::PlaygroundChat>) -> http::Response<dropshot::Body> => mcp::playground_chat);

    // ---- Organizations and accounts that end ----

    delegate!(fn org_delete(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::orgs::OrgDeleteRequest>) -> dropshot::HttpResponseAccepted<workspace_api::orgs::OrgDeletion> => deletion::delete_org);
    delegate!(fn org_deletion_status(query: QueryParams<OrgQuery>) -> HttpResponseOk<workspace_api::orgs::OrgDeletion> => deletion::org_status);
    delegate!(fn users_delete_me(body: JsonBody<workspace_api::users::AccountDeleteRequest>) -> dropshot::HttpResponseAccepted<workspace_api::users::AccountDeletion> => deletion::delete_me);
    delegate!(fn users_export() -> http::Response<dropshot::Body> => deletion::export);

    // ---- Audit log (issue #36) ----
    delegate!(fn audit_list(query: QueryParams<workspace_api::audit::AuditListQuery>) -> HttpResponseOk<workspace_api::audit::AuditPage> => audit::list);
    delegate!(fn audit_export(query: QueryParams<workspace_api::audit::AuditExportQuery>) -> http::Response<dropshot::Body> => audit::export);
    delegate!(fn audit_verify(query: QueryParams<workspace_api::audit::AuditVerifyQuery>) -> HttpResponseOk<workspace_api::audit::AuditVerification> => audit::verify);
    // ---- Usage, cost and budgets (issue #36) ----

    delegate!(fn org_usage_report(query: QueryParams<workspace_api::usage::UsageReportQuery>) -> HttpResponseOk<workspace_api::usage::UsageReport> => usage::report);
    delegate!(fn org_usage_export(query: QueryParams<workspace_api::usage::UsageReportQuery>) -> http::Response<dropshot::Body> => usage::export);
    delegate!(fn org_budgets_list(query: QueryParams<OrgQuery>) -> HttpResponseOk<workspace_api::usage::BudgetList> => usage::budgets_list);
    delegate!(fn org_budgets_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::usage::BudgetCreate>) -> dropshot::HttpResponseCreated<workspace_api::usage::Budget> => usage::budgets_create);
    delegate!(fn org_budgets_update(query: QueryParams<workspace_api::usage::BudgetQuery>, body: JsonBody<workspace_api::usage::BudgetUpdate>) -> HttpResponseOk<workspace_api::usage::Budget> => usage::budgets_update);
    delegate!(fn org_budgets_delete(query: QueryParams<workspace_api::usage::BudgetQuery>) -> HttpResponseOk<workspace_api::usage::BudgetDeleted> => usage::budgets_delete);
    // Webhooks (issue #36).
    delegate!(fn org_webhooks_create(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::webhooks::WebhookEndpointCreate>) -> HttpResponseCreated<workspace_api::webhooks::WebhookEndpointCreated> => webhooks::create);
    delegate!(fn org_webhooks_list(query: QueryParams<OrgQuery>) -> HttpResponseOk<Vec<workspace_api::webhooks::WebhookEndpoint>> => webhooks::list);
    delegate!(fn org_webhooks_get(query: QueryParams<workspace_api::webhooks::WebhookEndpointQuery>) -> HttpResponseOk<workspace_api::webhooks::WebhookEndpoint> => webhooks::get);
    delegate!(fn org_webhooks_update(query: QueryParams<workspace_api::webhooks::WebhookEndpointQuery>, body: JsonBody<workspace_api::webhooks::WebhookEndpointUpdate>) -> HttpResponseOk<workspace_api::webhooks::WebhookEndpoint> => webhooks::update);
    delegate!(fn org_webhooks_delete(query: QueryParams<workspace_api::webhooks::WebhookEndpointQuery>) -> HttpResponseOk<MessageResponse> => webhooks::delete);
    delegate!(fn org_webhooks_rotate_secret(query: QueryParams<workspace_api::webhooks::WebhookEndpointQuery>) -> HttpResponseOk<workspace_api::webhooks::WebhookSecretRotated> => webhooks::rotate_secret);
    delegate!(fn org_webhooks_test(query: QueryParams<workspace_api::webhooks::WebhookEndpointQuery>) -> dropshot::HttpResponseAccepted<workspace_api::webhooks::WebhookDelivery> => webhooks::test);
    delegate!(fn org_webhooks_deliveries(query: QueryParams<workspace_api::webhooks::WebhookDeliveriesQuery>) -> HttpResponseOk<workspace_api::webhooks::WebhookDeliveryPage> => webhooks::deliveries);
    delegate!(fn org_webhooks_replay(query: QueryParams<workspace_api::webhooks::WebhookDeliveryQuery>) -> dropshot::HttpResponseAccepted<workspace_api::webhooks::WebhookDelivery> => webhooks::replay);
    delegate!(fn org_sso_get(query: QueryParams<OrgQuery>) -> HttpResponseOk<workspace_api::sso::SsoConfig> => sso::get);
    delegate!(fn org_sso_put(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::sso::SsoConfigInput>) -> HttpResponseOk<workspace_api::sso::SsoConfig> => sso::put);
    delegate!(fn org_sso_delete(query: QueryParams<OrgQuery>) -> HttpResponseOk<MessageResponse> => sso::delete);
    delegate!(fn auth_sso_start(body: JsonBody<workspace_api::sso::SsoStartRequest>) -> HttpResponseOk<workspace_api::sso::SsoStart> => sso::start);
    delegate!(fn auth_sso_callback(body: JsonBody<workspace_api::sso::SsoCallbackRequest>) -> HttpResponseOk<LoginResponse> => sso::callback);
    delegate!(fn org_scim_get(query: QueryParams<OrgQuery>) -> HttpResponseOk<workspace_api::scim::ScimConfig> => scim::get);
    delegate!(fn org_scim_put(query: QueryParams<OrgQuery>, body: JsonBody<workspace_api::scim::ScimConfigInput>) -> HttpResponseOk<workspace_api::scim::ScimConfig> => scim::put);
    delegate!(fn org_scim_token(query: QueryParams<OrgQuery>) -> HttpResponseOk<workspace_api::scim::ScimTokenIssued> => scim::token);
    delegate!(fn org_scim_delete(query: QueryParams<OrgQuery>) -> HttpResponseOk<MessageResponse> => scim::delete);
    delegate!(fn scim_service_provider_config() -> http::Response<dropshot::Body> => scim::service_provider_config);
    delegate!(fn scim_resource_types() -> http::Response<dropshot::Body> => scim::resource_types);
    delegate!(fn scim_resource_type(path: dropshot::Path<workspace_api::scim::ScimIdPath>) -> http::Response<dropshot::Body> => scim::resource_type);
    delegate!(fn scim_search(body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::search);
    delegate!(fn scim_schemas() -> http::Response<dropshot::Body> => scim::schemas);
    delegate!(fn scim_schema(path: dropshot::Path<workspace_api::scim::ScimIdPath>) -> http::Response<dropshot::Body> => scim::schema);
    delegate!(fn scim_users_list(query: QueryParams<workspace_api::scim::ScimListQuery>) -> http::Response<dropshot::Body> => scim::users_list);
    delegate!(fn scim_users_create(body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::users_create);
    delegate!(fn scim_users_get(path: dropshot::Path<workspace_api::scim::ScimIdPath>, query: QueryParams<workspace_api::scim::ScimResourceQuery>) -> http::Response<dropshot::Body> => scim::users_get);
    delegate!(fn scim_users_replace(path: dropshot::Path<workspace_api::scim::ScimIdPath>, body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::users_replace);
    delegate!(fn scim_users_patch(path: dropshot::Path<workspace_api::scim::ScimIdPath>, body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::users_patch);
    delegate!(fn scim_users_delete(path: dropshot::Path<workspace_api::scim::ScimIdPath>) -> http::Response<dropshot::Body> => scim::users_delete);
    delegate!(fn scim_groups_list(query: QueryParams<workspace_api::scim::ScimListQuery>) -> http::Response<dropshot::Body> => scim::groups_list);
    delegate!(fn scim_groups_create(body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::groups_create);
    delegate!(fn scim_groups_get(path: dropshot::Path<workspace_api::scim::ScimIdPath>, query: QueryParams<workspace_api::scim::ScimResourceQuery>) -> http::Response<dropshot::Body> => scim::groups_get);
    delegate!(fn scim_groups_replace(path: dropshot::Path<workspace_api::scim::ScimIdPath>, body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::groups_replace);
    delegate!(fn scim_groups_patch(path: dropshot::Path<workspace_api::scim::ScimIdPath>, body: dropshot::UntypedBody) -> http::Response<dropshot::Body> => scim::groups_patch);
    delegate!(fn scim_groups_delete(path: dropshot::Path<workspace_api::scim::ScimIdPath>) -> http::Response<dropshot::Body> => scim::groups_delete);
}
