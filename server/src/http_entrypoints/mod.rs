//! The HTTP entry points: the implementation of [`WorkspaceApi`], one
//! module per API area. Each handler makes one authorization call
//! (`ServerContext::authorize`, `authorize_system_admin` or, for the
//! caller's own account, `authenticate`), calls the app layer and maps the
//! result; no business rule lives here. The trait implementation below only
//! delegates to the area modules.

mod agents;
mod auth;
mod chat;
mod conversations;
mod deployments;
mod invitations;
mod kb;
mod mcp;
mod orgs;
mod roles;
mod system;
mod tools;
mod users;

use crate::context::ServerContext;
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk, RequestContext};
use workspace_api::WorkspaceApi;
use workspace_api::auth::{LoginRequest, LoginResponse, SignupRequest, SignupResponse};
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
    OrgPageQuery, OrgQuery, Organization, PageQuery,
};
use workspace_api::roles::{
    CreatePermissionRequest, CreateRoleRequest, Permission, PermissionQuery, Role, RoleQuery,
    RoleWithPermissions, UpdateRoleRequest,
};
use workspace_api::system::HealthStatus;
use workspace_api::users::{
    CurrentUser, UpdateUserQuery, UpdateUserRoleRequest, UpdatedUser, UserInviteQuery,
    UserInviteRequest, UserInviteResponse, UserListQuery, UserListResponse,
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

/// Watches one request: records its status and latency in the metrics and
/// logs every 5xx at error level, with its `error_code`, the whole
/// internal error chain and (through the request's logger) its request id.
struct Probe {
    started: std::time::Instant,
    operation: String,
    log: slog::Logger,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
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
        Probe {
            started: std::time::Instant::now(),
            operation: rqctx.endpoint.operation_id.clone(),
            log: rqctx.log.clone(),
            metrics: rqctx.context().metrics.clone(),
        }
    }

    fn done<T: Status>(self, result: Result<T, HttpError>) -> Result<T, HttpError> {
        let status = match &result {
            Ok(response) => response.status(),
            Err(error) => {
                let status = error.status_code.as_u16();
                if status >= 500 {
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
        result
    }

    /// [`Probe::done`] for the OpenAI-compatible operations.
    fn done_openai<T: Status>(
        self,
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
        result
    }
}

fn message(message: String) -> HttpResponseOk<MessageResponse> {
    HttpResponseOk(MessageResponse { message })
}

impl WorkspaceApi for WorkspaceImpl {
    type Context = ServerContext;

    async fn docs_page(rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(system::docs_page(rqctx).await)
    }

    async fn docs_script(rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(system::docs_script(rqctx).await)
    }

    async fn openapi_json(rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(system::openapi_json(rqctx).await)
    }

    async fn healthz(_rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
        let probe = Probe::new(&_rqctx);
        probe.done(system::healthz(_rqctx).await)
    }

    async fn system_outbox(
        rqctx: Ctx,
        query: QueryParams<workspace_api::system::OutboxQuery>,
    ) -> Result<HttpResponseOk<workspace_api::system::OutboxPage>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(system::outbox(rqctx, query).await)
    }

    async fn readyz(rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(system::readyz(rqctx).await)
    }

    async fn auth_signup(
        rqctx: Ctx,
        body: JsonBody<SignupRequest>,
    ) -> Result<HttpResponseCreated<SignupResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(auth::signup(rqctx, body).await)
    }

    async fn auth_login(
        rqctx: Ctx,
        body: JsonBody<LoginRequest>,
    ) -> Result<HttpResponseOk<LoginResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(auth::login(rqctx, body).await)
    }

    async fn users_me(rqctx: Ctx) -> Result<HttpResponseOk<CurrentUser>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(users::me(rqctx).await)
    }

    async fn org_list(
        rqctx: Ctx,
        query: QueryParams<PageQuery>,
    ) -> Result<HttpResponseOk<Vec<Organization>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(orgs::list(rqctx, query).await)
    }

    async fn org_create_org(
        rqctx: Ctx,
        query: QueryParams<CreateOrgQuery>,
    ) -> Result<HttpResponseCreated<Organization>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(orgs::create_org(rqctx, query).await)
    }

    async fn org_add_member(
        rqctx: Ctx,
        body: JsonBody<AddMemberRequest>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(orgs::add_member(rqctx, body).await)
    }

    async fn org_features(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<OrgFeatures>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(orgs::features(rqctx, query).await)
    }

    async fn org_update_features(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<OrgFeaturesUpdate>,
    ) -> Result<HttpResponseOk<OrgFeatures>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(orgs::update_features(rqctx, query, body).await)
    }

    async fn users_update(
        rqctx: Ctx,
        query: QueryParams<UpdateUserQuery>,
        body: JsonBody<UpdateUserRoleRequest>,
    ) -> Result<HttpResponseOk<UpdatedUser>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(users::update(rqctx, query, body).await)
    }

    async fn users_list(
        rqctx: Ctx,
        query: QueryParams<UserListQuery>,
    ) -> Result<HttpResponseOk<UserListResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(users::list(rqctx, query).await)
    }

    async fn users_invite(
        rqctx: Ctx,
        query: QueryParams<UserInviteQuery>,
        body: JsonBody<UserInviteRequest>,
    ) -> Result<HttpResponseCreated<UserInviteResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(users::invite(rqctx, query, body).await)
    }

    async fn roles_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<CreateRoleRequest>,
    ) -> Result<HttpResponseCreated<RoleWithPermissions>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::create(rqctx, query, body).await)
    }

    async fn roles_update(
        rqctx: Ctx,
        query: QueryParams<RoleQuery>,
        body: JsonBody<UpdateRoleRequest>,
    ) -> Result<HttpResponseOk<RoleWithPermissions>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::update(rqctx, query, body).await)
    }

    async fn roles_remove(
        rqctx: Ctx,
        query: QueryParams<RoleQuery>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::remove(rqctx, query).await)
    }

    async fn roles_list_roles(
        rqctx: Ctx,
        query: QueryParams<OrgPageQuery>,
    ) -> Result<HttpResponseOk<Vec<Role>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::list_roles(rqctx, query).await)
    }

    async fn roles_list_permissions(
        rqctx: Ctx,
        query: QueryParams<PageQuery>,
    ) -> Result<HttpResponseOk<Vec<Permission>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::list_permissions(rqctx, query).await)
    }

    async fn roles_create_permission(
        rqctx: Ctx,
        body: JsonBody<CreatePermissionRequest>,
    ) -> Result<HttpResponseCreated<Permission>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::create_permission(rqctx, body).await)
    }

    async fn roles_delete_permission(
        rqctx: Ctx,
        query: QueryParams<PermissionQuery>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(roles::delete_permission(rqctx, query).await)
    }

    async fn invitations_create(
        rqctx: Ctx,
        query: QueryParams<InvitationOrgQuery>,
        body: JsonBody<InvitationCreateRequest>,
    ) -> Result<HttpResponseCreated<Invitation>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::create(rqctx, query, body).await)
    }

    async fn invitations_list(
        rqctx: Ctx,
        query: QueryParams<InvitationListQuery>,
    ) -> Result<HttpResponseOk<Vec<InvitationListItem>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::list(rqctx, query).await)
    }

    async fn invitations_get(
        rqctx: Ctx,
        query: QueryParams<InvitationIdQuery>,
    ) -> Result<HttpResponseOk<Invitation>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::get(rqctx, query).await)
    }

    async fn invitations_validate(
        rqctx: Ctx,
        query: QueryParams<InvitationTokenQuery>,
    ) -> Result<HttpResponseOk<InvitationValidation>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::validate(rqctx, query).await)
    }

    async fn invitations_resend(
        rqctx: Ctx,
        query: QueryParams<InvitationIdQuery>,
    ) -> Result<HttpResponseOk<InvitationResendResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::resend(rqctx, query).await)
    }

    async fn invitations_revoke(
        rqctx: Ctx,
        query: QueryParams<InvitationIdQuery>,
    ) -> Result<HttpResponseOk<InvitationRevokeResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::revoke(rqctx, query).await)
    }

    async fn invitations_bulk_create(
        rqctx: Ctx,
        query: QueryParams<InvitationOrgQuery>,
        body: JsonBody<InvitationBulkCreateRequest>,
    ) -> Result<HttpResponseOk<InvitationBulkCreateResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(invitations::bulk_create(rqctx, query, body).await)
    }

    async fn auth_signup_invite(
        rqctx: Ctx,
        body: JsonBody<SignupInviteRequest>,
    ) -> Result<HttpResponseCreated<SignupInviteResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(auth::signup_invite(rqctx, body).await)
    }

    async fn models_list(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<Model>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::models_list(rqctx, query).await)
    }

    async fn conversation_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<ConversationCreate>,
    ) -> Result<HttpResponseCreated<Conversation>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::create(rqctx, query, body).await)
    }

    async fn conversation_create_session(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<ConversationSessionCreate>,
    ) -> Result<HttpResponseCreated<ConversationSession>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::create_session(rqctx, query, body).await)
    }

    async fn conversation_stream_chat(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<StreamChatRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::stream_chat(rqctx, query, body).await)
    }

    async fn conversation_stream(
        rqctx: Ctx,
        query: QueryParams<workspace_api::conversations::ConversationMessageQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::stream(rqctx, query).await)
    }

    async fn conversation_stop(
        rqctx: Ctx,
        query: QueryParams<workspace_api::conversations::ConversationMessageQuery>,
    ) -> Result<HttpResponseOk<workspace_api::conversations::ConversationStopResponse>, HttpError>
    {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::stop(rqctx, query).await)
    }

    async fn conversation_list(
        rqctx: Ctx,
        query: QueryParams<OrgPageQuery>,
    ) -> Result<HttpResponseOk<Vec<Conversation>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::list(rqctx, query).await)
    }

    async fn conversation_get_with_sessions(
        rqctx: Ctx,
        query: QueryParams<ConversationQuery>,
    ) -> Result<HttpResponseOk<ConversationWithSessions>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::get_with_sessions(rqctx, query).await)
    }

    async fn conversation_messages(
        rqctx: Ctx,
        query: QueryParams<MessagesQuery>,
    ) -> Result<HttpResponseOk<ConversationMessagesPage>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(conversations::messages(rqctx, query).await)
    }
    async fn kb_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::kb::KbCreate>,
    ) -> Result<HttpResponseCreated<workspace_api::kb::KbCreated>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::create(rqctx, query, body).await)
    }

    async fn kb_list(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbListQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::kb::KbSummary>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::list(rqctx, query).await)
    }

    async fn kb_get(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbDetail>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::get(rqctx, query).await)
    }

    async fn kb_update(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
        body: JsonBody<workspace_api::kb::KbUpdate>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbUpdated>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::update(rqctx, query, body).await)
    }

    async fn kb_delete(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbDeleted>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::delete(rqctx, query).await)
    }

    async fn kb_add_source(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
        body: JsonBody<workspace_api::kb::SourceInput>,
    ) -> Result<HttpResponseCreated<workspace_api::kb::SourceAdded>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::add_source(rqctx, query, body).await)
    }

    async fn kb_list_documents(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbDocumentsQuery>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbDocumentsPage>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::list_documents(rqctx, query).await)
    }

    async fn kb_delete_document(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbDocumentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbDeleted>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::delete_document(rqctx, query).await)
    }

    async fn kb_retry_document(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbDocumentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbDeleted>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::retry_document(rqctx, query).await)
    }

    async fn kb_search(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
        body: JsonBody<workspace_api::kb::KbSearchRequest>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbSearchResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::search(rqctx, query, body).await)
    }

    async fn kb_query(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
        body: JsonBody<workspace_api::kb::KbQueryRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::query(rqctx, query, body).await)
    }

    async fn kb_ingestion_status(
        rqctx: Ctx,
        query: QueryParams<workspace_api::kb::KbQuery>,
    ) -> Result<HttpResponseOk<workspace_api::kb::KbIngestionStatus>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::ingestion_status(rqctx, query).await)
    }

    async fn chat_available_knowledge_bases(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::kb::AvailableKnowledgeBase>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::available_knowledge_bases(rqctx, query).await)
    }

    async fn chat_upload_file(
        rqctx: Ctx,
        query: QueryParams<workspace_api::files::UploadQuery>,
        body: workspace_api::files::MultipartForm,
    ) -> Result<HttpResponseCreated<workspace_api::files::Upload>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::upload_file(rqctx, query, body).await)
    }

    async fn files_download(
        rqctx: Ctx,
        query: QueryParams<workspace_api::files::DownloadQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(kb::download(rqctx, query).await)
    }

    // ---- Chat area ----

    async fn chat_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::chat::ChatWrite>,
    ) -> Result<HttpResponseCreated<workspace_api::chat::ChatIdResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::create(rqctx, query, body).await)
    }

    async fn chat_get(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::ChatQuery>,
    ) -> Result<HttpResponseOk<workspace_api::chat::ChatSessionDetail>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::get(rqctx, query).await)
    }

    async fn chat_list(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::ChatListQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::chat::ChatSession>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::list(rqctx, query).await)
    }

    async fn chat_update(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::ChatQuery>,
        body: JsonBody<workspace_api::chat::ChatWrite>,
    ) -> Result<HttpResponseOk<workspace_api::chat::ChatIdResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::update(rqctx, query, body).await)
    }

    async fn chat_delete_session(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::DeleteSessionQuery>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::delete_session(rqctx, query).await)
    }

    async fn chat_bulk_delete_sessions(
        rqctx: Ctx,
        query: QueryParams<workspace_api::orgs::PersonalOrgQuery>,
        body: JsonBody<workspace_api::chat::BulkDeleteRequest>,
    ) -> Result<HttpResponseOk<workspace_api::chat::BulkDeleteResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::bulk_delete(rqctx, query, body).await)
    }

    async fn chat_send_message(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::chat::SendMessageRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::send_message(rqctx, query, body).await)
    }

    async fn chat_stream(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::ChatMessageQuery>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::stream(rqctx, query).await)
    }

    async fn chat_stop(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::ChatMessageQuery>,
    ) -> Result<HttpResponseOk<workspace_api::chat::StopResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::stop(rqctx, query).await)
    }

    async fn chat_prompt(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::chat::PromptRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::prompt(rqctx, query, body).await)
    }

    async fn chat_transcribe(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::TranscribeQuery>,
        body: dropshot::UntypedBody,
    ) -> Result<HttpResponseOk<workspace_api::chat::TranscribeResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::transcribe(rqctx, query, body).await)
    }

    async fn chat_ws_ticket(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseCreated<workspace_api::chat::WsTicket>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(chat::ws_ticket(rqctx, query).await)
    }

    // A WebSocket runs after the upgrade (101): no status to probe.
    async fn chat_ws(
        rqctx: Ctx,
        query: QueryParams<workspace_api::chat::WsQuery>,
        upgraded: dropshot::WebsocketConnection,
    ) -> dropshot::WebsocketChannelResult {
        chat::ws(rqctx, query, upgraded).await
    }

    // ---- Tools area ----

    async fn tools_list_categories(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::ToolListQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::tools::ToolCategory>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::list_categories(rqctx, query).await)
    }

    async fn tools_create_category(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::tools::CategoryCreate>,
    ) -> Result<HttpResponseCreated<workspace_api::tools::ToolCategory>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::create_category(rqctx, query, body).await)
    }

    async fn tools_update_category(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::CategoryQuery>,
        body: JsonBody<workspace_api::tools::CategoryUpdate>,
    ) -> Result<HttpResponseOk<workspace_api::tools::ToolCategory>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::update_category(rqctx, query, body).await)
    }

    async fn tools_delete_category(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::CategoryQuery>,
    ) -> Result<HttpResponseOk<workspace_api::tools::SuccessResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::delete_category(rqctx, query).await)
    }

    async fn tools_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::tools::ToolCreate>,
    ) -> Result<HttpResponseCreated<workspace_api::tools::ToolCreated>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::create(rqctx, query, body).await)
    }

    async fn tools_list_all(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::ToolListQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::tools::ToolListItem>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::list_all(rqctx, query).await)
    }

    async fn tools_update(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::ToolQuery>,
        body: JsonBody<workspace_api::tools::ToolUpdate>,
    ) -> Result<HttpResponseOk<workspace_api::tools::ToolUpdated>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::update(rqctx, query, body).await)
    }

    async fn tools_get(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::ToolQuery>,
    ) -> Result<HttpResponseOk<workspace_api::tools::Tool>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::get(rqctx, query).await)
    }

    async fn tools_delete(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::ToolQuery>,
    ) -> Result<HttpResponseOk<workspace_api::tools::SuccessResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::delete(rqctx, query).await)
    }

    async fn tools_test(
        rqctx: Ctx,
        query: QueryParams<workspace_api::tools::ToolQuery>,
        body: JsonBody<workspace_api::tools::ToolTestRequest>,
    ) -> Result<HttpResponseOk<workspace_api::tools::ToolTestResult>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(tools::test(rqctx, query, body).await)
    }

    // ---- Agents area ----

    async fn agents_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<workspace_api::agents::AgentCreate>,
    ) -> Result<HttpResponseCreated<workspace_api::agents::AgentSummary>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(agents::create(rqctx, query, body).await)
    }

    async fn agents_list(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentListQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::agents::AgentListItem>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(agents::list(rqctx, query).await)
    }

    async fn agents_get(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::agents::AgentDetail>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(agents::get(rqctx, query).await)
    }

    async fn agents_update(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentQuery>,
        body: JsonBody<workspace_api::agents::AgentUpdate>,
    ) -> Result<HttpResponseOk<workspace_api::agents::AgentSummary>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(agents::update(rqctx, query, body).await)
    }

    async fn agents_delete(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::tools::SuccessResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(agents::delete(rqctx, query).await)
    }

    async fn agents_test(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentQuery>,
        body: JsonBody<workspace_api::agents::AgentTestRequest>,
    ) -> Result<HttpResponseOk<workspace_api::agents::AgentTestResult>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(agents::test(rqctx, query, body).await)
    }

    async fn deployments_create(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentQuery>,
        body: JsonBody<workspace_api::deployments::DeploymentCreate>,
    ) -> Result<HttpResponseCreated<workspace_api::deployments::DeploymentWithKey>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::create(rqctx, query, body).await)
    }

    async fn deployments_list(
        rqctx: Ctx,
        query: QueryParams<workspace_api::agents::AgentQuery>,
    ) -> Result<HttpResponseOk<Vec<workspace_api::deployments::Deployment>>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::list(rqctx, query).await)
    }

    async fn deployments_get(
        rqctx: Ctx,
        query: QueryParams<workspace_api::deployments::DeploymentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::deployments::Deployment>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::get(rqctx, query).await)
    }

    async fn deployments_update(
        rqctx: Ctx,
        query: QueryParams<workspace_api::deployments::DeploymentQuery>,
        body: JsonBody<workspace_api::deployments::DeploymentUpdate>,
    ) -> Result<HttpResponseOk<workspace_api::deployments::Deployment>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::update(rqctx, query, body).await)
    }

    async fn deployments_delete(
        rqctx: Ctx,
        query: QueryParams<workspace_api::deployments::DeploymentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::tools::SuccessResponse>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::delete(rqctx, query).await)
    }

    async fn deployments_regenerate_key(
        rqctx: Ctx,
        query: QueryParams<workspace_api::deployments::DeploymentQuery>,
    ) -> Result<HttpResponseOk<workspace_api::deployments::DeploymentWithKey>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::regenerate_key(rqctx, query).await)
    }

    async fn deployments_chat_completions(
        rqctx: Ctx,
        body: JsonBody<workspace_api::deployments::ChatCompletionRequest>,
    ) -> Result<http::Response<dropshot::Body>, workspace_api::deployments::OpenAiHttpError> {
        let probe = Probe::new(&rqctx);
        probe.done_openai(deployments::chat_completions(rqctx, body).await)
    }

    async fn deployments_models(
        rqctx: Ctx,
    ) -> Result<http::Response<dropshot::Body>, workspace_api::deployments::OpenAiHttpError> {
        let probe = Probe::new(&rqctx);
        probe.done_openai(deployments::models(rqctx).await)
    }

    async fn deployments_chat_completions_preflight(
        rqctx: Ctx,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::preflight(rqctx).await)
    }

    async fn deployments_models_preflight(
        rqctx: Ctx,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(deployments::preflight(rqctx).await)
    }

    // MCP area.

    async fn mcp_list_servers(
        rqctx: Ctx,
        query: QueryParams<workspace_api::orgs::PersonalOrgQuery>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::McpServerList>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::list_servers(rqctx, query).await)
    }

    async fn mcp_server_with_tools(
        rqctx: Ctx,
        query: QueryParams<workspace_api::mcp::ServerQuery>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::McpServerWithTools>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::server_with_tools(rqctx, query).await)
    }

    async fn mcp_connect_account(
        rqctx: Ctx,
        query: QueryParams<workspace_api::orgs::PersonalOrgQuery>,
        body: JsonBody<workspace_api::mcp::ConnectAccount>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::ConnectionStart>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::connect_account(rqctx, query, body).await)
    }

    async fn mcp_callback(
        rqctx: Ctx,
        query: QueryParams<workspace_api::mcp::CallbackQuery>,
    ) -> Result<dropshot::HttpResponseSeeOther, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::callback(rqctx, query).await)
    }

    async fn mcp_list_instances(
        rqctx: Ctx,
        query: QueryParams<workspace_api::mcp::InstanceListQuery>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::McpInstanceList>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::list_instances(rqctx, query).await)
    }

    async fn mcp_update_instance(
        rqctx: Ctx,
        query: QueryParams<workspace_api::mcp::InstanceQuery>,
        body: JsonBody<workspace_api::mcp::InstanceRename>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::McpInstance>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::update_instance(rqctx, query, body).await)
    }

    async fn mcp_delete_instance(
        rqctx: Ctx,
        query: QueryParams<workspace_api::mcp::InstanceQuery>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::McpDeleted>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::delete_instance(rqctx, query).await)
    }

    async fn mcp_generate_url(
        rqctx: Ctx,
        query: QueryParams<workspace_api::orgs::PersonalOrgQuery>,
        body: JsonBody<workspace_api::mcp::GenerateUrl>,
    ) -> Result<HttpResponseOk<workspace_api::mcp::McpUrl>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::generate_url(rqctx, query, body).await)
    }

    async fn mcp_gateway_post(
        rqctx: Ctx,
        path: dropshot::Path<workspace_api::mcp::GatewayPath>,
        body: dropshot::UntypedBody,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        let body = bytes::Bytes::copy_from_slice(body.as_bytes());
        probe.done(mcp::gateway(rqctx, path, reqwest::Method::POST, body).await)
    }

    async fn mcp_gateway_get(
        rqctx: Ctx,
        path: dropshot::Path<workspace_api::mcp::GatewayPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::gateway(rqctx, path, reqwest::Method::GET, bytes::Bytes::new()).await)
    }

    async fn mcp_gateway_delete(
        rqctx: Ctx,
        path: dropshot::Path<workspace_api::mcp::GatewayPath>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::gateway(rqctx, path, reqwest::Method::DELETE, bytes::Bytes::new()).await)
    }

    async fn mcp_playground_chat(
        rqctx: Ctx,
        query: QueryParams<workspace_api::orgs::PersonalOrgQuery>,
        body: JsonBody<workspace_api::mcp::PlaygroundChat>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let probe = Probe::new(&rqctx);
        probe.done(mcp::playground_chat(rqctx, query, body).await)
    }
}
