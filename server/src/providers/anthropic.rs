//! Anthropic's Messages API (`POST {base_url}/v1/messages` with
//! `stream: true`).
//!
//! The answer is SSE with named events whose data carries the same `type`:
//! `message_start` (input usage), `content_block_start` (a `text`,
//! `tool_use`, `thinking` or `redacted_thinking` block),
//! `content_block_delta` (`text_delta`, `input_json_delta`,
//! `thinking_delta`, `signature_delta`), `content_block_stop`,
//! `message_delta` (`stop_reason`, output usage), `message_stop`, `ping`,
//! and `error`.
//!
//! Attachments of a user message go as content blocks before its text, as
//! the "Vision" and "PDF support" guides show: an `image` block and a
//! `document` block (titled with the file's name), each with a `base64`
//! source.
//!
//! Extended thinking (the "Building with extended thinking" guide):
//! [`Reasoning::Budget`] is sent as `thinking: {type: enabled,
//! budget_tokens}`. A `thinking` block streams its text as
//! `thinking_delta`s, passed on as [`ChatEvent::Reasoning`], then its
//! `signature` as a `signature_delta`; a `redacted_thinking` block arrives
//! whole, its `data` encrypted. Each is passed on complete, at its
//! `content_block_stop`, as a [`ChatEvent::ReasoningBlock`]: within a tool
//! loop the assistant turn must be sent back with its thinking blocks
//! unchanged and first (the guide's "Preserving thinking blocks"), which
//! [`AnthropicClient::body`] does with [`ChatMessage::reasoning`].

use super::sse::{self, Decoder};
use super::{
    Attachment, ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, FinishReason,
    ProviderError, ProviderErrorKind, Reasoning, ReasoningBlock, Role, ToolCall, Usage,
};
use base64::Engine as _;
use eventsource_stream::Event;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; used when none is configured.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A client for one Anthropic model.
pub struct AnthropicClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    model: String,
}

impl AnthropicClient {
    /// `base_url` is the API root, e.g. `https://api.anthropic.com` (a
    /// trailing `/v1` is accepted too).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<String>,
        model: impl Into<String>,
    ) -> AnthropicClient {
        let base = base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        AnthropicClient {
            http,
            url,
            api_key,
            model: model.into(),
        }
    }

    /// The JSON body of a request.
    ///
    /// With a thinking budget ([`Reasoning::Budget`]), `max_tokens` counts
    /// the thinking too and must exceed the budget: a `max_tokens` (asked
    /// or [`DEFAULT_MAX_TOKENS`]) at or below the budget becomes the budget
    /// plus [`DEFAULT_MAX_TOKENS`], so the answer keeps the room it has
    /// without thinking. With any reasoning asked for, no `temperature` is
    /// sent (extended thinking refuses one); [`Reasoning::Effort`] is
    /// OpenAI's and is not sent.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let messages: Vec<Value> = request
            .messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(message)
            .collect();
        let mut max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let budget = match request.reasoning {
            Some(Reasoning::Budget(budget)) => Some(budget),
            _ => None,
        };
        if let Some(budget) = budget
            && max_tokens <= budget
        {
            max_tokens = budget.saturating_add(DEFAULT_MAX_TOKENS);
        }
        let mut body = json!({
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": messages,
            "stream": true,
        });
        if let Some(budget) = budget {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                                "input_schema": t.parameters})
                })
                .collect();
        }
        if let Some(t) = request.temperature
            && request.reasoning.is_none()
        {
            body["temperature"] = json!(t);
        }
        body
    }
}

/// One message of the request (not a system message: those go in
/// `system`).
fn message(m: &ChatMessage) -> Value {
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() || !m.reasoning.is_empty() => {
            // Thinking blocks first and unchanged, then the text, then
            // the tool calls.
            let mut blocks: Vec<Value> = m.reasoning.iter().map(reasoning_block).collect();
            if !m.content.is_empty() {
                blocks.push(json!({"type": "text", "text": m.content}));
            }
            for call in &m.tool_calls {
                let input: Value =
                    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                blocks.push(json!({"type": "tool_use", "id": call.id,
                                   "name": call.name, "input": input}));
            }
            json!({"role": "assistant", "content": blocks})
        }
        Role::Tool => json!({"role": "user", "content": [{
            "type": "tool_result",
            "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content,
        }]}),
        Role::Assistant => json!({"role": "assistant", "content": m.content}),
        Role::User if !m.attachments.is_empty() => {
            json!({"role": "user", "content": user_blocks(m)})
        }
        Role::User | Role::System => json!({"role": "user", "content": m.content}),
    }
}

/// A reasoning block as the API gave it.
fn reasoning_block(block: &ReasoningBlock) -> Value {
    match block {
        ReasoningBlock::Thinking {
            thinking,
            signature,
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        ReasoningBlock::Redacted { data } => json!({"type": "redacted_thinking", "data": data}),
    }
}

/// A user message's blocks: its attachments, then its text (left out when
/// empty: the API refuses an empty text block).
fn user_blocks(m: &ChatMessage) -> Vec<Value> {
    let base64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    let mut blocks: Vec<Value> = m
        .attachments
        .iter()
        .map(|attachment| match attachment {
            Attachment::Image {
                media_type, data, ..
            } => json!({"type": "image", "source": {
                "type": "base64", "media_type": media_type, "data": base64(data),
            }}),
            Attachment::Pdf { filename, data, .. } => json!({"type": "document", "source": {
                "type": "base64", "media_type": "application/pdf", "data": base64(data),
            }, "title": filename}),
        })
        .collect();
    if !m.content.is_empty() {
        blocks.push(json!({"type": "text", "text": m.content}));
    }
    blocks
}

#[async_trait::async_trait]
impl ChatModel for AnthropicClient {
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        let mut builder = self
            .http
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .headers(crate::telemetry::trace_headers())
            .json(&self.body(request));
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| ProviderError::from_reqwest(&e, false))?;
        if !response.status().is_success() {
            return Err(super::error_from_response(response, self.api_key.as_deref()).await);
        }
        Ok(sse::decode(response, EventDecoder::default()))
    }

    fn describe(&self) -> (&str, &str) {
        ("anthropic", &self.model)
    }
}

/// A content block being received.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    /// Its text and signature so far (kept to be sent back).
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
}

/// Decodes Messages API events.
#[derive(Default)]
pub(crate) struct EventDecoder {
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    /// Bytes of thinking text in the answer (for the usage's estimate).
    thinking_bytes: usize,
    /// Bytes of reasoning blocks kept to be sent back (thinking text,
    /// signatures, redacted data), for the whole answer.
    kept_bytes: usize,
    stop_reason: Option<FinishReason>,
    done: bool,
}

fn stop_reason(text: &str) -> FinishReason {
    match text {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

fn malformed(what: impl Into<String>) -> ProviderError {
    ProviderError::new(ProviderErrorKind::Malformed, what)
}

impl EventDecoder {
    /// Counts `len` more bytes of reasoning blocks kept to be sent back;
    /// an error past [`sse::MAX_ACCUMULATED`] for the answer (far above
    /// the largest thinking budget's text), so a provider that never ends
    /// its thinking cannot grow it without end.
    fn keep(&mut self, len: usize) -> Result<(), ProviderError> {
        self.kept_bytes = self.kept_bytes.saturating_add(len);
        if self.kept_bytes > sse::MAX_ACCUMULATED {
            return Err(malformed(format!(
                "the answer's reasoning blocks are over {} bytes",
                sse::MAX_ACCUMULATED
            )));
        }
        Ok(())
    }

    /// The answer's usage. Anthropic counts thinking among the output
    /// tokens without a figure of its own (the extended thinking guide:
    /// billed as output tokens), so `reasoning_tokens` is an estimate: the
    /// thinking text's bytes / 4, rounded up, at most the output tokens.
    /// Redacted thinking is not counted: its encrypted data says nothing
    /// of the thinking's length.
    fn usage(&self) -> Usage {
        let estimate = u32::try_from(self.thinking_bytes.div_ceil(4)).unwrap_or(u32::MAX);
        Usage {
            reasoning_tokens: estimate.min(self.usage.output_tokens),
            ..self.usage
        }
    }

    fn block_start(&mut self, index: u64, data: &Value) -> Result<Vec<ChatEvent>, ProviderError> {
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        let mut out = Vec::new();
        let started = match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => Block::Tool {
                id: text("id").to_string(),
                name: text("name").to_string(),
                json: String::new(),
            },
            Some("thinking") => {
                // The block may open with text (and, from some servers, an
                // empty signature).
                let (thinking, signature) = (text("thinking"), text("signature"));
                self.keep(thinking.len() + signature.len())?;
                if !thinking.is_empty() {
                    self.thinking_bytes += thinking.len();
                    out.push(ChatEvent::Reasoning(thinking.to_string()));
                }
                Block::Thinking {
                    thinking: thinking.to_string(),
                    signature: signature.to_string(),
                }
            }
            Some("redacted_thinking") => match block.get("data").and_then(Value::as_str) {
                Some(data) if !data.is_empty() => {
                    self.keep(data.len())?;
                    Block::Redacted {
                        data: data.to_string(),
                    }
                }
                _ => return Err(malformed("a redacted_thinking block without data")),
            },
            _ => {
                if !text("text").is_empty() {
                    out.push(ChatEvent::Text(text("text").to_string()));
                }
                Block::Text
            }
        };
        self.blocks.insert(index, started);
        Ok(out)
    }

    fn block_delta(&mut self, index: u64, data: &Value) -> Result<Vec<ChatEvent>, ProviderError> {
        let delta = data.get("delta").unwrap_or(&Value::Null);
        let field = |kind: &str, key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| malformed(format!("{kind} without {key}")))
        };
        let mut out = Vec::new();
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                let text = field("text_delta", "text")?;
                if !text.is_empty() {
                    out.push(ChatEvent::Text(text.to_string()));
                }
            }
            Some("input_json_delta") => {
                if let Some(Block::Tool { json, .. }) = self.blocks.get_mut(&index) {
                    let piece = delta
                        .get("partial_json")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    sse::append_bounded(json, piece, "a tool call's arguments")?;
                }
            }
            Some("thinking_delta") => {
                let piece = field("thinking_delta", "thinking")?;
                if !matches!(self.blocks.get(&index), Some(Block::Thinking { .. })) {
                    return Err(malformed("thinking_delta outside a thinking block"));
                }
                self.keep(piece.len())?;
                if let Some(Block::Thinking { thinking, .. }) = self.blocks.get_mut(&index) {
                    thinking.push_str(piece);
                }
                if !piece.is_empty() {
                    self.thinking_bytes += piece.len();
                    out.push(ChatEvent::Reasoning(piece.to_string()));
                }
            }
            Some("signature_delta") => {
                let piece = field("signature_delta", "signature")?;
                if !matches!(self.blocks.get(&index), Some(Block::Thinking { .. })) {
                    return Err(malformed("signature_delta outside a thinking block"));
                }
                self.keep(piece.len())?;
                if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(&index) {
                    signature.push_str(piece);
                }
            }
            // Delta types added later are ignored.
            _ => {}
        }
        Ok(out)
    }

    fn block_stop(&mut self, index: u64) -> Result<Vec<ChatEvent>, ProviderError> {
        Ok(match self.blocks.remove(&index) {
            Some(Block::Tool { id, name, json }) => vec![ChatEvent::ToolCall(ToolCall {
                id,
                name,
                arguments: if json.is_empty() { "{}".into() } else { json },
            })],
            Some(Block::Thinking {
                thinking,
                signature,
            }) => {
                if signature.is_empty() {
                    // Unsigned, it could not be sent back in the tool loop
                    // (the API refuses a thinking block without its
                    // signature).
                    return Err(malformed("a thinking block ended without a signature"));
                }
                vec![ChatEvent::ReasoningBlock(ReasoningBlock::Thinking {
                    thinking,
                    signature,
                })]
            }
            Some(Block::Redacted { data }) => {
                vec![ChatEvent::ReasoningBlock(ReasoningBlock::Redacted { data })]
            }
            Some(Block::Text) | None => Vec::new(),
        })
    }
}

impl Decoder for EventDecoder {
    fn event(&mut self, event: &Event) -> Result<Vec<ChatEvent>, ProviderError> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let data = sse::json(event)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let n = |v: &Value, p: &str| {
            let n = v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                self.usage.input_tokens = n(&data, "/message/usage/input_tokens")
                    .saturating_add(n(&data, "/message/usage/cache_read_input_tokens"))
                    .saturating_add(n(&data, "/message/usage/cache_creation_input_tokens"));
                self.usage.cached_tokens = n(&data, "/message/usage/cache_read_input_tokens");
                self.usage.output_tokens = n(&data, "/message/usage/output_tokens");
            }
            "content_block_start" => out = self.block_start(index, &data)?,
            "content_block_delta" => out = self.block_delta(index, &data)?,
            "content_block_stop" => out = self.block_stop(index)?,
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if data.pointer("/usage/output_tokens").is_some() {
                    self.usage.output_tokens = n(&data, "/usage/output_tokens");
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(ChatEvent::Usage(self.usage()));
                out.push(ChatEvent::Finish(
                    self.stop_reason.take().unwrap_or(FinishReason::Stop),
                ));
            }
            "error" => {
                let kind = data
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let error_kind = match kind {
                    "overloaded_error" => ProviderErrorKind::Server(529),
                    "api_error" => ProviderErrorKind::Server(500),
                    "rate_limit_error" => ProviderErrorKind::RateLimited,
                    _ => ProviderErrorKind::Interrupted,
                };
                return Err(ProviderError::new(
                    error_kind,
                    format!("{kind}: {}", super::scrub(message, None)),
                ));
            }
            // ping and event types added later are ignored.
            _ => {}
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn eof(&mut self) -> Result<Vec<ChatEvent>, ProviderError> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err(ProviderError::new(
                ProviderErrorKind::Interrupted,
                "the stream ended before message_stop",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::sse::testing::run;

    const TEXT: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"lookup\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    #[tokio::test]
    async fn text_tool_use_and_usage() {
        let events: Vec<ChatEvent> = run(TEXT, EventDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            [
                ChatEvent::Text("Hi".into()),
                ChatEvent::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "lookup".into(),
                    arguments: "{\"q\":1}".into()
                }),
                ChatEvent::Usage(Usage {
                    input_tokens: 12,
                    output_tokens: 15,
                    cached_tokens: 0,
                    ..Default::default()
                }),
                ChatEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[tokio::test]
    async fn error_event_and_early_end() {
        let events = run(
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            EventDecoder::default(),
        )
        .await;
        assert_eq!(
            events[0].as_ref().unwrap_err().kind,
            ProviderErrorKind::Server(529)
        );
        let cut = &TEXT[..TEXT.find("event: message_stop").unwrap()];
        let events = run(cut, EventDecoder::default()).await;
        assert_eq!(
            events.last().unwrap().as_ref().unwrap_err().kind,
            ProviderErrorKind::Interrupted
        );
    }

    #[test]
    fn request_body() {
        let client = AnthropicClient::new(reqwest::Client::new(), "http://x/v1", None, "claude-x");
        assert_eq!(client.url, "http://x/v1/messages");
        let body = client.body(&ChatRequest {
            messages: vec![
                super::super::ChatMessage::system("be brief"),
                super::super::ChatMessage::user("hi"),
            ],
            ..Default::default()
        });
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(body["messages"].as_array().unwrap().len(), 1);
        assert_eq!(body["stream"], true);
    }

    /// An SSE event as the Messages API names it.
    fn event(data: Value) -> String {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    }

    fn message_start() -> String {
        event(json!({"type": "message_start", "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 40, "output_tokens": 1}}}))
    }

    fn block_start(index: u64, block: Value) -> String {
        event(json!({"type": "content_block_start", "index": index, "content_block": block}))
    }

    fn delta(index: u64, delta: Value) -> String {
        event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
    }

    fn block_stop(index: u64) -> String {
        event(json!({"type": "content_block_stop", "index": index}))
    }

    fn message_end(stop_reason: &str, output_tokens: u32) -> String {
        event(json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}}))
            + &event(json!({"type": "message_stop"}))
    }

    async fn decode(text: &str) -> Vec<ChatEvent> {
        run(text, EventDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect()
    }

    const SIGNATURE: &str = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds";

    /// The extended thinking guide's streaming example: a thinking block
    /// (opened empty, several `thinking_delta`s, one `signature_delta`),
    /// then a text block.
    #[tokio::test]
    async fn extended_thinking_stream() {
        let text = [
            message_start(),
            block_start(0, json!({"type": "thinking", "thinking": ""})),
            delta(
                0,
                json!({"type": "thinking_delta",
                "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453"}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": "\n2. 453 = 400 + 50 + 3"}),
            ),
            delta(
                0,
                json!({"type": "signature_delta", "signature": SIGNATURE}),
            ),
            block_stop(0),
            block_start(1, json!({"type": "text", "text": ""})),
            delta(
                1,
                json!({"type": "text_delta", "text": "27 * 453 = 12,231"}),
            ),
            block_stop(1),
            message_end("end_turn", 90),
        ]
        .concat();
        let thinking = "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3";
        assert_eq!(
            decode(&text).await,
            [
                ChatEvent::Reasoning(
                    "Let me solve this step by step:\n\n1. First break down 27 * 453".into()
                ),
                ChatEvent::Reasoning("\n2. 453 = 400 + 50 + 3".into()),
                ChatEvent::ReasoningBlock(ReasoningBlock::Thinking {
                    thinking: thinking.into(),
                    signature: SIGNATURE.into(),
                }),
                ChatEvent::Text("27 * 453 = 12,231".into()),
                ChatEvent::Usage(Usage {
                    input_tokens: 40,
                    output_tokens: 90,
                    cached_tokens: 0,
                    reasoning_tokens: thinking.len().div_ceil(4) as u32,
                }),
                ChatEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    /// A thinking block that opens with text and a signature field (empty
    /// until its `signature_delta`), and an estimate capped at the output.
    #[tokio::test]
    async fn thinking_opened_with_text_and_a_small_output() {
        let text = [
            message_start(),
            block_start(
                0,
                json!({"type": "thinking", "thinking": "Hmm.", "signature": ""}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": " Long thought here."}),
            ),
            delta(0, json!({"type": "signature_delta", "signature": "c2ln"})),
            block_stop(0),
            message_end("end_turn", 2),
        ]
        .concat();
        let events = decode(&text).await;
        assert_eq!(
            events[..3],
            [
                ChatEvent::Reasoning("Hmm.".into()),
                ChatEvent::Reasoning(" Long thought here.".into()),
                ChatEvent::ReasoningBlock(ReasoningBlock::Thinking {
                    thinking: "Hmm. Long thought here.".into(),
                    signature: "c2ln".into(),
                }),
            ]
        );
        let ChatEvent::Usage(usage) = &events[3] else {
            panic!("{events:?}")
        };
        assert_eq!((usage.output_tokens, usage.reasoning_tokens), (2, 2));
    }

    /// The guide's redacted thinking: a `redacted_thinking` block arrives
    /// whole with its encrypted `data`, then text.
    #[tokio::test]
    async fn redacted_thinking_then_text() {
        let data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP";
        let text = [
            message_start(),
            block_start(0, json!({"type": "redacted_thinking", "data": data})),
            block_stop(0),
            block_start(1, json!({"type": "text", "text": ""})),
            delta(1, json!({"type": "text_delta", "text": "Answer."})),
            block_stop(1),
            message_end("end_turn", 30),
        ]
        .concat();
        assert_eq!(
            decode(&text).await,
            [
                ChatEvent::ReasoningBlock(ReasoningBlock::Redacted { data: data.into() }),
                ChatEvent::Text("Answer.".into()),
                ChatEvent::Usage(Usage {
                    input_tokens: 40,
                    output_tokens: 30,
                    cached_tokens: 0,
                    reasoning_tokens: 0,
                }),
                ChatEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    /// Thinking, then a tool call (the guide's "Extended thinking with
    /// tool use"): the block comes before the call it led to.
    #[tokio::test]
    async fn thinking_then_tool_use() {
        let text = [
            message_start(),
            block_start(0, json!({"type": "thinking", "thinking": ""})),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": "I need the weather."}),
            ),
            delta(
                0,
                json!({"type": "signature_delta", "signature": SIGNATURE}),
            ),
            block_stop(0),
            block_start(
                1,
                json!({"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
            ),
            delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "{\"location\": "}),
            ),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "\"Paris\"}"}),
            ),
            block_stop(1),
            message_end("tool_use", 60),
        ]
        .concat();
        let events = decode(&text).await;
        assert_eq!(
            events[..3],
            [
                ChatEvent::Reasoning("I need the weather.".into()),
                ChatEvent::ReasoningBlock(ReasoningBlock::Thinking {
                    thinking: "I need the weather.".into(),
                    signature: SIGNATURE.into(),
                }),
                ChatEvent::ToolCall(ToolCall {
                    id: "toolu_01".into(),
                    name: "get_weather".into(),
                    arguments: "{\"location\": \"Paris\"}".into(),
                }),
            ]
        );
        assert_eq!(events[4], ChatEvent::Finish(FinishReason::ToolCalls));
    }

    async fn error_of(text: &str) -> ProviderError {
        let events = run(text, EventDecoder::default()).await;
        events.into_iter().find_map(Result::err).expect("an error")
    }

    #[tokio::test]
    async fn a_thinking_block_without_signature_is_malformed() {
        let text = [
            message_start(),
            block_start(0, json!({"type": "thinking", "thinking": ""})),
            delta(0, json!({"type": "thinking_delta", "thinking": "unsigned"})),
            block_stop(0),
            message_end("end_turn", 5),
        ]
        .concat();
        let error = error_of(&text).await;
        assert_eq!(error.kind, ProviderErrorKind::Malformed);
        assert!(
            error.detail.contains("without a signature"),
            "{}",
            error.detail
        );
    }

    #[tokio::test]
    async fn reasoning_outside_its_blocks_is_malformed() {
        for (text, expected) in [
            (
                [
                    message_start(),
                    delta(0, json!({"type": "thinking_delta", "thinking": "x"})),
                ]
                .concat(),
                "thinking_delta outside",
            ),
            (
                [
                    message_start(),
                    block_start(0, json!({"type": "text", "text": ""})),
                    delta(0, json!({"type": "signature_delta", "signature": "x"})),
                ]
                .concat(),
                "signature_delta outside",
            ),
            (
                [
                    message_start(),
                    block_start(0, json!({"type": "thinking", "thinking": ""})),
                    delta(0, json!({"type": "thinking_delta"})),
                ]
                .concat(),
                "thinking_delta without thinking",
            ),
            (
                [
                    message_start(),
                    block_start(0, json!({"type": "redacted_thinking"})),
                ]
                .concat(),
                "without data",
            ),
        ] {
            let error = error_of(&text).await;
            assert_eq!(error.kind, ProviderErrorKind::Malformed, "{expected}");
            assert!(error.detail.contains(expected), "{}", error.detail);
        }
    }

    /// The reasoning kept to be sent back is bounded for the answer: in
    /// one block, and across blocks.
    #[tokio::test]
    async fn reasoning_past_the_limit_is_malformed() {
        let half = "x".repeat(sse::MAX_ACCUMULATED / 2);
        let one_block = [
            message_start(),
            block_start(0, json!({"type": "thinking", "thinking": ""})),
            delta(0, json!({"type": "thinking_delta", "thinking": half})),
            delta(0, json!({"type": "thinking_delta", "thinking": half})),
            delta(0, json!({"type": "signature_delta", "signature": "sig"})),
        ]
        .concat();
        let blocks = [
            message_start(),
            block_start(0, json!({"type": "thinking", "thinking": half})),
            delta(0, json!({"type": "signature_delta", "signature": "sig"})),
            block_stop(0),
            block_start(1, json!({"type": "redacted_thinking", "data": half})),
        ]
        .concat();
        for text in [one_block, blocks] {
            let error = error_of(&text).await;
            assert_eq!(error.kind, ProviderErrorKind::Malformed);
            assert!(error.detail.contains("over"), "{}", error.detail);
        }
    }

    fn client() -> AnthropicClient {
        AnthropicClient::new(reqwest::Client::new(), "http://x", None, "claude-x")
    }

    #[test]
    fn attachments_are_blocks_before_the_text() {
        let mut user = ChatMessage::user("Summarise.");
        user.attachments = vec![
            Attachment::Image {
                media_type: "image/jpeg".into(),
                data: bytes::Bytes::from_static(b"\xff\xd8\xff"),
                width: 1,
                height: 1,
                detail: crate::media::ImageDetail::High,
            },
            Attachment::Pdf {
                filename: "report.pdf".into(),
                data: bytes::Bytes::from_static(b"%PDF-1.7"),
                pages: 3,
            },
        ];
        let body = client().body(&ChatRequest {
            messages: vec![
                user,
                ChatMessage::assistant("ok"),
                ChatMessage::user("plain"),
            ],
            ..Default::default()
        });
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                "data": "JVBERi0xLjc="}, "title": "report.pdf"},
                {"type": "text", "text": "Summarise."},
            ])
        );
        assert_eq!(body["messages"][2]["content"], "plain");
    }

    #[test]
    fn a_budget_enables_thinking() {
        let request = |max_tokens, reasoning| ChatRequest {
            messages: vec![ChatMessage::user("hi")],
            max_tokens,
            temperature: Some(0.5),
            reasoning,
            ..Default::default()
        };
        // A max_tokens above the budget is kept.
        let body = client().body(&request(Some(16000), Some(Reasoning::Budget(10000))));
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 10000})
        );
        assert_eq!(body["max_tokens"], 16000);
        assert!(body.get("temperature").is_none(), "{body}");
        // One at or below it (or the default) leaves the answer the default.
        for max_tokens in [Some(2000), Some(10000), None] {
            let body = client().body(&request(max_tokens, Some(Reasoning::Budget(10000))));
            assert_eq!(
                body["max_tokens"],
                10000 + DEFAULT_MAX_TOKENS,
                "{max_tokens:?}"
            );
        }
        // An effort is OpenAI's: no thinking, and no temperature either.
        let effort = Reasoning::Effort(crate::providers::ReasoningEffort::High);
        let body = client().body(&request(Some(100), Some(effort)));
        assert!(body.get("thinking").is_none(), "{body}");
        assert!(body.get("temperature").is_none(), "{body}");
        assert_eq!(body["max_tokens"], 100);
        // Without reasoning: the temperature, no thinking.
        let body = client().body(&request(Some(100), None));
        assert!(body.get("thinking").is_none(), "{body}");
        assert_eq!(body["temperature"], json!(0.5f32));
    }

    #[test]
    fn thinking_blocks_are_sent_back_first_and_unchanged() {
        let mut assistant = ChatMessage::assistant("Checking.");
        assistant.reasoning = vec![
            ReasoningBlock::Thinking {
                thinking: "I need the weather.".into(),
                signature: SIGNATURE.into(),
            },
            ReasoningBlock::Redacted {
                data: "EmwKAhgB".into(),
            },
        ];
        assistant.tool_calls.push(ToolCall {
            id: "toolu_01".into(),
            name: "get_weather".into(),
            arguments: "{\"location\":\"Paris\"}".into(),
        });
        let mut thought_only = ChatMessage::assistant("");
        thought_only.reasoning = vec![ReasoningBlock::Redacted { data: "ZZ".into() }];
        let body = client().body(&ChatRequest {
            messages: vec![
                ChatMessage::user("Weather in Paris?"),
                assistant,
                ChatMessage::tool_result("toolu_01", "18 C"),
                thought_only,
            ],
            reasoning: Some(Reasoning::Budget(2048)),
            ..Default::default()
        });
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I need the weather.", "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                 "input": {"location": "Paris"}},
            ]})
        );
        assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(
            body["messages"][3]["content"],
            json!([{"type": "redacted_thinking", "data": "ZZ"}])
        );
    }
}
