//! The MCP playground: a chat whose model may call the tools of the
//! caller's MCP instances (Direct MCP mode, through the agent runtime's
//! tool loop), or that recommends servers to connect (Intelligent
//! Discovery).
//!
//! Discovery ranks the catalog by the words (lowercase, 3+ letters) the
//! message shares with each server's name, toolkit and cached tools'
//! names and descriptions; servers sharing none are not recommended.
//! Not done yet: embedding or model-assisted ranking, and remembering
//! pagination hints (`nextPageToken`) of tool outputs between requests.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::db::datastore::mcp::GatewayTarget;
use crate::db::enums::McpSessionStatus;
use crate::error::Error;
use crate::mcp::McpError;
use crate::runtime::{RunLimits, RunSpec, RuntimeEvent, RuntimeTool, model_tool_name};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;
use workspace_api::mcp::{PlaygroundChat, PlaygroundItem, PlaygroundServers, PlaygroundTool};

/// The server context, shared with the stream's task (dropshot keeps it
/// behind an `Arc` of a type of its own).
pub trait ContextHandle: Send + Sync + 'static {
    fn get(&self) -> &ServerContext;
}

/// A [`ContextHandle`] over any shared state that holds the context.
pub struct Handle<S: Send + Sync + 'static> {
    pub state: Arc<S>,
    pub get: fn(&S) -> &ServerContext,
}

impl<S: Send + Sync + 'static> ContextHandle for Handle<S> {
    fn get(&self) -> &ServerContext {
        (self.get)(&self.state)
    }
}

pub const CONTENT_MAX_CHARS: usize = 32_000;
const MODEL_PREFIXES: &[&str] = &["gpt-", "o1", "claude-", "deepseek-", "gemini-"];

fn message(text: impl Into<String>) -> PlaygroundItem {
    PlaygroundItem {
        message: Some(text.into()),
        tool: Some(None),
        ..Default::default()
    }
}

fn error(text: impl Into<String>) -> PlaygroundItem {
    PlaygroundItem {
        error: Some(text.into()),
        ..Default::default()
    }
}

/// The model of a request: a prefix the spec names (or the built-in
/// development model), offered by this service.
fn model(
    cx: &ServerContext,
    requested: Option<&str>,
) -> Result<crate::providers::ModelEntry, Error> {
    let offline = crate::config::OFFLINE_MODEL_NAME;
    let name = match requested.or(cx.config.mcp.playground_model.as_deref()) {
        Some(n) => n.to_string(),
        None => cx
            .models
            .list()
            .iter()
            .find(|m| m.name != offline)
            .or_else(|| cx.models.list().first())
            .map(|m| m.name.clone())
            .ok_or_else(|| Error::invalid("model_unavailable", "no model is offered"))?,
    };
    if name != offline && !MODEL_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Err(Error::invalid(
            "invalid_model",
            "the model name must start with gpt-, o1, claude-, deepseek- or gemini-",
        ));
    }
    cx.models
        .list()
        .iter()
        .find(|m| m.name == name)
        .cloned()
        .ok_or_else(|| {
            Error::invalid(
                "model_unavailable",
                format!("model {name:?} is not offered"),
            )
        })
}

/// One tool of an instance, offered to the model.
struct InstanceTool {
    cx: Arc<dyn ContextHandle>,
    target: Arc<GatewayTarget>,
    model_name: String,
    name: String,
    description: String,
    schema: Value,
}

#[async_trait::async_trait]
impl RuntimeTool for InstanceTool {
    fn spec(&self) -> crate::providers::ToolSpec {
        crate::providers::ToolSpec {
            name: self.model_name.clone(),
            description: self.description.clone(),
            parameters: self.schema.clone(),
        }
    }

    async fn call(&self, input: Value) -> Result<Value, String> {
        let args = match input {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => return Err(format!("the arguments must be an object, not {other}")),
        };
        let cx = self.cx.get();
        let token = crate::app::mcp_gateway::access_token(cx, &self.target, false)
            .await
            .map_err(|e| e.to_string())?;
        let mut result = cx
            .mcp
            .call_tool(&self.target.url, token.as_deref(), &self.name, args.clone())
            .await;
        if matches!(result, Err(McpError::Unauthorized(_))) && token.is_some() {
            let token = crate::app::mcp_gateway::access_token(cx, &self.target, true)
                .await
                .map_err(|e| e.to_string())?;
            result = cx
                .mcp
                .call_tool(&self.target.url, token.as_deref(), &self.name, args)
                .await;
        }
        match result {
            Ok(out) if out.is_error => Err(out.result.to_string()),
            Ok(out) => Ok(out.result),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Validates the request, then streams its items.
pub async fn chat(
    handle: Arc<dyn ContextHandle>,
    access: &OrgAccess,
    body: PlaygroundChat,
) -> Result<mpsc::Receiver<PlaygroundItem>, Error> {
    let cx = handle.get();
    let chars = body.content.trim().chars().count();
    if chars == 0 || body.content.chars().count() > CONTENT_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_message",
            format!("content must be 1 to {CONTENT_MAX_CHARS} characters"),
        ));
    }
    let ids = body.mcp_instance_ids.clone().unwrap_or_default();
    let (tx, rx) = mpsc::channel(64);
    if ids.is_empty() {
        let servers = discover(cx, access, &body.content).await?;
        tokio::spawn(async move {
            let _ = tx
                .send(PlaygroundItem {
                    message: Some(String::new()),
                    tool: Some(None),
                    mcp: Some(PlaygroundServers {
                        server_ids: servers,
                    }),
                    error: None,
                })
                .await;
            let _ = tx.send(message("DONE")).await;
        });
        return Ok(rx);
    }
    let model = model(cx, body.model.as_deref())?;
    let targets = cx.datastore.mcp_instance_targets(access, &ids).await?;
    let log = access.log().clone();
    tokio::spawn(async move {
        let cx = handle.get();
        let mut tools: Vec<Arc<dyn RuntimeTool>> = Vec::new();
        for (slug, target) in targets {
            if target.status != McpSessionStatus::Active {
                let _ = tx
                    .send(error(
                        "an MCP instance needs a new authorization: connect the account again",
                    ))
                    .await;
                return;
            }
            let target = Arc::new(target);
            let listed = async {
                let token = crate::app::mcp_gateway::access_token(cx, &target, false)
                    .await
                    .map_err(|e| e.to_string())?;
                cx.mcp
                    .list_tools(&target.url, token.as_deref())
                    .await
                    .map_err(|e| e.to_string())
            }
            .await;
            let listed = match listed {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx
                        .send(error(format!("listing the MCP tools failed: {e}")))
                        .await;
                    return;
                }
            };
            for t in listed {
                tools.push(Arc::new(InstanceTool {
                    cx: handle.clone(),
                    target: target.clone(),
                    model_name: model_tool_name(&crate::app::mcp::tool_slug(&slug, &t.name)),
                    name: t.name,
                    description: t.description,
                    schema: t.input_schema,
                }));
            }
        }
        let spec = RunSpec {
            model,
            retry: cx.models.retry.clone(),
            system_prompt: "You are a helpful assistant. Use the tools when they help.".into(),
            temperature: None,
            max_tokens: None,
            history: vec![crate::providers::ChatMessage::user(body.content)],
            tools,
            limits: RunLimits {
                tool_timeout: std::time::Duration::from_secs(cx.config.mcp.timeout_secs.max(1)),
                ..RunLimits::default()
            },
            log,
        };
        let mut events = crate::runtime::run(spec);
        while let Some(event) = events.recv().await {
            let item = match event {
                RuntimeEvent::Text(t) => message(t),
                RuntimeEvent::ToolStarted { id, name, input } => PlaygroundItem {
                    message: Some(String::new()),
                    tool: Some(Some(PlaygroundTool {
                        id,
                        name,
                        input,
                        output: None,
                        successful: None,
                        error: None,
                    })),
                    ..Default::default()
                },
                RuntimeEvent::ToolFinished {
                    id,
                    name,
                    input,
                    output,
                    error,
                    successful,
                } => PlaygroundItem {
                    message: Some(String::new()),
                    tool: Some(Some(PlaygroundTool {
                        id,
                        name,
                        input,
                        output,
                        successful: Some(successful),
                        error: Some(error),
                    })),
                    ..Default::default()
                },
                RuntimeEvent::Usage(_) => continue,
                RuntimeEvent::End => message("DONE"),
                RuntimeEvent::Error { message, .. } => error(message),
            };
            let last = item.error.is_some() || item.message.as_deref() == Some("DONE");
            if tx.send(item).await.is_err() || last {
                return;
            }
        }
    });
    Ok(rx)
}

fn words(text: &str) -> std::collections::HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| w.to_lowercase())
        .collect()
}

/// The configured servers sharing words with the message, best first.
async fn discover(
    cx: &ServerContext,
    access: &OrgAccess,
    content: &str,
) -> Result<Vec<uuid::Uuid>, Error> {
    let wanted = words(content);
    let mut scored = Vec::new();
    for server in cx.datastore.mcp_servers_list(access).await? {
        let mut text = format!(
            "{} {} {}",
            server.name, server.toolkit_name, server.toolkit_slug
        );
        if let Some((tools, _)) = cx
            .datastore
            .mcp_tool_cache_get(server.id, &server.url)
            .await?
            && let Ok(tools) = serde_json::from_value::<Vec<crate::mcp::ListedTool>>(tools)
        {
            for t in tools {
                text.push(' ');
                text.push_str(&t.name);
                text.push(' ');
                text.push_str(&t.description);
            }
        }
        let score = words(&text).intersection(&wanted).count();
        if score > 0 {
            scored.push((score, server.name, server.id));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(scored.into_iter().map(|(_, _, id)| id).collect())
}
