//! Chat export and import (issue #35).

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use crate::error::Error;
use bytes::{Bytes, BytesMut};
use dropshot::{HttpError, HttpResponseOk};
use futures::{Stream, StreamExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use workspace_api::chat_transfer::{
    ChatExportAllQuery, ChatExportQuery, ChatImportQuery, ChatImportResult, IMPORT_MAX_BYTES,
};
use workspace_api::extract::QueryParams;

pub async fn export(
    rqctx: Ctx,
    query: QueryParams<ChatExportQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    let format = query.format.unwrap_or_default();
    Ok(app::chat_transfer::export(cx, &access, query.chat_id, format).await?)
}

pub async fn export_all(
    rqctx: Ctx,
    query: QueryParams<ChatExportAllQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_READ)
        .await?;
    let format = query.format.unwrap_or_default();
    Ok(app::chat_transfer::export_all(cx, &access, format).await?)
}

pub async fn import(
    rqctx: Ctx,
    query: QueryParams<ChatImportQuery>,
    body: dropshot::StreamingBody,
) -> Result<HttpResponseOk<ChatImportResult>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::CHATS_WRITE)
        .await?;
    let permit = app::chat_transfer::import_permit().await?;
    let bytes = import_body(rqctx.request.headers(), body).await?;
    let format = query.format.unwrap_or_default();
    Ok(HttpResponseOk(
        app::chat_transfer::import(cx, &access, &permit, bytes, format).await?,
    ))
}

/// Room for a form's boundaries and part headers around the file.
const FORM_OVERHEAD: usize = 1024 * 1024;
/// The least time an import's body may take to arrive (a 50 MiB file
/// on a slow link), whatever `http.body_read_timeout_secs` says.
const IMPORT_READ_MIN: std::time::Duration = std::time::Duration::from_secs(300);

fn too_large() -> Error {
    Error::TooLarge {
        code: "file_too_large",
        message: format!("an import file is at most {IMPORT_MAX_BYTES} bytes"),
    }
}

fn unreadable(message: impl Into<String>) -> Error {
    Error::invalid("invalid_import_file", message)
}

/// The import file: the raw body, or the `file` part of a
/// `multipart/form-data` body; `413` from `Content-Length` before reading,
/// or as soon as the bytes read pass the limit; `408` when it does not
/// arrive in time.
async fn import_body(
    headers: &http::HeaderMap,
    body: dropshot::StreamingBody,
) -> Result<Bytes, HttpError> {
    let boundary = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
        .map(multer::parse_boundary)
        .transpose()
        .map_err(|e| unreadable(format!("malformed multipart body: {e}")))?;
    let limit = IMPORT_MAX_BYTES + if boundary.is_some() { FORM_OVERHEAD } else { 0 };
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large().into());
    }
    let over = Arc::new(AtomicBool::new(false));
    let chunks = bounded(body, limit, over.clone());
    let timeout = workspace_api::extract::body_read_timeout().max(IMPORT_READ_MIN);
    let read = async {
        match boundary {
            None => collect(chunks, &over).await,
            Some(boundary) => file_part(multer::Multipart::new(chunks, boundary), &over).await,
        }
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(result) => Ok(result?),
        Err(_elapsed) => {
            let mut error = HttpError::for_client_error(
                Some("request_timeout".to_string()),
                dropshot::ClientErrorStatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time".to_string(),
            );
            let _ = error.add_header(http::header::CONNECTION, "close");
            Err(error)
        }
    }
}

/// The body's chunks, ending with an error (and `over` set) once more
/// than `limit` bytes came.
fn bounded(
    body: dropshot::StreamingBody,
    limit: usize,
    over: Arc<AtomicBool>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let mut seen = 0usize;
    body.into_stream().map(move |chunk| {
        let chunk = chunk.map_err(|e| std::io::Error::other(e.to_string()))?;
        seen += chunk.len();
        if seen > limit {
            over.store(true, Ordering::Relaxed);
            return Err(std::io::Error::other("the body is too large"));
        }
        Ok(chunk)
    })
}

async fn collect(
    chunks: impl Stream<Item = Result<Bytes, std::io::Error>>,
    over: &AtomicBool,
) -> Result<Bytes, Error> {
    let mut chunks = std::pin::pin!(chunks);
    let mut bytes = BytesMut::new();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(_) if over.load(Ordering::Relaxed) => return Err(too_large()),
            Err(e) => return Err(unreadable(format!("the body could not be read: {e}"))),
        }
    }
    Ok(bytes.freeze())
}

/// The form's part named `file` (at most a few other parts are skipped),
/// at most [`IMPORT_MAX_BYTES`].
async fn file_part(
    mut form: multer::Multipart<'static>,
    over: &AtomicBool,
) -> Result<Bytes, Error> {
    let failed = |e: multer::Error| {
        if over.load(Ordering::Relaxed) {
            too_large()
        } else {
            unreadable(format!("malformed multipart body: {e}"))
        }
    };
    for _ in 0..8 {
        match form.next_field().await.map_err(failed)? {
            Some(mut field) if field.name() == Some("file") => {
                let mut bytes = BytesMut::new();
                while let Some(chunk) = field.chunk().await.map_err(failed)? {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() > IMPORT_MAX_BYTES {
                        return Err(too_large());
                    }
                }
                return Ok(bytes.freeze());
            }
            Some(_) => continue,
            None => break,
        }
    }
    Err(unreadable("the form has no part named `file`"))
}
