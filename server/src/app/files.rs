//! Chat uploads: sniffing, the allow-list, the size limit, streaming to
//! the file store, and the signed download links of the local store.

use crate::authz::{DownloadGrant, Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::error::Error;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use uuid::Uuid;
use workspace_api::files::Upload;

/// Bytes looked at to decide a file's type.
const SNIFF_BYTES: usize = 64 * 1024;
/// Longest stored file name, in bytes.
const FILENAME_MAX: usize = 255;

/// The part's file name reduced to its last path component, without
/// control characters, at most 255 bytes.
pub fn clean_filename(raw: Option<&str>) -> String {
    let raw = raw.unwrap_or("");
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let mut name: String = last.chars().filter(|c| !c.is_control()).collect();
    name = name.trim().to_string();
    while name.len() > FILENAME_MAX {
        name.pop();
    }
    if name.is_empty() || name == "." || name == ".." {
        "upload".to_string()
    } else {
        name
    }
}

fn invalid_upload(message: impl Into<String>) -> Error {
    Error::invalid("invalid_upload", message)
}

fn too_large(max: u64) -> Error {
    Error::TooLarge {
        code: "file_too_large",
        message: format!("files are at most {max} bytes"),
    }
}

/// `POST /api/chat/upload_file`: checks the plan's gates, takes the form's
/// `file` part, sniffs its type from the head, streams it to the store
/// (bounded by `files.max_upload_bytes`, hashed on the way) and records it.
pub async fn upload(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    chat_id: Option<Uuid>,
    body: dropshot::MultipartBody,
) -> Result<Upload, Error> {
    check_upload_features(cx, grant).await?;
    let max = cx.config.files.max_upload_bytes;
    let mut part = FilePart::of(body).await?;
    let filename = clean_filename(part.file_name());
    let head = part.head(max).await?;
    let content_type = crate::extract::sniff::sniff(&head.bytes, head.complete, &filename)?;
    let file_id = Uuid::new_v4();
    let key = format!("orgs/{}/files/{file_id}", grant.org_id());
    let (size, sha256) = store_stream(cx, &key, head, &mut part, max).await?;
    let message_id = Uuid::new_v4();
    let inserted = cx
        .datastore
        .file_insert(
            grant,
            &crate::db::datastore::files::NewFile {
                id: file_id,
                chat_id,
                message_id,
                filename: filename.clone(),
                content_type: content_type.to_string(),
                file_size: size as i64,
                sha256,
                storage_key: key.clone(),
            },
        )
        .await;
    if let Err(e) = inserted {
        let _ = cx.files.delete(&key).await;
        return Err(e);
    }
    slog::info!(grant.log(), "file uploaded"; "file_id" => file_id.to_string(),
        "content_type" => content_type, "bytes" => size);
    let url = cx
        .files
        .download_url(&key, file_id)
        .await
        .map_err(Error::internal)?;
    Ok(Upload {
        id: file_id,
        message_id,
        filename,
        file_size: size as i64,
        content_type: content_type.to_string(),
        url,
    })
}

/// `403 feature_disabled` unless the plan has both upload features.
async fn check_upload_features(cx: &ServerContext, access: &OrgAccess) -> Result<(), Error> {
    let features = crate::app::orgs::features(cx, access).await?;
    for (enabled, name) in [
        (features.file_upload, "file_upload"),
        (features.chat_uploads, "chat_uploads"),
    ] {
        if !enabled {
            return Err(Error::Forbidden {
                code: "feature_disabled",
                message: format!("the organization's plan does not include the {name} feature"),
            });
        }
    }
    Ok(())
}

/// The `file` part of an upload form, read chunk by chunk.
struct FilePart {
    field: multer::Field<'static>,
}

/// The first bytes of a file (up to [`SNIFF_BYTES`]), and whether they are
/// all of it.
struct Head {
    bytes: BytesMut,
    complete: bool,
}

fn malformed(e: impl std::fmt::Display) -> Error {
    invalid_upload(format!("malformed multipart body: {e}"))
}

impl FilePart {
    /// The form's part named `file` (at most a few other parts are
    /// skipped): `400 invalid_upload` when there is none.
    async fn of(body: dropshot::MultipartBody) -> Result<FilePart, Error> {
        let mut multipart = body.content;
        for _ in 0..8 {
            match multipart.next_field().await.map_err(malformed)? {
                Some(field) if field.name() == Some("file") => return Ok(FilePart { field }),
                Some(_) => continue,
                None => break,
            }
        }
        Err(invalid_upload("the form has no part named `file`"))
    }

    fn file_name(&self) -> Option<&str> {
        self.field.file_name()
    }

    async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        self.field.chunk().await.map_err(malformed)
    }

    /// Reads the head to sniff: `400` for an empty file, `413` past `max`.
    async fn head(&mut self, max: u64) -> Result<Head, Error> {
        let mut head = Head {
            bytes: BytesMut::new(),
            complete: false,
        };
        while head.bytes.len() < SNIFF_BYTES {
            match self.chunk().await? {
                Some(chunk) => head.bytes.extend_from_slice(&chunk),
                None => {
                    head.complete = true;
                    break;
                }
            }
            if head.bytes.len() as u64 > max {
                return Err(too_large(max));
            }
        }
        if head.bytes.is_empty() {
            return Err(invalid_upload("the file is empty"));
        }
        Ok(head)
    }
}

/// Streams the head and the rest of the part to the store under `key`,
/// refusing (and removing) a file over `max` bytes; returns its size and
/// SHA-256 (hex).
async fn store_stream(
    cx: &ServerContext,
    key: &str,
    head: Head,
    part: &mut FilePart,
    max: u64,
) -> Result<(u64, String), Error> {
    let mut complete = head.complete;
    let mut writer = cx.files.writer(key).await.map_err(Error::internal)?;
    let mut size = head.bytes.len() as u64;
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut hasher, &head.bytes);
    let mut pending: Option<Bytes> = Some(head.bytes.freeze());
    let result: Result<(), Error> = async {
        loop {
            if let Some(bytes) = pending.take() {
                writer.write(bytes).await.map_err(Error::internal)?;
            }
            if complete {
                break;
            }
            match part.chunk().await? {
                Some(chunk) => {
                    size += chunk.len() as u64;
                    if size > max {
                        return Err(too_large(max));
                    }
                    sha2::Digest::update(&mut hasher, &chunk);
                    pending = Some(chunk);
                }
                None => complete = true,
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        writer.abort().await;
        return Err(e);
    }
    writer.finish().await.map_err(Error::internal)?;
    let sha256 = sha2::Digest::finalize(hasher)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((size, sha256))
}

/// The text of an uploaded file of the caller's organization (for a chat
/// prompt or ingestion). Extracted once, on first use, within the
/// `files.max_extracted_bytes` / `files.extraction_timeout_secs` budget, and
/// kept with the file; a file whose format has no text (images, audio,
/// video) or that is corrupt or encrypted gives 422 `extraction_failed`
/// with the reason (remembered too, so a bad file is not parsed again).
pub async fn extract_text(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    file_id: Uuid,
) -> Result<String, Error> {
    let file = cx
        .datastore
        .file_for_extraction(grant, file_id)
        .await?
        .ok_or(Error::NotFound { what: "file" })?;
    if let Some(text) = file.extracted_text {
        return Ok(text);
    }
    if let Some(error) = file.extraction_error {
        return Err(Error::unprocessable("extraction_failed", error));
    }
    let budget = crate::extract::Budget::from_config(&cx.config.files);
    let result = if crate::extract::supports(&file.content_type) {
        let bytes = read_all(cx, &file.storage_key, file.file_size).await?;
        crate::extract::extract(&file.content_type, bytes, budget).await
    } else {
        Err(crate::extract::ExtractError::Unsupported(
            file.content_type.clone(),
        ))
    };
    match result {
        Ok(text) => {
            cx.datastore
                .file_set_extraction(grant, file_id, Some(&text), None)
                .await?;
            Ok(text)
        }
        Err(e) => {
            let message = e.to_string();
            // A timeout may pass on a quieter machine: not remembered.
            if !matches!(e, crate::extract::ExtractError::TimedOut(_)) {
                cx.datastore
                    .file_set_extraction(grant, file_id, None, Some(&message))
                    .await?;
            }
            Err(Error::unprocessable("extraction_failed", message))
        }
    }
}

/// The stored object's bytes when they are at most `limit` (`None` when
/// more: read no further than that).
pub(crate) async fn read_at_most(
    cx: &ServerContext,
    key: &str,
    limit: usize,
) -> Result<Option<Bytes>, Error> {
    let mut stream = cx.files.read(key).await.map_err(Error::internal)?;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(Error::internal)?;
        if out.len() + chunk.len() > limit {
            return Ok(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Some(Bytes::from(out)))
}

/// The stored object's bytes (bounded by the upload limit it passed).
async fn read_all(cx: &ServerContext, key: &str, size: i64) -> Result<Bytes, Error> {
    let limit = cx.config.files.max_upload_bytes.max(size.max(0) as u64) as usize;
    let mut stream = cx.files.read(key).await.map_err(Error::internal)?;
    let mut out = Vec::with_capacity(size.clamp(0, 64 << 20) as usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(Error::internal)?;
        if out.len() + chunk.len() > limit {
            return Err(Error::unprocessable(
                "extraction_failed",
                "the stored file is larger than the upload limit",
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// Serves the file of a checked download link of the local store.
pub async fn download(
    cx: &ServerContext,
    grant: DownloadGrant,
) -> Result<http::Response<dropshot::Body>, Error> {
    let file = cx
        .datastore
        .file_for_download(&grant)
        .await?
        .ok_or(Error::NotFound { what: "file" })?;
    let stream = cx
        .files
        .read(&file.storage_key)
        .await
        .map_err(Error::internal)?;
    // A channel makes the store's stream (Send only) a Sync body.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, crate::storage::StorageError>>(4);
    crate::telemetry::spawn(async move {
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            if tx.send(item).await.is_err() {
                break;
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| {
            (
                item.map(hyper::body::Frame::data)
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>),
                rx,
            )
        })
    });
    let body = dropshot::Body::wrap(http_body_util::StreamBody::new(frames));
    let disposition = format!(
        "attachment; filename=\"{}\"",
        file.filename.replace(['"', '\\'], "_")
    );
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, file.content_type)
        .header(http::header::CONTENT_LENGTH, file.file_size.to_string())
        .header(http::header::CONTENT_DISPOSITION, disposition)
        .header("x-content-type-options", "nosniff")
        .body(body)
        .map_err(Error::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_are_reduced() {
        assert_eq!(clean_filename(Some("../../etc/passwd")), "passwd");
        assert_eq!(clean_filename(Some("C:\\x\\y.pdf")), "y.pdf");
        assert_eq!(clean_filename(Some("a\nb.txt")), "ab.txt");
        assert_eq!(clean_filename(None), "upload");
        assert_eq!(clean_filename(Some("..")), "upload");
        assert!(clean_filename(Some(&"é".repeat(300))).len() <= 255);
    }
}
