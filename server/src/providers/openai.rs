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
//!
//! Attachments of a user message go as content parts before its text, as
//! OpenAI's "Images and vision" and "File inputs" guides show: an image as
//! an `image_url` part holding a `data:` URL (with its `detail`), a PDF as
//! a `file` part with `file_data` (a `data:application/pdf;base64,` URL)
//! and its `filename`. A message without attachments keeps a plain string.
//!
//! Reasoning: [`Reasoning::Effort`] is sent as `reasoning_effort` (OpenAI's
//! "Reasoning models" guide); with any reasoning asked for, no
//! `temperature` is sent (reasoning models refuse one). Reasoning text
//! arrives as `delta.reasoning_content` (DeepSeek's "Reasoning Model"
//! guide, vLLM's "Reasoning Outputs") or `delta.reasoning` (OpenRouter and
//! later vLLM releases; a server that sends both gives the same text
//! twice, so `reasoning_content` wins), in a whole answer as
//! `message.reasoning_content` / `message.reasoning`; OpenAI itself reports
//! only a count, `usage.completion_tokens_details.reasoning_tokens`. An
//! assistant message's reasoning is never sent back: DeepSeek's guide says
//! a `reasoning_content` in the input messages is answered with a 400.

use super::sse::{self, Decoder};
use super::{
    Attachment, ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, FinishReason,
    ProviderError, ProviderErrorKind, Reasoning, Role, ToolCall, Usage,
};
use base64::Engine as _;
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
                let content = if m.role == Role::User && !m.attachments.is_empty() {
                    content_parts(m)
                } else {
                    json!(m.content)
                };
                let mut message = json!({"role": role, "content": content});
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
        if request.continue_final {
            // vLLM's (and SGLang's) way to continue the final assistant
            // message instead of answering it.
            body["continue_final_message"] = json!(true);
            body["add_generation_prompt"] = json!(false);
        }
        if let Some(Reasoning::Effort(effort)) = request.reasoning {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        if let Some(t) = request.temperature
            && request.reasoning.is_none()
        {
            body["temperature"] = json!(t);
        }
        body
    }
}

/// A user message's content parts: its attachments, then its text (left
/// out when empty).
fn content_parts(message: &ChatMessage) -> Value {
    let mut parts: Vec<Value> = message
        .attachments
        .iter()
        .map(|attachment| match attachment {
            Attachment::Image {
                media_type,
                data,
                detail,
                ..
            } => json!({"type": "image_url", "image_url": {
                "url": data_url(media_type, data),
                "detail": detail_name(*detail),
            }}),
            Attachment::Pdf { filename, data, .. } => json!({"type": "file", "file": {
                "filename": filename,
                "file_data": data_url("application/pdf", data),
            }}),
        })
        .collect();
    if !message.content.is_empty() {
        parts.push(json!({"type": "text", "text": message.content}));
    }
    Value::Array(parts)
}

/// `data:<media_type>;base64,<data>`.
fn data_url(media_type: &str, data: &[u8]) -> String {
    format!(
        "data:{media_type};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(data)
    )
}

/// OpenAI's name of an image's `detail`.
fn detail_name(detail: crate::media::ImageDetail) -> &'static str {
    match detail {
        crate::media::ImageDetail::Low => "low",
        crate::media::ImageDetail::High => "high",
        crate::media::ImageDetail::Auto => "auto",
    }
}

/// The reasoning text of a delta or a whole answer's message:
/// `reasoning_content`, else `reasoning` (never both: a server sending
/// both sends the same text twice).
fn reasoning_text(object: &Value) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .iter()
        .filter_map(|key| object.get(*key).and_then(Value::as_str))
        .find(|text| !text.is_empty())
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
/// reasoning, its text, its tool calls, its usage and why it finished, in
/// the order a stream gives them.
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
    if let Some(reasoning) = reasoning_text(message) {
        out.push(ChatEvent::Reasoning(reasoning.to_string()));
    }
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

/// A `usage` object's tokens (`completion_tokens_details.reasoning_tokens`
/// are among the completion tokens, as OpenAI counts them).
fn usage(reported: &Value) -> Usage {
    let n = |p: &str| {
        let n = reported.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    Usage {
        input_tokens: n("/prompt_tokens"),
        output_tokens: n("/completion_tokens"),
        cached_tokens: n("/prompt_tokens_details/cached_tokens"),
        reasoning_tokens: n("/completion_tokens_details/reasoning_tokens"),
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
            if let Some(reasoning) = reasoning_text(delta) {
                out.push(ChatEvent::Reasoning(reasoning.to_string()));
            }
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
                        sse::append_bounded(&mut entry.name, name, "a tool call's name")?;
                    }
                    if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        sse::append_bounded(&mut entry.arguments, args, "a tool call's arguments")?;
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
                    cached_tokens: 3,
                    ..Default::default()
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
            reasoning: None,
            whole: false,
            continue_final: false,
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

    /// A partial answer to continue goes as the final assistant message,
    /// with vLLM's flags to continue it instead of answering it.
    #[test]
    fn a_partial_answer_is_continued_with_vllms_flags() {
        let client = OpenAiClient::new(reqwest::Client::new(), "http://x/v1", None, "llama");
        let body = client.body(&ChatRequest {
            messages: vec![
                super::super::ChatMessage::user("count"),
                super::super::ChatMessage::assistant("one, two,"),
            ],
            continue_final: true,
            ..Default::default()
        });
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["messages"][1]["content"], "one, two,");
        assert_eq!(body["continue_final_message"], true);
        assert_eq!(body["add_generation_prompt"], false);
        let plain = client.body(&ChatRequest {
            messages: vec![super::super::ChatMessage::user("count")],
            ..Default::default()
        });
        assert!(plain.get("continue_final_message").is_none());
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
                    cached_tokens: 3,
                    ..Default::default()
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

    /// DeepSeek's "Reasoning Model (deepseek-reasoner)" stream: the
    /// reasoning in `reasoning_content` deltas (with `content: null`), then
    /// the answer in `content` deltas (with `reasoning_content: null`), the
    /// usage with the finish reason, `[DONE]`.
    #[tokio::test]
    async fn deepseek_reasoning_content_then_content() {
        let chunk = |delta: &str, tail: &str| {
            format!(
                "data: {{\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-reasoner\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null{tail}}}]}}\n\n"
            )
        };
        let text = [
            chunk(r#"{"role":"assistant","content":null,"reasoning_content":""}"#, r#","finish_reason":null"#),
            chunk(r#"{"content":null,"reasoning_content":"Okay, "}"#, r#","finish_reason":null"#),
            chunk(r#"{"content":null,"reasoning_content":"9.8 > 9.11."}"#, r#","finish_reason":null"#),
            chunk(r#"{"content":"9.8","reasoning_content":null}"#, r#","finish_reason":null"#),
            chunk(r#"{"content":" is greater.","reasoning_content":null}"#, r#","finish_reason":null"#),
            "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\",\"reasoning_content\":null},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":13,\"completion_tokens\":30,\"total_tokens\":43,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":25},\"prompt_cache_hit_tokens\":0,\"prompt_cache_miss_tokens\":13}}\n\n".to_string(),
            "data: [DONE]\n\n".to_string(),
        ]
        .concat();
        let events: Vec<ChatEvent> = run(&text, ChunkDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            [
                ChatEvent::Reasoning("Okay, ".into()),
                ChatEvent::Reasoning("9.8 > 9.11.".into()),
                ChatEvent::Text("9.8".into()),
                ChatEvent::Text(" is greater.".into()),
                ChatEvent::Usage(Usage {
                    input_tokens: 13,
                    output_tokens: 30,
                    cached_tokens: 0,
                    reasoning_tokens: 25,
                }),
                ChatEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    /// `delta.reasoning` (OpenRouter and others); a server that sends
    /// `reasoning_content` and `reasoning` with the same text gives it once.
    #[tokio::test]
    async fn reasoning_field_and_both_fields() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"reasoning\":\"Let me think.\"}}]}\n\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" Twice?\",\"reasoning\":\" Twice?\"}}]}\n\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Done\",\"reasoning\":null},\"finish_reason\":\"stop\"}]}\n\n\
                    data: [DONE]\n\n";
        let events: Vec<ChatEvent> = run(text, ChunkDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            [
                ChatEvent::Reasoning("Let me think.".into()),
                ChatEvent::Reasoning(" Twice?".into()),
                ChatEvent::Text("Done".into()),
                ChatEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    /// OpenAI's usage chunk of a reasoning model (the chat completions
    /// reference's `completion_tokens_details`).
    #[tokio::test]
    async fn openai_reasoning_tokens_in_usage() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Yes\"},\"finish_reason\":\"stop\"}]}\n\n\
                    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":150,\"total_tokens\":170,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":128,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n\
                    data: [DONE]\n\n";
        let events: Vec<ChatEvent> = run(text, ChunkDecoder::default())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events[1],
            ChatEvent::Usage(Usage {
                input_tokens: 20,
                output_tokens: 150,
                cached_tokens: 0,
                reasoning_tokens: 128,
            })
        );
    }

    #[test]
    fn a_whole_answers_reasoning_comes_before_its_text() {
        for key in ["reasoning_content", "reasoning"] {
            let body = format!(
                r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"9.8","{key}":"Compare."}},"finish_reason":"stop"}}],
                   "usage":{{"prompt_tokens":5,"completion_tokens":9,"completion_tokens_details":{{"reasoning_tokens":6}}}}}}"#
            );
            assert_eq!(
                completion_events(body.as_bytes()).unwrap(),
                [
                    ChatEvent::Reasoning("Compare.".into()),
                    ChatEvent::Text("9.8".into()),
                    ChatEvent::Usage(Usage {
                        input_tokens: 5,
                        output_tokens: 9,
                        cached_tokens: 0,
                        reasoning_tokens: 6,
                    }),
                    ChatEvent::Finish(FinishReason::Stop),
                ],
                "{key}"
            );
        }
    }

    fn image(detail: crate::media::ImageDetail) -> Attachment {
        Attachment::Image {
            media_type: "image/png".into(),
            data: bytes::Bytes::from_static(b"\x89PNG"),
            width: 1,
            height: 1,
            detail,
        }
    }

    #[test]
    fn attachments_are_parts_before_the_text() {
        use crate::media::ImageDetail;
        let client = OpenAiClient::new(reqwest::Client::new(), "http://x/v1", None, "gpt-4o");
        let mut user = ChatMessage::user("What is in these?");
        user.attachments = vec![
            image(ImageDetail::Auto),
            image(ImageDetail::Low),
            image(ImageDetail::High),
            Attachment::Pdf {
                filename: "report.pdf".into(),
                data: bytes::Bytes::from_static(b"%PDF-1.7"),
                pages: 1,
            },
        ];
        let body = client.body(&ChatRequest {
            messages: vec![
                ChatMessage::system("be brief"),
                user,
                ChatMessage::user("plain"),
            ],
            ..Default::default()
        });
        assert_eq!(body["messages"][0]["content"], "be brief");
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw==", "detail": "auto"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw==", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw==", "detail": "high"}},
                {"type": "file", "file": {"filename": "report.pdf",
                                          "file_data": "data:application/pdf;base64,JVBERi0xLjc="}},
                {"type": "text", "text": "What is in these?"},
            ])
        );
        // Without attachments, the content stays a string.
        assert_eq!(body["messages"][2]["content"], "plain");

        // An attachment without text: no empty text part.
        let mut only = ChatMessage::user("");
        only.attachments = vec![image(ImageDetail::Auto)];
        let body = client.body(&ChatRequest {
            messages: vec![only],
            ..Default::default()
        });
        assert_eq!(body["messages"][0]["content"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn reasoning_effort_replaces_temperature() {
        use crate::providers::ReasoningEffort;
        let client = OpenAiClient::new(reqwest::Client::new(), "http://x/v1", None, "o4-mini");
        let request = |reasoning| ChatRequest {
            messages: vec![ChatMessage::user("hi")],
            temperature: Some(0.3),
            reasoning,
            ..Default::default()
        };
        for (effort, name) in [
            (ReasoningEffort::Minimal, "minimal"),
            (ReasoningEffort::Low, "low"),
            (ReasoningEffort::Medium, "medium"),
            (ReasoningEffort::High, "high"),
        ] {
            let body = client.body(&request(Some(Reasoning::Effort(effort))));
            assert_eq!(body["reasoning_effort"], name);
            assert!(body.get("temperature").is_none(), "{body}");
        }
        // A budget is Anthropic's: nothing of it is sent, nor a temperature.
        let body = client.body(&request(Some(Reasoning::Budget(2048))));
        assert!(body.get("reasoning_effort").is_none(), "{body}");
        assert!(body.get("temperature").is_none(), "{body}");
        // Without reasoning, the temperature is sent.
        let body = client.body(&request(None));
        assert!(body.get("reasoning_effort").is_none(), "{body}");
        assert_eq!(body["temperature"], json!(0.3f32));
    }

    #[test]
    fn an_assistants_reasoning_is_not_sent_back() {
        let client = OpenAiClient::new(reqwest::Client::new(), "http://x/v1", None, "deepseek");
        let mut assistant = ChatMessage::assistant("");
        assistant.reasoning = vec![crate::providers::ReasoningBlock::Thinking {
            thinking: "hmm".into(),
            signature: "sig".into(),
        }];
        assistant.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
        });
        let body = client.body(&ChatRequest {
            messages: vec![ChatMessage::user("hi"), assistant],
            ..Default::default()
        });
        let message = body["messages"][1].as_object().unwrap();
        let mut keys: Vec<&str> = message.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["content", "role", "tool_calls"]);
    }
}
