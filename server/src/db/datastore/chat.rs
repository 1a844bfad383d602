//! Chat sessions, their messages, the numbered events of streamed answers
//! and WebSocket tickets. A chat is private to its user: every query of a
//! chat or of its messages filters by the caller's organization AND user.

use super::chat_folders::{ChatFilter, ChatPlacement};
use super::{Datastore, Page};
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
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
    pub struct ChatMessageRow {
        pub id: Uuid = "m.id",
        pub chat_id: Uuid = "m.chat_id",
        pub role: ChatRole = "m.role",
        pub content: String = "m.content",
        pub parent_message_id: Option<Uuid> = "m.parent_message_id",
        pub model_id: Option<Uuid> = "m.model_id",
        pub agent_id: Option<Uuid> = "m.agent_id",
        pub prompt_data: Option<Value> = "m.prompt_data",
        pub metadata: Value = "m.metadata",
        pub status: ChatMessageStatus = "m.status",
        pub created_at: DateTime<Utc> = "m.created_at",
    }
}

const MESSAGE_COLUMNS: &str = ChatMessageRow::COLUMNS;

db_row! {
    /// A message of a chat's history, as an answer sends it.
    pub struct ChatHistoryRow {
        pub id: Uuid = "h.id",
        pub role: ChatRole = "h.role",
        pub content: String = "h.content",
    }
}

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

/// What `send_message` stores before the answer starts.
pub struct NewExchange<'a> {
    /// `None`: a new chat titled `new_title`.
    pub chat_id: Option<Uuid>,
    pub new_title: &'a str,
    pub new_settings: Option<Value>,
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
    pub status: ChatMessageStatus,
    pub error_code: Option<&'a str>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub prompt_data: Option<Value>,
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
        let conn = self.conn().await?;
        let row = conn
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
        Ok(ChatRow::from_row(&row))
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
        tx.commit().await?;
        Ok((deleted, keys, streaming))
    }

    /// The messages of one of the caller's chats, oldest first.
    pub async fn chat_messages(
        &self,
        access: &OrgAccess,
        chat_id: Uuid,
    ) -> Result<Vec<ChatMessageRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {MESSAGE_COLUMNS} FROM chat_messages m \
                     JOIN chats c ON c.id = m.chat_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3 \
                     ORDER BY m.seq"
                ),
                &[&access.org_id(), &access.user_id(), &chat_id],
            )
            .await?;
        Ok(rows.iter().map(ChatMessageRow::from_row).collect())
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

    /// Stores the user's message and the empty `streaming` answer, in one
    /// transaction that first counts the message against the daily limit
    /// and creates the chat when none is given. Returns the chat, whether
    /// it is new, and the history before the new message (oldest first):
    /// its most recent part within `new.history` (the newest message
    /// always: the new one names it as its parent).
    pub async fn chat_begin_exchange(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        new: &NewExchange<'_>,
    ) -> Result<(ChatRow, bool, Vec<ChatHistoryRow>), Error> {
        let org_id = grant.org_id();
        let user_id = grant.user_id();
        let limit = super::conversations::daily_limit_param(new.daily_limit);
        // Sent together: the count, the chat (created, or touched and so
        // proven the caller's), its history. The writes that need the chat
        // follow only once it is found.
        let chat_id = new.chat_id.unwrap_or_else(Uuid::new_v4);
        let update_sql = format!(
            "UPDATE chats SET updated_at = now() \
             WHERE organization_id = $1 AND user_id = $2 AND id = $3 \
             RETURNING {CHAT_COLUMNS}"
        );
        let insert_sql = format!(
            "INSERT INTO chats (id, organization_id, user_id, title, settings) \
             VALUES ($1, $2, $3, $4, $5) RETURNING {CHAT_COLUMNS}"
        );
        // Newest first by the chat's (chat_id, seq) index, as
        // HISTORY_ORDER (conversations.rs) says.
        let row_tokens = super::conversations::ROW_TOKENS;
        let history_sql = format!(
            "SELECT {HISTORY_COLUMNS} FROM ( \
                 SELECT id, role, content, seq, \
                     sum({row_tokens}) OVER w AS running, row_number() OVER w AS n \
                 FROM chat_messages \
                 WHERE organization_id = $1 AND chat_id = ANY(ARRAY[$2::uuid]) \
                 WINDOW w AS (ORDER BY chat_id DESC, seq DESC) \
                 ORDER BY chat_id DESC, seq DESC LIMIT $3) h \
             WHERE h.n = 1 OR h.running <= $4 \
             ORDER BY h.seq",
            HISTORY_COLUMNS = ChatHistoryRow::COLUMNS,
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
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let [counted, chat, history] = tx
            .pipeline([
                (
                    super::conversations::COUNT_DAILY_MESSAGE,
                    &[&org_id, &limit],
                ),
                chat_statement,
                (
                    history_sql.as_str(),
                    &[&org_id, &chat_id, &new.history.rows, &new.history.tokens],
                ),
            ])
            .await?;
        super::conversations::daily_message_counted(&counted, new.daily_limit)?;
        let chat = chat
            .first()
            .map(ChatRow::from_row)
            .ok_or(Error::NotFound { what: "chat" })?;
        let created = new.chat_id.is_none();
        let history: Vec<ChatHistoryRow> = history.iter().map(ChatHistoryRow::from_row).collect();
        let parent = history.last().map(|m| m.id);
        tx.pipeline([
            // Uploads named without a chat join this one (and go with it).
            (
                "UPDATE files SET chat_id = $3 \
                 WHERE organization_id = $1 AND uploaded_by = $2 AND id = ANY($4) \
                   AND chat_id IS NULL",
                &[&org_id, &user_id, &chat.id, &new.upload_ids],
            ),
            (
                "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, \
                     parent_message_id, model_id, agent_id, metadata) \
                 VALUES ($1, $2, $3, $9, $4, $5, $6, $7, $8)",
                &[
                    &new.user_message_id,
                    &org_id,
                    &chat.id,
                    &new.content,
                    &parent,
                    &new.model_id,
                    &new.agent_id,
                    &new.metadata,
                    &ChatRole::User,
                ],
            ),
            (
                "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, \
                     parent_message_id, model_id, agent_id, metadata, status) \
                 VALUES ($1, $2, $3, $9, '', $4, $5, $6, $7, $8)",
                &[
                    &new.answer_id,
                    &org_id,
                    &chat.id,
                    &new.user_message_id,
                    &new.model_id,
                    &new.agent_id,
                    &new.metadata,
                    &ChatMessageStatus::Streaming,
                    &ChatRole::Model,
                ],
            ),
        ])
        .await?;
        tx.commit().await?;
        Ok((chat, created, history))
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
        });
        let mut extra = serde_json::json!({ "usage": usage });
        if let Some(code) = answer.error_code {
            extra["error_code"] = Value::String(code.to_string());
        }
        tx.execute(
            "UPDATE chat_messages SET content = $3, status = $4, error_code = $5, \
                 metadata = metadata || $6, prompt_data = $7 \
             WHERE organization_id = $1 AND id = $2 AND status = $8",
            &[
                &grant.org_id(),
                &answer.id,
                &answer.content,
                &answer.status,
                &answer.error_code,
                &extra,
                &answer.prompt_data,
                &ChatMessageStatus::Streaming,
            ],
        )
        .await?;
        tx.execute(
            "UPDATE chats SET input_tokens = input_tokens + $3, \
                 output_tokens = output_tokens + $4, cached_tokens = cached_tokens + $5, \
                 updated_at = now() \
             WHERE organization_id = $1 AND id = $2",
            &[
                &grant.org_id(),
                &answer.chat_id,
                &answer.input_tokens,
                &answer.output_tokens,
                &answer.cached_tokens,
            ],
        )
        .await?;
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
