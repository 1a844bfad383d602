//! A scripted model provider on `127.0.0.1:0` that speaks the real wire
//! formats: OpenAI chat-completions SSE (chunks, tool-call deltas, a usage
//! chunk, `data: [DONE]`) and Anthropic Messages SSE (named events), over
//! HTTP/1.1 with chunked transfer encoding, plus error answers and
//! failures (a connection dropped mid-stream, malformed chunks, stalls).
//!
//! An OpenAI request with `stream: false` gets the same scripted answer in
//! one piece: a `chat.completion` object assembled from the chunks, after
//! all of the script's pauses, in one write (see [`whole`]).
//!
//! Reasoning replies replay the providers' documented streams: Anthropic's
//! extended thinking (`thinking` blocks with `thinking_delta`s and a
//! `signature_delta`, `redacted_thinking`), and the OpenAI-compatible
//! `delta.reasoning_content` (DeepSeek, vLLM) or `delta.reasoning`
//! (OpenRouter and others) with OpenAI's
//! `usage.completion_tokens_details.reasoning_tokens`.
//!
//! Each connection serves one request (`Connection: close`) with the next
//! scripted [`Reply`], or the default reply when the script is empty;
//! after [`FakeProvider::keep_alive`], a connection serves request after
//! request, as a real provider's does. Every request is recorded for
//! assertions.
//!
//! [`FakeProvider::scripted`] lets a closure choose what each request gets
//! by its sequence number (an [`Action`]: a reply, a stall before the first
//! byte, a TCP reset before or in the middle of the answer), so a seeded
//! fault mix replays the same way in every run.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request the fake received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `(role, content)` of the request's `messages`.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.body["messages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        (
                            m["role"].as_str().unwrap_or("").to_string(),
                            m["content"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The content parts of the last user message that is not only tool
    /// results (Anthropic sends tool results as user messages): OpenAI
    /// `image_url`/`file`/`text` parts or Anthropic
    /// `image`/`document`/`text` blocks. Empty when that message's content
    /// is a plain string (a message without attachments) or there is none.
    pub fn user_parts(&self) -> Vec<serde_json::Value> {
        let only_tool_results = |content: &[serde_json::Value]| {
            !content.is_empty() && content.iter().all(|b| b["type"] == "tool_result")
        };
        self.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
            .filter(|m| m["role"] == "user")
            .find(|m| {
                !m["content"]
                    .as_array()
                    .is_some_and(|c| only_tool_results(c))
            })
            .and_then(|m| m["content"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The content blocks of the last assistant message (Anthropic:
    /// `thinking`/`redacted_thinking` blocks sent back, then `text` and
    /// `tool_use`). Empty when its content is a plain string or there is
    /// none.
    pub fn assistant_blocks(&self) -> Vec<serde_json::Value> {
        self.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
            .find(|m| m["role"] == "assistant")
            .and_then(|m| m["content"].as_array().cloned())
            .unwrap_or_default()
    }
}

/// One step of a streamed body.
#[derive(Clone, Debug)]
pub enum Part {
    /// Bytes written as one HTTP chunk.
    Data(String),
    /// A pause.
    Pause(Duration),
}

/// A scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
    /// Close the connection without the terminating chunk (a dropped
    /// stream) instead of ending the body properly.
    pub drop_at_end: bool,
}

fn data(json: serde_json::Value) -> Part {
    Part::Data(format!("data: {json}\n\n"))
}

fn named(event: &str, json: serde_json::Value) -> Part {
    Part::Data(format!("event: {event}\ndata: {json}\n\n"))
}

fn anthropic_message_start(id: &str) -> Part {
    named(
        "message_start",
        serde_json::json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "content": [],
        "model": "fake", "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 21, "output_tokens": 1}}}),
    )
}

/// A `thinking` block at `index`: opened empty, one `thinking_delta` per
/// piece, a `signature_delta` when `signature` is given, closed.
fn anthropic_thinking_block(index: usize, thinking: &[&str], signature: Option<&str>) -> Vec<Part> {
    let mut parts = vec![named(
        "content_block_start",
        serde_json::json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": ""}}),
    )];
    for piece in thinking {
        parts.push(named(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": piece}}),
        ));
    }
    if let Some(signature) = signature {
        parts.push(named(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta", "signature": signature}}),
        ));
    }
    parts.push(named(
        "content_block_stop",
        serde_json::json!({"type": "content_block_stop", "index": index}),
    ));
    parts
}

/// A `text` block at `index` with one `text_delta` per piece.
fn anthropic_text_block(index: usize, text: &[&str]) -> Vec<Part> {
    let mut parts = vec![named(
        "content_block_start",
        serde_json::json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}),
    )];
    for piece in text {
        parts.push(named(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    parts.push(named(
        "content_block_stop",
        serde_json::json!({"type": "content_block_stop", "index": index}),
    ));
    parts
}

/// `message_delta` (with `stop_reason` and the output tokens), then
/// `message_stop`.
fn anthropic_message_end(stop_reason: &str, output_tokens: usize) -> Vec<Part> {
    vec![
        named(
            "message_delta",
            serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}}),
        ),
        named("message_stop", serde_json::json!({"type": "message_stop"})),
    ]
}

impl Reply {
    fn sse(parts: Vec<Part>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts,
            drop_at_end: false,
        }
    }

    /// OpenAI chat-completion chunks: a role chunk, one chunk per piece, a
    /// finish chunk, a usage chunk, `[DONE]`.
    pub fn openai_text(pieces: &[&str]) -> Reply {
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            data(serde_json::json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            }))
        };
        let mut parts = vec![chunk(
            serde_json::json!({"role": "assistant", "content": ""}),
            None,
        )];
        for p in pieces {
            parts.push(chunk(serde_json::json!({"content": p}), None));
        }
        parts.push(chunk(serde_json::json!({}), Some("stop")));
        parts.push(data(serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
            "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": pieces.len(),
                      "total_tokens": 11 + pieces.len(),
                      "prompt_tokens_details": {"cached_tokens": 4}}
        })));
        parts.push(Part::Data("data: [DONE]\n\n".into()));
        Reply::sse(parts)
    }

    /// OpenAI tool-call deltas: `name({"city":"Paris"})` in three fragments.
    pub fn openai_tool_call(id: &str, name: &str) -> Reply {
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            data(
                serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
            )
        };
        Reply::sse(vec![
            chunk(
                serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                None,
            ),
            chunk(
                serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
                None,
            ),
            chunk(
                serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
                None,
            ),
            chunk(serde_json::json!({}), Some("tool_calls")),
            Part::Data("data: [DONE]\n\n".into()),
        ])
    }

    /// Anthropic Messages events with one text block of `pieces`.
    pub fn anthropic_text(pieces: &[&str]) -> Reply {
        let mut parts = vec![
            named(
                "message_start",
                serde_json::json!({"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "fake", "stop_reason": null,
                "usage": {"input_tokens": 21, "output_tokens": 1}}}),
            ),
            named(
                "content_block_start",
                serde_json::json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            named("ping", serde_json::json!({"type": "ping"})),
        ];
        for p in pieces {
            parts.push(named(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}),
            ));
        }
        parts.push(named(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ));
        parts.push(named(
            "message_delta",
            serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": pieces.len()}}),
        ));
        parts.push(named(
            "message_stop",
            serde_json::json!({"type": "message_stop"}),
        ));
        Reply::sse(parts)
    }

    /// Anthropic `tool_use` block with streamed `input_json_delta`s.
    pub fn anthropic_tool_use(id: &str, name: &str) -> Reply {
        Reply::sse(vec![
            named(
                "message_start",
                serde_json::json!({"type": "message_start", "message": {
                "id": "msg_2", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            ),
            named(
                "content_block_start",
                serde_json::json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ),
            named(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
            ),
            named(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
            ),
            named(
                "content_block_stop",
                serde_json::json!({"type": "content_block_stop", "index": 0}),
            ),
            named(
                "message_delta",
                serde_json::json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
            ),
            named("message_stop", serde_json::json!({"type": "message_stop"})),
        ])
    }

    /// OpenAI-compatible reasoning as DeepSeek streams it: a role chunk,
    /// one `delta.reasoning_content` chunk per reasoning piece (with
    /// `content: null`), one `delta.content` chunk per text piece (with
    /// `reasoning_content: null`), a finish chunk, a usage chunk whose
    /// `completion_tokens_details.reasoning_tokens` counts the reasoning
    /// pieces, `[DONE]`.
    pub fn openai_reasoning(reasoning: &[&str], text: &[&str]) -> Reply {
        Reply::openai_reasoning_in("reasoning_content", reasoning, text)
    }

    /// [`Reply::openai_reasoning`] with the reasoning in `delta.reasoning`
    /// (OpenRouter and other compatible servers).
    pub fn openai_reasoning_field(reasoning: &[&str], text: &[&str]) -> Reply {
        Reply::openai_reasoning_in("reasoning", reasoning, text)
    }

    fn openai_reasoning_in(field: &str, reasoning: &[&str], text: &[&str]) -> Reply {
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            data(serde_json::json!({
                "id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1,
                "model": "fake-reasoner",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
            }))
        };
        let mut parts = vec![chunk(
            serde_json::json!({"role": "assistant", "content": null, field: ""}),
            None,
        )];
        for piece in reasoning {
            parts.push(chunk(
                serde_json::json!({"content": null, field: piece}),
                None,
            ));
        }
        for piece in text {
            parts.push(chunk(
                serde_json::json!({"content": piece, field: null}),
                None,
            ));
        }
        parts.push(chunk(serde_json::json!({}), Some("stop")));
        let completion = reasoning.len() + text.len();
        parts.push(data(serde_json::json!({
            "id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1,
            "model": "fake-reasoner", "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": completion,
                      "total_tokens": 11 + completion,
                      "prompt_tokens_details": {"cached_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": reasoning.len()}}
        })));
        parts.push(Part::Data("data: [DONE]\n\n".into()));
        Reply::sse(parts)
    }

    /// Anthropic extended thinking as the "Building with extended
    /// thinking" guide streams it: a `thinking` block (opened empty, one
    /// `thinking_delta` per piece, one `signature_delta`), then a text
    /// block of `text`; `end_turn`.
    pub fn anthropic_thinking(thinking: &[&str], signature: &str, text: &[&str]) -> Reply {
        let mut parts = vec![anthropic_message_start("msg_t1")];
        parts.extend(anthropic_thinking_block(0, thinking, Some(signature)));
        parts.extend(anthropic_text_block(1, text));
        parts.extend(anthropic_message_end(
            "end_turn",
            thinking.len() + text.len(),
        ));
        Reply::sse(parts)
    }

    /// A thinking block (as [`Reply::anthropic_thinking`]), then a
    /// `tool_use` block `name({"city": "Paris"})` with streamed
    /// `input_json_delta`s; `stop_reason: tool_use`.
    pub fn anthropic_thinking_tool_use(
        thinking: &[&str],
        signature: &str,
        id: &str,
        name: &str,
    ) -> Reply {
        let mut parts = vec![anthropic_message_start("msg_t2")];
        parts.extend(anthropic_thinking_block(0, thinking, Some(signature)));
        parts.extend([
            named(
                "content_block_start",
                serde_json::json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ),
            named(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ""}}),
            ),
            named(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
            ),
            named(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
            ),
            named(
                "content_block_stop",
                serde_json::json!({"type": "content_block_stop", "index": 1}),
            ),
        ]);
        parts.extend(anthropic_message_end("tool_use", thinking.len() + 9));
        Reply::sse(parts)
    }

    /// A `redacted_thinking` block carrying `data` (arriving whole, as the
    /// guide's "Thinking redaction" shows), then a text block of `text`.
    pub fn anthropic_redacted_then_text(data: &str, text: &[&str]) -> Reply {
        let mut parts = vec![
            anthropic_message_start("msg_t3"),
            named(
                "content_block_start",
                serde_json::json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "redacted_thinking", "data": data}}),
            ),
            named(
                "content_block_stop",
                serde_json::json!({"type": "content_block_stop", "index": 0}),
            ),
        ];
        parts.extend(anthropic_text_block(1, text));
        parts.extend(anthropic_message_end("end_turn", 8 + text.len()));
        Reply::sse(parts)
    }

    /// A thinking block that ends without its `signature_delta` (which the
    /// server must refuse: it could not be sent back), then a text block.
    pub fn anthropic_thinking_unsigned(thinking: &[&str], text: &[&str]) -> Reply {
        let mut parts = vec![anthropic_message_start("msg_t4")];
        parts.extend(anthropic_thinking_block(0, thinking, None));
        parts.extend(anthropic_text_block(1, text));
        parts.extend(anthropic_message_end(
            "end_turn",
            thinking.len() + text.len(),
        ));
        Reply::sse(parts)
    }

    /// An error answer with a JSON body as the providers send them.
    pub fn error(status: u16, message: &str) -> Reply {
        let body = serde_json::json!({"error": {"message": message, "type": "fake_error"}});
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            parts: vec![Part::Data(body.to_string())],
            drop_at_end: false,
        }
    }

    /// Adds a header (e.g. `retry-after`).
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Pauses `delay` before every data part.
    pub fn paced(mut self, delay: Duration) -> Reply {
        self.parts = self
            .parts
            .into_iter()
            .flat_map(|p| [Part::Pause(delay), p])
            .collect();
        self
    }

    /// Keeps the first `n` data parts, then drops the connection.
    pub fn drop_after(mut self, n: usize) -> Reply {
        let mut kept = 0;
        self.parts.retain(|p| match p {
            Part::Data(_) => {
                kept += 1;
                kept <= n
            }
            Part::Pause(_) => kept < n,
        });
        self.drop_at_end = true;
        self
    }

    /// Replaces data part `n` (0-based) and everything after it with a
    /// malformed chunk, then ends the body.
    pub fn malformed_at(mut self, n: usize) -> Reply {
        let mut seen = 0;
        self.parts.retain(|p| match p {
            Part::Data(_) => {
                seen += 1;
                seen <= n
            }
            Part::Pause(_) => true,
        });
        self.parts.push(Part::Data(
            "data: {\"choices\": [{\"delta\": {\"content\": \"x\"\n\n".into(),
        ));
        self
    }

    /// Stalls for `delay` after the first `n` data parts, then goes on.
    pub fn stall_after(mut self, n: usize, delay: Duration) -> Reply {
        let mut index = 0;
        let mut out = Vec::new();
        for p in self.parts {
            let is_data = matches!(p, Part::Data(_));
            out.push(p);
            if is_data {
                index += 1;
                if index == n {
                    out.push(Part::Pause(delay));
                }
            }
        }
        self.parts = out;
        self
    }
}

/// What a [`FakeProvider::scripted`] fake does with one request.
#[derive(Clone, Debug)]
pub enum Action {
    /// Answers with the reply, as a queued or default reply is answered.
    Reply(Reply),
    /// Writes nothing for the duration (not even the status line), then
    /// answers with the reply: a stall before the first byte.
    Stall(Duration, Reply),
    /// Resets the connection (a TCP RST, `SO_LINGER` 0) before writing
    /// anything.
    Reset,
    /// Writes the status line and the reply's first `n` data parts (with
    /// its pauses), then resets the connection.
    ResetAfter(usize, Reply),
}

/// Chooses a scripted fake's [`Action`] from the request's sequence
/// number (0 for the first request the fake received) and the request.
type Chooser = dyn Fn(usize, &Recorded) -> Action + Send + Sync;

struct State {
    script: VecDeque<Reply>,
    default: Reply,
    /// Chooses each request's action when the script is empty (instead of
    /// the default reply).
    chooser: Option<Arc<Chooser>>,
    requests: Vec<Recorded>,
    /// Per request (in arrival order): when each data part was written.
    write_times: Vec<Vec<Instant>>,
    /// Connections stay open between requests.
    keep_alive: bool,
}

/// The running fake provider.
pub struct FakeProvider {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeProvider {
    /// Starts with the default reply `Reply::openai_text(["Hello", ", ", "world"])`.
    pub async fn start() -> FakeProvider {
        Self::with_default(Reply::openai_text(&["Hello", ", ", "world"])).await
    }

    pub async fn with_default(default: Reply) -> FakeProvider {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the fake provider");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(Mutex::new(State {
            script: VecDeque::new(),
            default,
            chooser: None,
            requests: Vec::new(),
            write_times: Vec::new(),
            keep_alive: false,
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                // Each part is written as soon as it is due (a streamed
                // answer's chunks), not held for the previous one's ACK.
                let _ = socket.set_nodelay(true);
                let state = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, state).await;
                });
            }
        });
        FakeProvider { addr, state, task }
    }

    /// A fake whose every request gets what `choose` returns for it (the
    /// request's sequence number, 0-based in arrival order, and the
    /// request), unless a reply was queued with [`FakeProvider::push`].
    /// `choose` runs under the fake's lock: it must not call the fake.
    pub async fn scripted(
        choose: impl Fn(usize, &Recorded) -> Action + Send + Sync + 'static,
    ) -> FakeProvider {
        let fake = Self::start().await;
        fake.lock().chooser = Some(Arc::new(choose));
        fake
    }

    /// `http://127.0.0.1:PORT` (OpenAI clients append `/chat/completions`,
    /// so configure `base_url()` + `/v1` for realism).
    /// A model named `name` served by this fake as an OpenAI-compatible
    /// provider (upstream model `fake-upstream`), for `Config::models`.
    pub fn model_config(&self, name: &str) -> workspace_server::config::ModelConfig {
        workspace_server::config::ModelConfig {
            name: name.into(),
            provider: Some(workspace_server::config::ProviderKind::OpenaiCompatible),
            upstream_model: Some("fake-upstream".into()),
            base_url: Some(format!("{}/v1", self.base_url())),
            api_key: Some("sk-test".into()),
            api_key_env: None,
            max_tokens: None,
            context_tokens: None,
            input: None,
            reasoning: None,
            max_output_tokens: None,
            deployments: Vec::new(),
            fallbacks: Vec::new(),
            context_window_fallbacks: Vec::new(),
            content_policy_fallbacks: Vec::new(),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a reply for the next request.
    pub fn push(&self, reply: Reply) {
        self.lock().script.push_back(reply);
    }

    /// Keeps each connection open for the client's next request (HTTP/1.1
    /// keep-alive, as OpenAI's and Anthropic's APIs do), instead of one
    /// request per connection: what a benchmark of the server's own cost
    /// needs (a new connection per request is the client's cost to
    /// connect, not the server's work).
    pub fn keep_alive(&self) {
        self.lock().keep_alive = true;
    }

    pub fn set_default(&self, reply: Reply) {
        self.lock().default = reply;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// For each request so far, when each data part of its reply was
    /// written (for latency measurements; same clock as the caller).
    pub fn write_times(&self) -> Vec<Vec<Instant>> {
        self.lock().write_times.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut words = request_line.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    }))
}

async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    while serve_one(&mut socket, &state).await? {}
    let _ = socket.shutdown().await;
    Ok(())
}

/// Serves one request; whether the connection stays open for another.
async fn serve_one(socket: &mut TcpStream, state: &Mutex<State>) -> std::io::Result<bool> {
    let Some(request) = read_request(socket).await? else {
        return Ok(false);
    };
    let request_streams = request.body.get("stream") == Some(&serde_json::Value::Bool(true));
    let (action, index, keep_alive) = {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let seq = state.requests.len();
        let action = match (state.script.pop_front(), &state.chooser) {
            (Some(r), _) => Action::Reply(r),
            (None, Some(choose)) => choose(seq, &request),
            (None, None) => Action::Reply(state.default.clone()),
        };
        state.requests.push(request);
        state.write_times.push(Vec::new());
        let index = state.write_times.len() - 1;
        let keep_alive = state.keep_alive
            && match &action {
                Action::Reply(r) | Action::Stall(_, r) => !r.drop_at_end,
                Action::Reset | Action::ResetAfter(..) => false,
            };
        (action, index, keep_alive)
    };
    let (reply, reset_at_end) = match action {
        Action::Reply(reply) => (reply, false),
        Action::Stall(delay, reply) => {
            tokio::time::sleep(delay).await;
            (reply, false)
        }
        Action::Reset => return reset(socket),
        Action::ResetAfter(n, reply) => (reply.drop_after(n), true),
    };
    if reply.status == 200 && !request_streams && is_openai_stream(&reply) {
        return serve_whole(socket, whole(&reply), keep_alive).await;
    }
    let reason = match reply.status {
        200 => "OK",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", reply.status);
    for (n, v) in &reply.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(if keep_alive {
        "transfer-encoding: chunked\r\n\r\n"
    } else {
        "transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    });
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    for part in &reply.parts {
        match part {
            Part::Pause(d) => tokio::time::sleep(*d).await,
            Part::Data(text) => {
                let chunk = format!("{:x}\r\n{text}\r\n", text.len());
                socket.write_all(chunk.as_bytes()).await?;
                socket.flush().await?;
                let now = Instant::now();
                let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(times) = state.write_times.get_mut(index) {
                    times.push(now);
                }
            }
        }
    }
    if reset_at_end {
        return reset(socket);
    }
    if reply.drop_at_end {
        // No terminating chunk: the body is cut off (the caller drops
        // the connection).
        return Ok(false);
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    Ok(keep_alive)
}

/// Resets the connection: returns an error, so that `serve` drops the
/// socket without shutting it down, and with `SO_LINGER` 0 the kernel
/// sends a RST instead of a FIN.
fn reset(socket: &TcpStream) -> std::io::Result<bool> {
    let _ = socket.set_zero_linger();
    Err(std::io::Error::other("connection reset by the script"))
}

/// A scripted answer in one piece (see [`whole`]).
struct Whole {
    /// The script's pauses, all spent before the answer is written.
    pause: Duration,
    body: String,
    /// The script drops the connection: half the body is written, then
    /// the connection closes.
    cut: bool,
}

/// Whether `reply` streams OpenAI chat-completion chunks.
fn is_openai_stream(reply: &Reply) -> bool {
    reply
        .headers
        .iter()
        .any(|(n, v)| n == "content-type" && v == "text/event-stream")
        && reply.parts.iter().any(
            |p| matches!(p, Part::Data(d) if d.starts_with("data: ") && d.contains("\"choices\"")),
        )
}

/// The answer an OpenAI-compatible provider gives to `stream: false` for
/// the same script: the chunks' text, reasoning (in the field the chunks
/// used), tool calls (fragments joined by index), finish reason and usage
/// as one `chat.completion` object.
fn whole(reply: &Reply) -> Whole {
    use serde_json::{Value, json};
    let mut pause = Duration::ZERO;
    let mut content = String::new();
    // The reasoning and the field it came in (`reasoning_content` or
    // `reasoning`), which the whole answer's message uses too.
    let mut reasoning: Option<(&str, String)> = None;
    let mut calls: std::collections::BTreeMap<u64, (String, String, String)> = Default::default();
    let mut finish = Value::Null;
    let mut usage = Value::Null;
    let cut = reply.drop_at_end;
    // A malformed chunk makes a malformed answer: half of it, complete.
    let mut malformed = false;
    for part in &reply.parts {
        let text = match part {
            Part::Pause(d) => {
                pause += *d;
                continue;
            }
            Part::Data(text) => text.trim(),
        };
        let Some(data) = text.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            continue;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            malformed = true;
            continue;
        };
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
        let choice = &chunk["choices"][0];
        if let Some(piece) = choice["delta"]["content"].as_str() {
            content.push_str(piece);
        }
        for field in ["reasoning_content", "reasoning"] {
            if let Some(piece) = choice["delta"][field].as_str() {
                reasoning
                    .get_or_insert_with(|| (field, String::new()))
                    .1
                    .push_str(piece);
            }
        }
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let entry = calls
                .entry(call["index"].as_u64().unwrap_or(0))
                .or_default();
            if let Some(id) = call["id"].as_str() {
                entry.0 = id.to_string();
            }
            entry
                .1
                .push_str(call["function"]["name"].as_str().unwrap_or(""));
            entry
                .2
                .push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
    }
    let mut message = json!({"role": "assistant", "content": content});
    if let Some((field, text)) = reasoning {
        message[field] = json!(text);
    }
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .into_values()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": arguments}})
            })
            .collect();
    }
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    })
    .to_string();
    let body = if malformed {
        body[..body.len() / 2].to_string()
    } else {
        body
    };
    Whole { pause, body, cut }
}

/// Writes a whole answer: headers and body in one write, as a provider
/// sends a short JSON answer.
async fn serve_whole(
    socket: &mut TcpStream,
    whole: Whole,
    keep_alive: bool,
) -> std::io::Result<bool> {
    if !whole.pause.is_zero() {
        // (A zero sleep still waits for the timer's next tick, up to 1 ms.)
        tokio::time::sleep(whole.pause).await;
    }
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
        whole.body.len(),
        if keep_alive && !whole.cut {
            ""
        } else {
            "connection: close\r\n"
        },
    );
    if whole.cut {
        out.push_str(&whole.body[..whole.body.len() / 2]);
    } else {
        out.push_str(&whole.body);
    }
    socket.write_all(out.as_bytes()).await?;
    socket.flush().await?;
    Ok(keep_alive && !whole.cut)
}

/// A `127.0.0.1` address on which nothing listens.
pub async fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}
