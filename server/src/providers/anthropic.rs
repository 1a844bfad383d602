//! Anthropic's Messages API (`POST {base_url}/v1/messages` with
//! `stream: true`).
//!
//! The answer is SSE with named events whose data carries the same `type`:
//! `message_start` (input usage), `content_block_start` (a `text` or
//! `tool_use` block), `content_block_delta` (`text_delta` or
//! `input_json_delta`), `content_block_stop`, `message_delta`
//! (`stop_reason`, output usage), `message_stop`, `ping`, and `error`.

use super::sse::{self, Decoder};
use super::{
    ChatEvent, ChatModel, ChatRequest, ChatStream, FinishReason, ProviderError, ProviderErrorKind,
    Role, ToolCall, Usage,
};
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
            .map(|m| match m.role {
                Role::Assistant if !m.tool_calls.is_empty() => {
                    let mut blocks = Vec::new();
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
                Role::User | Role::System => json!({"role": "user", "content": m.content}),
            })
            .collect();
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages,
            "stream": true,
        });
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
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        body
    }
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

enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

/// Decodes Messages API events.
#[derive(Default)]
pub(crate) struct EventDecoder {
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
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
        let n = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0) as u32;
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                self.usage.input_tokens = n(&data, "/message/usage/input_tokens")
                    + n(&data, "/message/usage/cache_read_input_tokens")
                    + n(&data, "/message/usage/cache_creation_input_tokens");
                self.usage.cached_tokens = n(&data, "/message/usage/cache_read_input_tokens");
                self.usage.output_tokens = n(&data, "/message/usage/output_tokens");
            }
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        self.blocks.insert(
                            index,
                            Block::Tool {
                                id: block["id"].as_str().unwrap_or_default().to_string(),
                                name: block["name"].as_str().unwrap_or_default().to_string(),
                                json: String::new(),
                            },
                        );
                    }
                    _ => {
                        if let Some(text) = block.get("text").and_then(Value::as_str)
                            && !text.is_empty()
                        {
                            out.push(ChatEvent::Text(text.to_string()));
                        }
                        self.blocks.insert(index, Block::Text);
                    }
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta.get("text").and_then(Value::as_str).ok_or_else(|| {
                            ProviderError::new(
                                ProviderErrorKind::Malformed,
                                "text_delta without text",
                            )
                        })?;
                        if !text.is_empty() {
                            out.push(ChatEvent::Text(text.to_string()));
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(Block::Tool { json, .. }) = self.blocks.get_mut(&index) {
                            json.push_str(
                                delta
                                    .get("partial_json")
                                    .and_then(Value::as_str)
                                    .unwrap_or(""),
                            );
                        }
                    }
                    // thinking and signature deltas are not passed on.
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(Block::Tool { id, name, json }) = self.blocks.remove(&index) {
                    out.push(ChatEvent::ToolCall(ToolCall {
                        id,
                        name,
                        arguments: if json.is_empty() { "{}".into() } else { json },
                    }));
                }
            }
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
                out.push(ChatEvent::Usage(self.usage));
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
                    cached_tokens: 0
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
}
