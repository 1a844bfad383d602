//! Chat area, issue #35: search across one's chats, and folders.

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::chat_folders::{
    ChatFolder, ChatFolderDeleted, ChatFolderQuery, ChatFolderWrite, ChatMoveRequest,
    ChatMoveResponse,
};
use workspace_api::chat_search::{ChatSearchPage, ChatSearchQuery};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::OrgQuery;

pub async fn search(
    rqctx: Ctx,
    query: QueryParams<ChatSearchQuery>,
) -> Result<HttpResponseOk<ChatSearchPage>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    Ok(HttpResponseOk(
        app::chat_search::search(cx, &access, query).await?,
    ))
}

pub async fn folders_list(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<Vec<ChatFolder>>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), perm::CHATS_READ)
        .await?;
    Ok(HttpResponseOk(app::chat_folders::list(cx, &access).await?))
}

pub async fn folders_create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ChatFolderWrite>,
) -> Result<HttpResponseCreated<ChatFolder>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CHATS_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::chat_folders::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn folders_rename(
    rqctx: Ctx,
    query: QueryParams<ChatFolderQuery>,
    body: JsonBody<ChatFolderWrite>,
) -> Result<HttpResponseOk<ChatFolder>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::chat_folders::rename(cx, &access, query.folder_id, body.into_inner()).await?,
    ))
}

pub async fn folders_delete(
    rqctx: Ctx,
    query: QueryParams<ChatFolderQuery>,
) -> Result<HttpResponseOk<ChatFolderDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::chat_folders::delete(cx, &access, query.folder_id).await?,
    ))
}

pub async fn folders_move(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ChatMoveRequest>,
) -> Result<HttpResponseOk<ChatMoveResponse>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::CHATS_WRITE,
        )
        .await?;
    Ok(HttpResponseOk(
        app::chat_folders::move_chats(cx, &access, body.into_inner()).await?,
    ))
}
