//! Types of the folders of chats (`/api/chat/folders`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The longest folder name, in characters.
pub const FOLDER_NAME_MAX_CHARS: usize = 100;
/// The most chats one move names.
pub const MOVE_MAX_CHATS: usize = 100;

/// A folder of the caller's chats (private to its user, like chats).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatFolder {
    pub id: Uuid,
    pub name: String,
    pub org_id: Uuid,
    pub user_id: Uuid,
    /// The chats in it that are not `DELETED`.
    pub chat_count: i64,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Body of creating and renaming a folder.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatFolderWrite {
    /// 1 to 100 characters after trimming, not blank, without NUL; unique
    /// among the caller's folders in the organization, case-insensitively.
    /// (The pattern's blanks are exactly those the server trims, Unicode's
    /// White_Space.)
    #[schemars(
        length(min = 1, max = 100),
        regex(
            pattern = r"^[^\x00]*[^\x00\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00]*$"
        )
    )]
    pub name: String,
}

/// `org_id` and `folder_id`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatFolderQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The folder.
    pub folder_id: Uuid,
}

/// Response of deleting a folder.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatFolderDeleted {
    pub message: String,
    /// How many chats were in it (now in no folder).
    pub chats_moved: i64,
}

/// Body of `POST /api/chat/folders/move`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatMoveRequest {
    /// 1 to 100 of the caller's chats (duplicates count once).
    #[schemars(length(min = 1, max = 100))]
    pub chat_ids: Vec<Uuid>,
    /// The caller's folder to move them into; `null`: out of any folder.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub folder_id: Option<Uuid>,
}

/// Response of `POST /api/chat/folders/move`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatMoveResponse {
    pub message: String,
    /// How many chats were moved.
    pub moved: i64,
}
