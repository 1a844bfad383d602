//! Conversations area (and the model catalog it uses).

use super::Ctx;
use crate::app;
use crate::authz::{Member, on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::conversations::{
    Conversation, ConversationCreate, ConversationMessageQuery, ConversationMessagesPage,
    ConversationQuery, ConversationSession, ConversationSessionCreate, ConversationStopResponse,
    ConversationWithSessions, MessagesQuery, Model, StreamChatRequest,
};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::OrgQuery;

pub async fn models_list(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<Vec<Model>>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), Member)
        .await?;
    Ok(HttpResponseOk(app::models::list(cx, &access)))
}

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ConversationCreate>,
) -> Result<HttpResponseCreated<Conversation>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CONVERSATION_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::conversations::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn create_session(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ConversationSessionCreate>,
) -> Result<HttpResponseCreated<ConversationSession>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CONVERSATION_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::conversations::create_session(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn stream_chat(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<StreamChatRequest>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CONVERSATION_WRITE,
        )
        .await?;
    let events = app::conversations::stream_chat(cx, &access, body.into_inner()).await?;
    crate::sse::numbered_response(events)
}

pub async fn stream(
    rqctx: Ctx,
    query: QueryParams<ConversationMessageQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CONVERSATION_READ)
        .await?;
    let after = app::streams::last_event_id(rqctx.request.headers())?;
    let events = app::conversations::resume(cx, &access, &query.message_id, after).await?;
    crate::sse::numbered_response(events)
}

pub async fn stop(
    rqctx: Ctx,
    query: QueryParams<ConversationMessageQuery>,
) -> Result<HttpResponseOk<ConversationStopResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CONVERSATION_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::conversations::stop(cx, &access, &query.message_id).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<workspace_api::orgs::OrgPageQuery>,
) -> Result<HttpResponseOk<Vec<Conversation>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    // The page is read in the authorization statement's round trip and
    // answered only with the grant (a bad `limit` or `offset` is `400`
    // only for a caller allowed to list).
    let (_access, conversations) = cx
        .authorize_with(
            &rqctx,
            on::Org(query.org_id),
            perm::CONVERSATION_READ,
            async |pending| {
                let page = app::page(query.limit, query.offset)?;
                app::conversations::list(cx, pending, page).await
            },
        )
        .await?;
    Ok(HttpResponseOk(conversations))
}

pub async fn get_with_sessions(
    rqctx: Ctx,
    query: QueryParams<ConversationQuery>,
) -> Result<HttpResponseOk<ConversationWithSessions>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CONVERSATION_READ)
        .await?;
    Ok(HttpResponseOk(
        app::conversations::get_with_sessions(cx, &access, query.conversation_id).await?,
    ))
}

pub async fn messages(
    rqctx: Ctx,
    query: QueryParams<MessagesQuery>,
) -> Result<HttpResponseOk<ConversationMessagesPage>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CONVERSATION_READ)
        .await?;
    Ok(HttpResponseOk(
        app::conversations::messages(cx, &access, query).await?,
    ))
}
