//! Feedback on answers (issue #35): the rules of rating an answer (a
//! bounded comment, tags of a small charset), the organization's list with
//! its opaque cursor, and the export (CSV or JSON Lines) streamed page by
//! page.
//!
//! The export's bound: a writer task reads one page of
//! [`EXPORT_PAGE`] ratings at a time by the list's keyset cursor (each a
//! short statement on a pooled connection, returned at once), turns it
//! into chunks of about [`CHUNK_BYTES`] and hands them to the response
//! through a channel of [`CHUNKS_IN_FLIGHT`]: it waits while the client has
//! not read them, so the server holds at most one page and a few chunks of
//! any export (as `deletion::export` does).

use crate::authz::{Admin, Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::feedback::{
    FeedbackFilter, FeedbackItemRow, FeedbackPosition, FeedbackRow, NewFeedback,
};
use crate::db::enums as db;
use crate::error::Error;
use base64::Engine;
use bytes::Bytes;
use std::collections::HashMap;
use tokio::sync::mpsc;
use uuid::Uuid;
use workspace_api::feedback as api;

/// Ratings read per page of the export.
pub const EXPORT_PAGE: i64 = 200;
/// The size a chunk of the export is sent at.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks waiting for the client at most.
const CHUNKS_IN_FLIGHT: usize = 4;

type Chunk = Result<Bytes, std::io::Error>;

/// Rates an answer of one of the caller's chats.
pub async fn rate_chat(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: api::ChatFeedbackWrite,
) -> Result<api::MessageFeedback, Error> {
    let comment = comment(body.comment)?;
    let tags = tags(body.tags)?;
    let new = NewFeedback {
        rating: rating_to_db(body.rating),
        comment: comment.as_deref(),
        tags: &tags,
    };
    let row = cx
        .datastore
        .feedback_rate_chat(grant, body.message_id, &new)
        .await?;
    Ok(feedback_from_row(row))
}

/// Rates an answer of one of the organization's conversations.
pub async fn rate_conversation(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ConversationWrite>,
    body: api::ConversationFeedbackWrite,
) -> Result<api::MessageFeedback, Error> {
    let id = message_id(&body.message_id)?;
    let comment = comment(body.comment)?;
    let tags = tags(body.tags)?;
    let new = NewFeedback {
        rating: rating_to_db(body.rating),
        comment: comment.as_deref(),
        tags: &tags,
    };
    let row = cx
        .datastore
        .feedback_rate_conversation(grant, id, &new)
        .await?;
    Ok(feedback_from_row(row))
}

/// Removes the caller's rating of a message of one of their chats.
pub async fn delete_chat(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    message_id: Uuid,
) -> Result<api::FeedbackDeleted, Error> {
    let deleted = cx.datastore.feedback_delete_chat(grant, message_id).await?;
    Ok(api::FeedbackDeleted {
        message_id: message_id.to_string(),
        deleted,
    })
}

/// Removes the caller's rating of a conversation's message.
pub async fn delete_conversation(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ConversationWrite>,
    message_id: &str,
) -> Result<api::FeedbackDeleted, Error> {
    let id = self::message_id(message_id)?;
    let deleted = cx.datastore.feedback_delete_conversation(grant, id).await?;
    Ok(api::FeedbackDeleted {
        message_id: id.to_string(),
        deleted,
    })
}

/// The caller's own feedback on those of the chat messages `ids` they
/// rated, by message id (one statement; nothing for an empty `ids`): for
/// `ChatMessage.feedback`. Pass the ids of the messages being shown (of
/// the caller's chat: other ids find nothing, as the rows read are the
/// caller's own).
pub async fn of_chat_messages(
    cx: &ServerContext,
    access: &OrgAccess,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, api::MessageFeedback>, Error> {
    let rows = cx
        .datastore
        .feedback_of_messages(access, db::FeedbackArea::Chat, ids)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(id, row)| (id, feedback_from_row(row)))
        .collect())
}

/// One page of the organization's feedback.
pub async fn list(
    cx: &ServerContext,
    grant: &Grant<on::Org, Admin<perm::FeedbackRead>>,
    query: api::FeedbackListQuery,
) -> Result<api::FeedbackPage, Error> {
    let limit = query.limit.unwrap_or(api::LIST_DEFAULT_LIMIT);
    if !(1..=api::LIST_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {}", api::LIST_MAX_LIMIT),
        ));
    }
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = filter(
        query.rating,
        query.model_id,
        query.user_id,
        query.area,
        query.tag,
        query.from,
        query.to,
    );
    let limit = i64::from(limit);
    // One more than the page: whether a next page exists.
    let mut rows = cx
        .datastore
        .feedback_page(grant, &filter, after, limit + 1)
        .await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(position(r)))
    } else {
        None
    };
    Ok(api::FeedbackPage {
        items: rows.into_iter().map(item_from_row).collect(),
        next_cursor,
    })
}

/// The streamed `200` of the export: the first page is read before the
/// response starts (so its errors are ordinary error responses), the rest
/// by a writer task.
pub async fn export(
    cx: &ServerContext,
    grant: Grant<on::Org, Admin<perm::FeedbackRead>>,
    query: api::FeedbackExportQuery,
) -> Result<http::Response<dropshot::Body>, Error> {
    let filter = filter(
        query.rating,
        query.model_id,
        query.user_id,
        query.area,
        query.tag,
        query.from,
        query.to,
    );
    let format = query.format;
    let first = cx
        .datastore
        .feedback_page(&grant, &filter, None, EXPORT_PAGE)
        .await?;
    let (tx, rx) = mpsc::channel::<Chunk>(CHUNKS_IN_FLIGHT);
    let mut out = Writer {
        buffer: Vec::new(),
        tx,
    };
    if format == api::FeedbackExportFormat::Csv {
        out.buffer
            .extend_from_slice(&csv_rows(std::iter::once(CSV_HEADER.map(String::from)))?);
    }
    let datastore = cx.datastore.clone();
    let log = grant.log().clone();
    crate::telemetry::spawn(async move {
        match write_all(&datastore, &grant, &filter, format, first, &mut out).await {
            Ok(()) | Err(Stop::ClientGone) => {}
            Err(Stop::Failed(e)) => {
                slog::warn!(log, "the feedback export failed part-way; ending its response";
                    "error" => %e);
                // The client sees an aborted body, not a shorter export.
                let _ = out
                    .tx
                    .send(Err(std::io::Error::other("export failed")))
                    .await;
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (chunk.map(hyper::body::Frame::data), rx))
    });
    let (content_type, file) = match format {
        api::FeedbackExportFormat::Csv => ("text/csv; charset=utf-8", "feedback.csv"),
        api::FeedbackExportFormat::Jsonl => ("application/jsonl", "feedback.jsonl"),
    };
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(
            http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{file}\""),
        )
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(dropshot::Body::wrap(http_body_util::StreamBody::new(
            frames,
        )))
        .map_err(Error::internal)
}

/// Why writing the export stopped early.
enum Stop {
    /// The client went away: nothing more to do.
    ClientGone,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Collects the export into chunks of about [`CHUNK_BYTES`].
struct Writer {
    buffer: Vec<u8>,
    tx: mpsc::Sender<Chunk>,
}

impl Writer {
    async fn flush(&mut self) -> Result<(), Stop> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.tx.send(Ok(chunk)).await.map_err(|_| Stop::ClientGone)
    }

    async fn push(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }
}

/// Writes `first` and every page after it, then flushes.
async fn write_all(
    datastore: &crate::db::Datastore,
    grant: &Grant<on::Org, Admin<perm::FeedbackRead>>,
    filter: &FeedbackFilter,
    format: api::FeedbackExportFormat,
    first: Vec<FeedbackItemRow>,
    out: &mut Writer,
) -> Result<(), Stop> {
    let mut page = first;
    loop {
        let full = page.len() as i64 == EXPORT_PAGE;
        let after = page.last().map(position);
        let items: Vec<api::FeedbackListItem> = page.into_iter().map(item_from_row).collect();
        match format {
            api::FeedbackExportFormat::Csv => {
                out.push(&csv_rows(items.iter().map(csv_record))?).await?;
            }
            api::FeedbackExportFormat::Jsonl => {
                for item in &items {
                    let mut line = serde_json::to_vec(item).map_err(Error::internal)?;
                    line.push(b'\n');
                    out.push(&line).await?;
                }
            }
        }
        if !full {
            break;
        }
        page = datastore
            .feedback_page(grant, filter, after, EXPORT_PAGE)
            .await?;
    }
    out.flush().await
}

/// The CSV export's columns.
pub const CSV_HEADER: [&str; CSV_COLUMNS] = [
    "id",
    "created_at",
    "updated_at",
    "area",
    "rating",
    "user_id",
    "user_email",
    "user_name",
    "model_id",
    "model_name",
    "chat_id",
    "conversation_id",
    "message_id",
    "knowledge_base_ids",
    "knowledge_base_names",
    "tags",
    "comment",
    "question",
    "answer",
];

/// How many columns the CSV export has.
pub const CSV_COLUMNS: usize = 19;

/// One rating as a CSV record, in [`CSV_HEADER`]'s order.
fn csv_record(item: &api::FeedbackListItem) -> [String; CSV_COLUMNS] {
    let time =
        |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    let id = |u: Option<Uuid>| u.map(|u| u.to_string()).unwrap_or_default();
    let joined = |parts: Vec<String>| parts.join(";");
    [
        item.id.to_string(),
        time(&item.created_at),
        time(&item.updated_at),
        area_name(item.area).to_string(),
        rating_name(item.rating).to_string(),
        item.user.id.to_string(),
        item.user.email.clone(),
        item.user.name.clone(),
        id(item.model.as_ref().map(|m| m.id)),
        item.model
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default(),
        id(item.chat_id),
        id(item.conversation_id),
        item.message_id.clone(),
        joined(
            item.knowledge_bases
                .iter()
                .map(|k| k.id.to_string())
                .collect(),
        ),
        joined(
            item.knowledge_bases
                .iter()
                .map(|k| k.name.clone().unwrap_or_default())
                .collect(),
        ),
        joined(item.tags.clone()),
        item.comment.clone().unwrap_or_default(),
        item.question.clone().unwrap_or_default(),
        item.answer.clone(),
    ]
}

/// Records as CSV (RFC 4180: quoted where needed, CRLF), every cell
/// neutralised ([`neutralise`]).
fn csv_rows(records: impl Iterator<Item = [String; CSV_COLUMNS]>) -> Result<Vec<u8>, Error> {
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    for record in records {
        writer
            .write_record(record.iter().map(|c| neutralise(c).into_owned()))
            .map_err(Error::internal)?;
    }
    writer.into_inner().map_err(Error::internal)
}

/// A cell that a spreadsheet would read as a formula (starting with `=`,
/// `+`, `-`, `@`, a tab or a carriage return) gets a leading apostrophe,
/// so it is shown as text (OWASP's advice against CSV injection).
pub fn neutralise(cell: &str) -> std::borrow::Cow<'_, str> {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        std::borrow::Cow::Owned(format!("'{cell}"))
    } else {
        std::borrow::Cow::Borrowed(cell)
    }
}

/// A conversation answer's id from the API's opaque string: `404` when
/// it is no UUID (so no message).
fn message_id(text: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(text.trim()).map_err(|_| Error::NotFound { what: "message" })
}

/// The comment: trimmed, blank is none; at most
/// [`api::COMMENT_MAX_CHARS`] characters (`400 invalid_comment`).
fn comment(comment: Option<String>) -> Result<Option<String>, Error> {
    let Some(comment) = comment else {
        return Ok(None);
    };
    let trimmed = comment.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    if trimmed.chars().count() > api::COMMENT_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_comment",
            format!("a comment is at most {} characters", api::COMMENT_MAX_CHARS),
        ));
    }
    Ok(Some(trimmed.to_string()))
}

/// Whether `tag` is of the tag charset ([`api::TAG_PATTERN`]).
fn is_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    (1..=api::TAG_MAX_CHARS).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// The tags: at most [`api::TAGS_MAX`], each of the charset, lowercased,
/// each once in the order given (`400 invalid_tags`).
fn tags(tags: Option<Vec<String>>) -> Result<Vec<String>, Error> {
    let tags = tags.unwrap_or_default();
    if tags.len() > api::TAGS_MAX {
        return Err(Error::invalid(
            "invalid_tags",
            format!("at most {} tags", api::TAGS_MAX),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        if !is_tag(&tag) {
            return Err(Error::invalid(
                "invalid_tags",
                format!(
                    "a tag is 1 to {} ASCII letters, digits, `_` or `-`, starting with a \
                     letter or digit: {:?}",
                    api::TAG_MAX_CHARS,
                    tag.chars().take(50).collect::<String>()
                ),
            ));
        }
        let tag = tag.to_ascii_lowercase();
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

/// The list's filters, checked.
fn filter(
    rating: Option<api::FeedbackRating>,
    model_id: Option<Uuid>,
    user_id: Option<Uuid>,
    area: Option<api::FeedbackArea>,
    tag: Option<String>,
    from: Option<chrono::DateTime<chrono::Utc>>,
    to: Option<chrono::DateTime<chrono::Utc>>,
) -> FeedbackFilter {
    FeedbackFilter {
        rating: rating.map(rating_to_db),
        model_id,
        user_id,
        area: area.map(area_to_db),
        // Tags are stored lowercase; one outside the charset matches
        // nothing (rather than refusing the filter).
        tag: tag.map(|t| t.to_ascii_lowercase()),
        from,
        to,
    }
}

/// The position of a row in the list's order.
fn position(row: &FeedbackItemRow) -> FeedbackPosition {
    FeedbackPosition {
        created_at: row.created_at,
        id: row.id,
    }
}

/// An opaque cursor: URL-safe base64 of the position's time (microseconds
/// since the epoch, big-endian) and id.
fn encode_cursor(p: FeedbackPosition) -> String {
    let mut bytes = Vec::with_capacity(24);
    bytes.extend_from_slice(&p.created_at.timestamp_micros().to_be_bytes());
    bytes.extend_from_slice(p.id.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// 0001-01-01T00:00:00Z, in microseconds since the epoch.
const CURSOR_MIN_MICROS: i64 = -62_135_596_800_000_000;
/// 9999-12-31T23:59:59.999999Z, in microseconds since the epoch.
const CURSOR_MAX_MICROS: i64 = 253_402_300_799_999_999;

/// A cursor read back (`400 invalid_cursor` for anything else).
fn decode_cursor(text: &str) -> Result<FeedbackPosition, Error> {
    let invalid = || {
        Error::invalid(
            "invalid_cursor",
            "cursor is not a `next_cursor` of this list",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|_| invalid())?;
    let (micros, id) = bytes.split_first_chunk::<8>().ok_or_else(invalid)?;
    let id = Uuid::from_slice(id).map_err(|_| invalid())?;
    // Any 32 characters of the alphabet are a position (the document's
    // pattern): a time outside years 1 to 9999 is taken as the nearest
    // end of that range (before or after every rating).
    let micros = i64::from_be_bytes(*micros).clamp(CURSOR_MIN_MICROS, CURSOR_MAX_MICROS);
    let created_at = chrono::DateTime::from_timestamp_micros(micros).ok_or_else(invalid)?;
    Ok(FeedbackPosition { created_at, id })
}

fn rating_to_db(r: api::FeedbackRating) -> db::FeedbackRating {
    match r {
        api::FeedbackRating::Up => db::FeedbackRating::Up,
        api::FeedbackRating::Down => db::FeedbackRating::Down,
    }
}

fn rating_from_db(r: db::FeedbackRating) -> api::FeedbackRating {
    match r {
        db::FeedbackRating::Up => api::FeedbackRating::Up,
        db::FeedbackRating::Down => api::FeedbackRating::Down,
    }
}

fn area_to_db(a: api::FeedbackArea) -> db::FeedbackArea {
    match a {
        api::FeedbackArea::Chat => db::FeedbackArea::Chat,
        api::FeedbackArea::Conversation => db::FeedbackArea::Conversation,
    }
}

fn area_from_db(a: db::FeedbackArea) -> api::FeedbackArea {
    match a {
        db::FeedbackArea::Chat => api::FeedbackArea::Chat,
        db::FeedbackArea::Conversation => api::FeedbackArea::Conversation,
    }
}

fn rating_name(r: api::FeedbackRating) -> &'static str {
    rating_to_db(r).as_str()
}

fn area_name(a: api::FeedbackArea) -> &'static str {
    area_to_db(a).as_str()
}

fn feedback_from_row(row: FeedbackRow) -> api::MessageFeedback {
    api::MessageFeedback {
        message_id: row.message_id.to_string(),
        area: area_from_db(row.area),
        rating: rating_from_db(row.rating),
        comment: row.comment,
        tags: row.tags,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn item_from_row(row: FeedbackItemRow) -> api::FeedbackListItem {
    api::FeedbackListItem {
        id: row.id,
        area: area_from_db(row.area),
        message_id: row.message_id.to_string(),
        chat_id: row.chat_id,
        conversation_id: row.conversation_id,
        rating: rating_from_db(row.rating),
        comment: row.comment,
        tags: row.tags,
        model: row
            .model_id
            .zip(row.model_name)
            .map(|(id, name)| api::FeedbackModel { id, name }),
        knowledge_bases: row
            .kb_ids
            .into_iter()
            .zip(row.kb_names)
            .map(|(id, name)| api::FeedbackKnowledgeBase { id, name })
            .collect(),
        question: row.question,
        answer: row.answer,
        user: api::FeedbackRater {
            id: row.user_id,
            email: row.user_email,
            name: row.user_name,
        },
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_neutralised() {
        for cell in ["=SUM(A1)", "+1", "-2", "@cmd", "\tx", "\rx"] {
            assert_eq!(neutralise(cell), format!("'{cell}"));
        }
        for cell in ["plain", "1+1", "", "'quoted", " =x"] {
            assert_eq!(neutralise(cell), cell);
        }
    }

    #[test]
    fn csv_quotes_and_neutralises() {
        let mut record: [String; CSV_COLUMNS] = Default::default();
        record[0] = "a,b".into();
        record[1] = "say \"hi\"".into();
        record[2] = "line\nbreak".into();
        record[3] = "=HYPERLINK(\"x\")".into();
        let text = String::from_utf8(csv_rows(std::iter::once(record)).unwrap()).unwrap();
        assert!(
            text.starts_with(
                "\"a,b\",\"say \"\"hi\"\"\",\"line\nbreak\",\"'=HYPERLINK(\"\"x\"\")\","
            )
        );
        assert!(text.ends_with(",,,\r\n"));
        assert_eq!(text.matches(',').count(), CSV_COLUMNS - 1 + 1);
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let p = FeedbackPosition {
            created_at: chrono::DateTime::from_timestamp_micros(1_790_000_000_123_456).unwrap(),
            id: Uuid::new_v4(),
        };
        assert_eq!(decode_cursor(&encode_cursor(p)).unwrap(), p);
        assert_eq!(encode_cursor(p).len(), 32);
        // Any 32 characters of the alphabet (the document's pattern).
        for edge in [
            "________________________________",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        ] {
            assert!(decode_cursor(edge).is_ok(), "{edge}");
        }
        for bad in ["", "x", "!!!!", &encode_cursor(p)[..10]] {
            assert!(decode_cursor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tags_are_checked_lowercased_and_deduplicated() {
        let t = |v: &[&str]| tags(Some(v.iter().map(|s| s.to_string()).collect()));
        assert_eq!(
            t(&["Wrong", "wrong", "too-long_2"]).unwrap(),
            ["wrong", "too-long_2"]
        );
        assert!(t(&["-x"]).is_err());
        assert!(t(&["a b"]).is_err());
        assert!(t(&["é"]).is_err());
        assert!(t(&[&"a".repeat(41)]).is_err());
        assert!(t(&["a"; 11]).is_err());
        assert_eq!(t(&[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn comments_are_trimmed_and_bounded() {
        assert_eq!(comment(Some("  ".into())).unwrap(), None);
        assert_eq!(comment(Some(" ok ".into())).unwrap().as_deref(), Some("ok"));
        assert!(comment(Some("é".repeat(2000))).is_ok());
        assert!(comment(Some("é".repeat(2001))).is_err());
    }
}
