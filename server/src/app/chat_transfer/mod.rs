//! Chat export and import.
//!
//! Export ([`export`], [`export_all`]): one chat or all of the caller's
//! chats in an organization, as a `ChatExportDocument` (the whole tree,
//! parents before children, and each chat's leaf) or as Markdown (the
//! active path), streamed through [`crate::app::doc_stream`] one page at a
//! time. An answer's reasoning is written apart from its content: the
//! message's `reasoning` in JSON, a folded `<details>` block before the
//! answer in Markdown.
//!
//! Import ([`import`]): a file of this service's export or of another
//! service's ([`formats`]) becomes chats of the caller, each built into
//! the tree columns of V34 ([`tree`]) and written in its own transaction
//! with its messages in batches. Bounds: the file's bytes (read by the
//! handler, [`workspace_api::chat_transfer::IMPORT_MAX_BYTES`]), its chats
//! and messages (checked before anything is written), each message's size
//! and depth (per chat), and [`IMPORTS_AT_ONCE`] imports per instance.

pub mod formats;
pub mod tree;

use crate::app::doc_stream::{self, Stop, Writer, json, opened};
use crate::authz::{Grant, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::Datastore;
use crate::db::datastore::chat_transfer::{ExportChatRow, ExportMessageRow};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus};
use crate::error::Error;
use uuid::Uuid;
use workspace_api::chat::{
    ChatMessageStatus as ApiMessageStatus, ChatRole as ApiRole, ChatStatus as ApiStatus,
};
use workspace_api::chat_transfer::{
    CHAT_EXPORT_FORMAT, ChatExportDocument, ChatExportFormat, ChatImportFormat, ChatImportResult,
    ExportedChat, ExportedMessage, IMPORT_MAX_MESSAGES, ImportSkipReason, ImportedChat,
    SkippedChat,
};

/// Messages read per page of an export.
pub const MESSAGES_PAGE: i64 = 50;
/// Chats read per page of `export_all`.
pub const CHATS_PAGE: i64 = 100;
/// Imports one instance parses and writes at once (each holds its file,
/// at most 50 MiB, and what it parsed).
pub const IMPORTS_AT_ONCE: usize = 4;
/// How long an import waits for its turn before `503 server_busy`.
const IMPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

// ---- export ----

/// `GET /api/chat/export`: one of the caller's chats (`404` before the
/// response starts when it is not).
pub async fn export(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsRead>,
    chat_id: Uuid,
    format: ChatExportFormat,
) -> Result<http::Response<dropshot::Body>, Error> {
    let chat = cx.datastore.chat_export_chat(grant, chat_id).await?;
    let name = format!("chat-{chat_id}");
    stream(cx, grant, format, &name, Source::One(Box::new(chat)))
}

/// `GET /api/chat/export_all`: every chat of the caller in the
/// organization, a page at a time.
pub async fn export_all(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsRead>,
    format: ChatExportFormat,
) -> Result<http::Response<dropshot::Body>, Error> {
    let name = format!("chats-{}", grant.org_id());
    stream(cx, grant, format, &name, Source::All)
}

/// The chats an export writes.
enum Source {
    One(Box<ExportChatRow>),
    All,
}

fn stream(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsRead>,
    format: ChatExportFormat,
    name: &str,
    source: Source,
) -> Result<http::Response<dropshot::Body>, Error> {
    let datastore = cx.datastore.clone();
    let grant = grant.clone();
    let log = grant.log().clone();
    match format {
        ChatExportFormat::Json => {
            let head = ChatExportDocument {
                format: CHAT_EXPORT_FORMAT.to_string(),
                exported_at: chrono::Utc::now(),
                org_id: grant.org_id(),
                chats: Vec::new(),
            };
            doc_stream::response(
                "application/json",
                &format!("{name}.json"),
                opened(&head, "chats")?,
                log,
                move |mut out| async move {
                    let mut result =
                        write_chats(&datastore, &grant, format, source, &mut out).await;
                    if result.is_ok() {
                        out.push("]}");
                        result = out.flush().await;
                    }
                    (out, result)
                },
            )
        }
        ChatExportFormat::Markdown => doc_stream::response(
            "text/markdown; charset=utf-8",
            &format!("{name}.md"),
            String::new(),
            log,
            move |mut out| async move {
                let mut result = write_chats(&datastore, &grant, format, source, &mut out).await;
                if result.is_ok() {
                    result = out.flush().await;
                }
                (out, result)
            },
        ),
    }
}

/// Writes every chat of `source` as `format`, a page of chats at a time.
async fn write_chats(
    datastore: &Datastore,
    grant: &Grant<on::Org, perm::ChatsRead>,
    format: ChatExportFormat,
    source: Source,
    out: &mut Writer,
) -> Result<(), Stop> {
    match source {
        Source::One(chat) => write_chat(datastore, grant, format, *chat, out, true).await,
        Source::All => {
            let mut after = Uuid::nil();
            let mut first = true;
            loop {
                let chats = datastore
                    .chat_export_chats(grant, after, CHATS_PAGE)
                    .await?;
                let Some(last) = chats.last() else {
                    return Ok(());
                };
                after = last.id;
                for chat in chats {
                    let first = std::mem::take(&mut first);
                    write_chat(datastore, grant, format, chat, out, first).await?;
                }
            }
        }
    }
}

async fn write_chat(
    datastore: &Datastore,
    grant: &Grant<on::Org, perm::ChatsRead>,
    format: ChatExportFormat,
    chat: ExportChatRow,
    out: &mut Writer,
    first: bool,
) -> Result<(), Stop> {
    match format {
        ChatExportFormat::Json => write_json_chat(datastore, grant, chat, out, first).await,
        ChatExportFormat::Markdown => write_markdown_chat(datastore, grant, chat, out, first).await,
    }
}

async fn write_json_chat(
    datastore: &Datastore,
    grant: &Grant<on::Org, perm::ChatsRead>,
    chat: ExportChatRow,
    out: &mut Writer,
    first: bool,
) -> Result<(), Stop> {
    let id = chat.id;
    let head = ExportedChat {
        id: chat.id,
        title: chat.title,
        status: status_view(chat.status),
        settings: chat.settings.and_then(|s| serde_json::from_value(s).ok()),
        created_at: chat.created_at,
        updated_at: chat.updated_at,
        leaf_id: chat.leaf_id,
        messages: Vec::new(),
    };
    if !first {
        out.push(",");
    }
    out.push(&opened(&head, "messages")?);
    let (mut seq, mut first_message) = (0, true);
    loop {
        let page = datastore
            .chat_export_messages(grant, id, seq, MESSAGES_PAGE)
            .await?;
        let Some(last) = page.last() else { break };
        seq = last.seq;
        let full = page.len() as i64 == MESSAGES_PAGE;
        for m in page {
            out.item(&mut first_message, &json(&message_view(m))?)
                .await?;
        }
        if !full {
            break;
        }
    }
    out.push("]}");
    out.flush_full().await
}

async fn write_markdown_chat(
    datastore: &Datastore,
    grant: &Grant<on::Org, perm::ChatsRead>,
    chat: ExportChatRow,
    out: &mut Writer,
    first: bool,
) -> Result<(), Stop> {
    if !first {
        out.push("\n---\n\n");
    }
    out.push(&markdown_title(&chat.title));
    let mut depth = -1;
    loop {
        let page = datastore
            .chat_export_path(grant, chat.id, depth, MESSAGES_PAGE)
            .await?;
        let Some(last) = page.last() else { break };
        depth = last.depth;
        let full = page.len() as i64 == MESSAGES_PAGE;
        for m in &page {
            out.push(&markdown_message(m));
            out.flush_full().await?;
        }
        if !full {
            break;
        }
    }
    Ok(())
}

/// `# <title>` (on one line) and a blank line.
fn markdown_title(title: &str) -> String {
    let line: String = title
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("# {}\n\n", line.trim())
}

/// The message under its heading, its content verbatim, and a blank line;
/// an answer's reasoning before its content, folded as GitHub and most
/// Markdown viewers fold HTML: `<details><summary>Reasoning</summary>`,
/// the text (Markdown inside, between blank lines), `</details>`.
fn markdown_message(m: &ExportMessageRow) -> String {
    let heading = match (m.role, &m.model_name) {
        (ChatRole::User, _) => "### User".to_string(),
        (ChatRole::Model, Some(model)) => {
            let model: String = model.chars().filter(|c| !c.is_control()).collect();
            format!("### Assistant ({model})")
        }
        (ChatRole::Model, None) => "### Assistant".to_string(),
    };
    let end = if m.content.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    let reasoning = match (m.role, m.reasoning.as_deref()) {
        (ChatRole::Model, Some(r)) if !r.trim().is_empty() => format!(
            "<details>\n<summary>Reasoning</summary>\n\n{}\n\n</details>\n\n",
            folded(r.trim_end())
        ),
        _ => String::new(),
    };
    format!("{heading}\n\n{reasoning}{}{end}", m.content)
}

/// `text` as it can sit inside a `<details>` block: a `</details` of its
/// own would close the block early, so its `<` is written `&lt;`.
fn folded(text: &str) -> std::borrow::Cow<'_, str> {
    const CLOSE: &str = "</details";
    let lower = text.to_ascii_lowercase();
    if !lower.contains(CLOSE) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut from = 0;
    while let Some(at) = lower[from..].find(CLOSE) {
        out.push_str(&text[from..from + at]);
        out.push_str("&lt;");
        from += at + 1;
    }
    out.push_str(&text[from..]);
    std::borrow::Cow::Owned(out)
}

fn status_view(s: ChatStatus) -> ApiStatus {
    match s {
        ChatStatus::Active => ApiStatus::Active,
        ChatStatus::Archived => ApiStatus::Archived,
        ChatStatus::Deleted => ApiStatus::Deleted,
    }
}

fn message_view(m: ExportMessageRow) -> ExportedMessage {
    ExportedMessage {
        id: m.id,
        parent_id: m.parent_message_id,
        role: match m.role {
            ChatRole::User => ApiRole::User,
            ChatRole::Model => ApiRole::Model,
        },
        content: m.content,
        reasoning: m.reasoning,
        status: match m.status {
            ChatMessageStatus::Streaming => ApiMessageStatus::Streaming,
            ChatMessageStatus::Complete => ApiMessageStatus::Complete,
            ChatMessageStatus::Stopped => ApiMessageStatus::Stopped,
            ChatMessageStatus::Failed => ApiMessageStatus::Failed,
        },
        model_id: m.model_id,
        model_name: m.model_name,
        created_at: m.created_at,
    }
}

// ---- import ----

/// The right to run one import on this instance (see
/// [`IMPORTS_AT_ONCE`]); taken before the body is read.
pub struct ImportPermit(#[allow(dead_code)] tokio::sync::SemaphorePermit<'static>);

static IMPORTS: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(IMPORTS_AT_ONCE));

/// Waits for a turn to import (`503 server_busy` after a minute).
pub async fn import_permit() -> Result<ImportPermit, Error> {
    match tokio::time::timeout(IMPORT_WAIT, IMPORTS.acquire()).await {
        Ok(Ok(permit)) => Ok(ImportPermit(permit)),
        _ => Err(Error::Busy {
            code: "server_busy",
            message: "the server is importing other files; retry shortly".to_string(),
            retry_after_secs: 10,
        }),
    }
}

/// `POST /api/chat/import`: reads `bytes` (already bounded) as
/// `format` and creates the caller's chats, each in its own transaction.
pub async fn import(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    _permit: &ImportPermit,
    bytes: bytes::Bytes,
    format: ChatImportFormat,
) -> Result<ChatImportResult, Error> {
    // Parsing a large file is CPU work: off the request threads.
    let parsed = tokio::task::spawn_blocking(move || formats::parse(&bytes, format))
        .await
        .map_err(Error::internal)??;
    let source = parsed.format;
    let mut result = ChatImportResult {
        format: source,
        imported: Vec::new(),
        skipped: Vec::new(),
    };
    let mut budget = IMPORT_MAX_MESSAGES;
    let mut member = true;
    for (index, entry) in parsed.entries.into_iter().enumerate() {
        let index = index as u32;
        let raw = match entry {
            formats::Entry::Chat(raw) => raw,
            formats::Entry::Invalid {
                source_id,
                title,
                message,
            } => {
                result.skipped.push(SkippedChat {
                    index,
                    source_id,
                    title,
                    reason: ImportSkipReason::InvalidChat,
                    message,
                });
                continue;
            }
        };
        let (source_id, title) = (raw.source_id.clone(), raw.title.clone());
        let skipped = |reason, message: String| SkippedChat {
            index,
            source_id: source_id.clone(),
            title: title.clone(),
            reason,
            message,
        };
        if !member {
            result.skipped.push(skipped(
                ImportSkipReason::MembershipEnded,
                "the caller's membership ended during the import".into(),
            ));
            continue;
        }
        let built = match tree::build(raw, source, chrono::Utc::now()) {
            Ok(built) => built,
            Err(skip) => {
                result.skipped.push(skipped(skip.reason, skip.message));
                continue;
            }
        };
        let count = built.chat.messages.len();
        if count > budget {
            result.skipped.push(skipped(
                ImportSkipReason::LimitReached,
                format!("the import's limit of {IMPORT_MAX_MESSAGES} messages was reached"),
            ));
            continue;
        }
        if !cx.datastore.chat_import_one(grant, &built.chat).await? {
            member = false;
            result.skipped.push(skipped(
                ImportSkipReason::MembershipEnded,
                "the caller's membership ended during the import".into(),
            ));
            continue;
        }
        budget -= count;
        result.imported.push(ImportedChat {
            index,
            source_id,
            chat_id: built.chat.id,
            title: built.chat.title,
            messages: count as u32,
            messages_left_out: built.left_out,
        });
    }
    slog::info!(grant.log(), "chats imported"; "format" => tree::source_name(source),
        "imported" => result.imported.len(), "skipped" => result.skipped.len());
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(role: ChatRole, content: &str, model: Option<&str>) -> ExportMessageRow {
        ExportMessageRow {
            id: Uuid::nil(),
            seq: 1,
            depth: 0,
            parent_message_id: None,
            role,
            content: content.to_string(),
            reasoning: None,
            status: ChatMessageStatus::Complete,
            model_id: None,
            model_name: model.map(str::to_string),
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn markdown_headings_and_verbatim_content() {
        assert_eq!(markdown_title("A\ntitle "), "# A title\n\n");
        assert_eq!(
            markdown_message(&row(ChatRole::User, "**hi**\n\n```\ncode\n```", None)),
            "### User\n\n**hi**\n\n```\ncode\n```\n\n"
        );
        assert_eq!(
            markdown_message(&row(ChatRole::Model, "ok\n", Some("gpt-4o"))),
            "### Assistant (gpt-4o)\n\nok\n\n"
        );
        assert_eq!(
            markdown_message(&row(ChatRole::Model, "ok", None)),
            "### Assistant\n\nok\n\n"
        );
    }

    #[test]
    fn markdown_folds_an_answers_reasoning_before_it() {
        let mut answer = row(ChatRole::Model, "4", None);
        answer.reasoning = Some("2+2 is **4**.\n".into());
        assert_eq!(
            markdown_message(&answer),
            "### Assistant\n\n<details>\n<summary>Reasoning</summary>\n\n2+2 is **4**.\n\n\
             </details>\n\n4\n\n"
        );
        answer.reasoning = Some("a </details> b </DETAILS>".into());
        assert!(
            markdown_message(&answer)
                .contains("\n\na &lt;/details> b &lt;/DETAILS>\n\n</details>\n\n4")
        );
        answer.reasoning = Some(" ".into());
        assert_eq!(markdown_message(&answer), "### Assistant\n\n4\n\n");
    }
}
