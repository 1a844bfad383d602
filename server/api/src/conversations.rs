//! Types of the Conversation area (`/api/conversation`) and of the model
//! catalog (`/api/models`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The default of `limit` in `GET /api/conversation/messages`.
pub const MESSAGES_DEFAULT_LIMIT: u32 = 20;
/// The largest accepted `limit` in `GET /api/conversation/messages`.
pub const MESSAGES_MAX_LIMIT: u32 = 100;

pub use crate::orgs::{OrgPageQuery, OrgQuery};

/// Query naming one conversation of an organization.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
}

/// Query naming one assistant message (an answer) of an organization's
/// conversation: `GET /api/conversation/stream`, `POST
/// /api/conversation/stop`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationMessageQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The answer's id: the `message_id` of its stream's `start` event (an
    /// opaque string, currently a UUID).
    #[schemars(length(min = 1, max = 100))]
    pub message_id: String,
}

/// Response of `POST /api/conversation/stop`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationStopResponse {
    pub message_id: String,
    /// Whether the answer was still streaming (false: it had ended).
    pub stopped: bool,
    pub message: String,
}

/// Query of `GET /api/conversation/messages`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct MessagesQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
    /// Messages per page: 1 to 100 (else `400 invalid_pagination`),
    /// default 20.
    #[schemars(range(min = 1, max = "MESSAGES_MAX_LIMIT"))]
    pub limit: Option<u32>,
    /// Number of messages to skip (not a page number), default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// A language model the service can talk to.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Model {
    /// Stable id of the model (kept across restarts; keyed by `name`).
    pub id: Uuid,
    /// The model's name, e.g. `gpt-4o-mini` or `claude-sonnet-4-5`.
    pub name: String,
    /// Who serves it: `openai`, `anthropic`, `deepseek`, `gemini`,
    /// `openai_compatible` (any other OpenAI-compatible server) or `offline`
    /// (the built-in development model).
    pub provider: String,
    /// What the model takes besides text (always listed first): `image`
    /// (PNG, JPEG, WebP and GIF uploads reach it as images) and `pdf` (PDF
    /// uploads reach it whole; to other models a PDF goes as its text).
    /// Sending an image to a model without `image` input is refused with
    /// `400 model_lacks_input`.
    pub input: Vec<ModelInput>,
    /// How the model reasons, which decides the settings it takes:
    /// `effort` (`settings.reasoning_effort`), `budget`
    /// (`settings.reasoning_budget_tokens`), `always` (it reasons on every
    /// answer and takes neither), `none`. Reasoning streams as `reasoning`
    /// events, apart from the answer's `content`.
    pub reasoning: ReasoningMode,
    /// The largest answer the model gives, in tokens: `settings.max_tokens`
    /// and a reasoning budget are bounded by it.
    pub max_output_tokens: u32,
    /// The context window in tokens: an answer sends the most recent turns
    /// of its history (images counted with the provider's formula) that
    /// fit beside the new message and the answer.
    pub context_tokens: u32,
}

/// What a model takes as input.
#[derive(
    Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum ModelInput {
    Text,
    Image,
    Pdf,
}

/// How a model reasons before it answers.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningMode {
    /// It does not reason (or does not show it).
    None,
    /// OpenAI o-series and GPT-5 style: a `reasoning_effort` of `minimal`,
    /// `low`, `medium` or `high`.
    Effort,
    /// Anthropic extended thinking: a budget of thinking tokens.
    Budget,
    /// DeepSeek-R1 style: it always reasons, streamed as
    /// `reasoning_content`.
    Always,
}

impl ReasoningMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningMode::None => "none",
            ReasoningMode::Effort => "effort",
            ReasoningMode::Budget => "budget",
            ReasoningMode::Always => "always",
        }
    }
}

/// Body of `POST /api/conversation/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationCreate {
    /// 1 to 200 characters after trimming.
    #[schemars(length(min = 1, max = 200))]
    pub title: String,
    /// Default false.
    #[serde(default)]
    pub is_archived: Option<bool>,
}

/// A conversation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Conversation {
    pub id: Uuid,
    pub title: String,
    pub is_archived: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// Changes when the conversation gets a session or a message.
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Body of `POST /api/conversation/create_session`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationSessionCreate {
    pub conversation_id: Uuid,
    /// One of the ids listed by `GET /api/models/list`.
    pub model_id: Uuid,
}

/// The state of a conversation chat session.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConversationSessionStatus {
    /// Accepts messages (every session starts here).
    Active,
    /// Finished.
    Completed,
}

/// A conversation chat session: one model's thread in a conversation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationSession {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub model_id: Uuid,
    pub status: ConversationSessionStatus,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A session in the combined view: `model` instead of `model_id`, no
/// `updated_at`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationSessionView {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub model: Model,
    pub status: ConversationSessionStatus,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// A conversation with all its sessions.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationWithSessions {
    pub conversation: Conversation,
    /// Oldest first.
    pub sessions: Vec<ConversationSessionView>,
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    User,
    Assistant,
}

/// Whether a message is whole (an addition to the spec's message shape).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// The whole message.
    Complete,
    /// An assistant answer ended by `POST /api/conversation/stop`; the text
    /// generated until then is kept.
    Cancelled,
    /// An assistant answer cut short because the model provider failed, or
    /// because the server generating it stopped (`error_code`
    /// `answer_interrupted`, set by another instance once the answer's lease
    /// expired, or by the stopping instance itself at the end of its
    /// shutdown grace period); the text generated until then is kept.
    Failed,
    /// An assistant answer still being generated: the text so far (saved
    /// about once a second).
    Streaming,
}

/// A message of a conversation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationMessage {
    /// Opaque string (currently a UUID). For an assistant answer it is the
    /// `message_id` of the stream's `start` event.
    pub id: String,
    pub role: MessageRole,
    pub content: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// The session (and so the model) the message belongs to.
    pub chat_session_id: Uuid,
    /// Addition to the spec: `complete`, or why an answer is partial.
    pub status: MessageStatus,
    /// On an answer: the model's reasoning, apart from its content (`null`
    /// when the model showed none).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub reasoning: Option<String>,
}

/// One page of a conversation's messages.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConversationMessagesPage {
    /// Oldest first, across all sessions of the conversation.
    pub messages: Vec<ConversationMessage>,
    /// Number of messages in the conversation.
    pub total: u64,
    pub offset: u32,
    pub limit: u32,
}

/// Body of `POST /api/conversation/stream_chat`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct StreamChatRequest {
    pub chat_session_id: Uuid,
    /// The user's message: not blank, at most 100,000 characters.
    #[schemars(length(min = 1, max = 100000))]
    pub message: String,
}

/// One Server-Sent Event of `POST /api/conversation/stream_chat` and `GET
/// /api/conversation/stream`, sent as an `id: N` line (the event's number,
/// from 1, for `Last-Event-ID`), a `data: <json>` line and a blank line.
///
/// The set of event types is open: a minor version may add one (0.9.0
/// added `reasoning`, 0.10.0 `route` and `restart`), so a client skips an
/// event whose `type` it does not know.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConversationStreamEvent {
    /// The answer begins; `message_id` is the id of the assistant message.
    Start { message_id: String },
    /// The next piece of the answer, in order.
    Content { content: String },
    /// The next piece of the model's reasoning, apart from the answer
    /// (an addition; stored as the message's `reasoning`).
    Reasoning { content: String },
    /// Which model and deployment answer from here on, and why (an
    /// addition, 0.10.0): as the chat stream's `route`.
    Route {
        model: String,
        deployment: String,
        /// `first`, `failover`, `fallback`, `context_window_fallback` or
        /// `content_policy_fallback`.
        reason: String,
    },
    /// The answer starts over (an addition, 0.10.0): drop the content and
    /// reasoning received so far, as the chat stream's `restart`.
    Restart { reason: String },
    /// The answer is stored: complete, or `cancelled` when it was stopped
    /// (`POST /api/conversation/stop`).
    End,
    /// The answer failed (an addition to the spec); the stream ends here,
    /// without `end`. The text sent so far is stored, marked `failed`.
    Error { error_code: String, message: String },
}
