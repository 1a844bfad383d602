//! Share links of chats (issue #35): the active path of one of the
//! caller's chats read for a snapshot, the links stored by the hash of
//! their token, listed and revoked by their owner, and read by anyone
//! holding a token.
//!
//! Reading a chat for a snapshot filters by the caller's organization AND
//! user AND the chat, as every chat query does (see `chat.rs`, which this
//! module does not touch).

use super::{Datastore, Page};
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus, MembershipStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

db_row! {
    /// A message of a chat's active path, with only what a snapshot may
    /// show.
    pub struct PathMessageRow {
        pub role: ChatRole = "m.role",
        pub content: String = "m.content",
        pub status: ChatMessageStatus = "m.status",
        pub created_at: DateTime<Utc> = "m.created_at",
        /// The answering model's name (`models.name`).
        pub model: Option<String> = "mo.name",
    }
}

/// A chat's active path, as read for a snapshot.
pub struct SharePath {
    pub title: String,
    /// The messages on the path and the bytes of their text.
    pub messages: i64,
    pub bytes: i64,
    /// The messages, oldest first; empty when the path is beyond the
    /// bounds it was read with.
    pub rows: Vec<PathMessageRow>,
}

db_row! {
    /// A share link as its owner sees it (no token hash, no snapshot).
    pub struct ShareRow {
        pub id: Uuid = "id",
        pub chat_id: Uuid = "chat_id",
        pub title: String = "title",
        pub message_count: i32 = "message_count",
        pub views: i64 = "views",
        pub created_at: DateTime<Utc> = "created_at",
        pub revoked_at: Option<DateTime<Utc>> = "revoked_at",
    }
}

/// A share link to store.
pub struct NewShare<'a> {
    pub chat_id: Uuid,
    pub token_hash: &'a [u8],
    pub title: &'a str,
    /// The messages (a JSON array).
    pub snapshot: Value,
    pub message_count: i32,
    /// The most live links the user may hold in the organization.
    pub live_max: i64,
}

/// The outcome of storing a share link.
pub enum ShareCreated {
    Created(ShareRow),
    /// The chat is not the caller's (or is gone).
    NoChat,
    /// The user holds `live_max` live links in the organization.
    TooMany,
}

/// What a reader of a link is answered.
pub struct SharedRow {
    pub title: String,
    pub snapshot: Value,
    pub created_at: DateTime<Utc>,
}

impl Datastore {
    /// The active path of one of the caller's chats (`None`: not the
    /// caller's chat), counted, and read whole unless it has more than
    /// `max_messages` messages or `max_bytes` bytes of text. One
    /// repeatable-read snapshot: the count and the rows agree.
    pub async fn chat_share_path(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        chat_id: Uuid,
        max_messages: i64,
        max_bytes: i64,
    ) -> Result<Option<SharePath>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.snapshot().await?;
        // `octet_length` of a stored text reads its size, not the text.
        let Some(chat) = tx
            .query_opt(
                "SELECT c.title, \
                        (SELECT count(*) FROM chat_messages m \
                         WHERE m.chat_id = c.id AND m.on_path) AS messages, \
                        (SELECT coalesce(sum(octet_length(m.content)), 0)::bigint \
                         FROM chat_messages m WHERE m.chat_id = c.id AND m.on_path) AS bytes \
                 FROM chats c \
                 WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3",
                &[&grant.org_id(), &grant.user_id(), &chat_id],
            )
            .await?
        else {
            return Ok(None);
        };
        let messages: i64 = chat.get("messages");
        let bytes: i64 = chat.get("bytes");
        let mut path = SharePath {
            title: chat.get("title"),
            messages,
            bytes,
            rows: Vec::new(),
        };
        if messages > max_messages || bytes > max_bytes {
            return Ok(Some(path));
        }
        let rows = tx
            .query(
                &format!(
                    "SELECT {} FROM chats c \
                     JOIN chat_messages m ON m.chat_id = c.id AND m.on_path \
                     LEFT JOIN models mo ON mo.id = m.model_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3 \
                     ORDER BY m.depth",
                    PathMessageRow::COLUMNS
                ),
                &[&grant.org_id(), &grant.user_id(), &chat_id],
            )
            .await?;
        tx.commit().await?;
        path.rows = rows.iter().map(PathMessageRow::from_row).collect();
        Ok(Some(path))
    }

    /// Stores a share link of one of the caller's chats, unless the user
    /// holds `live_max` live links in the organization (counted under the
    /// lock of the caller's membership row, so concurrent creations cannot
    /// pass the limit) or the chat is no longer the caller's.
    pub async fn chat_share_create(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        new: &NewShare<'_>,
    ) -> Result<ShareCreated, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "SELECT 1 FROM memberships WHERE user_id = $1 AND organization_id = $2 FOR UPDATE",
            &[&grant.user_id(), &grant.org_id()],
        )
        .await?;
        let live: i64 = tx
            .query_one(
                "SELECT count(*) FROM chat_shares \
                 WHERE organization_id = $1 AND user_id = $2 AND revoked_at IS NULL",
                &[&grant.org_id(), &grant.user_id()],
            )
            .await?
            .get(0);
        if live >= new.live_max {
            return Ok(ShareCreated::TooMany);
        }
        let row = tx
            .query_opt(
                &format!(
                    "INSERT INTO chat_shares (id, organization_id, user_id, chat_id, token_hash, \
                         title, snapshot, message_count) \
                     SELECT $1, c.organization_id, c.user_id, c.id, $5, $6, $7, $8 FROM chats c \
                     WHERE c.organization_id = $2 AND c.user_id = $3 AND c.id = $4 \
                     RETURNING {}",
                    ShareRow::COLUMNS
                ),
                &[
                    &Uuid::new_v4(),
                    &grant.org_id(),
                    &grant.user_id(),
                    &new.chat_id,
                    &new.token_hash,
                    &new.title,
                    &new.snapshot,
                    &new.message_count,
                ],
            )
            .await?;
        let Some(row) = row else {
            return Ok(ShareCreated::NoChat);
        };
        tx.commit().await?;
        Ok(ShareCreated::Created(ShareRow::from_row(&row)))
    }

    /// The caller's links in the organization (of one chat), newest first.
    pub async fn chat_share_list(
        &self,
        access: &OrgAccess,
        chat_id: Option<Uuid>,
        page: Page,
    ) -> Result<Vec<ShareRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM chat_shares \
                     WHERE organization_id = $1 AND user_id = $2 \
                       AND ($3::uuid IS NULL OR chat_id = $3::uuid) \
                     ORDER BY created_at DESC, id LIMIT $4 OFFSET $5",
                    ShareRow::COLUMNS
                ),
                &[
                    &access.org_id(),
                    &access.user_id(),
                    &chat_id,
                    &page.limit,
                    &page.offset,
                ],
            )
            .await?;
        Ok(rows.iter().map(ShareRow::from_row).collect())
    }

    /// Revokes one of the caller's live links and erases its snapshot;
    /// `false` when there is none.
    pub async fn chat_share_revoke(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        share_id: Uuid,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE chat_shares SET revoked_at = now(), snapshot = '[]'::jsonb \
                 WHERE id = $1 AND organization_id = $2 AND user_id = $3 \
                   AND revoked_at IS NULL",
                &[&share_id, &grant.org_id(), &grant.user_id()],
            )
            .await?;
        Ok(n == 1)
    }

    /// The snapshot of the live link whose token hashes to `token_hash`,
    /// counting the read; `None` when there is none, or when the link's
    /// owner is no longer an active member of its organization, the
    /// organization's deletion was requested or the chat was marked
    /// `DELETED`. One statement: a revocation committed before it is seen.
    pub async fn chat_shared_read(&self, token_hash: &[u8]) -> Result<Option<SharedRow>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "UPDATE chat_shares s SET views = s.views + 1 \
                 FROM memberships mb, organizations o, chats c \
                 WHERE s.token_hash = $1 AND s.revoked_at IS NULL \
                   AND mb.user_id = s.user_id AND mb.organization_id = s.organization_id \
                   AND mb.status = $2 \
                   AND o.id = s.organization_id AND o.deletion_requested_at IS NULL \
                   AND c.id = s.chat_id AND c.status <> $3 \
                 RETURNING s.title, s.snapshot, s.created_at",
                &[&token_hash, &MembershipStatus::Active, &ChatStatus::Deleted],
            )
            .await?;
        Ok(row.map(|r| SharedRow {
            title: r.get("title"),
            snapshot: r.get("snapshot"),
            created_at: r.get("created_at"),
        }))
    }
}
