//! Types of chat export and import (`GET /api/chat/export`, `GET
//! /api/chat/export_all`, `POST /api/chat/import`).
//!
//! The JSON export is a [`ChatExportDocument`] (`format`
//! `workspace.chat.v1`): every message of each chat's tree with its parent,
//! and the chat's active leaf, so that importing it gives the same tree.
//! An answer's reasoning travels apart from its content
//! ([`ExportedMessage::reasoning`]); files written before that field
//! existed import as before, without reasoning.

use crate::chat::{ChatMessageStatus, ChatRole, ChatSettings, ChatStatus};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The `format` marker of a [`ChatExportDocument`].
pub const CHAT_EXPORT_FORMAT: &str = "workspace.chat.v1";

/// The largest file `POST /api/chat/import` reads, in bytes (50 MiB): the
/// raw body, or the `file` part of a form.
pub const IMPORT_MAX_BYTES: usize = 50 * 1024 * 1024;
/// The most chats one import may hold.
pub const IMPORT_MAX_CHATS: usize = 1_000;
/// The most messages one import may hold (all chats together).
pub const IMPORT_MAX_MESSAGES: usize = 100_000;
/// The largest message an import keeps, in bytes of UTF-8 (1 MB).
pub const IMPORT_MAX_MESSAGE_BYTES: usize = 1_000_000;
/// The deepest message an import keeps (a first message is at depth 0).
pub const IMPORT_MAX_DEPTH: usize = 10_000;

/// How an export is written.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChatExportFormat {
    /// A [`ChatExportDocument`] (`application/json`): the whole tree.
    #[default]
    Json,
    /// `text/markdown`: the active path only, as people read it.
    Markdown,
}

/// Query of `GET /api/chat/export`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatExportQuery {
    /// The organization.
    pub org_id: Uuid,
    /// One of the caller's chats in the organization.
    pub chat_id: Uuid,
    /// `json` (default) or `markdown`.
    #[serde(default)]
    pub format: Option<ChatExportFormat>,
}

/// Query of `GET /api/chat/export_all`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatExportAllQuery {
    /// The organization.
    pub org_id: Uuid,
    /// `json` (default) or `markdown`.
    #[serde(default)]
    pub format: Option<ChatExportFormat>,
}

/// A JSON chat export (`workspace.chat.v1`), which `POST /api/chat/import`
/// reads back.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatExportDocument {
    /// Always `workspace.chat.v1`.
    pub format: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub exported_at: DateTime<Utc>,
    /// The organization the chats were exported from (an import ignores
    /// it: imported chats go to the importing caller's organization).
    pub org_id: Uuid,
    /// The chats, each with its whole tree of messages.
    pub chats: Vec<ExportedChat>,
}

/// A chat in a [`ChatExportDocument`].
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportedChat {
    /// The chat's id here (an import gives the chat a new one).
    pub id: Uuid,
    pub title: String,
    pub status: ChatStatus,
    #[schemars(with = "crate::schema::Nullable<ChatSettings>")]
    pub settings: Option<ChatSettings>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// The last message of the active path (`null`: the chat has no
    /// message).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub leaf_id: Option<Uuid>,
    /// Every message of the tree, oldest first: a parent always before
    /// its children, siblings in their order.
    pub messages: Vec<ExportedMessage>,
}

/// A message in a [`ChatExportDocument`].
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportedMessage {
    pub id: Uuid,
    /// The message it follows (`null`: a first message).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub parent_id: Option<Uuid>,
    pub role: ChatRole,
    /// The text, verbatim.
    pub content: String,
    /// On an answer: the model's reasoning (its thinking), apart from its
    /// content (`null`: none). An import reads it back as the answer's
    /// reasoning; absent in files exported before it existed.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub reasoning: Option<String>,
    pub status: ChatMessageStatus,
    /// The model that answered, when it is one of this service's.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub model_id: Option<Uuid>,
    /// The model's name: this service's model, or the one an imported
    /// message named (`null`: none known).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub model_name: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// What `POST /api/chat/import` reads the file as.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChatImportFormat {
    /// Recognised from the file's shape (the default).
    #[default]
    Auto,
    /// This service's JSON export (`workspace.chat.v1`).
    Workspace,
    /// ChatGPT's `conversations.json`.
    Chatgpt,
    /// Open WebUI's chat export.
    Openwebui,
    /// Claude's `conversations.json`.
    Claude,
    /// LibreChat's conversation export.
    Librechat,
}

/// Query of `POST /api/chat/import`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatImportQuery {
    /// The organization the chats are imported into (as the caller's).
    pub org_id: Uuid,
    /// `auto` (default), `workspace`, `chatgpt`, `openwebui`, `claude` or
    /// `librechat`.
    #[serde(default)]
    pub format: Option<ChatImportFormat>,
}

/// The format a file was read as.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChatImportSource {
    Workspace,
    Chatgpt,
    Openwebui,
    Claude,
    Librechat,
}

/// Answer of `POST /api/chat/import`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatImportResult {
    /// The format the file was read as.
    pub format: ChatImportSource,
    /// The chats created, in the file's order.
    pub imported: Vec<ImportedChat>,
    /// The chats of the file that were not imported, with why.
    pub skipped: Vec<SkippedChat>,
}

/// A chat an import created.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ImportedChat {
    /// Its position in the file (from 0).
    pub index: u32,
    /// Its id in the file, if it had one (never used as an id here).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub source_id: Option<String>,
    /// The new chat (the caller's).
    pub chat_id: Uuid,
    pub title: String,
    /// The messages stored.
    pub messages: u32,
    /// The file's messages left out: system and tool messages, hidden
    /// ones, ChatGPT's reasoning nodes (their thoughts become the next
    /// answer's `reasoning`), and nodes without a message (their children
    /// follow the nearest message kept above them).
    pub messages_left_out: u32,
}

/// Why a chat of a file was not imported.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ImportSkipReason {
    /// The entry is not a chat of the file's format (wrong types, not an
    /// object).
    InvalidChat,
    /// No user or assistant message.
    NoMessages,
    /// A message is larger than 1 MB.
    MessageTooLarge,
    /// Two messages share an id, a message names a parent that is not in
    /// the chat, or parents form a cycle.
    BrokenTree,
    /// A message is deeper than 10,000 levels.
    TooDeep,
    /// The import's message limit was reached before this chat.
    LimitReached,
    /// The caller's membership ended during the import.
    MembershipEnded,
}

/// A chat an import left out.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SkippedChat {
    /// Its position in the file (from 0).
    pub index: u32,
    /// Its id in the file, if it had one.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub source_id: Option<String>,
    /// Its title in the file, if it had one.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub title: Option<String>,
    pub reason: ImportSkipReason,
    /// What was wrong, for people.
    pub message: String,
}
