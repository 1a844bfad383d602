//! The paged reads of an account's export (`GET /api/users/me/export`):
//! each returns at most one page, after a keyset position (an id, or a
//! message's `seq`), so that the export holds one page at a time. The
//! account is the authenticated caller's own (no organization applies).

use super::Datastore;
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

db_row! {
    /// The account itself.
    pub struct ExportProfile {
        pub id: Uuid = "u.id",
        pub email: String = "u.email",
        pub first_name: String = "u.first_name",
        pub last_name: String = "u.last_name",
        pub created_at: DateTime<Utc> = "u.created_at",
        pub last_active_at: Option<DateTime<Utc>> = "u.last_active_at",
    }
}

db_row! {
    /// A membership, in any state.
    pub struct ExportMembership {
        pub organization_id: Uuid = "o.id",
        pub name: String = "o.name",
        pub slug: String = "o.slug",
        pub is_personal: bool = "o.is_personal",
        pub role_name: String = "r.name",
        pub status: crate::db::enums::MembershipStatus = "m.status",
        pub joined_at: DateTime<Utc> = "m.created_at",
    }
}

db_row! {
    /// A chat of the account.
    pub struct ExportChat {
        pub id: Uuid = "c.id",
        pub organization_id: Uuid = "c.organization_id",
        pub title: String = "c.title",
        pub status: crate::db::enums::ChatStatus = "c.status",
        pub created_at: DateTime<Utc> = "c.created_at",
        pub updated_at: DateTime<Utc> = "c.updated_at",
    }
}

db_row! {
    /// A message of a chat.
    pub struct ExportChatMessage {
        pub id: Uuid = "m.id",
        pub seq: i64 = "m.seq",
        pub role: String = "m.role",
        pub content: String = "m.content",
        pub status: crate::db::enums::ChatMessageStatus = "m.status",
        pub created_at: DateTime<Utc> = "m.created_at",
    }
}

db_row! {
    /// A conversation the account started.
    pub struct ExportConversation {
        pub id: Uuid = "c.id",
        pub organization_id: Uuid = "c.organization_id",
        pub title: String = "c.title",
        pub is_archived: bool = "c.is_archived",
        pub created_at: DateTime<Utc> = "c.created_at",
        pub updated_at: DateTime<Utc> = "c.updated_at",
    }
}

db_row! {
    /// A message of a conversation.
    pub struct ExportConversationMessage {
        pub id: Uuid = "m.id",
        pub seq: i64 = "m.seq",
        pub role: crate::db::enums::MessageRole = "m.role",
        pub content: String = "m.content",
        pub status: String = "m.status",
        pub by_me: bool = "coalesce(m.created_by = $4, false)",
        pub created_at: DateTime<Utc> = "m.created_at",
    }
}

db_row! {
    /// An upload of the account (its bytes are not exported).
    pub struct ExportUpload {
        pub id: Uuid = "f.id",
        pub organization_id: Uuid = "f.organization_id",
        pub chat_id: Option<Uuid> = "f.chat_id",
        pub filename: String = "f.filename",
        pub content_type: String = "f.content_type",
        pub file_size: i64 = "f.file_size",
        pub sha256: String = "f.sha256",
        pub created_at: DateTime<Utc> = "f.created_at",
    }
}

impl Datastore {
    /// The account and all its memberships (any state), for its export.
    /// `None` when the account does not exist or cannot log in.
    pub async fn export_profile(
        &self,
        user_id: Uuid,
    ) -> Result<Option<(ExportProfile, Vec<ExportMembership>)>, Error> {
        let conn = self.conn().await?;
        let Some(profile) = conn
            .query_opt(
                &format!(
                    "SELECT {} FROM users u WHERE u.id = $1 AND u.password_hash IS NOT NULL",
                    ExportProfile::COLUMNS
                ),
                &[&user_id],
            )
            .await?
        else {
            return Ok(None);
        };
        let memberships = conn
            .query(
                &format!(
                    "SELECT {} FROM memberships m JOIN organizations o ON o.id = m.organization_id \
                     JOIN roles r ON r.id = m.role_id \
                     WHERE m.user_id = $1 ORDER BY m.created_at, o.id",
                    ExportMembership::COLUMNS
                ),
                &[&user_id],
            )
            .await?;
        Ok(Some((
            ExportProfile::from_row(&profile),
            memberships.iter().map(ExportMembership::from_row).collect(),
        )))
    }

    /// The account's chats after `after` (by id), at most `limit`.
    pub async fn export_chats(
        &self,
        user_id: Uuid,
        after: Uuid,
        limit: i64,
    ) -> Result<Vec<ExportChat>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "SELECT {} FROM chats c WHERE c.user_id = $1 AND c.id > $2 \
                     ORDER BY c.id LIMIT $3",
                    ExportChat::COLUMNS
                ),
                &[&user_id, &after, &limit],
            )
            .await?
            .iter()
            .map(ExportChat::from_row)
            .collect())
    }

    /// The messages of the account's chat after `after_seq`, at most
    /// `limit`, in order.
    pub async fn export_chat_messages(
        &self,
        user_id: Uuid,
        chat_id: Uuid,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<ExportChatMessage>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "SELECT {} FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                     WHERE m.chat_id = $1 AND c.user_id = $2 AND m.seq > $3 \
                     ORDER BY m.seq LIMIT $4",
                    ExportChatMessage::COLUMNS
                ),
                &[&chat_id, &user_id, &after_seq, &limit],
            )
            .await?
            .iter()
            .map(ExportChatMessage::from_row)
            .collect())
    }

    /// The conversations the account started after `after` (by id), at
    /// most `limit`.
    pub async fn export_conversations(
        &self,
        user_id: Uuid,
        after: Uuid,
        limit: i64,
    ) -> Result<Vec<ExportConversation>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "SELECT {} FROM conversations c WHERE c.created_by = $1 AND c.id > $2 \
                     ORDER BY c.id LIMIT $3",
                    ExportConversation::COLUMNS
                ),
                &[&user_id, &after, &limit],
            )
            .await?
            .iter()
            .map(ExportConversation::from_row)
            .collect())
    }

    /// The messages of a conversation the account started, after
    /// `after_seq`, at most `limit`, in order.
    pub async fn export_conversation_messages(
        &self,
        conversation: &ExportConversation,
        user_id: Uuid,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<ExportConversationMessage>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "SELECT {} FROM conversation_messages m \
                     WHERE m.organization_id = $1 AND m.conversation_id = $2 AND m.seq > $3 \
                     ORDER BY m.seq LIMIT $5",
                    ExportConversationMessage::COLUMNS
                ),
                &[
                    &conversation.organization_id,
                    &conversation.id,
                    &after_seq,
                    &user_id,
                    &limit,
                ],
            )
            .await?
            .iter()
            .map(ExportConversationMessage::from_row)
            .collect())
    }

    /// The account's uploads after `after` (by id), at most `limit`.
    pub async fn export_uploads(
        &self,
        user_id: Uuid,
        after: Uuid,
        limit: i64,
    ) -> Result<Vec<ExportUpload>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "SELECT {} FROM files f WHERE f.uploaded_by = $1 AND f.id > $2 \
                     ORDER BY f.id LIMIT $3",
                    ExportUpload::COLUMNS
                ),
                &[&user_id, &after, &limit],
            )
            .await?
            .iter()
            .map(ExportUpload::from_row)
            .collect())
    }
}
