//! The HTTP entry points: the implementation of [`WorkspaceApi`]. Each
//! handler authenticates, authorizes, calls the app layer and maps the
//! result; no business rule lives here.

use crate::app;
use crate::context::ServerContext;
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk, RequestContext};
use workspace_api::WorkspaceApi;
use workspace_api::auth::{LoginRequest, LoginResponse, SignupRequest, SignupResponse};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::invitations::{
    Invitation, InvitationBulkCreateRequest, InvitationBulkCreateResponse, InvitationCreateRequest,
    InvitationIdQuery, InvitationListItem, InvitationListQuery, InvitationOrgQuery,
    InvitationResendResponse, InvitationRevokeResponse, InvitationTokenQuery, InvitationValidation,
    SignupInviteRequest, SignupInviteResponse,
};
use workspace_api::system::HealthStatus;
use workspace_api::users::{
    CurrentUser, UserInviteQuery, UserInviteRequest, UserInviteResponse, UserListQuery,
    UserListResponse,
};

pub enum WorkspaceImpl {}

type Ctx = RequestContext<ServerContext>;

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

    // ---- Users area ----

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
}
