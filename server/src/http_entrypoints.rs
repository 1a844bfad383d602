//! The HTTP entry points: the implementation of [`WorkspaceApi`]. Each
//! handler authenticates, authorizes, calls the app layer and maps the
//! result; no business rule lives here.

use crate::app;
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
    AddMemberRequest, CreateOrgQuery, MessageResponse, OrgFeatures, OrgFeaturesUpdate, OrgQuery,
    Organization,
};
use workspace_api::roles::{
    CreatePermissionRequest, CreateRoleRequest, Permission, PermissionQuery, Role, RoleQuery,
    UpdateRoleRequest,
};
use workspace_api::system::HealthStatus;
use workspace_api::users::CurrentUser;
use workspace_api::users::{
    UpdateUserQuery, UpdateUserRoleRequest, UpdatedUser, UserInviteQuery, UserInviteRequest,
    UserInviteResponse, UserListQuery, UserListResponse,
};

pub enum WorkspaceImpl {}

type Ctx = RequestContext<ServerContext>;

fn message(message: String) -> HttpResponseOk<MessageResponse> {
    HttpResponseOk(MessageResponse { message })
}

fn ok() -> HealthStatus {
    HealthStatus {
        status: "ok".to_string(),
    }
}

impl WorkspaceApi for WorkspaceImpl {
    type Context = ServerContext;

    async fn healthz(_rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
        Ok(HttpResponseOk(ok()))
    }

    async fn readyz(rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
        let cx = rqctx.context();
        cx.datastore.ping().await.map_err(|e| {
            HttpError::from(crate::error::Error::Unavailable {
                code: "database_unavailable",
                message: e.to_string(),
            })
        })?;
        Ok(HttpResponseOk(ok()))
    }

    async fn auth_signup(
        rqctx: Ctx,
        body: JsonBody<SignupRequest>,
    ) -> Result<HttpResponseCreated<SignupResponse>, HttpError> {
        let cx = rqctx.context();
        Ok(HttpResponseCreated(
            app::auth::signup(cx, body.into_inner()).await?,
        ))
    }

    async fn auth_login(
        rqctx: Ctx,
        body: JsonBody<LoginRequest>,
    ) -> Result<HttpResponseOk<LoginResponse>, HttpError> {
        let cx = rqctx.context();
        Ok(HttpResponseOk(
            app::auth::login(cx, body.into_inner()).await?,
        ))
    }

    async fn users_me(rqctx: Ctx) -> Result<HttpResponseOk<CurrentUser>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        Ok(HttpResponseOk(app::users::me(cx, &actor).await?))
    }

    // ---- Organizations area ----

    async fn org_list(rqctx: Ctx) -> Result<HttpResponseOk<Vec<Organization>>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        Ok(HttpResponseOk(app::orgs::list(cx, &actor).await?))
    }

    async fn org_create_org(
        rqctx: Ctx,
        query: QueryParams<CreateOrgQuery>,
    ) -> Result<HttpResponseCreated<Organization>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        Ok(HttpResponseCreated(
            app::orgs::create(cx, &actor, &query.into_inner().name).await?,
        ))
    }

    async fn org_add_member(
        rqctx: Ctx,
        body: JsonBody<AddMemberRequest>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let body = body.into_inner();
        let access = cx
            .authorize(&actor, body.organization_id, Some("users:write"))
            .await?;
        Ok(message(app::orgs::add_member(cx, &access, body).await?))
    }

    async fn org_features(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<OrgFeatures>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, None)
            .await?;
        Ok(HttpResponseOk(
            app::orgs::features(cx, access.org_id).await?,
        ))
    }

    async fn org_update_features(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<OrgFeaturesUpdate>,
    ) -> Result<HttpResponseOk<OrgFeatures>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        cx.require_system_admin(&actor).await?;
        let org_id = query.into_inner().org_id;
        Ok(HttpResponseOk(
            app::orgs::update_features(cx, org_id, body.into_inner()).await?,
        ))
    }

    // ---- Users area ----

    async fn users_update(
        rqctx: Ctx,
        query: QueryParams<UpdateUserQuery>,
        body: JsonBody<UpdateUserRoleRequest>,
    ) -> Result<HttpResponseOk<UpdatedUser>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx
            .authorize(&actor, query.org_id, Some("users:write"))
            .await?;
        let role_id = body.into_inner().role_id;
        Ok(HttpResponseOk(
            app::users::update_role(cx, &access, query.user_id, role_id).await?,
        ))
    }

    async fn users_list(
        rqctx: Ctx,
        query: QueryParams<UserListQuery>,
    ) -> Result<HttpResponseOk<UserListResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx
            .authorize(&actor, query.org_id, Some("users:read"))
            .await?;
        Ok(HttpResponseOk(app::users::list(cx, &access, &query).await?))
    }

    async fn users_invite(
        rqctx: Ctx,
        query: QueryParams<UserInviteQuery>,
        body: JsonBody<UserInviteRequest>,
    ) -> Result<HttpResponseCreated<UserInviteResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, Some("users:write"))
            .await?;
        Ok(HttpResponseCreated(
            app::invitations::invite_user(cx, &access, body.into_inner()).await?,
        ))
    }

    // ---- Roles area ----

    async fn roles_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<CreateRoleRequest>,
    ) -> Result<HttpResponseCreated<Role>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, Some("roles:write"))
            .await?;
        Ok(HttpResponseCreated(
            app::roles::create(cx, &access, body.into_inner()).await?,
        ))
    }

    async fn roles_update(
        rqctx: Ctx,
        query: QueryParams<RoleQuery>,
        body: JsonBody<UpdateRoleRequest>,
    ) -> Result<HttpResponseOk<Role>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx
            .authorize(&actor, query.org_id, Some("roles:write"))
            .await?;
        Ok(HttpResponseOk(
            app::roles::update(cx, &access, query.role_id, body.into_inner()).await?,
        ))
    }

    async fn roles_remove(
        rqctx: Ctx,
        query: QueryParams<RoleQuery>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx
            .authorize(&actor, query.org_id, Some("roles:delete"))
            .await?;
        access.require("roles:write")?;
        Ok(message(
            app::roles::remove(cx, &access, query.role_id).await?,
        ))
    }

    async fn roles_list_roles(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<Role>>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, Some("roles:read"))
            .await?;
        Ok(HttpResponseOk(app::roles::list(cx, &access).await?))
    }

    async fn roles_list_permissions(
        rqctx: Ctx,
    ) -> Result<HttpResponseOk<Vec<Permission>>, HttpError> {
        let cx = rqctx.context();
        cx.authenticate(rqctx.request.headers()).await?;
        Ok(HttpResponseOk(app::roles::list_permissions(cx).await?))
    }

    async fn roles_create_permission(
        rqctx: Ctx,
        body: JsonBody<CreatePermissionRequest>,
    ) -> Result<HttpResponseCreated<Permission>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        cx.require_system_admin(&actor).await?;
        Ok(HttpResponseCreated(
            app::roles::create_permission(cx, body.into_inner()).await?,
        ))
    }

    async fn roles_delete_permission(
        rqctx: Ctx,
        query: QueryParams<PermissionQuery>,
    ) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        cx.require_system_admin(&actor).await?;
        Ok(message(
            app::roles::delete_permission(cx, query.into_inner().permission_id).await?,
        ))
    }

    // ---- Invitations area ----

    async fn invitations_create(
        rqctx: Ctx,
        query: QueryParams<InvitationOrgQuery>,
        body: JsonBody<InvitationCreateRequest>,
    ) -> Result<HttpResponseCreated<Invitation>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, None)
            .await?;
        Ok(HttpResponseCreated(
            app::invitations::create(cx, &access, body.into_inner()).await?,
        ))
    }

    async fn invitations_list(
        rqctx: Ctx,
        query: QueryParams<InvitationListQuery>,
    ) -> Result<HttpResponseOk<Vec<InvitationListItem>>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx.authorize(&actor, query.org_id, None).await?;
        Ok(HttpResponseOk(
            app::invitations::list(cx, &access, query.status).await?,
        ))
    }

    async fn invitations_get(
        rqctx: Ctx,
        query: QueryParams<InvitationIdQuery>,
    ) -> Result<HttpResponseOk<Invitation>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let id = query.into_inner().invitation_id;
        let access = app::invitations::authorize_invitation(cx, &actor, id).await?;
        Ok(HttpResponseOk(
            app::invitations::get(cx, &access, id).await?,
        ))
    }

    async fn invitations_validate(
        rqctx: Ctx,
        query: QueryParams<InvitationTokenQuery>,
    ) -> Result<HttpResponseOk<InvitationValidation>, HttpError> {
        let cx = rqctx.context();
        Ok(HttpResponseOk(
            app::invitations::validate(cx, &query.into_inner().token).await?,
        ))
    }

    async fn invitations_resend(
        rqctx: Ctx,
        query: QueryParams<InvitationIdQuery>,
    ) -> Result<HttpResponseOk<InvitationResendResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let id = query.into_inner().invitation_id;
        let access = app::invitations::authorize_invitation(cx, &actor, id).await?;
        Ok(HttpResponseOk(
            app::invitations::resend(cx, &access, id).await?,
        ))
    }

    async fn invitations_revoke(
        rqctx: Ctx,
        query: QueryParams<InvitationIdQuery>,
    ) -> Result<HttpResponseOk<InvitationRevokeResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let id = query.into_inner().invitation_id;
        let access = app::invitations::authorize_invitation(cx, &actor, id).await?;
        Ok(HttpResponseOk(
            app::invitations::revoke(cx, &access, id).await?,
        ))
    }

    async fn invitations_bulk_create(
        rqctx: Ctx,
        query: QueryParams<InvitationOrgQuery>,
        body: JsonBody<InvitationBulkCreateRequest>,
    ) -> Result<HttpResponseOk<InvitationBulkCreateResponse>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, None)
            .await?;
        Ok(HttpResponseOk(
            app::invitations::bulk_create(cx, &access, body.into_inner()).await?,
        ))
    }

    async fn auth_signup_invite(
        rqctx: Ctx,
        body: JsonBody<SignupInviteRequest>,
    ) -> Result<HttpResponseCreated<SignupInviteResponse>, HttpError> {
        let cx = rqctx.context();
        Ok(HttpResponseCreated(
            app::invitations::signup_invite(cx, body.into_inner()).await?,
        ))
    }

    // ---- Conversations area ----

    async fn models_list(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<Model>>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        cx.authorize(&actor, query.into_inner().org_id, None)
            .await?;
        Ok(HttpResponseOk(app::models::list(cx)))
    }

    async fn conversation_create(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<ConversationCreate>,
    ) -> Result<HttpResponseCreated<Conversation>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(
                &actor,
                query.into_inner().org_id,
                Some("conversation:write"),
            )
            .await?;
        Ok(HttpResponseCreated(
            app::conversations::create(cx, &access, body.into_inner()).await?,
        ))
    }

    async fn conversation_create_session(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<ConversationSessionCreate>,
    ) -> Result<HttpResponseCreated<ConversationSession>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(
                &actor,
                query.into_inner().org_id,
                Some("conversation:write"),
            )
            .await?;
        Ok(HttpResponseCreated(
            app::conversations::create_session(cx, &access, body.into_inner()).await?,
        ))
    }

    async fn conversation_stream_chat(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
        body: JsonBody<StreamChatRequest>,
    ) -> Result<http::Response<dropshot::Body>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(
                &actor,
                query.into_inner().org_id,
                Some("conversation:write"),
            )
            .await?;
        let events = app::conversations::stream_chat(cx, &access, body.into_inner()).await?;
        crate::sse::response(events)
    }

    async fn conversation_list(
        rqctx: Ctx,
        query: QueryParams<OrgQuery>,
    ) -> Result<HttpResponseOk<Vec<Conversation>>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let access = cx
            .authorize(&actor, query.into_inner().org_id, Some("conversation:read"))
            .await?;
        Ok(HttpResponseOk(app::conversations::list(cx, &access).await?))
    }

    async fn conversation_get_with_sessions(
        rqctx: Ctx,
        query: QueryParams<ConversationQuery>,
    ) -> Result<HttpResponseOk<ConversationWithSessions>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx
            .authorize(&actor, query.org_id, Some("conversation:read"))
            .await?;
        Ok(HttpResponseOk(
            app::conversations::get_with_sessions(cx, &access, query.conversation_id).await?,
        ))
    }

    async fn conversation_messages(
        rqctx: Ctx,
        query: QueryParams<MessagesQuery>,
    ) -> Result<HttpResponseOk<ConversationMessagesPage>, HttpError> {
        let cx = rqctx.context();
        let actor = cx.authenticate(rqctx.request.headers()).await?;
        let query = query.into_inner();
        let access = cx
            .authorize(&actor, query.org_id, Some("conversation:read"))
            .await?;
        Ok(HttpResponseOk(
            app::conversations::messages(cx, &access, query).await?,
        ))
    }
}
