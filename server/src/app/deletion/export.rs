//! `GET /api/users/me/export`: the account's data as one JSON document
//! (`AccountExport`), streamed as it is read.
//!
//! Bound: the writer task reads one page at a time (at most
//! [`MESSAGES_PAGE`] messages, or [`ITEMS_PAGE`] chats, conversations or
//! uploads) and streams it through [`crate::app::doc_stream`], so the
//! server holds at most one page and a few chunks of any export, whatever
//! the account's history. Pages are read by keyset (id, or a message's `seq`), each a
//! short statement on a pooled connection that is returned at once: a
//! slow download holds no connection.
//!
//! The document is written by hand around serde's output of each item,
//! in the field order of `AccountExport`; the test of the export reads it
//! back as that type.

use crate::app::doc_stream::{self, Stop, Writer, json, opened};
use crate::authn::Actor;
use crate::context::ServerContext;
use crate::db::datastore::Datastore;
use crate::error::Error;
use serde::Serialize;
use uuid::Uuid;
use workspace_api::users as api;

/// Messages read per page.
pub const MESSAGES_PAGE: i64 = 50;
/// Chats, conversations or uploads read per page.
pub const ITEMS_PAGE: i64 = 100;

/// The streamed `200 application/json` response.
pub async fn export(
    cx: &ServerContext,
    actor: &Actor,
) -> Result<http::Response<dropshot::Body>, Error> {
    let (profile, memberships) = cx
        .datastore
        .export_profile(actor.user_id)
        .await?
        .ok_or_else(crate::authn::invalid_token)?;
    let head = Head {
        format: "workspace.account-export".to_string(),
        version: 1,
        exported_at: chrono::Utc::now(),
        profile: api::ExportProfile {
            id: profile.id,
            email: profile.email,
            first_name: profile.first_name,
            last_name: profile.last_name,
            created_at: profile.created_at,
            last_active_at: profile.last_active_at,
        },
        memberships: memberships
            .into_iter()
            .map(|m| api::ExportMembership {
                organization_id: m.organization_id,
                organization_name: m.name,
                slug: m.slug,
                is_personal: m.is_personal,
                role_name: m.role_name,
                status: m.status.as_str().to_string(),
                joined_at: m.joined_at,
            })
            .collect(),
        chats: Vec::new(),
    };
    let datastore = cx.datastore.clone();
    let user = actor.user_id;
    let log = cx.log.new(slog::o!("user_id" => user.to_string()));
    // The head, with the `chats` array opened.
    doc_stream::response(
        "application/json",
        "workspace-export.json",
        opened(&head, "chats")?,
        log,
        move |mut out| async move {
            let result = write_rest(&datastore, user, &mut out).await;
            (out, result)
        },
    )
}

/// The document's first fields, in `AccountExport`'s order, with its
/// `chats` (left open).
#[derive(Serialize)]
struct Head {
    format: String,
    version: u32,
    #[serde(serialize_with = "workspace_api::time::serialize")]
    exported_at: chrono::DateTime<chrono::Utc>,
    profile: api::ExportProfile,
    memberships: Vec<api::ExportMembership>,
    chats: Vec<api::ExportChat>,
}

/// Everything after the head: the chats with their messages, the
/// conversations with theirs, the uploads, and the closing brackets.
async fn write_rest(datastore: &Datastore, user: Uuid, out: &mut Writer) -> Result<(), Stop> {
    write_chats(datastore, user, out).await?;
    out.push("],\"conversations\":[");
    write_conversations(datastore, user, out).await?;
    out.push("],\"uploads\":[");
    write_uploads(datastore, user, out).await?;
    out.push("]}");
    out.flush().await
}

async fn write_chats(datastore: &Datastore, user: Uuid, out: &mut Writer) -> Result<(), Stop> {
    let mut after = Uuid::nil();
    let mut first = true;
    loop {
        let chats = datastore.export_chats(user, after, ITEMS_PAGE).await?;
        let Some(last) = chats.last() else {
            return Ok(());
        };
        after = last.id;
        for chat in chats {
            let id = chat.id;
            let head = api::ExportChat {
                id: chat.id,
                organization_id: chat.organization_id,
                title: chat.title,
                status: chat.status.as_str().to_string(),
                created_at: chat.created_at,
                updated_at: chat.updated_at,
                messages: Vec::new(),
            };
            out.item(&mut first, &opened(&head, "messages")?).await?;
            let (mut seq, mut first_message) = (0, true);
            loop {
                let page = datastore
                    .export_chat_messages(user, id, seq, MESSAGES_PAGE)
                    .await?;
                let Some(last) = page.last() else { break };
                seq = last.seq;
                let full = (page.len() as i64) == MESSAGES_PAGE;
                for m in page {
                    let message = api::ExportChatMessage {
                        id: m.id,
                        role: m.role,
                        content: m.content,
                        status: m.status.as_str().to_string(),
                        created_at: m.created_at,
                    };
                    out.item(&mut first_message, &json(&message)?).await?;
                }
                if !full {
                    break;
                }
            }
            out.push("]}");
        }
    }
}

async fn write_conversations(
    datastore: &Datastore,
    user: Uuid,
    out: &mut Writer,
) -> Result<(), Stop> {
    let mut after = Uuid::nil();
    let mut first = true;
    loop {
        let conversations = datastore
            .export_conversations(user, after, ITEMS_PAGE)
            .await?;
        let Some(last) = conversations.last() else {
            return Ok(());
        };
        after = last.id;
        for conversation in conversations {
            let head = api::ExportConversation {
                id: conversation.id,
                organization_id: conversation.organization_id,
                title: conversation.title.clone(),
                is_archived: conversation.is_archived,
                created_at: conversation.created_at,
                updated_at: conversation.updated_at,
                messages: Vec::new(),
            };
            out.item(&mut first, &opened(&head, "messages")?).await?;
            let (mut seq, mut first_message) = (0, true);
            loop {
                let page = datastore
                    .export_conversation_messages(&conversation, user, seq, MESSAGES_PAGE)
                    .await?;
                let Some(last) = page.last() else { break };
                seq = last.seq;
                let full = (page.len() as i64) == MESSAGES_PAGE;
                for m in page {
                    let message = api::ExportConversationMessage {
                        id: m.id,
                        role: m.role.as_str().to_string(),
                        content: m.content,
                        status: m.status,
                        by_me: m.by_me,
                        created_at: m.created_at,
                    };
                    out.item(&mut first_message, &json(&message)?).await?;
                }
                if !full {
                    break;
                }
            }
            out.push("]}");
        }
    }
}

async fn write_uploads(datastore: &Datastore, user: Uuid, out: &mut Writer) -> Result<(), Stop> {
    let mut after = Uuid::nil();
    let mut first = true;
    loop {
        let uploads = datastore.export_uploads(user, after, ITEMS_PAGE).await?;
        let Some(last) = uploads.last() else {
            return Ok(());
        };
        after = last.id;
        for f in uploads {
            let upload = api::ExportUpload {
                id: f.id,
                organization_id: f.organization_id,
                chat_id: f.chat_id,
                filename: f.filename,
                content_type: f.content_type,
                file_size: f.file_size,
                sha256: f.sha256,
                created_at: f.created_at,
            };
            out.item(&mut first, &json(&upload)?).await?;
        }
    }
}
