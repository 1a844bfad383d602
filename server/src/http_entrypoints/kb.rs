//! Knowledge base area, chat uploads and signed downloads.

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::files::{DownloadQuery, MultipartForm, Upload, UploadQuery};
use workspace_api::kb::{
    AvailableKnowledgeBase, KbCreate, KbCreated, KbDeleted, KbDetail, KbDocumentQuery,
    KbDocumentsPage, KbDocumentsQuery, KbIngestionStatus, KbListQuery, KbQuery, KbQueryRequest,
    KbSearchRequest, KbSearchResponse, KbSummary, KbUpdate, KbUpdated, SourceAdded, SourceInput,
};
use workspace_api::orgs::OrgQuery;

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<KbCreate>,
) -> Result<HttpResponseCreated<KbCreated>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), perm::KB_WRITE)
        .await?;
    Ok(HttpResponseCreated(
        app::kb::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<KbListQuery>,
) -> Result<HttpResponseOk<Vec<KbSummary>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::KB_READ)
        .await?;
    Ok(HttpResponseOk(app::kb::list(cx, &access, query).await?))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
) -> Result<HttpResponseOk<KbDetail>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_READ).await?;
    Ok(HttpResponseOk(app::kb::get(cx, &access, kb_id).await?))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
    body: JsonBody<KbUpdate>,
) -> Result<HttpResponseOk<KbUpdated>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_WRITE).await?;
    Ok(HttpResponseOk(
        app::kb::update(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
) -> Result<HttpResponseOk<KbDeleted>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_DELETE).await?;
    Ok(HttpResponseOk(app::kb::delete(cx, &access).await?))
}

pub async fn add_source(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
    body: JsonBody<SourceInput>,
) -> Result<HttpResponseCreated<SourceAdded>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_WRITE).await?;
    Ok(HttpResponseCreated(
        app::kb::add_source(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn list_documents(
    rqctx: Ctx,
    query: QueryParams<KbDocumentsQuery>,
) -> Result<HttpResponseOk<KbDocumentsPage>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Kb(query.kb_id), perm::KB_READ)
        .await?;
    Ok(HttpResponseOk(
        app::kb::list_documents(cx, &access, query).await?,
    ))
}

pub async fn delete_document(
    rqctx: Ctx,
    query: QueryParams<KbDocumentQuery>,
) -> Result<HttpResponseOk<KbDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Kb(query.kb_id), perm::KB_DELETE)
        .await?;
    Ok(HttpResponseOk(
        app::kb::delete_document(cx, &access, query.document_id).await?,
    ))
}

pub async fn retry_document(
    rqctx: Ctx,
    query: QueryParams<KbDocumentQuery>,
) -> Result<HttpResponseOk<KbDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Kb(query.kb_id), perm::KB_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::kb::retry_document(cx, &access, query.document_id).await?,
    ))
}

pub async fn search(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
    body: JsonBody<KbSearchRequest>,
) -> Result<HttpResponseOk<KbSearchResponse>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_READ).await?;
    Ok(HttpResponseOk(
        app::kb::search(cx, &access, kb_id, body.into_inner()).await?,
    ))
}

pub async fn query(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
    body: JsonBody<KbQueryRequest>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_READ).await?;
    let mut body = body.into_inner();
    // `Accept: text/event-stream` asks for the stream as `"stream": true`
    // does (an explicit `"stream": false` keeps JSON).
    if body.stream.is_none() && crate::sse::accepts_event_stream(rqctx.request.headers()) {
        body.stream = Some(true);
    }
    Ok(app::kb::query(cx, &access, kb_id, body).await?)
}

pub async fn ingestion_status(
    rqctx: Ctx,
    query: QueryParams<KbQuery>,
) -> Result<HttpResponseOk<KbIngestionStatus>, HttpError> {
    let cx = rqctx.context();
    let kb_id = query.into_inner().kb_id;
    let access = cx.authorize(&rqctx, on::Kb(kb_id), perm::KB_READ).await?;
    Ok(HttpResponseOk(
        app::kb::ingestion_status(cx, &access, kb_id).await?,
    ))
}

pub async fn available_knowledge_bases(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<Vec<AvailableKnowledgeBase>>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            (perm::CHATS_READ, perm::KB_READ),
        )
        .await?;
    Ok(HttpResponseOk(app::kb::available(cx, &access).await?))
}

pub async fn upload_file(
    rqctx: Ctx,
    query: QueryParams<UploadQuery>,
    body: MultipartForm,
) -> Result<HttpResponseCreated<Upload>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseCreated(
        app::files::upload(cx, &access, query.chat_id, body.0).await?,
    ))
}

/// Public: the link's signature is the credential, checked by
/// `authorize_download`.
pub async fn download(
    rqctx: Ctx,
    query: QueryParams<DownloadQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize_download(query.file_id, query.expires, &query.signature)?;
    Ok(app::files::download(cx, grant).await?)
}
