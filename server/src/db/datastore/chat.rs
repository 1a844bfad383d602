//! Chat sessions, their messages, the numbered events of streamed answers
//! and WebSocket tickets. A chat is private to its user: every query of a
//! chat or of its messages filters by the caller's organization AND user.

use super::audit;
use super::chat_folders::{ChatFilter, ChatPlacement};
use super::{Datastore, Page};
use crate::audit::Event;
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::sync::LazyLock;
use uuid::Uuid;

db_row! {
    pub struct ChatRow {
        pub id: Uuid = "id",
        pub org_id: Uuid = "organization_id",
        pub user_id: Uuid = "user_id",
        pub title: String = "title",
        pub status: ChatStatus = "status",
        pub settings: Option<Value> = "settings",
        pub input_tokens: i64 = "input_tokens",
        pub output_tokens: i64 = "output_tokens",
        pub cached_tokens: i64 = "cached_tokens",
        pub created_at: DateTime<Utc> = "created_at",
        pub updated_at: DateTime<Utc> = "updated_at",
        pub pinned_at: Option<DateTime<Utc>> = "pinned_at",
        pub folder_id: Option<Uuid> = "folder_id",
    }
}

const CHAT_COLUMNS: &str = ChatRow::COLUMNS;

db_row! {
    /// A message of a chat's active path, with its place among its
    /// siblings (read by [`PATH_SQL`]).
    pub struct ChatMessageRow {
        pub id: Uuid = "m.id",
        pub role: ChatRole = "m.role",
        pub content: String = "m.content",
        pub parent_message_id: Option<Uuid> = "m.parent_message_id",
        pub model_id: Option<Uuid> = "m.model_id",
        pub agent_id: Option<Uuid> = "m.agent_id",
        pub prompt_data: Option<Value> = "m.prompt_data",
        pub metadata: Value = "m.metadata",
        pub reasoning: Option<String> = "m.reasoning",
        pub status: ChatMessageStatus = "m.status",
        pub created_at: DateTime<Utc> = "m.created_at",
        /// Its place on the path (0: the root); the path is ordered by it.
        pub depth: i32 = "m.depth",
        pub sibling_index: i32 = "m.sibling_index",
        pub sibling_count: i32 = "m.siblings",
        pub previous_sibling_id: Option<Uuid> = "m.previous_sibling_id",
        pub next_sibling_id: Option<Uuid> = "m.next_sibling_id",
    }
}

db_row! {
    /// The caller's rating of one message of a chat (read by
    /// [`PATH_FEEDBACK_SQL`]).
    pub struct PathFeedbackRow {
        pub message_id: Uuid = "f.chat_message_id",
        pub rating: String = "f.rating",
        pub comment: Option<String> = "f.comment",
        pub tags: Vec<String> = "f.tags",
        pub created_at: DateTime<Utc> = "f.created_at",
        pub updated_at: DateTime<Utc> = "f.updated_at",
    }
}

/// The active path of one of the caller's chats: one range of the path
/// index (`on_path`, one message per depth), each row already carrying its
/// place among its siblings. Params: organization, user, chat.
///
/// Lean on purpose, since a long path's rows are most of a chat read's
/// time: unordered ([`Datastore::chat_read`] puts it root first by `depth`,
/// unique on the path; an `ORDER BY` made PostgreSQL sort 750 kB of rows
/// for a 1,000-message path), without the chat's id (known) and without
/// the caller's ratings, which [`PATH_FEEDBACK_SQL`] reads beside it in the
/// same round trip: sending each column of each row costs PostgreSQL about
/// as much as finding the row, and the five feedback columns, empty on
/// almost every row, were a fifth of the statement.
static PATH_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {cols} FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
         WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3 \
           AND m.chat_id = $3 AND m.on_path",
        cols = ChatMessageRow::COLUMNS
    )
});

/// The caller's ratings of the messages of one chat (every branch; the
/// path's are kept): the feedback's `(user_id, chat_id)` index. Params:
/// organization, user, chat.
static PATH_FEEDBACK_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {cols} FROM message_feedback f \
         WHERE f.user_id = $2 AND f.chat_id = $3 AND f.organization_id = $1",
        cols = PathFeedbackRow::COLUMNS
    )
});

/// The statement [`Datastore::chat_read`] reads a chat's active path with
/// (params: organization, user, chat), for benchmarks and query plans.
pub fn active_path_sql() -> &'static str {
    PATH_SQL.as_str()
}

/// The statement [`Datastore::chat_read`] reads the caller's ratings of a
/// chat's messages with, beside the path (same parameters).
pub fn active_path_feedback_sql() -> &'static str {
    PATH_FEEDBACK_SQL.as_str()
}

/// One of the caller's chats as [`Datastore::chat_read`] reads it.
pub struct ChatRead {
    pub chat: ChatRow,
    /// The active path, root first.
    pub path: Vec<ChatMessageRow>,
    /// The caller's ratings of the chat's messages (any branch).
    pub feedback: Vec<PathFeedbackRow>,
    pub files: Vec<ChatFileRow>,
}

db_row! {
    /// One message of a chat, as edit, regenerate and switch find it.
    pub struct ChatNodeRow {
        pub id: Uuid = "m.id",
        pub chat_id: Uuid = "m.chat_id",
        pub role: ChatRole = "m.role",
        pub content: String = "m.content",
        pub parent_message_id: Option<Uuid> = "m.parent_message_id",
        pub depth: i32 = "m.depth",
        pub model_id: Option<Uuid> = "m.model_id",
        pub agent_id: Option<Uuid> = "m.agent_id",
        pub metadata: Value = "m.metadata",
    }
}

/// Where a new exchange goes in the chat's tree.
#[derive(Clone, Copy, Debug)]
pub enum Placement {
    /// A new question after the chat's active leaf (`send_message`).
    Leaf,
    /// A new version of this question (a sibling of it), answered.
    Edit(Uuid),
    /// Another answer (a sibling of this answer) to the same question.
    Regenerate(Uuid),
}

/// Moves a chat's active path to end at `$3` (NULL: before the first
/// message), first step: off the path goes every message below the
/// deepest path message that is `$3` or an ancestor of it. `up` walks from
/// `$3` up to the path. Params: organization, chat, message.
const PATH_CUT: &str = "WITH RECURSIVE up AS ( \
         SELECT id, parent_message_id, on_path, depth FROM chat_messages \
         WHERE organization_id = $1 AND chat_id = $2 AND id = $3 \
         UNION ALL \
         SELECT p.id, p.parent_message_id, p.on_path, p.depth \
         FROM chat_messages p JOIN up ON p.id = up.parent_message_id \
         WHERE p.chat_id = $2 AND NOT up.on_path) \
     UPDATE chat_messages SET on_path = false \
     WHERE organization_id = $1 AND chat_id = $2 AND on_path \
       AND depth > COALESCE((SELECT max(depth) FROM up WHERE on_path), -1)";

/// Second step: `$3` and its ancestors that were off the path join it.
const PATH_JOIN: &str = "WITH RECURSIVE up AS ( \
         SELECT id, parent_message_id, on_path FROM chat_messages \
         WHERE organization_id = $1 AND chat_id = $2 AND id = $3 \
         UNION ALL \
         SELECT p.id, p.parent_message_id, p.on_path \
         FROM chat_messages p JOIN up ON p.id = up.parent_message_id \
         WHERE p.chat_id = $2 AND NOT up.on_path) \
     UPDATE chat_messages m SET on_path = true, selected_at = now() \
     FROM up WHERE m.id = up.id AND NOT up.on_path";

/// Switching: from `$3` (on the path now) down through the most recently
/// selected child at each level to a leaf, all joining the path; the chat's
/// leaf set to the deepest. Params: organization, chat, message.
const PATH_DESCEND: &str = "WITH RECURSIVE down AS ( \
         SELECT m.id, m.depth FROM chat_messages m \
         WHERE m.organization_id = $1 AND m.chat_id = $2 AND m.id = $3 \
         UNION ALL \
         SELECT k.id, k.depth FROM down CROSS JOIN LATERAL ( \
             SELECT c.id, c.depth FROM chat_messages c \
             WHERE c.chat_id = $2 AND c.parent_message_id = down.id \
             ORDER BY c.selected_at DESC, c.sibling_index DESC LIMIT 1) k), \
     marked AS ( \
         UPDATE chat_messages m SET on_path = true, selected_at = now() \
         FROM down WHERE m.id = down.id RETURNING m.id, m.depth) \
     UPDATE chats SET leaf_id = (SELECT id FROM marked ORDER BY depth DESC LIMIT 1) \
     WHERE organization_id = $1 AND id = $2 RETURNING leaf_id";

/// A new message under `$6` (NULL: a first message), on the path, the
/// last of its siblings (their counts and neighbours: [`REGROUP`]). Params:
/// id, organization, chat, role, content, parent, model, agent, metadata,
/// status.
const INSERT_NODE: &str = "INSERT INTO chat_messages (id, organization_id, chat_id, role, \
         content, parent_message_id, model_id, agent_id, metadata, status, depth, \
         sibling_index, siblings, on_path) \
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE(p.depth + 1, 0), \
         COALESCE(p.children, c.roots) + 1, COALESCE(p.children, c.roots) + 1, true \
     FROM chats c LEFT JOIN chat_messages p ON p.id = $6 AND p.chat_id = c.id \
     WHERE c.id = $3 AND c.organization_id = $2";

/// Counts a new child of `$3` (no-op for NULL). Params: organization,
/// chat, parent.
const COUNT_CHILD: &str = "UPDATE chat_messages SET children = children + 1 \
     WHERE organization_id = $1 AND chat_id = $2 AND id = $3";

/// The children of `$3` (NULL: the first messages) get their count and
/// neighbours again (after one was added: a handful of rows, by the
/// children index). Params: organization, chat, parent.
pub(crate) const REGROUP: &str = "WITH g AS ( \
         SELECT id, count(*) OVER () AS n, lag(id) OVER w AS prev, lead(id) OVER w AS next \
         FROM chat_messages \
         WHERE organization_id = $1 AND chat_id = $2 \
           AND (parent_message_id = $3 OR ($3::uuid IS NULL AND parent_message_id IS NULL)) \
         WINDOW w AS (ORDER BY sibling_index)) \
     UPDATE chat_messages m SET siblings = g.n, previous_sibling_id = g.prev, \
         next_sibling_id = g.next \
     FROM g WHERE m.id = g.id \
       AND (m.siblings, m.previous_sibling_id, m.next_sibling_id) \
           IS DISTINCT FROM (g.n, g.prev, g.next)";

/// The chat's new leaf, and one more first message when `$4`. Params:
/// organization, chat, leaf, whether a first message was added.
const SET_LEAF: &str = "UPDATE chats SET leaf_id = $3, \
         roots = roots + CASE WHEN $4 THEN 1 ELSE 0 END \
     WHERE organization_id = $1 AND id = $2";

db_row! {
    /// A message of a chat's history, as an answer sends it.
    pub struct ChatHistoryRow {
        pub id: Uuid = "h.id",
        pub role: ChatRole = "h.role",
        pub content: String = "h.content",
        /// A question's uploads (its `metadata.upload_ids`), whose images
        /// and PDFs are sent again with it.
        pub upload_ids: Option<Value> = "h.upload_ids",
    }
}

/// The most recent part of a chat's active path down to depth `$5` within
/// a bound (see `HistoryBound`; the deepest message always), oldest first,
/// newest first by the path index. Params: organization, chat, rows,
/// tokens, depth.
static HISTORY_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {cols} FROM ( \
         SELECT id, role, content, depth, metadata -> 'upload_ids' AS upload_ids, \
             sum({tokens}) OVER w AS running, row_number() OVER w AS n \
         FROM chat_messages \
         WHERE organization_id = $1 AND chat_id = $2 AND on_path AND depth <= $5 \
         WINDOW w AS (ORDER BY depth DESC) \
         ORDER BY depth DESC LIMIT $3) h \
     WHERE h.n = 1 OR h.running <= $4 \
     ORDER BY h.depth",
        cols = ChatHistoryRow::COLUMNS,
        tokens = super::conversations::ROW_TOKENS,
    )
});

db_row! {
    /// An upload of a chat (or named by `send_message`).
    pub struct ChatFileRow {
        pub id: Uuid = "id",
        pub message_id: Uuid = "message_id",
        pub filename: String = "filename",
        pub content_type: String = "content_type",
        pub file_size: i64 = "file_size",
        pub storage_key: String = "storage_key",
        pub extracted_text: Option<String> = "extracted_text",
    }
}

const FILE_COLUMNS: &str = ChatFileRow::COLUMNS;

/// What `send_message`, edit and regenerate store before the answer
/// starts.
pub struct NewExchange<'a> {
    /// `None`: a new chat titled `new_title` (with [`Placement::Leaf`]).
    pub chat_id: Option<Uuid>,
    pub placement: Placement,
    pub new_title: &'a str,
    pub new_settings: Option<Value>,
    /// The new question (unused by [`Placement::Regenerate`]).
    pub content: &'a str,
    pub model_id: Uuid,
    pub agent_id: Option<Uuid>,
    pub metadata: Value,
    pub upload_ids: &'a [Uuid],
    pub daily_limit: u32,
    pub user_message_id: Uuid,
    pub answer_id: Uuid,
    /// What is read of the history.
    pub history: super::conversations::HistoryBound,
}

/// The end of an answer.
pub struct FinishedAnswer<'a> {
    pub chat_id: Uuid,
    pub id: Uuid,
    pub content: &'a str,
    /// The model's reasoning, kept apart from the content.
    pub reasoning: Option<&'a str>,
    pub status: ChatMessageStatus,
    pub error_code: Option<&'a str>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    /// Of the output tokens, those spent reasoning.
    pub reasoning_tokens: i64,
    pub prompt_data: Option<Value>,
    /// Which model and deployment produced which part (kept in the
    /// message's `metadata.route` when not empty).
    pub route: &'a [workspace_api::chat::AnswerRoute],
}

/// The NOTIFY channel announcing new stream events (`<message_id>:<seq>`)
/// of chat and conversation answers (see `streams.rs`).
pub const STREAM_CHANNEL: &str = "chat_stream";
/// The NOTIFY channel asking the generating instance to stop an answer
/// (chat or conversation; the payload is its id).
pub const STOP_CHANNEL: &str = "chat_stop";
/// The NOTIFY channel of WebSocket notices (`<org_id>:<user_id>:<json>`).
pub const LIVE_CHANNEL: &str = "chat_live";

/// Where a chat answer belongs (see `chat_answer_owners`).
pub struct AnswerOwner {
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub chat_id: Uuid,
    pub message_id: Uuid,
}

impl Datastore {
    pub async fn chat_create(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        title: &str,
        status: ChatStatus,
        settings: Option<Value>,
        placement: ChatPlacement,
    ) -> Result<ChatRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO chats (id, organization_id, user_id, title, status, settings, \
                         pinned_at, folder_id) \
                     VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::bool THEN now() END, $8) \
                     RETURNING {CHAT_COLUMNS}"
                ),
                &[
                    &Uuid::new_v4(),
                    &grant.org_id(),
                    &grant.user_id(),
                    &title,
                    &status,
                    &settings,
                    &placement.pinned,
                    &placement.folder_id,
                ],
            )
            .await
            .map_err(super::chat_folders::folder_not_found)?;
        let row = ChatRow::from_row(&row);
        // Chats are private: ids only, never a title.
        let event = Event::org(grant.org_id(), "chat.create").target("chat", row.id);
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// One of the caller's chats.
    pub async fn chat_get(&self, access: &OrgAccess, id: Uuid) -> Result<ChatRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {CHAT_COLUMNS} FROM chats \
                     WHERE organization_id = $1 AND user_id = $2 AND id = $3"
                ),
                &[&access.org_id(), &access.user_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "chat" })?;
        Ok(ChatRow::from_row(&row))
    }

    /// The caller's chats, in one state or (`None`) active and archived:
    /// pinned ones first (most recently pinned first), then the others,
    /// most recently updated first.
    pub async fn chat_list(
        &self,
        access: &OrgAccess,
        filter: ChatFilter,
        page: Page,
    ) -> Result<Vec<ChatRow>, Error> {
        let conn = self.conn().await?;
        // In the order of chats_owner_pinned_idx.
        let rows = conn
            .query(
                &format!(
                    "SELECT {CHAT_COLUMNS} FROM chats \
                     WHERE organization_id = $1 AND user_id = $2 \
                       AND CASE WHEN $3::text IS NULL THEN status <> $6 \
                                ELSE status = $3::text END \
                       AND ($7::uuid IS NULL OR folder_id = $7) \
                       AND ($8::bool IS NULL OR (pinned_at IS NOT NULL) = $8) \
                     ORDER BY pinned_at DESC NULLS LAST, updated_at DESC, id LIMIT $4 OFFSET $5"
                ),
                &[
                    &access.org_id(),
                    &access.user_id(),
                    &filter.status,
                    &page.limit,
                    &page.offset,
                    &ChatStatus::Deleted,
                    &filter.folder_id,
                    &filter.pinned,
                ],
            )
            .await?;
        Ok(rows.iter().map(ChatRow::from_row).collect())
    }

    /// Changes the given fields of one of the caller's chats. `updated_at`
    /// moves unless only the placement changes (organizing a chat does not
    /// make it recent).
    pub async fn chat_update(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        id: Uuid,
        title: Option<&str>,
        status: Option<ChatStatus>,
        settings: Option<Value>,
        placement: ChatPlacement,
    ) -> Result<ChatRow, Error> {
        let placing = placement.pinned.is_some() || placement.folder_id.is_some();
        let touch = title.is_some() || status.is_some() || settings.is_some() || !placing;
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "UPDATE chats SET title = COALESCE($4, title), \
                         status = COALESCE($5::text, status), \
                         settings = COALESCE($6, settings), \
                         pinned_at = CASE WHEN $7::bool IS NULL THEN pinned_at \
                                          WHEN $7::bool THEN COALESCE(pinned_at, now()) END, \
                         folder_id = COALESCE($8, folder_id), \
                         updated_at = CASE WHEN $9::bool THEN now() ELSE updated_at END \
                     WHERE organization_id = $1 AND user_id = $2 AND id = $3 \
                     RETURNING {CHAT_COLUMNS}"
                ),
                &[
                    &grant.org_id(),
                    &grant.user_id(),
                    &id,
                    &title,
                    &status,
                    &settings,
                    &placement.pinned,
                    &placement.folder_id,
                    &touch,
                ],
            )
            .await
            .map_err(super::chat_folders::folder_not_found)?
            .ok_or(Error::NotFound { what: "chat" })?;
        Ok(ChatRow::from_row(&row))
    }

    /// Deletes those of `ids` that are the caller's chats, with their
    /// messages, stream events (cascade) and the caller's uploads naming
    /// them, in one transaction.
    /// Returns the deleted ids, the storage keys of their uploads and the
    /// answers that were still streaming.
    pub async fn chat_delete<O: on::Object>(
        &self,
        grant: &Grant<O, perm::ChatsDelete>,
        ids: &[Uuid],
    ) -> Result<(Vec<Uuid>, Vec<String>, Vec<Uuid>), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let streaming: Vec<Uuid> = tx
            .query(
                "SELECT m.id FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                 WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = ANY($3) \
                   AND m.status = $4",
                &[
                    &grant.org_id(),
                    &grant.user_id(),
                    &ids,
                    &ChatMessageStatus::Streaming,
                ],
            )
            .await?
            .iter()
            .map(|r| r.get("id"))
            .collect();
        let deleted: Vec<Uuid> = tx
            .query(
                "DELETE FROM chats WHERE organization_id = $1 AND user_id = $2 AND id = ANY($3) \
                 RETURNING id",
                &[&grant.org_id(), &grant.user_id(), &ids],
            )
            .await?
            .iter()
            .map(|r| r.get("id"))
            .collect();
        let keys: Vec<String> = tx
            .query(
                "DELETE FROM files \
                 WHERE organization_id = $1 AND uploaded_by = $2 AND chat_id = ANY($3) \
                 RETURNING storage_key",
                &[&grant.org_id(), &grant.user_id(), &deleted],
            )
            .await?
            .iter()
            .map(|r| r.get("storage_key"))
            .collect();
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "chat.delete")
                .details(serde_json::json!({"chat_ids": deleted})),
        )
        .await?;
        tx.commit().await?;
        Ok((deleted, keys, streaming))
    }

    /// One of the caller's chats as `GET /api/chat` shows it: the chat,
    /// its active path (root first, with sibling counts and neighbours)
    /// and its uploads, sent together (one round trip).
    pub async fn chat_read(&self, access: &OrgAccess, chat_id: Uuid) -> Result<ChatRead, Error> {
        let conn = self.conn().await?;
        let chat_sql = format!(
            "SELECT {CHAT_COLUMNS} FROM chats \
             WHERE organization_id = $1 AND user_id = $2 AND id = $3"
        );
        let files_sql = format!(
            "SELECT {FILE_COLUMNS} FROM files \
             WHERE organization_id = $1 AND uploaded_by = $2 AND chat_id = $3 \
             ORDER BY created_at, id"
        );
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&access.org_id(), &access.user_id(), &chat_id];
        let [chat, path, feedback, files] = conn
            .pipeline([
                (chat_sql.as_str(), &params),
                (PATH_SQL.as_str(), &params),
                (PATH_FEEDBACK_SQL.as_str(), &params),
                (files_sql.as_str(), &params),
            ])
            .await?;
        let chat = chat
            .first()
            .map(ChatRow::from_row)
            .ok_or(Error::NotFound { what: "chat" })?;
        let mut path: Vec<ChatMessageRow> = path.iter().map(ChatMessageRow::from_row).collect();
        path.sort_unstable_by_key(|m| m.depth);
        Ok(ChatRead {
            chat,
            path,
            feedback: feedback.iter().map(PathFeedbackRow::from_row).collect(),
            files: files.iter().map(ChatFileRow::from_row).collect(),
        })
    }

    /// One message of one of the caller's chats.
    pub async fn chat_node(&self, access: &OrgAccess, id: Uuid) -> Result<ChatNodeRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {} FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND m.id = $3 \
                       AND m.organization_id = $1",
                    ChatNodeRow::COLUMNS
                ),
                &[&access.org_id(), &access.user_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "message" })?;
        Ok(ChatNodeRow::from_row(&row))
    }

    /// Makes `message_id` part of the active path of one of the caller's
    /// chats, the path going on below it through the most recently
    /// selected child at each level; returns the new leaf.
    pub async fn chat_switch(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        chat_id: Uuid,
        message_id: Uuid,
    ) -> Result<Uuid, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // The chat's lock orders this with sends, edits and other switches.
        let [chat, node] = tx
            .pipeline([
                (
                    "SELECT id FROM chats WHERE organization_id = $1 AND user_id = $2 AND id = $3 \
                     FOR UPDATE",
                    &[&org_id, &grant.user_id(), &chat_id],
                ),
                (
                    "SELECT id FROM chat_messages \
                     WHERE organization_id = $1 AND chat_id = $2 AND id = $3",
                    &[&org_id, &chat_id, &message_id],
                ),
            ])
            .await?;
        if chat.is_empty() {
            return Err(Error::NotFound { what: "chat" });
        }
        if node.is_empty() {
            return Err(Error::NotFound { what: "message" });
        }
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&org_id, &chat_id, &message_id];
        let [_, _, leaf] = tx
            .pipeline([
                (PATH_CUT, &params),
                (PATH_JOIN, &params),
                (PATH_DESCEND, &params),
            ])
            .await?;
        let leaf: Option<Uuid> = leaf.first().and_then(|r| r.get("leaf_id"));
        tx.commit().await?;
        leaf.ok_or(Error::NotFound { what: "message" })
    }

    /// The caller's uploads with this `chat_id`, oldest first (another
    /// member's upload naming the chat is not the chat's).
    pub async fn chat_uploads(
        &self,
        access: &OrgAccess,
        chat_id: Uuid,
    ) -> Result<Vec<ChatFileRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM files \
                     WHERE organization_id = $1 AND uploaded_by = $2 AND chat_id = $3 \
                     ORDER BY created_at, id"
                ),
                &[&access.org_id(), &access.user_id(), &chat_id],
            )
            .await?;
        Ok(rows.iter().map(ChatFileRow::from_row).collect())
    }

    /// The caller's uploads among `ids` in the organization; `404` when one
    /// is not.
    pub async fn chat_files_of_caller(
        &self,
        access: &OrgAccess,
        ids: &[Uuid],
    ) -> Result<Vec<ChatFileRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM files \
                     WHERE organization_id = $1 AND uploaded_by = $2 AND id = ANY($3) \
                     ORDER BY array_position($3, id)"
                ),
                &[&access.org_id(), &access.user_id(), &ids],
            )
            .await?;
        if rows.len() != ids.len() {
            return Err(Error::NotFound { what: "upload" });
        }
        Ok(rows.iter().map(ChatFileRow::from_row).collect())
    }

    /// Stores the question and the empty `streaming` answer where
    /// `new.placement` says, in one transaction that first counts the
    /// message against the daily limit and creates the chat when none is
    /// given (or locks it: exchanges and switches of one chat are ordered).
    /// The new messages end the chat's active path.
    ///
    /// Returns the chat, whether it is new, the question's id (a
    /// regenerated answer's is the existing question) and the history the
    /// model is sent before the question (oldest first): the most recent
    /// part of the active path above the question within `new.history`.
    pub async fn chat_begin_exchange(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        new: &NewExchange<'_>,
    ) -> Result<(ChatRow, bool, Uuid, Vec<ChatHistoryRow>), Error> {
        let org_id = grant.org_id();
        let user_id = grant.user_id();
        let limit = super::conversations::daily_limit_param(new.daily_limit);
        let chat_id = new.chat_id.unwrap_or_else(Uuid::new_v4);
        let update_sql = format!(
            "UPDATE chats SET updated_at = now() \
             WHERE organization_id = $1 AND user_id = $2 AND id = $3 \
             RETURNING {CHAT_COLUMNS}, leaf_id"
        );
        let insert_sql = format!(
            "INSERT INTO chats (id, organization_id, user_id, title, settings) \
             VALUES ($1, $2, $3, $4, $5) RETURNING {CHAT_COLUMNS}, leaf_id"
        );
        let update_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&org_id, &user_id, &chat_id];
        let insert_params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] = [
            &chat_id,
            &org_id,
            &user_id,
            &new.new_title,
            &new.new_settings,
        ];
        let chat_statement: (&str, super::Params<'_>) = match new.chat_id {
            Some(_) => (&update_sql, &update_params),
            None => (&insert_sql, &insert_params),
        };
        let target = match new.placement {
            Placement::Leaf => None,
            Placement::Edit(id) | Placement::Regenerate(id) => Some(id),
        };
        let node_sql = format!(
            "SELECT {} FROM chat_messages m \
             WHERE m.organization_id = $1 AND m.chat_id = $2 AND m.id = $3",
            ChatNodeRow::COLUMNS
        );
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // Sent together: the count, the chat (created, or locked and so
        // proven the caller's), the message edited or regenerated.
        let [counted, chat, node] = tx
            .pipeline([
                (
                    super::conversations::COUNT_DAILY_MESSAGE,
                    &[&org_id, &limit],
                ),
                chat_statement,
                (node_sql.as_str(), &[&org_id, &chat_id, &target]),
            ])
            .await?;
        super::conversations::daily_message_counted(&counted, new.daily_limit)?;
        let chat_row = chat.first().ok_or(Error::NotFound { what: "chat" })?;
        let leaf: Option<Uuid> = chat_row.get("leaf_id");
        let chat = ChatRow::from_row(chat_row);
        let created = new.chat_id.is_none();
        let node = node.first().map(ChatNodeRow::from_row);
        // The question's parent, or the existing question; and the deepest
        // message of the history.
        let (parent, question, max_depth) = match (new.placement, &node) {
            (Placement::Leaf, _) => (leaf, None, i32::MAX),
            (Placement::Edit(_), Some(n)) if n.role == ChatRole::User => {
                (n.parent_message_id, None, n.depth - 1)
            }
            (Placement::Regenerate(_), Some(n)) if n.role == ChatRole::Model => {
                let question = n
                    .parent_message_id
                    .ok_or(Error::NotFound { what: "message" })?;
                (None, Some(question), n.depth - 2)
            }
            (Placement::Edit(_), Some(_)) => {
                return Err(Error::invalid(
                    "not_a_question",
                    "only a question (a USER message) can be edited",
                ));
            }
            (Placement::Regenerate(_), Some(_)) => {
                return Err(Error::invalid(
                    "not_an_answer",
                    "only an answer (a MODEL message) can be regenerated",
                ));
            }
            (_, None) => return Err(Error::NotFound { what: "message" }),
        };
        // Edit and regenerate: the path first ends where the new message
        // goes (the edited question's parent, the regenerated answer's
        // question).
        let history_params_depth = max_depth;
        let history = if matches!(new.placement, Placement::Leaf) {
            tx.query(
                &HISTORY_SQL,
                &[
                    &org_id,
                    &chat_id,
                    &new.history.rows,
                    &new.history.tokens,
                    &history_params_depth,
                ],
            )
            .await?
        } else {
            let end = question.or(parent);
            let path_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&org_id, &chat_id, &end];
            let [_, _, history] = tx
                .pipeline([
                    (PATH_CUT, &path_params),
                    (PATH_JOIN, &path_params),
                    (
                        HISTORY_SQL.as_str(),
                        &[
                            &org_id,
                            &chat_id,
                            &new.history.rows,
                            &new.history.tokens,
                            &history_params_depth,
                        ],
                    ),
                ])
                .await?;
            history
        };
        let history: Vec<ChatHistoryRow> = history.iter().map(ChatHistoryRow::from_row).collect();
        let first_message = question.is_none() && parent.is_none();
        let question_id = question.unwrap_or(new.user_message_id);
        let streaming = ChatMessageStatus::Streaming;
        let complete = ChatMessageStatus::Complete;
        let empty = "";
        let answer: [&(dyn tokio_postgres::types::ToSql + Sync); 10] = [
            &new.answer_id,
            &org_id,
            &chat_id,
            &ChatRole::Model,
            &empty,
            &question_id,
            &new.model_id,
            &new.agent_id,
            &new.metadata,
            &streaming,
        ];
        let leaf_params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&org_id, &chat_id, &new.answer_id, &first_message];
        match question {
            Some(_) => {
                tx.pipeline([
                    (INSERT_NODE, &answer),
                    (COUNT_CHILD, &[&org_id, &chat_id, &question_id]),
                    (REGROUP, &[&org_id, &chat_id, &question_id]),
                    (SET_LEAF, &leaf_params),
                ])
                .await?;
            }
            None => {
                tx.pipeline([
                    // Uploads named without a chat join this one (and go
                    // with it).
                    (
                        "UPDATE files SET chat_id = $3 \
                         WHERE organization_id = $1 AND uploaded_by = $2 AND id = ANY($4) \
                           AND chat_id IS NULL",
                        &[&org_id, &user_id, &chat_id, &new.upload_ids],
                    ),
                    (
                        INSERT_NODE,
                        &[
                            &new.user_message_id,
                            &org_id,
                            &chat_id,
                            &ChatRole::User,
                            &new.content,
                            &parent,
                            &new.model_id,
                            &new.agent_id,
                            &new.metadata,
                            &complete,
                        ],
                    ),
                    (COUNT_CHILD, &[&org_id, &chat_id, &parent]),
                    (REGROUP, &[&org_id, &chat_id, &parent]),
                    (INSERT_NODE, &answer),
                    (COUNT_CHILD, &[&org_id, &chat_id, &question_id]),
                    (SET_LEAF, &leaf_params),
                ])
                .await?;
            }
        }
        tx.commit().await?;
        Ok((chat, created, question_id, history))
    }

    /// Saves the text of a streaming answer so far.
    pub async fn chat_answer_save_partial(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        id: Uuid,
        content: &str,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE chat_messages SET content = $3 \
             WHERE organization_id = $1 AND id = $2 AND status = $4",
            &[
                &grant.org_id(),
                &id,
                &content,
                &ChatMessageStatus::Streaming,
            ],
        )
        .await?;
        Ok(())
    }

    /// Stores the end of an answer (unless a sweeper closed it already, see
    /// `stream_sweep`) and adds its usage to the chat.
    pub async fn chat_answer_finish(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        answer: &FinishedAnswer<'_>,
    ) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let usage = serde_json::json!({
            "input_tokens": answer.input_tokens,
            "output_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
            "cached_tokens": answer.cached_tokens,
            "reasoning_tokens": answer.reasoning_tokens,
        });
        let mut extra = serde_json::json!({ "usage": usage });
        if !answer.route.is_empty() {
            extra["route"] = serde_json::json!(answer.route);
        }
        if let Some(code) = answer.error_code {
            extra["error_code"] = Value::String(code.to_string());
        }
        // The chat first, then its message: the order of every writer of
        // a chat's tree (exchanges and switches lock the chat, then change
        // its messages), so that none waits for another in a cycle. Sent
        // together (one round trip), with the `answer.completed` webhook
        // event of a complete answer (queued once per answer, see
        // `webhook_outbox::enqueue`).
        let org_id = grant.org_id();
        let chat_sql = "UPDATE chats SET input_tokens = input_tokens + $3, \
                 output_tokens = output_tokens + $4, cached_tokens = cached_tokens + $5, \
                 updated_at = now() \
             WHERE organization_id = $1 AND id = $2";
        let chat_params: &[&(dyn tokio_postgres::types::ToSql + Sync)] = &[
            &org_id,
            &answer.chat_id,
            &answer.input_tokens,
            &answer.output_tokens,
            &answer.cached_tokens,
        ];
        let message_sql = "UPDATE chat_messages SET content = $3, status = $4, error_code = $5, \
                 metadata = metadata || $6, prompt_data = $7, reasoning = $9 \
             WHERE organization_id = $1 AND id = $2 AND status = $8";
        let message_params: &[&(dyn tokio_postgres::types::ToSql + Sync)] = &[
            &org_id,
            &answer.id,
            &answer.content,
            &answer.status,
            &answer.error_code,
            &extra,
            &answer.prompt_data,
            &ChatMessageStatus::Streaming,
            &answer.reasoning,
        ];
        if answer.status == ChatMessageStatus::Complete {
            let event = serde_json::json!({
                "area": "chat",
                "chat_id": answer.chat_id,
                "message_id": answer.id,
                "user_id": grant.user_id(),
                "usage": usage,
            });
            let key = format!("answer:{}", answer.id);
            let traceparent = crate::telemetry::current_traceparent();
            tx.pipeline([
                (chat_sql, chat_params),
                (message_sql, message_params),
                (
                    super::webhook_outbox::ENQUEUE_SQL,
                    &[&org_id, &"answer.completed", &event, &key, &traceparent],
                ),
            ])
            .await?;
        } else {
            tx.pipeline([(chat_sql, chat_params), (message_sql, message_params)])
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn chat_set_title(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        chat_id: Uuid,
        title: &str,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE chats SET title = $3, updated_at = now() \
             WHERE organization_id = $1 AND id = $2",
            &[&grant.org_id(), &chat_id, &title],
        )
        .await?;
        Ok(())
    }

    /// The chat and state of an answer of one of the caller's chats.
    pub async fn chat_answer_of_caller(
        &self,
        access: &OrgAccess,
        message_id: Uuid,
    ) -> Result<(Uuid, ChatMessageStatus), Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT m.chat_id, m.status FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                 WHERE c.organization_id = $1 AND c.user_id = $2 AND m.id = $3 \
                   AND m.role = $4",
                &[
                    &access.org_id(),
                    &access.user_id(),
                    &message_id,
                    &ChatRole::Model,
                ],
            )
            .await?
            .ok_or(Error::NotFound { what: "message" })?;
        Ok((row.get("chat_id"), row.get("status")))
    }

    /// Deletes expired WebSocket tickets.
    pub async fn chat_ws_tickets_expire(&self) -> Result<u64, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .execute("DELETE FROM chat_ws_tickets WHERE expires_at < now()", &[])
            .await?)
    }

    /// The chats and owners of chat answers (for the live notices of
    /// answers a sweeper closed); answers that no longer exist are left
    /// out.
    pub async fn chat_answer_owners(&self, answer_ids: &[Uuid]) -> Result<Vec<AnswerOwner>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT m.organization_id, c.user_id, m.chat_id, m.id \
                 FROM chat_messages m \
                 JOIN chats c ON c.id = m.chat_id AND c.organization_id = m.organization_id \
                 WHERE m.id = ANY($1)",
                &[&answer_ids],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| AnswerOwner {
                org_id: r.get("organization_id"),
                user_id: r.get("user_id"),
                chat_id: r.get("chat_id"),
                message_id: r.get("id"),
            })
            .collect())
    }

    /// Sends a NOTIFY (to every instance's listener).
    pub async fn notify(&self, channel: &str, payload: &str) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.query("SELECT pg_notify($1, $2)", &[&channel, &payload])
            .await?;
        Ok(())
    }

    /// Stores a WebSocket ticket (its hash) for the caller, valid until
    /// `expires_at`.
    pub async fn chat_ws_ticket_insert(
        &self,
        grant: &Grant<on::Org, perm::ChatsRead>,
        ticket_hash: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO chat_ws_tickets (ticket_hash, organization_id, user_id, expires_at) \
             VALUES ($1, $2, $3, $4)",
            &[&ticket_hash, &grant.org_id(), &grant.user_id(), &expires_at],
        )
        .await?;
        Ok(())
    }

    /// Consumes a ticket: its organization and user when it was valid
    /// (deleted either way, so it works once).
    pub async fn chat_ws_ticket_take(
        &self,
        ticket_hash: &str,
    ) -> Result<Option<(Uuid, Uuid)>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt(
                "DELETE FROM chat_ws_tickets WHERE ticket_hash = $1 \
                 RETURNING organization_id, user_id, expires_at > now() AS fresh",
                &[&ticket_hash],
            )
            .await?
            .filter(|r| r.get::<_, bool>("fresh"))
            .map(|r| (r.get("organization_id"), r.get("user_id"))))
    }
}
