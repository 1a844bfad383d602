//! Share links of chats (issue #35): made, listed and revoked by their
//! owner; read by anyone holding a link (`GET /api/shared`, and the page
//! `/share/<token>` that calls it).

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseHeaders, HttpResponseOk, Path};
use workspace_api::chat::ChatQuery;
use workspace_api::chat_shares::{
    ChatShare, ChatShareCreated, ChatShareQuery, ChatSharesQuery, SharePagePath, SharedChat,
    SharedQuery,
};
use workspace_api::extract::QueryParams;
use workspace_api::orgs::MessageResponse;

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<ChatQuery>,
) -> Result<HttpResponseCreated<ChatShareCreated>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseCreated(
        app::chat_shares::create(cx, &grant, query.chat_id).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<ChatSharesQuery>,
) -> Result<HttpResponseOk<Vec<ChatShare>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    Ok(HttpResponseOk(
        app::chat_shares::list(cx, &access, query).await?,
    ))
}

pub async fn revoke(
    rqctx: Ctx,
    query: QueryParams<ChatShareQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::chat_shares::revoke(cx, &grant, query.share_id).await?,
    ))
}

/// The headers of every answer about a shared chat, found or not: not
/// kept by caches, no `Referer` from the page, not indexed.
const READER_HEADERS: [(http::header::HeaderName, &str); 3] = [
    (http::header::CACHE_CONTROL, "no-store"),
    (http::header::REFERRER_POLICY, "no-referrer"),
    (http::HeaderName::from_static("x-robots-tag"), "noindex"),
];

/// `GET /api/shared`: public, the token is the credential.
pub async fn read(
    rqctx: Ctx,
    query: QueryParams<SharedQuery>,
) -> Result<HttpResponseHeaders<HttpResponseOk<SharedChat>>, HttpError> {
    let cx = rqctx.context();
    let client = super::client_address(&rqctx);
    match app::chat_shares::read(cx, &query.into_inner().token, client).await {
        Ok(chat) => {
            let mut response = HttpResponseHeaders::new_unnamed(HttpResponseOk(chat));
            for (name, value) in READER_HEADERS {
                response
                    .headers_mut()
                    .insert(name, http::HeaderValue::from_static(value));
            }
            Ok(response)
        }
        Err(error) => {
            let mut error = HttpError::from(error);
            for (name, value) in READER_HEADERS {
                let _ = error.add_header(name, value);
            }
            Err(error)
        }
    }
}

/// The share page (`examples/web/share/`).
const SHARE_PAGE: &str = include_str!("../../../examples/web/share/share.html");
const SHARE_SCRIPT: &str = include_str!("../../../examples/web/share/share.js");

/// `/share/<token>`: the page reads the token from its own address; the
/// server does not look at it (nor log it: see `logging.rs`).
pub async fn page(
    _rqctx: Ctx,
    _path: Path<SharePagePath>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let mut response = super::system::token_page_asset("text/html; charset=utf-8", SHARE_PAGE)?;
    response.headers_mut().insert(
        http::HeaderName::from_static("x-robots-tag"),
        http::HeaderValue::from_static("noindex"),
    );
    Ok(response)
}

pub async fn script(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    super::system::token_page_asset("text/javascript; charset=utf-8", SHARE_SCRIPT)
}
