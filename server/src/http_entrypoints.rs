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
    OrgQuery, StreamChatRequest,
};
use workspace_api::extract::{JsonBody, QueryParams};
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
