//! Types of the Chat area (`/api/chat`): chat sessions, their messages,
//! the streamed answers of `send_message` (resumable), stopping an answer
//! and prompt suggestions.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The default title of a new chat.
pub const DEFAULT_TITLE: &str = "New Chat";
/// At most this many chats in one bulk delete.
pub const BULK_DELETE_MAX: usize = 100;

/// A chat session's state.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChatStatus {
    Active,
    Archived,
    Deleted,
}

/// Generation settings of a chat (all optional).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChatSettings {
    /// 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub temperature: Option<f64>,
    /// More than 0 (at most 32000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32000))]
    pub max_tokens: Option<u32>,
    /// 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub top_p: Option<f64>,
    /// How hard a model whose `reasoning` is `effort` thinks (OpenAI's
    /// `reasoning_effort`); default: the provider's. Other models ignore
    /// it, so a chat's setting survives a change of model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The thinking budget in tokens of a model whose `reasoning` is
    /// `budget` (Anthropic's extended thinking): 0 (the default) thinks
    /// not at all; from 1024, bounded by the model's `max_output_tokens`
    /// (a larger budget is lowered to leave room for the answer, and the
    /// answer's `max_tokens` raised above the budget). Other models ignore
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000000))]
    pub reasoning_budget_tokens: Option<u32>,
}

/// A reasoning effort (OpenAI's `reasoning_effort` values).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

/// Body of `POST /api/chat` and `PUT /api/chat` (all optional).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatWrite {
    /// 1 to 200 characters (default `New Chat`).
    #[serde(default)]
    #[schemars(length(min = 1, max = 200))]
    pub title: Option<String>,
    #[serde(default)]
    pub status: Option<ChatStatus>,
    #[serde(default)]
    pub settings: Option<ChatSettings>,
    /// Addition: `true` pins the chat (pinned chats come first in `GET
    /// /api/chat/list`; pinning a pinned chat keeps its `pinned_at`),
    /// `false` unpins it.
    #[serde(default)]
    pub pinned: Option<bool>,
    /// Addition: puts the chat into this folder of the caller's (`GET
    /// /api/chat/folders`; any other id is `400 unknown_folder` on create,
    /// `404 not_found` on update). Absent: the chat stays where it is. To take chats out of their folder, `POST
    /// /api/chat/folders/move` with `folder_id: null`.
    #[serde(default)]
    pub folder_id: Option<Uuid>,
}

/// `{id, message}` answer of create and update.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatIdResponse {
    pub id: Uuid,
    pub message: String,
}

/// Token usage accumulated over a chat's answers.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ChatUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub cached_tokens: i64,
}

/// A chat's metadata: its settings (an empty object when none) and usage.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatMetadata {
    pub settings: ChatSettings,
    pub usage: ChatUsage,
}

/// A chat session (as listed).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatSession {
    pub id: Uuid,
    pub title: String,
    pub status: ChatStatus,
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub metadata: ChatMetadata,
    #[schemars(with = "crate::schema::Nullable<ChatSettings>")]
    pub settings: Option<ChatSettings>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// Addition: whether the chat is pinned.
    pub pinned: bool,
    /// Addition: when it was pinned, `null` when it is not.
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub pinned_at: Option<DateTime<Utc>>,
    /// Addition: the caller's folder holding the chat, `null` for none.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub folder_id: Option<Uuid>,
}

/// Who wrote a chat message.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChatRole {
    User,
    Model,
}

/// A message's state (an addition): `streaming` while the answer is
/// generated, then `complete`, `stopped` (the stop operation) or `failed`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChatMessageStatus {
    Streaming,
    Complete,
    Stopped,
    Failed,
}

/// A message of a chat. A chat's messages form a tree (an edited question
/// has a sibling with the new text, a regenerated answer a sibling answer);
/// a chat shows its active path, and each message says where it stands
/// among its siblings (what a "‹ 2/3 ›" control needs).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatMessage {
    pub id: Uuid,
    pub content: String,
    pub role: ChatRole,
    pub chat_session_id: Uuid,
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub parent_message_id: Option<Uuid>,
    /// The model that answered (on both the question and the answer).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub model_id: Option<Uuid>,
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub agent_id: Option<Uuid>,
    /// On an answer: the retrieved sources and upload ids that went into
    /// the prompt.
    #[schemars(with = "serde_json::Value", required)]
    pub prompt_data: Option<serde_json::Value>,
    /// `knowledge_base_ids`, `upload_ids`; on answers also `usage`, when
    /// failed `error_code`, and when the model has several deployments or
    /// fallbacks `route` (0.10.0): which model and deployment produced
    /// which part of the content (see `AnswerRoute`).
    pub metadata: serde_json::Value,
    /// On an answer: the model's reasoning, apart from its content (`null`
    /// when the model showed none).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub reasoning: Option<String>,
    pub status: ChatMessageStatus,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// Its place among its siblings (the messages with the same parent:
    /// the versions of a question, or the answers to one question), from
    /// 1 in the order they were written.
    pub sibling_position: u32,
    /// How many siblings there are, itself included (1: no other version).
    pub sibling_count: u32,
    /// The sibling before it (`null` for the first): `POST
    /// /api/chat/switch_branch` with it shows that version.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub previous_sibling_id: Option<Uuid>,
    /// The sibling after it (`null` for the last).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub next_sibling_id: Option<Uuid>,
    /// The caller's own rating of this answer (`POST /api/chat/feedback`),
    /// `null` when not rated.
    #[schemars(with = "crate::schema::Nullable<crate::feedback::MessageFeedback>")]
    pub feedback: Option<crate::feedback::MessageFeedback>,
}

/// Body of `POST /api/chat/edit_message`: a new version of a question,
/// answered.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditMessageRequest {
    /// The question (a `USER` message) to edit.
    pub message_id: Uuid,
    /// The new text: 1 to 100,000 characters, not blank.
    pub content: String,
    /// Default: the edited question's model (else the first offered).
    #[serde(default)]
    pub model_id: Option<Uuid>,
    /// Answer through this agent (as in `send_message`); not inherited
    /// from the edited question.
    #[serde(default)]
    pub agent_id: Option<Uuid>,
    /// Knowledge bases to retrieve from (at most 10); not inherited.
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub knowledge_base_ids: Option<Vec<Uuid>>,
    /// Uploads whose text goes into the prompt (at most 10). Default: the
    /// edited question's; `[]` for none.
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub upload_ids: Option<Vec<Uuid>>,
    /// Settings for this answer (else the chat's).
    #[serde(default)]
    pub settings: Option<ChatSettings>,
}

/// Body of `POST /api/chat/regenerate`: another answer to a question.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegenerateRequest {
    /// The answer (a `MODEL` message) to answer again.
    pub message_id: Uuid,
    /// Default: the regenerated answer's model (else the first offered).
    #[serde(default)]
    pub model_id: Option<Uuid>,
    /// Answer through this agent; not inherited from the answer.
    #[serde(default)]
    pub agent_id: Option<Uuid>,
    /// Knowledge bases to retrieve from (at most 10); not inherited.
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub knowledge_base_ids: Option<Vec<Uuid>>,
    /// Settings for this answer (else the chat's).
    #[serde(default)]
    pub settings: Option<ChatSettings>,
}

/// Body of `POST /api/chat/switch_branch`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchBranchRequest {
    /// A message of the chat (e.g. a `previous_sibling_id` or
    /// `next_sibling_id`) that becomes part of the active path.
    pub message_id: Uuid,
}

/// An upload of a chat.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatUpload {
    pub id: Uuid,
    pub message_id: Uuid,
    pub filename: String,
    pub file_size: i64,
    pub content_type: String,
    /// A download link valid for 7 days.
    pub url: String,
}

/// The single-session view: the session with its active path's messages
/// and its uploads.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatSessionDetail {
    pub id: Uuid,
    pub title: String,
    pub status: ChatStatus,
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub metadata: ChatMetadata,
    #[schemars(with = "crate::schema::Nullable<ChatSettings>")]
    pub settings: Option<ChatSettings>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// Addition: whether the chat is pinned.
    pub pinned: bool,
    /// Addition: when it was pinned, `null` when it is not.
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub pinned_at: Option<DateTime<Utc>>,
    /// Addition: the caller's folder holding the chat, `null` for none.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub folder_id: Option<Uuid>,
    /// The active path, first message first (other branches are reached
    /// through each message's siblings).
    pub messages: Vec<ChatMessage>,
    /// Oldest first.
    pub uploads: Vec<ChatUpload>,
}

/// `org_id` and `chat_id`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The chat.
    pub chat_id: Uuid,
}

/// Query of `GET /api/chat/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// Only chats in this state (default: `ACTIVE` and `ARCHIVED`).
    #[serde(default)]
    pub status: Option<ChatStatus>,
    /// Items to return: 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
    /// Addition: only the chats in this folder of the caller's (none for
    /// an id that is not one).
    #[serde(default)]
    pub folder_id: Option<Uuid>,
    /// Addition: only pinned chats (`true`) or only unpinned ones
    /// (`false`).
    #[serde(default)]
    pub pinned: Option<bool>,
}

/// Query of `DELETE /api/chat/delete_session`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct DeleteSessionQuery {
    /// The chat session.
    pub session_id: Uuid,
}

/// Body of `POST /api/chat/bulk_delete_sessions`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkDeleteRequest {
    /// 1 to 100 ids.
    #[schemars(length(min = 1, max = 100))]
    pub chat_ids: Vec<Uuid>,
}

/// What happened to one id of a bulk delete.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BulkDeleteOutcome {
    Deleted,
    /// No chat of the caller in the organization has this id.
    NotFound,
}

/// One id of a bulk delete and its outcome.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct BulkDeleteResult {
    pub chat_id: Uuid,
    pub outcome: BulkDeleteOutcome,
}

/// Response of `POST /api/chat/bulk_delete_sessions`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct BulkDeleteResponse {
    pub message: String,
    /// How many were deleted.
    pub deleted: u32,
    /// One per distinct requested id, in request order.
    pub results: Vec<BulkDeleteResult>,
}

/// Body of `POST /api/chat/send_message`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageRequest {
    /// The chat; absent: a new chat is created.
    #[serde(default)]
    pub chat_id: Option<Uuid>,
    /// 1 to 100,000 characters, not blank.
    pub content: String,
    /// One of `GET /api/models/list` (default: the first offered model).
    #[serde(default)]
    pub model_id: Option<Uuid>,
    /// Answer through this agent (it must be `ready`, `deployed` or
    /// `active`); its model and settings apply.
    #[serde(default)]
    pub agent_id: Option<Uuid>,
    /// Knowledge bases to retrieve from (at most 10).
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub knowledge_base_ids: Option<Vec<Uuid>>,
    /// Uploads (`POST /api/chat/upload_file`) whose text goes into the
    /// prompt (at most 10).
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub upload_ids: Option<Vec<Uuid>>,
    /// Settings for this answer (else the chat's).
    #[serde(default)]
    pub settings: Option<ChatSettings>,
}

/// `org_id` and the `message_id` of an answer.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatMessageQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The answer's id (from the `start` event).
    pub message_id: Uuid,
}

/// Response of `POST /api/chat/stop`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct StopResponse {
    pub message_id: Uuid,
    /// Whether the answer was still streaming (false: it had ended).
    pub stopped: bool,
    pub message: String,
}

/// Body of `POST /api/chat/prompt`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptRequest {
    /// 1 to 10,000 characters.
    #[schemars(length(min = 1, max = 10000))]
    pub text: String,
    #[serde(default)]
    pub model_id: Option<Uuid>,
}

/// A retrieved chunk cited by an answer as `[index]`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ChatSource {
    /// The number cited in the answer, from 1.
    pub index: u32,
    pub knowledge_base_id: Uuid,
    pub document_id: Uuid,
    pub chunk_id: Uuid,
    pub content: String,
    pub score: f64,
    pub metadata: serde_json::Value,
}

/// Which model and deployment produced a part of an answer (an answer's
/// `metadata.route`, from 0.10.0: one entry per model or deployment that
/// took over, in order; empty when the model is not routed).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct AnswerRoute {
    pub model: String,
    pub deployment: String,
    /// Where its part of the content begins, in characters (Unicode scalar
    /// values); it runs to the next entry's `from` or the end. After a
    /// restart the entry begins at 0 and the earlier entries produced
    /// nothing that was kept.
    pub from: i64,
    /// As the stream's `route` event.
    pub reason: String,
}

/// One Server-Sent Event of the chat streams (`send_message`, `stream`,
/// `prompt`), sent as `id: N` (send_message and stream only) and
/// `data: <json>` followed by a blank line.
///
/// The set of event types is open: a minor version may add one (0.9.0
/// added `reasoning`, 0.10.0 `route` and `restart`), so a client skips an
/// event whose `type` it does not know.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatStreamEvent {
    /// The answer begins: its chat (new or given), the stored question's
    /// id and the answer's id (for `stream` and `stop`).
    Start {
        chat_id: Uuid,
        user_message_id: Uuid,
        message_id: Uuid,
    },
    /// The chunks retrieved from the knowledge bases, before any content.
    Sources { sources: Vec<ChatSource> },
    /// The next piece of the answer, in order.
    Content { content: String },
    /// The next piece of the model's reasoning (its thinking, shown apart
    /// from the answer): before the answer's content and between its tool
    /// calls. Stored as the answer's `reasoning`. At most 256 KiB of an
    /// answer's reasoning is streamed and kept.
    Reasoning { content: String },
    /// An agent's tool call begins.
    ToolStarted {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    /// An agent's tool call finished.
    ToolFinished {
        id: String,
        name: String,
        input: serde_json::Value,
        #[schemars(with = "serde_json::Value", required)]
        output: Option<serde_json::Value>,
        #[schemars(with = "crate::schema::Nullable<String>")]
        error: Option<String>,
        successful: bool,
    },
    /// Which model and deployment answer from here on, and why: sent
    /// before the first content when the model has several deployments or
    /// fallback models, and again whenever another one takes over (0.10.0).
    Route {
        /// The model answering (the one asked for, or a fallback).
        model: String,
        /// Its deployment, as the server's configuration names it.
        deployment: String,
        /// `first`, `failover` (another deployment of the same model,
        /// after a failure), `fallback` (a fallback model, after every
        /// deployment failed), `context_window_fallback` or
        /// `content_policy_fallback`.
        reason: String,
    },
    /// The answer starts over (0.10.0): a deployment broke off and the one
    /// taking over cannot continue the partial text, so it answers from
    /// the beginning. Drop the content and reasoning received so far; what
    /// follows is the whole answer. Sent right after the `route` that
    /// explains it. An answer continued from its partial text has no
    /// `restart`: its content simply goes on.
    Restart { reason: String },
    /// The generated title of a new chat.
    Title { chat_id: Uuid, title: String },
    /// Token usage of this answer.
    Usage {
        input_tokens: i64,
        output_tokens: i64,
        total_tokens: i64,
        cached_tokens: i64,
        /// Of the output tokens, those spent reasoning (reported by OpenAI
        /// as `completion_tokens_details.reasoning_tokens`; estimated from
        /// the thinking text for Anthropic, which counts it in its output).
        reasoning_tokens: i64,
    },
    /// The stream is complete: `message` is `DONE`; `finish_reason` is
    /// `stop` (answered) or `stopped` (the stop operation).
    End {
        message: String,
        finish_reason: String,
    },
    /// The answer failed; the stream ends here. The text so far is kept,
    /// marked `failed`.
    Error { error_code: String, message: String },
}

impl ChatStreamEvent {
    /// Whether this is the stream's last event.
    pub fn is_last(&self) -> bool {
        matches!(
            self,
            ChatStreamEvent::End { .. } | ChatStreamEvent::Error { .. }
        )
    }
}

/// Query of `POST /api/chat/transcribe`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct TranscribeQuery {
    /// The organization.
    pub org_id: Uuid,
    /// One of `en-US`, `en-GB`, `es-ES`, `fr-FR`, `de-DE`, `it-IT`,
    /// `pt-BR`, `ja-JP`, `ko-KR`, `zh-CN` (default: detected).
    #[serde(default)]
    pub language: Option<String>,
    /// The type of a raw (non-multipart) body, e.g. `audio/mpeg`.
    #[serde(default)]
    pub content_type: Option<String>,
}

/// Response of `POST /api/chat/transcribe`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct TranscribeResponse {
    pub text: String,
    /// The requested language, `null` when it was left to detection.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub language: Option<String>,
}

/// Response of `POST /api/chat/ws_ticket`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WsTicket {
    /// Opens `GET /api/chat/ws` once, within 60 seconds.
    pub ticket: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: DateTime<Utc>,
}

/// Query of `GET /api/chat/ws`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WsQuery {
    /// The organization.
    pub org_id: Uuid,
    /// From `POST /api/chat/ws_ticket` (single use).
    pub ticket: String,
}

/// A message of the chat WebSocket (server to client, JSON text frames).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatLiveEvent {
    /// The connection is authenticated and subscribed.
    Ready { org_id: Uuid, user_id: Uuid },
    /// A chat got a (generated or new) title.
    Title { chat_id: Uuid, title: String },
    /// An answer in a chat ended (`status`: `complete`, `stopped`,
    /// `failed`), also when its server stopped mid-answer and closed it
    /// at the end of its shutdown grace period, or died and another
    /// instance's sweeper closed it (`failed`, `error_code`
    /// `answer_interrupted` on the stored message).
    Message {
        chat_id: Uuid,
        message_id: Uuid,
        status: String,
    },
    /// A chat's active path changed (`POST /api/chat/switch_branch`): its
    /// new last message. Edits and regenerations show as their answers'
    /// `message` events.
    Branch {
        chat_id: Uuid,
        leaf_message_id: Uuid,
    },
}
