//! The HTTP entry points: the implementation of [`WorkspaceApi`]. Each
//! handler authenticates, authorizes, calls the app layer and maps the
//! result; no business rule lives here.

use crate::app;
use crate::context::ServerContext;
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk, RequestContext};
use workspace_api::WorkspaceApi;
use workspace_api::auth::{LoginRequest, LoginResponse, SignupRequest, SignupResponse};
use workspace_api::extract::JsonBody;
use workspace_api::system::HealthStatus;
use workspace_api::users::CurrentUser;

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

    // ---- Roles area ----

    // ---- Invitations area ----

    // ---- Conversations area ----
}
