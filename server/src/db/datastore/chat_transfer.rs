//! Chat export and import: the paged reads of the exports and
//! the writes of an imported chat. Chats are private to their user: every
//! statement filters by the caller's organization AND user.

use super::Datastore;
use crate::authz::{Grant, on, perm};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus, MembershipStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

db_row! {
    /// A chat as an export writes it (without its messages).
    pub struct ExportChatRow {
        pub id: Uuid = "c.id",
        pub title: String = "c.title",
        pub status: ChatStatus = "c.status",
        pub settings: Option<Value> = "c.settings",
        pub created_at: DateTime<Utc> = "c.created_at",
        pub updated_at: DateTime<Utc> = "c.updated_at",
        pub leaf_id: Option<Uuid> = "c.leaf_id",
    }
}

db_row! {
    /// A message as an export writes it.
    pub struct ExportMessageRow {
        pub id: Uuid = "m.id",
        pub seq: i64 = "m.seq",
        pub depth: i32 = "m.depth",
        pub parent_message_id: Option<Uuid> = "m.parent_message_id",
        pub role: ChatRole = "m.role",
        pub content: String = "m.content",
        /// An answer's reasoning, apart from its content.
        pub reasoning: Option<String> = "m.reasoning",
        pub status: ChatMessageStatus = "m.status",
        pub model_id: Option<Uuid> = "m.model_id",
        // This service's model, else the name an imported message kept.
        pub model_name: Option<String> = "COALESCE(mo.name, m.metadata->>'model')",
        pub created_at: DateTime<Utc> = "m.created_at",
    }
}

/// A chat to store, with its tree worked out (see
/// `app::chat_transfer::tree`).
pub struct NewImportedChat {
    pub id: Uuid,
    pub title: String,
    pub status: ChatStatus,
    pub settings: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The active path's last message (one of `messages`).
    pub leaf_id: Option<Uuid>,
    /// How many messages have no parent.
    pub roots: i32,
    /// Parents before their children.
    pub messages: Vec<NewImportedMessage>,
}

/// A message of an imported chat, with its tree columns.
pub struct NewImportedMessage {
    pub id: Uuid,
    pub parent_id: Option<Uuid>,
    pub role: ChatRole,
    pub content: String,
    /// An answer's reasoning (bounded by the import), apart from its
    /// content.
    pub reasoning: Option<String>,
    pub status: ChatMessageStatus,
    /// Kept when it is one of this service's models.
    pub model_id: Option<Uuid>,
    /// Resolves `model_id` when it is this service's model's name.
    pub model_name: Option<String>,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
    pub depth: i32,
    pub sibling_index: i32,
    pub children: i32,
    pub on_path: bool,
    pub selected_at: DateTime<Utc>,
}

/// Messages inserted per statement at most.
const INSERT_BATCH_ROWS: usize = 1_000;
/// Bytes of content and reasoning inserted per statement at most (a batch
/// holds at least one message).
const INSERT_BATCH_BYTES: usize = 8 * 1024 * 1024;

const EXPORT_CHAT_COLUMNS: &str = ExportChatRow::COLUMNS;
const EXPORT_MESSAGE_COLUMNS: &str = ExportMessageRow::COLUMNS;

impl Datastore {
    /// One of the caller's chats, for its export (`404` otherwise).
    pub async fn chat_export_chat(
        &self,
        grant: &Grant<on::Org, perm::ChatsRead>,
        chat_id: Uuid,
    ) -> Result<ExportChatRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {EXPORT_CHAT_COLUMNS} FROM chats c \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3"
                ),
                &[&grant.org_id(), &grant.user_id(), &chat_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "chat" })?;
        Ok(ExportChatRow::from_row(&row))
    }

    /// The caller's chats in the organization (every state) after `after`
    /// by id, at most `limit`.
    pub async fn chat_export_chats(
        &self,
        grant: &Grant<on::Org, perm::ChatsRead>,
        after: Uuid,
        limit: i64,
    ) -> Result<Vec<ExportChatRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {EXPORT_CHAT_COLUMNS} FROM chats c \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id > $3 \
                     ORDER BY c.id LIMIT $4"
                ),
                &[&grant.org_id(), &grant.user_id(), &after, &limit],
            )
            .await?;
        Ok(rows.iter().map(ExportChatRow::from_row).collect())
    }

    /// Messages of one of the caller's chats after `after_seq`, in
    /// creation order (a parent before its children), at most `limit`.
    pub async fn chat_export_messages(
        &self,
        grant: &Grant<on::Org, perm::ChatsRead>,
        chat_id: Uuid,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<ExportMessageRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {EXPORT_MESSAGE_COLUMNS} FROM chat_messages m \
                     JOIN chats c ON c.id = m.chat_id \
                     LEFT JOIN models mo ON mo.id = m.model_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3 \
                       AND m.seq > $4 \
                     ORDER BY m.seq LIMIT $5"
                ),
                &[
                    &grant.org_id(),
                    &grant.user_id(),
                    &chat_id,
                    &after_seq,
                    &limit,
                ],
            )
            .await?;
        Ok(rows.iter().map(ExportMessageRow::from_row).collect())
    }

    /// Messages of the active path of one of the caller's chats deeper
    /// than `after_depth`, first to last, at most `limit`.
    pub async fn chat_export_path(
        &self,
        grant: &Grant<on::Org, perm::ChatsRead>,
        chat_id: Uuid,
        after_depth: i32,
        limit: i64,
    ) -> Result<Vec<ExportMessageRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {EXPORT_MESSAGE_COLUMNS} FROM chat_messages m \
                     JOIN chats c ON c.id = m.chat_id \
                     LEFT JOIN models mo ON mo.id = m.model_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3 \
                       AND m.on_path AND m.depth > $4 \
                     ORDER BY m.depth LIMIT $5"
                ),
                &[
                    &grant.org_id(),
                    &grant.user_id(),
                    &chat_id,
                    &after_depth,
                    &limit,
                ],
            )
            .await?;
        Ok(rows.iter().map(ExportMessageRow::from_row).collect())
    }

    /// Stores one imported chat with its messages (in batches) and its
    /// leaf, in one transaction, as the caller's. `false` (nothing
    /// written) when the caller is no longer an active member of the
    /// organization, or its deletion was requested.
    pub async fn chat_import_one(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        chat: &NewImportedChat,
    ) -> Result<bool, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let created = tx
            .query_opt(
                "INSERT INTO chats (id, organization_id, user_id, title, status, settings, \
                     created_at, updated_at, roots) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 \
                 WHERE EXISTS (SELECT 1 FROM memberships ms \
                               JOIN organizations o ON o.id = ms.organization_id \
                               WHERE ms.organization_id = $2 AND ms.user_id = $3 \
                                 AND ms.status = $10 AND o.deletion_requested_at IS NULL) \
                 RETURNING id",
                &[
                    &chat.id,
                    &org_id,
                    &grant.user_id(),
                    &chat.title,
                    &chat.status,
                    &chat.settings,
                    &chat.created_at,
                    &chat.updated_at,
                    &chat.roots,
                    &MembershipStatus::Active,
                ],
            )
            .await?;
        if created.is_none() {
            return Ok(false);
        }
        let mut rest: &[NewImportedMessage] = &chat.messages;
        while !rest.is_empty() {
            let mut n = 0;
            let mut bytes = 0;
            while n < rest.len() && n < INSERT_BATCH_ROWS && (n == 0 || bytes < INSERT_BATCH_BYTES)
            {
                bytes += rest[n].content.len() + rest[n].reasoning.as_ref().map_or(0, String::len);
                n += 1;
            }
            let (batch, later) = rest.split_at(n);
            insert_messages(&tx, org_id, chat.id, batch).await?;
            rest = later;
        }
        tx.execute(
            "UPDATE chats SET leaf_id = $3 WHERE organization_id = $1 AND id = $2",
            &[&org_id, &chat.id, &chat.leaf_id],
        )
        .await?;
        tx.execute(REGROUP_CHAT, &[&org_id, &chat.id]).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Every message of a chat gets its siblings' count and neighbours (see
/// `migrations/V34__chat_tree.sql`), once all are inserted. Params:
/// organization, chat.
const REGROUP_CHAT: &str = "UPDATE chat_messages m SET siblings = s.total, \
         previous_sibling_id = s.prev, next_sibling_id = s.next \
     FROM (SELECT id, count(*) OVER (PARTITION BY parent_message_id) AS total, \
                  lag(id) OVER w AS prev, lead(id) OVER w AS next \
           FROM chat_messages WHERE organization_id = $1 AND chat_id = $2 \
           WINDOW w AS (PARTITION BY parent_message_id ORDER BY sibling_index)) s \
     WHERE m.id = s.id \
       AND (m.siblings, m.previous_sibling_id, m.next_sibling_id) \
           IS DISTINCT FROM (s.total, s.prev, s.next)";

/// One statement inserting `batch` (in its order, so `seq` follows it),
/// each message's model resolved to this service's by id, else by name.
async fn insert_messages(
    tx: &super::Tx<'_>,
    org_id: Uuid,
    chat_id: Uuid,
    batch: &[NewImportedMessage],
) -> Result<(), Error> {
    let ids: Vec<Uuid> = batch.iter().map(|m| m.id).collect();
    let parents: Vec<Option<Uuid>> = batch.iter().map(|m| m.parent_id).collect();
    let roles: Vec<&str> = batch.iter().map(|m| m.role.as_str()).collect();
    let contents: Vec<&str> = batch.iter().map(|m| m.content.as_str()).collect();
    let reasoning: Vec<Option<&str>> = batch.iter().map(|m| m.reasoning.as_deref()).collect();
    let statuses: Vec<&str> = batch.iter().map(|m| m.status.as_str()).collect();
    let model_ids: Vec<Option<Uuid>> = batch.iter().map(|m| m.model_id).collect();
    let model_names: Vec<Option<&str>> = batch.iter().map(|m| m.model_name.as_deref()).collect();
    let metadata: Vec<&Value> = batch.iter().map(|m| &m.metadata).collect();
    let created: Vec<DateTime<Utc>> = batch.iter().map(|m| m.created_at).collect();
    let depths: Vec<i32> = batch.iter().map(|m| m.depth).collect();
    let positions: Vec<i32> = batch.iter().map(|m| m.sibling_index).collect();
    let children: Vec<i32> = batch.iter().map(|m| m.children).collect();
    let on_path: Vec<bool> = batch.iter().map(|m| m.on_path).collect();
    let selected: Vec<DateTime<Utc>> = batch.iter().map(|m| m.selected_at).collect();
    tx.execute(
        "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, reasoning, \
             parent_message_id, model_id, metadata, status, created_at, depth, sibling_index, \
             siblings, children, on_path, selected_at) \
         SELECT u.id, $1, $2, u.role, u.content, u.reasoning, u.parent, \
             COALESCE(by_id.id, by_name.id), u.metadata, u.status, u.created_at, u.depth, \
             u.sibling_index, u.sibling_index, u.children, u.on_path, u.selected_at \
         FROM unnest($3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::uuid[], \
                     $9::text[], $10::jsonb[], $11::timestamptz[], $12::int4[], $13::int4[], \
                     $14::int4[], $15::bool[], $16::timestamptz[], $17::text[]) \
              WITH ORDINALITY AS u(id, parent, role, content, status, model_id, model_name, \
                                   metadata, created_at, depth, sibling_index, children, \
                                   on_path, selected_at, reasoning, n) \
         LEFT JOIN models by_id ON by_id.id = u.model_id \
         LEFT JOIN models by_name ON by_name.name = u.model_name \
         ORDER BY u.n",
        &[
            &org_id,
            &chat_id,
            &ids,
            &parents,
            &roles,
            &contents,
            &statuses,
            &model_ids,
            &model_names,
            &metadata,
            &created,
            &depths,
            &positions,
            &children,
            &on_path,
            &selected,
            &reasoning,
        ],
    )
    .await?;
    Ok(())
}
