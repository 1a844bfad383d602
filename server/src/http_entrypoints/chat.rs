//! Chat area: sessions, send_message, resumable streams, stop, prompts.

use super::Ctx;
use crate::app;
use crate::authz::{Also, on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use uuid::Uuid;
use workspace_api::chat::{
    BulkDeleteRequest, BulkDeleteResponse, ChatIdResponse, ChatListQuery, ChatMessageQuery,
    ChatQuery, ChatSession, ChatSessionDetail, ChatWrite, DeleteSessionQuery, EditMessageRequest,
    PromptRequest, RegenerateRequest, SendMessageRequest, StopResponse, SwitchBranchRequest,
};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{MessageResponse, OrgQuery, PersonalOrgQuery};

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ChatWrite>,
) -> Result<HttpResponseCreated<ChatIdResponse>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CHATS_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::chat::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<ChatQuery>,
) -> Result<HttpResponseOk<ChatSessionDetail>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    Ok(HttpResponseOk(
        app::chat::get(cx, &access, query.chat_id).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<ChatListQuery>,
) -> Result<HttpResponseOk<Vec<ChatSession>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    Ok(HttpResponseOk(app::chat::list(cx, &access, query).await?))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<ChatQuery>,
    body: JsonBody<ChatWrite>,
) -> Result<HttpResponseOk<ChatIdResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::chat::update(cx, &access, query.chat_id, body.into_inner()).await?,
    ))
}

pub async fn delete_session(
    rqctx: Ctx,
    query: QueryParams<DeleteSessionQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().session_id;
    let access = cx
        .authorize(&rqctx, on::Chat(id), perm::CHATS_DELETE)
        .await?;
    Ok(HttpResponseOk(
        app::chat::delete_session(cx, &access).await?,
    ))
}

pub async fn bulk_delete(
    rqctx: Ctx,
    query: QueryParams<PersonalOrgQuery>,
    body: JsonBody<BulkDeleteRequest>,
) -> Result<HttpResponseOk<BulkDeleteResponse>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::OrgOrPersonal(query.into_inner().org_id),
            perm::CHATS_DELETE,
        )
        .await?;
    Ok(HttpResponseOk(
        app::chat::bulk_delete(cx, &access, body.into_inner()).await?,
    ))
}

/// What asking for an answer requires: `chats:write`, and `agent:execute`
/// to answer as an agent, `kb:read` to retrieve from knowledge bases.
fn answer_requires(agent_id: Option<Uuid>, kb_ids: Option<&Vec<Uuid>>) -> Also<perm::ChatsWrite> {
    use crate::authz::perm::Permission as _;
    const AGENT: &[perm::Name] = &[perm::AgentExecute::NAME];
    const KB: &[perm::Name] = &[perm::KbRead::NAME];
    const BOTH: &[perm::Name] = &[perm::AgentExecute::NAME, perm::KbRead::NAME];
    let agent = agent_id.is_some();
    let kb = kb_ids.is_some_and(|k| !k.is_empty());
    Also(
        perm::CHATS_WRITE,
        match (agent, kb) {
            (false, false) => &[],
            (true, false) => AGENT,
            (false, true) => KB,
            (true, true) => BOTH,
        },
    )
}

pub async fn send_message(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<SendMessageRequest>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let body = body.into_inner();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            answer_requires(body.agent_id, body.knowledge_base_ids.as_ref()),
        )
        .await?;
    let events = app::chat::send_message(cx, &access, body).await?;
    crate::sse::numbered_response(events)
}

pub async fn edit_message(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<EditMessageRequest>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let body = body.into_inner();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            answer_requires(body.agent_id, body.knowledge_base_ids.as_ref()),
        )
        .await?;
    let events = app::chat::edit_message(cx, &access, body).await?;
    crate::sse::numbered_response(events)
}

pub async fn regenerate(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<RegenerateRequest>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let body = body.into_inner();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            answer_requires(body.agent_id, body.knowledge_base_ids.as_ref()),
        )
        .await?;
    let events = app::chat::regenerate(cx, &access, body).await?;
    crate::sse::numbered_response(events)
}

pub async fn switch_branch(
    rqctx: Ctx,
    query: QueryParams<ChatQuery>,
    body: JsonBody<SwitchBranchRequest>,
) -> Result<HttpResponseOk<ChatSessionDetail>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::chat::switch_branch(cx, &access, query.chat_id, body.into_inner().message_id).await?,
    ))
}

pub async fn stream(
    rqctx: Ctx,
    query: QueryParams<ChatMessageQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    let after = app::streams::last_event_id(rqctx.request.headers())?;
    let events = app::chat::resume(cx, &access, query.message_id, after).await?;
    crate::sse::numbered_response(events)
}

pub async fn stop(
    rqctx: Ctx,
    query: QueryParams<ChatMessageQuery>,
) -> Result<HttpResponseOk<StopResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::chat::stop(cx, &access, query.message_id).await?,
    ))
}

pub async fn prompt(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<PromptRequest>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CHATS_WRITE,
        )
        .await?;
    let events = app::chat::prompt(cx, &access, body.into_inner()).await?;
    crate::sse::response(events)
}

pub async fn transcribe(
    rqctx: Ctx,
    query: QueryParams<workspace_api::chat::TranscribeQuery>,
    body: dropshot::UntypedBody,
) -> Result<HttpResponseOk<workspace_api::chat::TranscribeResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    let content_type = rqctx
        .request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Ok(HttpResponseOk(
        app::chat::transcribe(cx, &access, query, content_type, body.as_bytes()).await?,
    ))
}

pub async fn ws_ticket(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseCreated<workspace_api::chat::WsTicket>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), perm::CHATS_READ)
        .await?;
    Ok(HttpResponseCreated(
        app::chat::ws_ticket(cx, &access).await?,
    ))
}

/// Public: the single-use ticket is the credential (checked after the
/// upgrade; a bad one closes the socket with 1008).
pub async fn ws(
    rqctx: Ctx,
    query: QueryParams<workspace_api::chat::WsQuery>,
    upgraded: dropshot::WebsocketConnection,
) -> dropshot::WebsocketChannelResult {
    use tokio_tungstenite::tungstenite::protocol::{Role, frame::coding::CloseCode};
    let cx = rqctx.context();
    let query = query.into_inner();
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        upgraded.into_inner(),
        Role::Server,
        None,
    )
    .await;
    let access = match cx.authorize_ws_ticket(query.org_id, &query.ticket).await {
        Ok(Some(access)) => access,
        Ok(None) | Err(_) => {
            app::chat::ws_close(
                &mut ws,
                CloseCode::Policy,
                "invalid, used or expired ticket",
            )
            .await;
            return Ok(());
        }
    };
    app::chat::ws_serve(cx, access, ws).await
}
