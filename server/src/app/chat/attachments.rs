//! What a chat message's uploads become for its model: images and PDFs in
//! the provider's own parts for a model that takes them, text for the
//! rest.
//!
//! An image is prepared once ([`crate::media::prepare_image`]: decoded with
//! its size checked before the frame is allocated, downscaled to the
//! providers' maximum, re-encoded without metadata) and the result kept
//! beside the upload (`file_renditions`), so the images of earlier turns
//! are sent again without decoding any. A PDF goes whole to a model with
//! `pdf` input when it is within [`PDF_MAX_BYTES`] and [`PDF_MAX_PAGES`]
//! (the Anthropic Messages API's limits, the smaller of the providers'),
//! else as its text, as to every other model.

use super::UPLOAD_TEXT_MAX;
use crate::authz::{Grant, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::chat::ChatFileRow;
use crate::db::datastore::files::{NewRendition, RenditionRow};
use crate::error::Error;
use crate::media::{ImageLimits, prepare_image};
use crate::providers::{Attachment, ModelEntry};
use crate::runtime::context::IMAGE_DETAIL;
use std::collections::HashMap;
use uuid::Uuid;
use workspace_api::conversations::ModelInput;

/// The largest PDF sent whole, in bytes (Anthropic's request limit).
pub const PDF_MAX_BYTES: usize = 32 * 1024 * 1024;
/// The most pages of a PDF sent whole (Anthropic's limit).
pub const PDF_MAX_PAGES: u32 = 100;
/// The most images one request to a model carries, the new message's and
/// the earlier turns' together (newest kept): far below the providers'
/// limits (Anthropic 100, OpenAI 500), and a bound on the memory an
/// answer holds.
pub const MAX_IMAGES_PER_REQUEST: usize = 32;

/// What a message's uploads become.
#[derive(Default)]
pub struct Prepared {
    /// Uploads sent as text: (file name, text).
    pub texts: Vec<(String, String)>,
    /// Uploads sent as the provider's parts.
    pub attachments: Vec<Attachment>,
}

fn is_image(content_type: &str) -> bool {
    content_type.starts_with("image/")
}

/// Refuses uploads the model cannot take, before anything is stored:
/// `400 model_lacks_input` naming the model, the input and the file.
pub fn check_inputs(model: &ModelEntry, files: &[ChatFileRow]) -> Result<(), Error> {
    if let Some(image) = files.iter().find(|f| is_image(&f.content_type))
        && !model.capabilities.takes(ModelInput::Image)
    {
        return Err(Error::invalid(
            "model_lacks_input",
            format!(
                "the model {} does not take image input ({} is an image); choose a model \
                 whose `input` lists `image` (GET /api/models/list) or leave the image out",
                model.name, image.filename
            ),
        ));
    }
    Ok(())
}

/// The error of an upload that could not be prepared, with its file name.
fn rendition_error(code: &str, message: &str, filename: &str) -> Error {
    let code = match code {
        "image_too_large" => "image_too_large",
        "image_unsupported" => "image_unsupported",
        _ => "image_unreadable",
    };
    Error::invalid(code, format!("{filename}: {message}"))
}

/// The uploads of a new message, for `model` (checked with
/// [`check_inputs`]): images prepared (or their kept rendition), PDFs whole
/// or as text, other files as text.
pub async fn prepare(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    model: &ModelEntry,
    files: &[ChatFileRow],
) -> Result<Prepared, Error> {
    let takes_pdf = model.capabilities.takes(ModelInput::Pdf);
    let wanted: Vec<Uuid> = files
        .iter()
        .filter(|f| is_image(&f.content_type) || (takes_pdf && f.content_type == "application/pdf"))
        .map(|f| f.id)
        .collect();
    let mut kept: HashMap<Uuid, RenditionRow> = cx
        .datastore
        .file_renditions(grant, &wanted)
        .await?
        .into_iter()
        .map(|r| (r.file_id, r))
        .collect();
    let mut out = Prepared::default();
    for file in files {
        if is_image(&file.content_type) {
            let rendition = match kept.remove(&file.id) {
                Some(r) => r,
                None => make_image(cx, grant, file).await?,
            };
            if let (Some(code), Some(message)) = (&rendition.error_code, &rendition.error) {
                return Err(rendition_error(code, message, &file.filename));
            }
            if let Some(image) = image_of(rendition) {
                out.attachments.push(image);
            }
        } else if takes_pdf && file.content_type == "application/pdf" {
            let pages = match kept.remove(&file.id) {
                Some(r) => r.pages,
                None => pdf_pages(cx, grant, file).await?,
            };
            match pdf_whole(cx, file, pages).await? {
                Some(pdf) => out.attachments.push(pdf),
                None => {
                    if let Some(text) = upload_text(cx, grant, file).await? {
                        out.texts.push((file.filename.clone(), text));
                    }
                }
            }
        } else if let Some(text) = upload_text(cx, grant, file).await? {
            out.texts.push((file.filename.clone(), text));
        }
    }
    Ok(out)
}

/// A kept image rendition as the model's part (none for a row without
/// an image).
fn image_of(r: RenditionRow) -> Option<Attachment> {
    Some(Attachment::Image {
        media_type: r.media_type?,
        data: bytes::Bytes::from(r.data?),
        width: u32::try_from(r.width?).ok()?,
        height: u32::try_from(r.height?).ok()?,
        detail: IMAGE_DETAIL,
    })
}

/// Prepares an image upload and keeps the result (or why it failed, so a
/// bad image is not decoded again).
async fn make_image(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    file: &ChatFileRow,
) -> Result<RenditionRow, Error> {
    let limits = ImageLimits::default();
    let bytes = crate::app::files::read_at_most(
        cx,
        &file.storage_key,
        usize::try_from(limits.max_input_bytes).unwrap_or(usize::MAX),
    )
    .await?;
    let prepared = match bytes {
        None => Err((
            "image_too_large",
            format!(
                "the image is over {} MiB; send a smaller one",
                limits.max_input_bytes >> 20
            ),
        )),
        Some(bytes) => {
            let started = std::time::Instant::now();
            let result = tokio::task::spawn_blocking(move || prepare_image(&bytes, &limits))
                .await
                .map_err(Error::internal)?;
            cx.metrics.image_prepared(started.elapsed());
            result.map_err(|e| (e.code(), e.message()))
        }
    };
    let row = match &prepared {
        Ok(image) => {
            cx.datastore
                .file_rendition_put(
                    grant,
                    file.id,
                    &NewRendition::Image {
                        media_type: image.media_type,
                        width: image.width,
                        height: image.height,
                        data: &image.data,
                    },
                )
                .await?;
            RenditionRow {
                file_id: file.id,
                media_type: Some(image.media_type.to_string()),
                width: i32::try_from(image.width).ok(),
                height: i32::try_from(image.height).ok(),
                data: Some(image.data.to_vec()),
                pages: None,
                error_code: None,
                error: None,
            }
        }
        Err((code, message)) => {
            cx.datastore
                .file_rendition_put(grant, file.id, &NewRendition::Failed { code, message })
                .await?;
            RenditionRow {
                file_id: file.id,
                media_type: None,
                width: None,
                height: None,
                data: None,
                pages: None,
                error_code: Some(code.to_string()),
                error: Some(message.clone()),
            }
        }
    };
    Ok(row)
}

/// A PDF's page count, read once and kept (`None` when it cannot be read:
/// it then goes as text, whose extraction says why).
async fn pdf_pages(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    file: &ChatFileRow,
) -> Result<Option<i32>, Error> {
    if usize::try_from(file.file_size).unwrap_or(usize::MAX) > PDF_MAX_BYTES {
        return Ok(None);
    }
    let Some(bytes) = crate::app::files::read_at_most(cx, &file.storage_key, PDF_MAX_BYTES).await?
    else {
        return Ok(None);
    };
    // Counted in the extraction worker: a crafted PDF must not take the
    // server down with it.
    let budget = crate::extract::Budget::from_config(&cx.config.files);
    match crate::extract::pdf_page_count(bytes, budget).await {
        Ok(pages) => {
            cx.datastore
                .file_rendition_put(grant, file.id, &NewRendition::Pdf { pages })
                .await?;
            Ok(i32::try_from(pages).ok())
        }
        // A timeout may pass on a quieter machine: not remembered.
        Err(crate::extract::ExtractError::TimedOut(_)) => Ok(None),
        Err(e) => {
            cx.datastore
                .file_rendition_put(
                    grant,
                    file.id,
                    &NewRendition::Failed {
                        code: "pdf_unreadable",
                        message: &e.to_string(),
                    },
                )
                .await?;
            Ok(None)
        }
    }
}

/// The PDF as the model's part when it is within the bounds.
async fn pdf_whole(
    cx: &ServerContext,
    file: &ChatFileRow,
    pages: Option<i32>,
) -> Result<Option<Attachment>, Error> {
    let Some(pages) = pages.and_then(|p| u32::try_from(p).ok()) else {
        return Ok(None);
    };
    if pages == 0 || pages > PDF_MAX_PAGES {
        return Ok(None);
    }
    let data = crate::app::files::read_at_most(cx, &file.storage_key, PDF_MAX_BYTES).await?;
    Ok(data.map(|data| Attachment::Pdf {
        filename: file.filename.clone(),
        data,
        pages,
    }))
}

/// The kept images of earlier questions, by the question's id, newest
/// questions first until [`MAX_IMAGES_PER_REQUEST`] less `new_images`
/// (the new message's) is reached. Only kept renditions are sent: nothing
/// is decoded again.
pub async fn history_images(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    model: &ModelEntry,
    questions: &[(Uuid, Vec<Uuid>)],
    new_images: usize,
) -> Result<HashMap<Uuid, Vec<Attachment>>, Error> {
    let mut out = HashMap::new();
    if !model.capabilities.takes(ModelInput::Image) {
        return Ok(out);
    }
    let room = MAX_IMAGES_PER_REQUEST.saturating_sub(new_images);
    let mut ids = Vec::new();
    for (_, uploads) in questions.iter().rev() {
        if ids.len() >= room {
            break;
        }
        ids.extend(uploads.iter().take(room - ids.len()));
    }
    let mut kept: HashMap<Uuid, RenditionRow> = cx
        .datastore
        .file_renditions(grant, &ids)
        .await?
        .into_iter()
        .map(|r| (r.file_id, r))
        .collect();
    for (question, uploads) in questions {
        let images: Vec<Attachment> = uploads
            .iter()
            .filter_map(|id| kept.remove(id))
            .filter_map(image_of)
            .collect();
        if !images.is_empty() {
            out.insert(*question, images);
        }
    }
    Ok(out)
}

/// The text of an upload for the prompt, if it has one: extracted once
/// (TXT, MD, CSV, PDF, DOCX, XLSX) and kept with the file, cut at
/// `UPLOAD_TEXT_MAX` bytes. Images, audio and files whose extraction failed
/// add nothing (the failure is kept with the file and not retried).
async fn upload_text(
    cx: &ServerContext,
    access: &Grant<on::Org, perm::ChatsWrite>,
    file: &ChatFileRow,
) -> Result<Option<String>, Error> {
    let mut text = match &file.extracted_text {
        Some(text) => text.clone(),
        None if !crate::extract::supports(&file.content_type) => return Ok(None),
        None => match crate::app::files::extract_text(cx, access, file.id).await {
            Ok(text) => text,
            Err(Error::Unprocessable { .. }) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    if text.len() > UPLOAD_TEXT_MAX {
        let mut cut = UPLOAD_TEXT_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    Ok(Some(text))
}
