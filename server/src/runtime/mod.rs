//! The agent runtime: runs a model with tools until it answers.
//!
//! Given a model, a system prompt, params, a history and tools, [`run`]
//! streams [`RuntimeEvent`]s: text deltas, tool calls started and finished,
//! usage, and the end. It loops model → tool calls → tool results → model
//! until the model answers without calling a tool, at most
//! [`RunLimits::max_steps`] model calls; each tool call has
//! [`RunLimits::tool_timeout`]. A tool error (or timeout, or an unknown
//! tool) goes back to the model as the tool's result, never as a crash.
//! Every user of a model with tools (agent tests, deployments, chat, the
//! MCP playground) runs through here; sandboxed code tools implement
//! [`RuntimeTool`] now, MCP tools and knowledge-base retrieval later.

pub mod context;

use crate::providers::{
    self, ChatEvent, ChatMessage, ChatRequest, ModelEntry, RetryPolicy, Role, ToolCall, ToolSpec,
    Usage,
};
use crate::sandbox::{ExecRequest, ToolExecutor};
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A finished tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolFinished {
    pub id: String,
    pub name: String,
    pub input: Value,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub successful: bool,
}

/// A tool call starting.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolStarted {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// Why a run failed: an error code and its public message.
#[derive(Clone, Debug, PartialEq)]
pub struct RunError {
    pub code: String,
    pub message: String,
}

/// What a run streams. The rare large variants are boxed: every answer's
/// channel holds a block of 32 events from its start, so the size of an
/// event is paid 32 times per streamed answer (144 bytes unboxed: 4.6 KB an
/// answer; 24 bytes: 0.8 KB).
#[derive(Clone, Debug, PartialEq)]
pub enum RuntimeEvent {
    Text(String),
    /// A piece of the model's reasoning, apart from its text (boxed: a
    /// second unboxed string would make every event larger).
    Reasoning(Box<String>),
    ToolStarted(Box<ToolStarted>),
    ToolFinished(Box<ToolFinished>),
    /// Usage of one model step (boxed: once a step, and it would make
    /// every event larger).
    Usage(Box<Usage>),
    /// Which model and deployment answer from here on (a routed model:
    /// first, and at each failover); with `restart`, the text and
    /// reasoning passed on before are void.
    Route(Box<providers::router::Route>),
    /// The model answered.
    End,
    /// The run failed (the model provider, or the step limit).
    Error(Box<RunError>),
}

const _: () = assert!(size_of::<RuntimeEvent>() <= 24);

impl RuntimeEvent {
    fn error(code: impl Into<String>, message: impl Into<String>) -> RuntimeEvent {
        RuntimeEvent::Error(Box::new(RunError {
            code: code.into(),
            message: message.into(),
        }))
    }
}

/// A tool the runtime can offer to a model.
#[async_trait::async_trait]
pub trait RuntimeTool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    /// Runs the tool; `Err` is a message for the model.
    async fn call(&self, input: Value) -> Result<Value, String>;
}

/// Limits of one run.
#[derive(Clone, Debug)]
pub struct RunLimits {
    pub max_steps: usize,
    pub tool_timeout: Duration,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_steps: 8,
            tool_timeout: Duration::from_secs(30),
        }
    }
}

/// What to run.
pub struct RunSpec {
    pub model: ModelEntry,
    pub retry: RetryPolicy,
    pub system_prompt: String,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Reasoning asked of the model (bounded by its table already).
    pub reasoning: Option<providers::Reasoning>,
    /// Earlier messages and the new one, oldest first (no system message).
    pub history: Vec<ChatMessage>,
    pub tools: Vec<Arc<dyn RuntimeTool>>,
    pub limits: RunLimits,
    pub log: slog::Logger,
    /// The run's metering (see `crate::usage`): fed each model step's
    /// input, text and reported usage, recorded when the run ends.
    pub usage: Option<Box<crate::usage::Metered>>,
    /// Each step's answer is wanted only once complete (nothing of it is
    /// shown before the end: a completion its client did not stream), so
    /// the provider may answer in one piece ([`ChatRequest::whole`]).
    pub whole: bool,
}

/// Starts a run; the receiver yields its events and ends after `End` or
/// `Error`. Dropping the receiver stops the run.
pub fn run(spec: RunSpec) -> mpsc::Receiver<RuntimeEvent> {
    let (tx, rx) = mpsc::channel(64);
    // In the caller's trace (the request's, while tracing is on).
    crate::telemetry::spawn(run_loop(spec, tx));
    rx
}

/// Runs `spec` within the caller's own task, `consume` reading its events
/// as [`run`]'s receiver gives them: for a caller that waits for the whole
/// run anyway (a completion not streamed), no task is spawned and no
/// event crosses to another task (each one wakes the task it is already
/// in). Dropping the returned future stops the run.
pub async fn run_here<T, F, Fut>(spec: RunSpec, consume: F) -> T
where
    F: FnOnce(mpsc::Receiver<RuntimeEvent>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let (tx, rx) = mpsc::channel(64);
    let ((), out) = tokio::join!(run_loop(spec, tx), consume(rx));
    out
}

async fn run_loop(mut spec: RunSpec, tx: mpsc::Sender<RuntimeEvent>) {
    // The history moves into the messages (not a copy of it held for the
    // whole run), and each step's request lives only until its stream has
    // started.
    let mut messages = Vec::with_capacity(spec.history.len() + 1);
    if !spec.system_prompt.is_empty() {
        messages.push(ChatMessage::system(std::mem::take(&mut spec.system_prompt)));
    }
    messages.append(&mut spec.history);
    let specs: Vec<ToolSpec> = spec.tools.iter().map(|t| t.spec()).collect();
    // Recorded when the run ends: `finish` below, or dropped (cancelled).
    let mut metered = spec.usage.take();
    for step in 0..spec.limits.max_steps {
        if let Some(m) = &mut metered {
            m.step(
                messages
                    .iter()
                    .map(|m| {
                        m.content.len()
                            + m.tool_calls
                                .iter()
                                .map(|c| c.arguments.len() + c.name.len())
                                .sum::<usize>()
                    })
                    .sum(),
            );
        }
        // Boxed, as the start below: the request lives only while the
        // step starts, and need not be part of the run's state.
        let request = Box::new(ChatRequest {
            messages: messages.clone(),
            tools: specs.clone(),
            max_tokens: spec.max_tokens.or(spec.model.max_tokens),
            temperature: spec.temperature,
            reasoning: spec.reasoning,
            whole: spec.whole,
            continue_final: false,
        });
        // Boxed: starting (with its retries and timeouts) is a step's
        // first moments, and its state need not be part of the run's for
        // the whole answer.
        let started = Box::pin(providers::start(
            spec.model.chat.as_ref(),
            &request,
            &spec.retry,
            &spec.log,
        ))
        .await;
        drop(request);
        let stream = match started {
            Ok(s) => s,
            Err(e) => {
                if let Some(m) = metered.take() {
                    m.finish(e.error_code());
                }
                let _ = tx
                    .send(RuntimeEvent::error(e.error_code(), e.public_message()))
                    .await;
                return;
            }
        };
        // Boxed: a step's reading (its text, calls and reasoning so far)
        // lives on the heap while it streams, not in the run's state.
        let Some(Step {
            text,
            calls,
            reasoning,
        }) = Box::pin(read_step(stream, &tx, &mut metered)).await
        else {
            return;
        };
        // With no tools offered, a tool call is not followed (a model may
        // still propose one): the answer is the text.
        if calls.is_empty() || spec.tools.is_empty() {
            if !calls.is_empty() {
                slog::debug!(spec.log, "ignoring tool calls: no tools are offered";
                    "calls" => calls.len());
            }
            // Recorded before the end is announced: whoever waits for the
            // end finds the call with the recorder.
            if let Some(m) = metered.take() {
                m.finish("complete");
            }
            let _ = tx.send(RuntimeEvent::End).await;
            return;
        }
        slog::debug!(spec.log, "model called tools"; "step" => step, "calls" => calls.len());
        messages.push(ChatMessage {
            role: Role::Assistant,
            content: text,
            tool_calls: calls.clone(),
            tool_call_id: None,
            attachments: Vec::new(),
            reasoning,
        });
        for call in calls {
            let input: Value = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            let started = RuntimeEvent::ToolStarted(Box::new(ToolStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                input: input.clone(),
            }));
            if tx.send(started).await.is_err() {
                return;
            }
            let tool = spec.tools.iter().find(|t| t.spec().name == call.name);
            let result = match tool {
                None => Err(format!("there is no tool named {}", call.name)),
                // Boxed: a tool's call (and its span) need not be part of
                // the run's state for the whole answer.
                Some(tool) => {
                    Box::pin(call_tool(
                        tool.as_ref(),
                        &call,
                        input.clone(),
                        spec.limits.tool_timeout,
                    ))
                    .await
                }
            };
            let content = match &result {
                Ok(v) => v.to_string(),
                Err(e) => format!("error: {e}"),
            };
            let (output, error) = match result {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e)),
            };
            let finished = RuntimeEvent::ToolFinished(Box::new(ToolFinished {
                id: call.id.clone(),
                name: call.name.clone(),
                input,
                successful: error.is_none(),
                output,
                error,
            }));
            if tx.send(finished).await.is_err() {
                return;
            }
            messages.push(ChatMessage::tool_result(call.id, content));
        }
    }
    if let Some(m) = metered.take() {
        m.finish("agent_step_limit");
    }
    let _ = tx
        .send(RuntimeEvent::error(
            "agent_step_limit",
            format!(
                "the model kept calling tools for {} steps",
                spec.limits.max_steps
            ),
        ))
        .await;
}

/// What one model step gave.
struct Step {
    text: String,
    calls: Vec<ToolCall>,
    /// Its reasoning blocks, sent back with its tool calls.
    reasoning: Vec<providers::ReasoningBlock>,
}

/// Reads one model step's stream, passing its text, reasoning and usage
/// on as they come; `None` when the run ends here (the error was sent and
/// the metering finished, or the receiver is gone).
async fn read_step(
    mut stream: providers::ChatStream,
    tx: &mpsc::Sender<RuntimeEvent>,
    metered: &mut Option<Box<crate::usage::Metered>>,
) -> Option<Step> {
    let mut step = Step {
        text: String::new(),
        calls: Vec::new(),
        reasoning: Vec::new(),
    };
    while let Some(item) = stream.next().await {
        match item {
            Ok(ChatEvent::Reasoning(r)) => {
                if let Some(m) = metered {
                    m.text(r.len());
                }
                tx.send(RuntimeEvent::Reasoning(Box::new(r))).await.ok()?;
            }
            Ok(ChatEvent::ReasoningBlock(block)) => step.reasoning.push(block),
            Ok(ChatEvent::Text(t)) => {
                if let Some(m) = metered {
                    m.text(t.len());
                }
                step.text.push_str(&t);
                tx.send(RuntimeEvent::Text(t)).await.ok()?;
            }
            Ok(ChatEvent::ToolCall(c)) => step.calls.push(c),
            Ok(ChatEvent::Usage(u)) => {
                if let Some(m) = metered {
                    m.reported(u);
                }
                let _ = tx.send(RuntimeEvent::Usage(Box::new(u))).await;
            }
            Ok(ChatEvent::Finish(_)) => {}
            Ok(ChatEvent::Route(route)) => {
                if route.reason != providers::router::RouteReason::First
                    && let Some(m) = metered
                {
                    m.rerouted();
                }
                if route.restart {
                    step.text.clear();
                    step.calls.clear();
                    step.reasoning.clear();
                }
                tx.send(RuntimeEvent::Route(route)).await.ok()?;
            }
            Err(e) => {
                if let Some(m) = metered.take() {
                    m.finish(e.error_code());
                }
                let _ = tx
                    .send(RuntimeEvent::error(e.error_code(), e.public_message()))
                    .await;
                return None;
            }
        }
    }
    Some(step)
}

/// A tool whose code runs in the sandbox.
pub struct CodeTool {
    pub tool: workspace_api::tools::Tool,
    /// The agent's configuration values for it.
    pub config: std::collections::BTreeMap<String, Value>,
    pub executor: Arc<dyn ToolExecutor>,
}

/// A tool name as models accept it (`^[a-zA-Z0-9_-]{1,64}$`).
pub fn model_tool_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.truncate(64);
    s
}

#[async_trait::async_trait]
impl RuntimeTool for CodeTool {
    fn spec(&self) -> ToolSpec {
        use workspace_api::tools::ParamType;
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        for p in &self.tool.inputs {
            let t = match p.type_ {
                ParamType::Str => "string",
                ParamType::Bool => "boolean",
                ParamType::Int => "integer",
                ParamType::Float => "number",
                ParamType::List => "array",
                ParamType::Dict => "object",
            };
            properties.insert(
                p.name.clone(),
                serde_json::json!({"type": t, "description": p.description}),
            );
            if p.required {
                required.push(Value::String(p.name.clone()));
            }
        }
        ToolSpec {
            name: model_tool_name(&self.tool.name),
            description: self.tool.description.clone(),
            parameters: serde_json::json!({
                "type": "object", "properties": properties, "required": required,
            }),
        }
    }

    async fn call(&self, input: Value) -> Result<Value, String> {
        let inputs = match input {
            Value::Object(m) => m.into_iter().collect(),
            Value::Null => Default::default(),
            _ => return Err("the arguments must be a JSON object".into()),
        };
        let request: ExecRequest =
            crate::sandbox::call::exec_request(&self.tool, &inputs, &self.config)
                .map_err(|e| e.to_string())?;
        match self.executor.execute(&request).await {
            Err(e) => Err(e.to_string()),
            Ok(outcome) => outcome.result.map_err(|f| f.to_string()),
        }
    }
}

/// Runs one tool call within `timeout`, in a span of its own while
/// tracing is on (what the tool calls out to, an MCP server, is its
/// child).
async fn call_tool(
    tool: &dyn RuntimeTool,
    call: &ToolCall,
    input: Value,
    timeout: Duration,
) -> Result<Value, String> {
    let mut span = crate::telemetry::tool_run(&call.name, &call.id);
    let running = tokio::time::timeout(timeout, tool.call(input));
    let result = match &span {
        Some(span) => span.run(running).await,
        None => running.await,
    };
    let result = result.unwrap_or_else(|_| {
        Err(format!(
            "tool_timeout: the tool did not finish within {} s",
            timeout.as_secs()
        ))
    });
    if let (Some(span), Err(e)) = (span.as_mut(), &result) {
        span.fail(e.chars().take(200).collect::<String>());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every streamed answer holds a run task for its whole life: its
    /// future stays small (1,336 bytes since a step is read by a boxed
    /// future of its own; 1,456 before, in the dev and the bench profile
    /// alike; about 1.8 KB while RuntimeEvent took 144 bytes).
    #[test]
    fn the_run_task_stays_small() {
        fn size<A, B, R>(_: impl FnOnce(A, B) -> R) -> usize {
            size_of::<R>()
        }
        let n = size(run_loop);
        assert!(n <= 1408, "run_loop's future takes {n} bytes");
    }
}
