//! OpenAI chat completions (`POST {base_url}/chat/completions` with
//! `stream: true`), the protocol also spoken by DeepSeek, Gemini's
//! OpenAI-compatible endpoint, Ollama and vLLM.
//!
//! The answer is SSE: `data: <chunk>` lines, then `data: [DONE]`. A chunk
//! has `choices[0].delta` with `content` and/or `tool_calls` fragments
//! (keyed by `index`; `id` and `function.name` arrive first, then pieces of
//! `function.arguments`), `choices[0].finish_reason` at the end, and with
//! `stream_options.include_usage` a last chunk with `usage` and no choices.
//!
//! An answer wanted only once complete ([`ChatRequest::whole`]) is asked
//! for with `stream: false` and arrives as one `chat.completion` object
//! (`choices[0].message` with `content` and `tool_calls`, `finish_reason`,
//! `usage`), read up to [`MAX_WHOLE_ANSWER`] bytes and turned into the same
//! events a stream would have given.

use super::sse::{self, Decoder};
use super::{
    ChatEvent, ChatModel, ChatRequest, ChatStream, FinishReason, ProviderError, ProviderErrorKind,
    Role, ToolCall, Usage,
};
use eventsource_stream::Event;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The largest answer in one piece read from a provider (far above any
/// model's output limit: a larger body is hostile, not an answer).
pub const MAX_WHOLE_ANSWER: u64 = 8 * 1024 * 1024;

/// A client for one model on one OpenAI-compatible endpoint.
pub struct OpenAiClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    model: String,
    /// OpenAI itself wants `max_completion_tokens`; compatible servers
    /// `max_tokens`.
    max_completion_tokens_field: bool,
}

impl OpenAiClient {
    /// `base_url` is the API root, e.g. `https://api.openai.com/v1` or
    /// `http://127.0.0.1:11434/v1` (Ollama).
    pub fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<String>,
        model: impl Into<String>,
    ) -> OpenAiClient {
        OpenAiClient {
            http,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
            model: model.into(),
            max_completion_tokens_field: false,
        }
    }

    /// Sends `max_completion_tokens` instead of `max_tokens` (OpenAI).
    pub fn with_max_completion_tokens(mut self) -> OpenAiClient {
        self.max_completion_tokens_field = true;
        self
    }

    /// The JSON body of a request.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                    Role::Tool => "tool",
                };
                let mut message = json!({"role": role, "content": m.content});
                if !m.tool_calls.is_empty() {
                    message["tool_calls"] = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                }
                if let Some(id) = &m.tool_call_id {
                    message["tool_call_id"] = json!(id);
                }
                message
            })
            .collect();
        let mut body = if request.whole {
            json!({"model": self.model, "messages": messages, "stream": false})
        } else {
            json!({
                "model": self.model,
                "messages": messages,
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        };
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
        }
        if let Some(max) = request.max_tokens {
            let field = if self.max_completion_tokens_field {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(max);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        body
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenAiClient {
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        let mut builder = self
            .http
            .post(&self.url)
            .header(
                reqwest::header::ACCEPT,
                if request.whole {
                    "application/json"
                } else {
                    "text/event-stream"
                },
            )
            .headers(crate::telemetry::trace_headers())
            .json(&self.body(request));
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| ProviderError::from_reqwest(&e, false))?;
        if !response.status().is_success() {
            return Err(super::error_from_response(response, self.api_key.as_deref()).await);
        }
        if request.whole {
            let body = crate::fetch::read_limited(response, MAX_WHOLE_ANSWER)
                .await
                .map_err(|e| match e {
                    crate::fetch::BodyError::TooLarge(max) => {
                        malformed(&format!("the answer is over {max} bytes"))
                    }
                    crate::fetch::BodyError::Read(cause) => ProviderError::new(
                        ProviderErrorKind::Interrupted,
                        format!("reading the answer: {cause}"),
                    ),
                })?;
            let events = completion_events(&body)?;
            return Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed());
        }
        Ok(sse::decode(response, ChunkDecoder::default()))
    }

    fn describe(&self) -> (&str, &str) {
        ("openai", &self.model)
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes chat-completion chunks.
#[derive(Default)]
pub(crate) struct ChunkDecoder {
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
}

impl ChunkDecoder {
    fn flush_calls(&mut self) -> Vec<ChatEvent> {
        std::mem::take(&mut self.calls)
            .into_values()
            .map(|c| {
                ChatEvent::ToolCall(ToolCall {
                    id: c.id,
                    name: c.name,
                    arguments: if c.arguments.is_empty() {
                        "{}".to_string()
                    } else {
                        c.arguments
                    },
                })
            })
            .collect()
    }

    fn finish(&mut self) -> Vec<ChatEvent> {
        let mut out = self.flush_calls();
        if let Some(usage) = self.usage.take() {
            out.push(ChatEvent::Usage(usage));
        }
        out.push(ChatEvent::Finish(
            self.finish.take().unwrap_or(FinishReason::Stop),
        ));
        out
    }
}

fn finish_reason(text: &str) -> FinishReason {
    match text {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The events of a `chat.completion` object (an answer not streamed): its
/// text, its tool calls, its usage and why it finished, in the order a
/// stream gives them.
fn completion_events(body: &[u8]) -> Result<Vec<ChatEvent>, ProviderError> {
    let completion: Value = serde_json::from_slice(body)
        .map_err(|e| malformed(&format!("the answer is not JSON: {e}")))?;
    if let Some(error) = completion.get("error").filter(|e| !e.is_null()) {
        return Err(reported_error(error, "the answer"));
    }
    let choice = match completion.get("choices") {
        Some(Value::Array(choices)) => choices
            .first()
            .ok_or_else(|| malformed("the answer has no choice"))?,
        _ => return Err(malformed("`choices` is not an array")),
    };
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| malformed("the choice has no message"))?;
    let mut out = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str)
        && !text.is_empty()
    {
        out.push(ChatEvent::Text(text.to_string()));
    }
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let text = |p: &str| call.pointer(p).and_then(Value::as_str).unwrap_or("");
            // Some compatible servers send the arguments as an object.
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(a)) if !a.is_empty() => a.clone(),
                Some(other @ Value::Object(_)) => other.to_string(),
                _ => "{}".to_string(),
            };
            out.push(ChatEvent::ToolCall(ToolCall {
                id: text("/id").to_string(),
                name: text("/function/name").to_string(),
                arguments,
            }));
        }
    }
    if let Some(reported) = completion.get("usage").filter(|u| !u.is_null()) {
        out.push(ChatEvent::Usage(usage(reported)));
    }
    let reason = choice.get("finish_reason").and_then(Value::as_str);
    out.push(ChatEvent::Finish(
        reason.map_or(FinishReason::Stop, finish_reason),
    ));
    Ok(out)
}

/// A failure the provider reported inside an answer (`{"error":
/// {"message": …}}` in a chunk or a whole answer): the answer broke off.
fn reported_error(error: &Value, place: &str) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    ProviderError::new(
        ProviderErrorKind::Interrupted,
        format!("error in {place}: {}", super::scrub(message, None)),
    )
}

/// A `usage` object's tokens.
fn usage(reported: &Value) -> Usage {
    let n = |p: &str| reported.pointer(p).and_then(Value::as_u64).unwrap_or(0) as u32;
    Usage {
        input_tokens: n("/prompt_tokens"),
        output_tokens: n("/completion_tokens"),
        cached_tokens: n("/prompt_tokens_details/cached_tokens"),
    }
}

fn malformed(what: &str) -> ProviderError {
    ProviderError::new(ProviderErrorKind::Malformed, what.to_string())
}

impl Decoder for ChunkDecoder {
    fn event(&mut self, event: &Event) -> Result<Vec<ChatEvent>, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(self.finish());
        }
        let chunk = sse::json(event)?;
        if let Some(error) = chunk.get("error") {
            // Some servers report a failure inside the stream.
            return Err(reported_error(error, "stream"));
        }
        if !chunk.is_object() {
            return Err(malformed("chunk is not an object"));
        }
        let mut out = Vec::new();
        if let Some(reported) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(usage(reported));
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(out),
            Some(Value::Array(choices)) => choices,
            Some(_) => return Err(malformed("`choices` is not an array")),
        };
        let Some(choice) = choices.first() else {
            return Ok(out);
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push(ChatEvent::Text(text.to_string()));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let entry = self.calls.entry(index).or_default();
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        entry.id = id.to_string();
                    }
                    if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                        entry.name.push_str(name);
                    }
                    if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        entry.arguments.push_str(args);
                    }
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(finish_reason(reason));
            out.extend(self.flush_calls());
        }
        Ok(out)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn eof(&mut self) -> Result<Vec<ChatEvent>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        // Some compatible servers omit `[DONE]`; a finish_reason is enough.
        if self.finish.is_some() {
            self.done = true;
            return Ok(self.finish());
        }
        Err(ProviderError::new(
            ProviderErrorKind::Interrupted,
            "the stream ended before the answer was complete",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::sse::testing::run;

    #[tokio::test]
    async fn text_usage_and_done() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n\
                    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":3}}}\n\n\
                    data: [DONE]\n\n";
        let events: Vec<ChatEvent> = run(text, ChunkDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            [
                ChatEvent::Text("Hel".into()),
                ChatEvent::Text("lo".into()),
                ChatEvent::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 2,
                    cached_tokens: 3
                }),
                ChatEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    #[tokio::test]
    async fn tool_call_fragments_are_assembled() {
        let text = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n\
                    data: [DONE]\n\n";
        let events: Vec<ChatEvent> = run(text, ChunkDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            [
                ChatEvent::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Paris\"}".into()
                }),
                ChatEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[tokio::test]
    async fn malformed_chunk_and_early_end_are_errors() {
        let events = run(
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json\n\n",
            ChunkDecoder::default(),
        )
        .await;
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[1].as_ref().unwrap_err().kind,
            ProviderErrorKind::Malformed
        );

        let events = run(
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            ChunkDecoder::default(),
        )
        .await;
        assert_eq!(
            events.last().unwrap().as_ref().unwrap_err().kind,
            ProviderErrorKind::Interrupted
        );
    }

    #[test]
    fn request_body_has_stream_tools_and_history() {
        let client = OpenAiClient::new(reqwest::Client::new(), "http://x/v1/", None, "gpt-4o")
            .with_max_completion_tokens();
        let mut assistant = super::super::ChatMessage::assistant("");
        assistant.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
        });
        let body = client.body(&ChatRequest {
            messages: vec![
                super::super::ChatMessage::user("hi"),
                assistant,
                super::super::ChatMessage::tool_result("c1", "42"),
            ],
            tools: vec![super::super::ToolSpec {
                name: "f".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: Some(10),
            temperature: None,
            whole: false,
        });
        assert_eq!(client.url, "http://x/v1/chat/completions");
        assert_eq!(body["stream"], true);
        assert_eq!(body["max_completion_tokens"], 10);
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["name"],
            "f"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
    }

    #[test]
    fn a_whole_answer_is_asked_without_streaming() {
        let client = OpenAiClient::new(reqwest::Client::new(), "http://x/v1", None, "gpt-4o");
        let body = client.body(&ChatRequest {
            messages: vec![super::super::ChatMessage::user("hi")],
            whole: true,
            ..Default::default()
        });
        assert_eq!(body["stream"], false);
        assert!(body.get("stream_options").is_none(), "{body}");
    }

    #[test]
    fn a_whole_answer_gives_a_streams_events() {
        let body = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":"Hello",
              "tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
                {"id":"call_2","type":"function","function":{"name":"now","arguments":""}},
                {"id":"call_3","type":"function","function":{"name":"obj","arguments":{"a":1}}}]},
              "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,
                     "prompt_tokens_details":{"cached_tokens":3}}}"#;
        let call = |id: &str, name: &str, arguments: &str| {
            ChatEvent::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            })
        };
        assert_eq!(
            completion_events(body).unwrap(),
            [
                ChatEvent::Text("Hello".into()),
                call("call_1", "get_weather", r#"{"city":"Paris"}"#),
                call("call_2", "now", "{}"),
                call("call_3", "obj", r#"{"a":1}"#),
                ChatEvent::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 2,
                    cached_tokens: 3
                }),
                ChatEvent::Finish(FinishReason::ToolCalls),
            ]
        );
        // No usage, no reason, `content: null`: a finish, nothing else.
        assert_eq!(
            completion_events(br#"{"choices":[{"message":{"content":null}}]}"#).unwrap(),
            [ChatEvent::Finish(FinishReason::Stop)]
        );
    }

    #[test]
    fn a_malformed_whole_answer_is_an_error() {
        for (body, kind) in [
            (
                &b"{\"choices\": [{\"message\""[..],
                ProviderErrorKind::Malformed,
            ),
            (b"[1, 2]", ProviderErrorKind::Malformed),
            (b"{\"choices\": []}", ProviderErrorKind::Malformed),
            (
                b"{\"choices\": [{\"text\": \"legacy\"}]}",
                ProviderErrorKind::Malformed,
            ),
            (
                b"{\"error\": {\"message\": \"overloaded\"}}",
                ProviderErrorKind::Interrupted,
            ),
        ] {
            let error = completion_events(body).unwrap_err();
            assert_eq!(error.kind, kind, "{}", String::from_utf8_lossy(body));
        }
    }
}
