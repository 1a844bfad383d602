//! Types of the Agent-deployments area (`/api/agent_deploy`) and of its
//! OpenAI-compatible invocation surface (`/api/agent_deploy/v1`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The prefix of every deployment key.
pub const KEY_PREFIX: &str = "wsk_live_";
/// Default and largest per-key request rate (requests per minute).
pub const RATE_LIMIT_DEFAULT: u32 = 60;
pub const RATE_LIMIT_MAX: u32 = 100_000;
/// Most allowed origins of one deployment.
pub const ORIGINS_MAX: usize = 20;

/// Query naming one deployment.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct DeploymentQuery {
    /// The deployment.
    pub deployment_id: Uuid,
}

/// Where a deployment is used.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentChannel {
    /// A chat widget script on web pages of `allowed_origins`.
    Widget,
    /// Server-to-server calls (any OpenAI client).
    Api,
    /// An SDK in an application (any OpenAI SDK).
    Sdk,
    /// An embedded frame on web pages of `allowed_origins`.
    Iframe,
}

/// Whether a deployment accepts requests.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentStatus {
    Active,
    /// Its key is refused (`401`) until the deployment is active again.
    Paused,
}

/// Body of `POST /api/agent_deploy/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct DeploymentCreate {
    /// 1 to 100 characters.
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    /// At most 2,000 characters.
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    pub channel: DeploymentChannel,
    /// Web origins (`scheme://host[:port]`) allowed to call the deployment
    /// from a browser (CORS). At most 20. Required (at least one) for
    /// `widget` and `iframe`.
    #[serde(default)]
    pub allowed_origins: Option<Vec<String>>,
    /// Requests per minute through this deployment's key, counted across
    /// every server instance over a sliding minute (a burst split across a
    /// minute boundary counts as one): 1 to 100,000, default 60.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100000))]
    pub rate_limit_per_minute: Option<u32>,
    /// When the key stops working (must be in the future); unset: never.
    #[serde(default)]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Body of `PUT /api/agent_deploy/update`: every field optional.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct DeploymentUpdate {
    #[schemars(length(min = 1, max = 100))]
    pub name: Option<String>,
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    /// Replaces the allowed origins.
    pub allowed_origins: Option<Vec<String>>,
    #[schemars(range(min = 1, max = 100000))]
    pub rate_limit_per_minute: Option<u32>,
    /// `paused` refuses the key at once; `active` accepts it again.
    pub status: Option<DeploymentStatus>,
    /// A new expiry of the current key (in the future).
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub expires_at: Option<DateTime<Utc>>,
    /// `true`: the current key never expires.
    #[serde(default)]
    pub clear_expiry: Option<bool>,
}

/// Requests and tokens served through a deployment, on every instance.
/// Each request is added within the usage writer's flush interval
/// (`usage.flush_interval_ms`, 100 ms by default) of its answer.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct DeploymentUsage {
    /// Requests its key admitted (whatever their answer; not those refused
    /// by the rate limit).
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// A deployment (its key is never shown again after create or
/// regenerate_key; `key_prefix` identifies it).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Deployment {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub org_id: Uuid,
    pub name: String,
    pub description: String,
    pub channel: DeploymentChannel,
    pub status: DeploymentStatus,
    pub allowed_origins: Vec<String>,
    pub rate_limit_per_minute: u32,
    /// The first characters of the key (`wsk_live_` and 6 more).
    pub key_prefix: String,
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When its key was last admitted (updated with `usage`).
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub last_used_at: Option<DateTime<Utc>>,
    pub usage: DeploymentUsage,
    /// How to use the deployment on its channel: an HTML snippet for
    /// `widget` and `iframe`, a curl command for `api` and `sdk` (the
    /// placeholder `$WORKSPACE_DEPLOYMENT_KEY` stands for the key).
    pub embed: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A deployment with its new key: the only time the key is shown.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct DeploymentWithKey {
    #[serde(flatten)]
    pub deployment: Deployment,
    /// `wsk_live_` and 43 base64url characters (256 random bits). Send it
    /// as `Authorization: Bearer <key>` or `X-API-Key: <key>` to
    /// `/api/agent_deploy/v1/...`. Stored only as a hash: keep it now.
    pub api_key: String,
}

/// One message of an OpenAI chat completion request.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OpenAiMessage {
    /// `system`, `developer`, `user` or `assistant` (`tool` messages are
    /// ignored: the agent runs its own tools).
    pub role: String,
    /// Text, or an array of parts of which the `text` parts are used. May
    /// be omitted or `null` (an assistant message that only called tools).
    #[serde(default)]
    #[schemars(with = "OpenAiContent")]
    pub content: Option<OpenAiContent>,
}

/// Message content: a string or content parts.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OpenAiContent {
    Text(String),
    Parts(Vec<OpenAiContentPart>),
}

impl OpenAiContent {
    /// The text of the content (text parts joined).
    pub fn text(&self) -> String {
        match self {
            OpenAiContent::Text(t) => t.clone(),
            OpenAiContent::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

/// A content part (`{"type": "text", "text": …}`; others are ignored).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OpenAiContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// `stream_options` of a chat completion request.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct StreamOptions {
    /// Accepted for compatibility: the last chunk always carries `usage`
    /// (with no choices), whatever this says.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// The path prefix of the OpenAI-compatible invocation surface, which
/// answers cross-origin requests with each deployment's own origins.
pub const V1_PREFIX: &str = "/api/agent_deploy/v1/";

/// Body of `POST /api/agent_deploy/v1/chat/completions` (the OpenAI Chat
/// Completions request; fields not listed are accepted and ignored).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatCompletionRequest {
    /// Ignored: a deployment serves its one agent (see `v1/models`).
    #[serde(default)]
    pub model: Option<String>,
    /// 1 to 200 messages; the last must be a `user` message.
    pub messages: Vec<OpenAiMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    /// Options of a streamed answer.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// 0 to 2 (outside: `400` with OpenAI's `decimal_above_max_value` or
    /// `decimal_below_min_value`), overrides the agent's (values above 1
    /// are taken as 1).
    #[serde(default)]
    #[schemars(range(min = 0, max = 2))]
    pub temperature: Option<f64>,
    /// At least 1 (`0`: `400 integer_below_min_value`); overrides the
    /// agent's `max_tokens` when lower.
    #[serde(default)]
    #[schemars(range(min = 1, max = 4294967295u32))]
    pub max_tokens: Option<u32>,
    /// The newer name of `max_tokens`, at least 1.
    #[serde(default)]
    #[schemars(range(min = 1, max = 4294967295u32))]
    pub max_completion_tokens: Option<u32>,
}

/// An assistant message of a completion.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CompletionMessage {
    pub role: String,
    pub content: String,
    /// The model's reasoning, apart from its text (as DeepSeek and vLLM
    /// answer it); absent when the model showed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub reasoning_content: Option<String>,
}

/// One choice of a completion.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CompletionChoice {
    pub index: u32,
    pub message: CompletionMessage,
    /// `stop`, or `length` when `max_tokens` cut the answer.
    pub finish_reason: String,
}

/// Token usage in OpenAI's names.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct CompletionUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// One event of a streamed completion (`stream: true`), sent as `data:
/// <json>` and a blank line: OpenAI's `chat.completion.chunk`. The first
/// chunk's delta has `role` `assistant`; then one chunk per piece of text;
/// the last chunk with a choice has an empty delta and `finish_reason`
/// `stop`; a final chunk with no choices carries `usage`; the stream ends
/// with `data: [DONE]`. A failure mid-answer is a last `data:` event in
/// OpenAI's error shape (`{"error": {...}}`) instead.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ChatCompletionChunk {
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: String,
    /// Unix seconds.
    pub created: i64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// Only on the final chunk (whose `choices` is empty); absent, never
    /// `null`, elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "CompletionUsage")]
    pub usage: Option<CompletionUsage>,
}

/// The one choice of a streamed chunk.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: ChunkDelta,
    /// `stop` on the last chunk with a choice, else `null`.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub finish_reason: Option<String>,
}

/// What a chunk adds to the message.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ChunkDelta {
    /// `assistant`, on the first chunk only (absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub role: Option<String>,
    /// The next piece of the answer's text (absent on the last chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub content: Option<String>,
    /// The next piece of the model's reasoning, apart from its text (the
    /// `reasoning_content` field DeepSeek and vLLM stream; absent when the
    /// model shows none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub reasoning_content: Option<String>,
}

/// A chat completion (`object` is `chat.completion`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatCompletion {
    pub id: String,
    pub object: String,
    /// Unix seconds.
    pub created: i64,
    /// The deployment's model name (`agent-<agent id>`).
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    pub usage: CompletionUsage,
}

/// A model of `GET /api/agent_deploy/v1/models`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OpenAiModel {
    /// `agent-<agent id>`.
    pub id: String,
    /// `model`.
    pub object: String,
    pub created: i64,
    pub owned_by: String,
}

/// The model list (`object` is `list`): the deployment's agent.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OpenAiModelList {
    pub object: String,
    pub data: Vec<OpenAiModel>,
}

/// An error of the OpenAI-compatible surface, in OpenAI's shape.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OpenAiErrorBody {
    pub message: String,
    /// `invalid_request_error`, `authentication_error`,
    /// `permission_error`, `rate_limit_error`, `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub param: Option<String>,
    /// The stable `error_code` of the rest of the API.
    pub code: String,
}

/// The error type of the OpenAI-compatible operations: every error of
/// theirs (including malformed requests) has OpenAI's body
/// `{"error": {message, type, param, code}}`, which OpenAI SDKs parse.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "OpenAiError")]
pub struct OpenAiHttpError {
    pub error: OpenAiErrorBody,
    #[serde(skip)]
    #[schemars(skip)]
    pub status: dropshot::ErrorStatusCode,
    /// For `429`: seconds to wait (sent as `Retry-After`).
    #[serde(skip)]
    #[schemars(skip)]
    pub retry_after: Option<u64>,
}

impl OpenAiHttpError {
    /// The OpenAI error `type` of an HTTP status.
    pub fn kind_of(status: u16) -> &'static str {
        match status {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            500..=599 => "server_error",
            _ => "invalid_request_error",
        }
    }

    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        OpenAiHttpError {
            error: OpenAiErrorBody {
                message: message.into(),
                kind: Self::kind_of(status).to_string(),
                param: None,
                code: code.to_string(),
            },
            status: dropshot::ErrorStatusCode::from_u16(status)
                .unwrap_or(dropshot::ErrorStatusCode::INTERNAL_SERVER_ERROR),
            retry_after: None,
        }
    }
}

impl From<dropshot::HttpError> for OpenAiHttpError {
    fn from(e: dropshot::HttpError) -> Self {
        let status = e.status_code.as_u16();
        let code = e
            .error_code
            .clone()
            .unwrap_or_else(|| crate::extract::INVALID_REQUEST.to_string());
        OpenAiHttpError::new(status, &code, e.external_message)
    }
}

impl std::fmt::Display for OpenAiHttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error.code, self.error.message)
    }
}

impl dropshot::HttpResponseError for OpenAiHttpError {
    fn status_code(&self) -> dropshot::ErrorStatusCode {
        self.status
    }
}
