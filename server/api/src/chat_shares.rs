//! Types of share links of chats (issue #35): a read-only snapshot of a
//! chat's active path at a URL whose token cannot be guessed, revocable,
//! readable without an account.

use crate::chat::ChatRole;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The prefix of every share token: `wsshare_` and 256 random bits as
/// URL-safe base64 (43 characters), 51 characters in all.
pub const SHARE_TOKEN_PREFIX: &str = "wsshare_";

/// The most messages one snapshot holds (`409 share_too_large` beyond).
pub const SHARE_MESSAGES_MAX: usize = 500;

/// The most bytes of message text (UTF-8) one snapshot holds (`409
/// share_too_large` beyond): 1 MiB.
pub const SHARE_BYTES_MAX: usize = 1 << 20;

/// The most live (unrevoked) links one user holds in one organization
/// (`409 too_many_shares` beyond).
pub const SHARES_PER_USER_MAX: i64 = 100;

/// The public page of a share link: `/share/<token>`.
pub const SHARE_PAGE_PREFIX: &str = "/share/";

/// How an answer of a snapshot ended.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SharedMessageStatus {
    /// Whole (every question is `complete`).
    Complete,
    /// Stopped by its user before its end: the text so far.
    Stopped,
    /// The model provider failed mid-answer: the text so far.
    Failed,
}

/// A message of a snapshot: only what a reader needs.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SharedMessage {
    pub role: ChatRole,
    pub content: String,
    /// When the message was written.
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// On an answer, the name of the model that wrote it; null on a
    /// question (and on an answer whose model is gone).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub model: Option<String>,
    pub status: SharedMessageStatus,
}

/// What a share link shows: the chat's title and the messages of its
/// active path when the link was made, oldest first.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SharedChat {
    pub title: String,
    /// When the link was made (the moment of the snapshot).
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    pub messages: Vec<SharedMessage>,
}

/// A share link as its owner lists it: never its token.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatShare {
    /// The link's handle (to revoke it).
    pub id: Uuid,
    pub chat_id: Uuid,
    /// The chat's title when the link was made.
    pub title: String,
    /// The messages of the snapshot.
    pub message_count: u32,
    /// How many times the link was read (`GET /api/shared`).
    pub views: i64,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// When the link was revoked; null while it works.
    #[schemars(with = "crate::schema::Nullable<chrono::DateTime<chrono::Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A share link just made: the only time its token is shown.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatShareCreated {
    /// The link's handle (to revoke it).
    pub id: Uuid,
    pub chat_id: Uuid,
    pub title: String,
    pub message_count: u32,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// The secret of the link (`wsshare_…`): whoever holds it reads the
    /// snapshot. Stored only as a hash; it cannot be shown again.
    pub token: String,
    /// The page of the link on this server: `/share/<token>`.
    pub path: String,
    /// The whole link: `{mail.public_url}` (else this server's own
    /// address) followed by `path`.
    pub url: String,
}

/// Query of `GET /api/chat/shares/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatSharesQuery {
    /// The organization.
    pub org_id: Uuid,
    /// Only the links of this chat.
    #[serde(default)]
    pub chat_id: Option<Uuid>,
    /// Items to return: 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// Query of `DELETE /api/chat/share/revoke`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatShareQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The link (its `id`).
    pub share_id: Uuid,
}

/// Query of `GET /api/shared`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SharedQuery {
    /// The link's token (`wsshare_…`).
    pub token: String,
}

/// The path of the share page (`/share/{token}`; unpublished).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SharePagePath {
    pub token: String,
}
