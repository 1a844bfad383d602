//! Language-model providers behind one streaming interface, [`ChatModel`].
//!
//! - [`openai`]: OpenAI chat completions with `stream: true` (`false` for
//!   an answer wanted only once complete, [`ChatRequest::whole`]), which
//!   also serves DeepSeek, Gemini's OpenAI-compatible endpoint, Ollama and
//!   vLLM;
//! - [`anthropic`]: Anthropic's Messages API;
//! - [`offline`]: the built-in development model, which answers without a
//!   network so the server streams with zero configuration.
//!
//! [`registry::ModelRegistry`] holds the configured models, each a
//! [`router::RoutedModel`] over its deployments; [`start`] opens an answer
//! with retries (only while nothing of the answer has arrived), failover
//! to other deployments and fallback models (also in the middle of an
//! answer), and an idle timeout on every later piece.
//!
//! Error messages of this module are safe to log: they never contain an API
//! key (provider error bodies are scrubbed of the key and truncated). What a
//! client sees is only [`ProviderError::public_message`].

pub mod anthropic;
pub mod offline;
pub mod openai;
pub mod registry;
pub mod router;
mod sse;

pub use registry::{ModelEntry, ModelRegistry, RetryPolicy};

use futures::StreamExt;
use futures::stream::BoxStream;
use std::time::Duration;

/// Who wrote a message of a model's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    /// The result of a tool call (`tool_call_id` names the call).
    Tool,
}

/// One message of a model's input.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// Tool calls the assistant made in this turn.
    pub tool_calls: Vec<ToolCall>,
    /// For [`Role::Tool`]: the call this is the result of.
    pub tool_call_id: Option<String>,
    /// What a user message carries besides its text (images, PDFs), sent
    /// as the provider's own content parts before the text.
    pub attachments: Vec<Attachment>,
    /// An assistant turn's reasoning blocks, sent back unchanged in the
    /// same answer's tool loop (Anthropic requires its `thinking` blocks,
    /// with their signatures, before the `tool_use` they led to). Only the
    /// runtime fills it, from the same model's answer: no provider is ever
    /// sent another provider's reasoning, and stored history carries none.
    pub reasoning: Vec<ReasoningBlock>,
}

/// A file a user message carries to a model that takes it natively.
#[derive(Clone, Debug, PartialEq)]
pub enum Attachment {
    /// An image, already prepared (decoded once, downscaled to the
    /// providers' maximum, re-encoded without metadata: see
    /// [`crate::media::prepare_image`]).
    Image {
        /// `image/jpeg` or `image/png`.
        media_type: String,
        data: bytes::Bytes,
        width: u32,
        height: u32,
        /// OpenAI's `detail` (`auto` unless asked otherwise).
        detail: crate::media::ImageDetail,
    },
    /// A PDF, as uploaded (bounded in bytes and pages by the caller).
    Pdf {
        filename: String,
        data: bytes::Bytes,
        pages: u32,
    },
}

/// A reasoning block of an answer, as its provider gave it, kept to be
/// sent back to the same provider within the answer's tool loop.
#[derive(Clone, Debug, PartialEq)]
pub enum ReasoningBlock {
    /// Anthropic `thinking`: its text and the `signature` that proves it.
    Thinking { thinking: String, signature: String },
    /// Anthropic `redacted_thinking`: encrypted, opaque data.
    Redacted { data: String },
}

/// How hard a reasoning model thinks, in the model's own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasoning {
    /// OpenAI `reasoning_effort` (o-series, GPT-5).
    Effort(ReasoningEffort),
    /// Anthropic extended thinking: `thinking.budget_tokens`.
    Budget(u32),
}

/// OpenAI's `reasoning_effort` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            attachments: Vec::new(),
            reasoning: Vec::new(),
        }
    }
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::Assistant, content)
    }
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            attachments: Vec::new(),
            reasoning: Vec::new(),
        }
    }
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A complete tool call (the streamed fragments assembled).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the JSON text the model produced.
    pub arguments: String,
}

/// Tokens a provider reported for one answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u32,
    /// Of the output tokens, those spent reasoning (OpenAI's
    /// `completion_tokens_details.reasoning_tokens`; for Anthropic, which
    /// counts thinking in its output without a separate figure, estimated
    /// from the thinking text and capped at the output).
    pub reasoning_tokens: u32,
}

impl Usage {
    pub fn total_tokens(&self) -> u32 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

/// What to ask the model.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    /// Reasoning asked of a reasoning model (already bounded by the
    /// model's table). A client whose model does not take this kind sends
    /// nothing; with reasoning on, no `temperature` is sent (OpenAI's
    /// reasoning models and Anthropic's extended thinking refuse one).
    pub reasoning: Option<Reasoning>,
    /// The answer is wanted only once complete (its caller passes nothing
    /// on before the end): a provider that can answer in one piece is
    /// asked to (OpenAI-compatible: `stream: false`), which costs one read
    /// and one decode instead of one per chunk. The answer still arrives
    /// as events; [`start`] waits for it up to the policy's
    /// `answer_timeout` instead of the idle timeout.
    pub whole: bool,
    /// The last message is the assistant's partial answer, to be
    /// continued rather than answered (a failover inside a stream: see
    /// [`router`]). Anthropic continues a final assistant message by
    /// itself; an OpenAI-compatible server is sent vLLM's
    /// `continue_final_message: true` and `add_generation_prompt: false`.
    pub continue_final: bool,
}

/// One piece of a streamed answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    /// The next piece of text.
    Text(String),
    /// The next piece of the model's reasoning (shown apart from the text:
    /// Anthropic `thinking_delta`, OpenAI-compatible `reasoning_content`
    /// or `reasoning`).
    Reasoning(String),
    /// A complete reasoning block to send back in a tool loop (Anthropic
    /// `thinking` with its signature, `redacted_thinking`), emitted when
    /// the block ends; its text was streamed as [`ChatEvent::Reasoning`].
    ReasoningBlock(ReasoningBlock),
    /// A tool call, complete (emitted once its last fragment arrived).
    ToolCall(ToolCall),
    /// Token usage (usually once, near the end).
    Usage(Usage),
    /// Which model and deployment answer from here on, and why (a routed
    /// model's first event, and again at each failover). With `restart`,
    /// the events before it are void: the answer starts over.
    Route(Box<router::Route>),
    /// The answer is complete.
    Finish(FinishReason),
}

/// A streamed answer. It ends after [`ChatEvent::Finish`], or with an error
/// when the answer broke off.
pub type ChatStream = BoxStream<'static, Result<ChatEvent, ProviderError>>;

/// A language model that streams answers.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// Sends the request. Resolves when the provider has accepted it (its
    /// response headers arrived); the stream then yields the answer.
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError>;

    /// The provider's name and the model's, for traces
    /// (`gen_ai.provider.name`, `gen_ai.request.model`).
    fn describe(&self) -> (&str, &str) {
        ("unknown", "unknown")
    }

    /// Starts an answer (see [`start`]): by default this one upstream,
    /// retried as [`start_single`] does; a routed model overrides it.
    async fn start(
        &self,
        request: &ChatRequest,
        policy: &RetryPolicy,
        log: &slog::Logger,
    ) -> Result<ChatStream, ProviderError> {
        start_single(self, request, policy, log).await
    }
}

/// What went wrong with a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// No connection (refused, DNS, TLS, connect timeout).
    Connect,
    /// No response or no next piece within the idle timeout.
    Timeout,
    /// 429.
    RateLimited,
    /// 5xx (or an overload error event).
    Server(u16),
    /// Another 4xx: bad key, unknown model, bad request. Not retried.
    Rejected(u16),
    /// Data the client could not understand.
    Malformed,
    /// The answer broke off (connection dropped, stream ended early).
    Interrupted,
    /// Every deployment of a routed model and of its fallbacks failed or
    /// is cooling down (`retry_after`: when one may answer again).
    NoneAvailable,
}

/// A provider failure. `detail` is for the log (scrubbed of keys).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?}: {detail}")]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    pub detail: String,
    /// A `Retry-After` the provider sent.
    pub retry_after: Option<Duration>,
}

impl ProviderError {
    pub fn new(kind: ProviderErrorKind, detail: impl Into<String>) -> ProviderError {
        ProviderError {
            kind,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// Whether a new attempt may succeed, provided nothing of the answer
    /// was passed on yet.
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            ProviderErrorKind::Connect
                | ProviderErrorKind::Timeout
                | ProviderErrorKind::RateLimited
                | ProviderErrorKind::Server(_)
                | ProviderErrorKind::Interrupted
        )
    }

    /// The stable error code clients see.
    pub fn error_code(&self) -> &'static str {
        match self.kind {
            ProviderErrorKind::Connect | ProviderErrorKind::Server(_) => "provider_unavailable",
            ProviderErrorKind::RateLimited => "provider_rate_limited",
            ProviderErrorKind::Rejected(_) => "provider_rejected",
            ProviderErrorKind::Timeout => "provider_timeout",
            ProviderErrorKind::Malformed | ProviderErrorKind::Interrupted => {
                "provider_stream_interrupted"
            }
            ProviderErrorKind::NoneAvailable => "providers_unavailable",
        }
    }

    /// The message clients see: no provider detail.
    pub fn public_message(&self) -> &'static str {
        match self.kind {
            ProviderErrorKind::Connect | ProviderErrorKind::Server(_) => {
                "the model provider is unavailable; try again later"
            }
            ProviderErrorKind::RateLimited => {
                "the model provider is rate limiting requests; try again later"
            }
            ProviderErrorKind::Rejected(_) => {
                "the model provider refused the request (check the server's model configuration)"
            }
            ProviderErrorKind::Timeout => "the model provider stopped answering",
            ProviderErrorKind::Malformed | ProviderErrorKind::Interrupted => {
                "the model provider's answer broke off"
            }
            ProviderErrorKind::NoneAvailable => {
                "every deployment of the model and of its fallbacks is unavailable; try again later"
            }
        }
    }

    /// Classifies a transport error of reqwest.
    pub(crate) fn from_reqwest(error: &reqwest::Error, while_streaming: bool) -> ProviderError {
        // reqwest's Display never includes headers, so no key can leak.
        let detail = format!("{error}");
        let kind = if error.is_timeout() {
            ProviderErrorKind::Timeout
        } else if error.is_connect() && !while_streaming {
            ProviderErrorKind::Connect
        } else if while_streaming || error.is_body() || error.is_decode() {
            ProviderErrorKind::Interrupted
        } else {
            ProviderErrorKind::Connect
        };
        ProviderError::new(kind, detail)
    }
}

/// Removes `secret` from `text` and cuts it to a loggable length.
pub(crate) fn scrub(text: &str, secret: Option<&str>) -> String {
    let mut text = match secret {
        Some(s) if s.len() >= 4 => text.replace(s, "<redacted>"),
        _ => text.to_string(),
    };
    if text.len() > 500 {
        let mut end = 500;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// Turns a non-2xx response into an error (reading a bounded part of the
/// body for the log).
pub(crate) async fn error_from_response(
    response: reqwest::Response,
    secret: Option<&str>,
) -> ProviderError {
    let status = response.status().as_u16();
    let retry_after = crate::fetch::retry_after(response.headers());
    let body = crate::fetch::read_limited(response, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    // Both OpenAI and Anthropic put a message at `error.message`; OpenAI
    // a code at `error.code` (`context_length_exceeded`,
    // `content_policy_violation`), Anthropic a type at `error.type`: kept
    // in the detail, which the router reads.
    let parsed = serde_json::from_str::<serde_json::Value>(&body).ok();
    let code = parsed.as_ref().and_then(|v| {
        ["/error/code", "/error/type"]
            .iter()
            .find_map(|p| v.pointer(p).and_then(|c| c.as_str()))
            .map(str::to_string)
    });
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or(body);
    let kind = match status {
        429 => ProviderErrorKind::RateLimited,
        408 => ProviderErrorKind::Timeout,
        500..=599 => ProviderErrorKind::Server(status),
        _ => ProviderErrorKind::Rejected(status),
    };
    let code = code
        .map(|c| format!(" ({})", scrub(&c, secret)))
        .unwrap_or_default();
    ProviderError {
        kind,
        detail: format!("HTTP {status}{code}: {}", scrub(&message, secret)),
        retry_after,
    }
}

/// Asks `model` for a short answer (a title, a ranking) and returns its
/// whole text, or `None` when the provider fails or `budget` passes. The
/// answer is asked for in one piece ([`ChatRequest::whole`]): nothing of
/// it is used before its end. Retries as [`start`] does, within the
/// budget. `wrap` may wrap the stream once it started, and hears of a
/// failure to start (the usage recorder's metering).
pub async fn ask(
    model: &dyn ChatModel,
    request: &ChatRequest,
    policy: &RetryPolicy,
    log: &slog::Logger,
    budget: Duration,
    wrap: impl FnOnce(Result<ChatStream, &ProviderError>) -> Option<ChatStream> + Send,
) -> Option<String> {
    let whole;
    let request = if request.whole {
        request
    } else {
        whole = ChatRequest {
            whole: true,
            ..request.clone()
        };
        &whole
    };
    let asked = async {
        let mut stream = match start(model, request, policy, log).await {
            Ok(stream) => wrap(Ok(stream))?,
            Err(e) => {
                wrap(Err(&e));
                return None;
            }
        };
        let mut text = String::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(ChatEvent::Text(t)) => text.push_str(&t),
                Ok(ChatEvent::Route(route)) if route.restart => text.clear(),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        Some(text)
    };
    tokio::time::timeout(budget, asked).await.ok().flatten()
}

/// Starts an answer from `model` ([`ChatModel::start`]): a routed model
/// ([`router::RoutedModel`]) goes through its deployments and fallbacks;
/// any other, as [`start_single`].
pub async fn start(
    model: &dyn ChatModel,
    request: &ChatRequest,
    policy: &RetryPolicy,
    log: &slog::Logger,
) -> Result<ChatStream, ProviderError> {
    model.start(request, policy, log).await
}

/// Starts an answer from one upstream, retrying while it is safe: a
/// failure of the request itself or of the stream before its first event
/// (nothing was passed on yet) is retried up to `policy.max_retries` times
/// with jittered exponential backoff (or the provider's `Retry-After`, at
/// most 10 s). Every later event must arrive within `policy.idle_timeout`,
/// else the stream ends with a [`ProviderErrorKind::Timeout`] error. An
/// answer asked for in one piece ([`ChatRequest::whole`]) may take
/// `policy.answer_timeout` to arrive.
pub async fn start_single<M: ChatModel + ?Sized>(
    model: &M,
    request: &ChatRequest,
    policy: &RetryPolicy,
    log: &slog::Logger,
) -> Result<ChatStream, ProviderError> {
    let mut attempts = 0u32;
    loop {
        let error = match attempt(model, request, policy, policy.idle_timeout).await {
            Ok(stream) => return Ok(stream),
            Err(error) => error,
        };
        if !error.retryable() || attempts >= policy.max_retries {
            slog::warn!(log, "model provider failed"; "error" => %error, "attempts" => attempts + 1);
            return Err(error);
        }
        let backoff = error
            .retry_after
            .map(|d| d.min(Duration::from_secs(10)))
            .unwrap_or_else(|| {
                (policy.backoff * 2u32.saturating_pow(attempts))
                    .mul_f64(rand::random_range(0.5..1.0))
            });
        slog::info!(log, "model provider failed; retrying";
            "error" => %error, "attempt" => attempts + 1, "backoff_ms" => backoff.as_millis() as u64);
        tokio::time::sleep(backoff).await;
        attempts += 1;
    }
}

/// One try of one upstream: resolves once the answer's first event
/// arrived (the response within `first_event`, then its first piece within
/// `first_event` again; an answer asked for in one piece within
/// `policy.answer_timeout`), with the stream (that event first, every
/// later one within the idle timeout) traced as a model call.
pub(crate) async fn attempt<M: ChatModel + ?Sized>(
    model: &M,
    request: &ChatRequest,
    policy: &RetryPolicy,
    first_event: Duration,
) -> Result<ChatStream, ProviderError> {
    let (provider, model_name) = model.describe();
    // The call's span (while tracing is on): current while the provider is
    // asked (its `traceparent` goes with the request), ended with the
    // stream.
    let mut span = crate::telemetry::model_call(provider, model_name);
    let started = std::time::Instant::now();
    let first_wait = if request.whole {
        policy.answer_timeout
    } else {
        first_event
    };
    let asked = tokio::time::timeout(first_wait, model.stream(request));
    let asked = match &span {
        Some(span) => span.run(asked).await,
        None => asked.await,
    };
    let error = match asked {
        Err(_) => ProviderError::new(
            ProviderErrorKind::Timeout,
            if request.whole {
                "no answer within the answer timeout"
            } else {
                "no response headers within the first-event timeout"
            },
        ),
        Ok(Err(e)) => e,
        Ok(Ok(mut stream)) => match tokio::time::timeout(first_wait, stream.next()).await {
            Err(_) => ProviderError::new(
                ProviderErrorKind::Timeout,
                "no data within the first-event timeout",
            ),
            Ok(Some(Err(e))) => e,
            Ok(None) => ProviderError::new(
                ProviderErrorKind::Interrupted,
                "the answer ended before it began",
            ),
            Ok(Some(Ok(first))) => {
                let rest = with_idle_timeout(stream, policy.idle_timeout);
                let stream = futures::stream::once(async move { Ok(first) })
                    .chain(rest)
                    .boxed();
                return Ok(match span.take() {
                    Some(mut span) => {
                        span.set(opentelemetry::KeyValue::new(
                            "gen_ai.response.time_to_first_token",
                            started.elapsed().as_secs_f64(),
                        ));
                        traced(stream, span)
                    }
                    None => stream,
                });
            }
        },
    };
    if let Some(span) = span.as_mut() {
        span.fail(error.to_string());
    }
    Err(error)
}

/// `stream` with its model call's span: the tokens of its usage and its
/// finish reason noted as they pass, the span ended with the stream.
fn traced(stream: ChatStream, mut span: crate::telemetry::ChildSpan) -> ChatStream {
    use opentelemetry::KeyValue;
    stream
        .map(move |item| {
            match &item {
                Ok(ChatEvent::Usage(usage)) => {
                    span.set(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        i64::from(usage.input_tokens),
                    ));
                    span.set(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        i64::from(usage.output_tokens),
                    ));
                }
                Ok(ChatEvent::Finish(reason)) => {
                    let reason = match reason {
                        FinishReason::Stop => "stop".to_string(),
                        FinishReason::Length => "length".to_string(),
                        FinishReason::ToolCalls => "tool_calls".to_string(),
                        FinishReason::ContentFilter => "content_filter".to_string(),
                        FinishReason::Other(other) => other.clone(),
                    };
                    span.set(KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        opentelemetry::Value::Array(
                            vec![opentelemetry::StringValue::from(reason)].into(),
                        ),
                    ));
                }
                Ok(_) => {}
                Err(e) => span.fail(e.to_string()),
            }
            item
        })
        .boxed()
}

/// Ends `stream` with a timeout error when an event takes longer than
/// `idle` to arrive.
fn with_idle_timeout(stream: ChatStream, idle: Duration) -> ChatStream {
    futures::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(item)) => Some((item, Some(stream))),
            Ok(None) => None,
            Err(_) => Some((
                Err(ProviderError::new(
                    ProviderErrorKind::Timeout,
                    "no data within the idle timeout",
                )),
                None,
            )),
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_keys_and_truncates() {
        assert_eq!(
            scrub("bad key sk-secret-123 given", Some("sk-secret-123")),
            "bad key <redacted> given"
        );
        let long = "é".repeat(400);
        assert!(scrub(&long, None).len() <= 503);
    }

    #[test]
    fn codes() {
        let e = ProviderError::new(ProviderErrorKind::Server(503), "x");
        assert!(e.retryable());
        assert_eq!(e.error_code(), "provider_unavailable");
        let e = ProviderError::new(ProviderErrorKind::Rejected(401), "x");
        assert!(!e.retryable());
        assert_eq!(e.error_code(), "provider_rejected");
    }
}
