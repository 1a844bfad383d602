//! Feedback on answers (issue #35): rating an answer of one's chats
//! (`chats:write`) or of the organization's conversations
//! (`conversation:write`), and the organization's list and export for its
//! admins (a role of the admin level with `feedback:read`).

use super::Ctx;
use crate::app;
use crate::authz::{Admin, on, perm};
use dropshot::{HttpError, HttpResponseOk};
use workspace_api::chat::ChatMessageQuery;
use workspace_api::conversations::ConversationMessageQuery;
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::feedback::{
    ChatFeedbackWrite, ConversationFeedbackWrite, FeedbackDeleted, FeedbackExportQuery,
    FeedbackListQuery, FeedbackPage, MessageFeedback,
};
use workspace_api::orgs::OrgQuery;

/// The organization's admins, with `feedback:read`.
const REVIEW: Admin<perm::FeedbackRead> = Admin(perm::FEEDBACK_READ);

pub async fn rate_chat(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ChatFeedbackWrite>,
) -> Result<HttpResponseOk<MessageFeedback>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx
        .authorize(&rqctx, on::Org(org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::feedback::rate_chat(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn delete_chat(
    rqctx: Ctx,
    query: QueryParams<ChatMessageQuery>,
) -> Result<HttpResponseOk<FeedbackDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::feedback::delete_chat(cx, &grant, query.message_id).await?,
    ))
}

pub async fn rate_conversation(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ConversationFeedbackWrite>,
) -> Result<HttpResponseOk<MessageFeedback>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx
        .authorize(&rqctx, on::Org(org_id), perm::CONVERSATION_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::feedback::rate_conversation(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn delete_conversation(
    rqctx: Ctx,
    query: QueryParams<ConversationMessageQuery>,
) -> Result<HttpResponseOk<FeedbackDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CONVERSATION_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::feedback::delete_conversation(cx, &grant, &query.message_id).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<FeedbackListQuery>,
) -> Result<HttpResponseOk<FeedbackPage>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), REVIEW).await?;
    Ok(HttpResponseOk(
        app::feedback::list(cx, &grant, query).await?,
    ))
}

pub async fn export(
    rqctx: Ctx,
    query: QueryParams<FeedbackExportQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), REVIEW).await?;
    Ok(app::feedback::export(cx, grant, query).await?)
}
