//! Direct MCP mode: the model calls the tools of the caller's MCP
//! instances through the agent runtime's tool loop, as a direct answer of
//! the answer pipeline.
//!
//! Pagination hints: when a tool's output (its `structuredContent`, or a
//! text content that is JSON) carries `nextPageToken` (and
//! `resultSizeEstimate`), the token is remembered in PostgreSQL per (user,
//! instance, tool); an output without one (the last page) forgets it.
//! "More" then continues in two ways: the tool's description given to the
//! model mentions the remembered `pageToken` (and the estimate), and when
//! the user's message asks for more (a word among [`MORE_WORDS`]) and the
//! model calls that tool without a `pageToken` although its input schema
//! has one, the remembered token is filled in.
//!

use super::{ContextHandle, error, message, words};
use crate::app::answer::{Answer, Area, Out, Outcome, Stored, ToolFinished};
use crate::authz::OrgAccess;
use crate::db::datastore::mcp::{GatewayTarget, PaginationHint};
use crate::db::enums::McpSessionStatus;
use crate::error::Error;
use crate::mcp::McpError;
use crate::runtime::{RunLimits, RunSpec, RuntimeTool, model_tool_name};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;
use workspace_api::mcp::{PlaygroundChat, PlaygroundItem, PlaygroundTool};

/// Words of a message that ask for the next page of a listing.
pub const MORE_WORDS: &[&str] = &["more", "next", "continue", "further", "remaining", "rest"];

fn asks_for_more(content: &str) -> bool {
    words(content)
        .iter()
        .any(|w| MORE_WORDS.contains(&w.as_str()))
}

/// The pagination hint of a tool's output: `nextPageToken` (a non-empty
/// string) and the `resultSizeEstimate` of the same object, found in
/// `structuredContent` or in a text content that is JSON, at most a few
/// objects deep.
pub fn pagination_hint(result: &Value) -> Option<(String, Option<i64>)> {
    fn find(v: &Value, depth: usize) -> Option<(String, Option<i64>)> {
        match v {
            Value::Object(map) => {
                if let Some(token) = map
                    .get("nextPageToken")
                    .and_then(|t| t.as_str())
                    .filter(|t| !t.is_empty())
                {
                    let estimate = map.get("resultSizeEstimate").and_then(|e| e.as_i64());
                    return Some((token.to_string(), estimate));
                }
                if depth == 0 {
                    return None;
                }
                map.values().find_map(|v| find(v, depth - 1))
            }
            Value::Array(items) if depth > 0 => items.iter().find_map(|v| find(v, depth - 1)),
            _ => None,
        }
    }
    if let Some(hint) = result.get("structuredContent").and_then(|v| find(v, 3)) {
        return Some(hint);
    }
    result
        .get("content")
        .and_then(|c| c.as_array())?
        .iter()
        .filter(|c| c.get("type").and_then(|t| t.as_str()) == Some("text"))
        .filter_map(|c| c.get("text").and_then(|t| t.as_str()))
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .find_map(|v| find(&v, 3))
}

/// The description the model sees: the tool's, plus the remembered hint.
fn described(description: &str, hint: Option<&PaginationHint>) -> String {
    let Some(hint) = hint else {
        return description.to_string();
    };
    let estimate = hint
        .result_size_estimate
        .map(|n| format!(" (about {n} results in all)"))
        .unwrap_or_default();
    format!(
        "{description}\n\nThe previous call of this tool returned one page of results{estimate}; \
         to get more, call it again with \"pageToken\": {:?}.",
        hint.next_page_token
    )
}

/// One tool of an instance, offered to the model.
struct InstanceTool {
    cx: Arc<dyn ContextHandle>,
    access: OrgAccess,
    target: Arc<GatewayTarget>,
    model_name: String,
    name: String,
    description: String,
    schema: Value,
    /// The remembered hint of this tool's latest output.
    hint: Option<PaginationHint>,
    /// The user's message asks for more.
    wants_more: bool,
}

#[async_trait::async_trait]
impl RuntimeTool for InstanceTool {
    fn spec(&self) -> crate::providers::ToolSpec {
        crate::providers::ToolSpec {
            name: self.model_name.clone(),
            description: described(&self.description, self.hint.as_ref()),
            parameters: self.schema.clone(),
        }
    }

    async fn call(&self, input: Value) -> Result<Value, String> {
        let mut args = match input {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => return Err(format!("the arguments must be an object, not {other}")),
        };
        let cx = self.cx.get();
        let pages = self.schema["properties"].get("pageToken").is_some();
        if let (true, true, Some(hint)) = (self.wants_more, pages, &self.hint)
            && !args.contains_key("pageToken")
        {
            args.insert("pageToken".into(), hint.next_page_token.clone().into());
        }
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
            Ok(out) => {
                let hint = pagination_hint(&out.result);
                if let Err(e) = cx
                    .datastore
                    .mcp_pagination_hint_put(
                        &self.access,
                        self.target.instance_id,
                        &self.name,
                        hint.as_ref().map(|(t, n)| (t.as_str(), *n)),
                    )
                    .await
                {
                    slog::warn!(self.access.log(), "keeping an MCP pagination hint failed";
                        "error" => %e);
                }
                Ok(out.result)
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Direct MCP mode: lists the tools of the instances `ids` (each must be
/// active) and runs the model with them, streaming its items.
pub(super) async fn answer(
    handle: Arc<dyn ContextHandle>,
    access: &OrgAccess,
    body: PlaygroundChat,
    ids: Vec<uuid::Uuid>,
    model: crate::providers::ModelEntry,
) -> Result<mpsc::Receiver<PlaygroundItem>, Error> {
    let cx = handle.get();
    let targets = cx.datastore.mcp_instance_targets(access, &ids).await?;
    let mut hints = std::collections::HashMap::new();
    for (_, target) in &targets {
        for hint in cx
            .datastore
            .mcp_pagination_hints(access, target.instance_id)
            .await?
        {
            hints.insert((target.instance_id, hint.tool.clone()), hint);
        }
    }
    let wants_more = asks_for_more(&body.content);
    // The budgets, before the answer starts.
    let metered = crate::app::usage::admit(
        cx,
        crate::app::usage::member(access),
        "playground",
        &model,
        body.content.len(),
        None,
    )
    .await
    .map_err(crate::app::usage::refused_as_forbidden)?;
    let access = access.clone();
    let log = access.log().clone();
    let (mut answer, rx) = Answer::direct(cx, PlaygroundAnswer, 64, Some(&access), log.clone());
    crate::telemetry::spawn(async move {
        let cx = handle.get();
        let mut tools: Vec<Arc<dyn RuntimeTool>> = Vec::new();
        for (slug, target) in targets {
            if target.status != McpSessionStatus::Active {
                answer
                    .emit(error(
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
                    answer
                        .emit(error(format!("listing the MCP tools failed: {e}")))
                        .await;
                    return;
                }
            };
            for t in listed {
                tools.push(Arc::new(InstanceTool {
                    cx: handle.clone(),
                    access: access.clone(),
                    target: target.clone(),
                    model_name: model_tool_name(&crate::app::mcp::tool_slug(&slug, &t.name)),
                    hint: hints.remove(&(target.instance_id, t.name.clone())),
                    name: t.name,
                    description: t.description,
                    schema: t.input_schema,
                    wants_more,
                }));
            }
        }
        let spec = RunSpec {
            model,
            retry: cx.models.retry.clone(),
            system_prompt: "You are a helpful assistant. Use the tools when they help.".into(),
            temperature: None,
            max_tokens: None,
            reasoning: None,
            history: vec![crate::providers::ChatMessage::user(body.content)],
            tools,
            limits: RunLimits {
                tool_timeout: std::time::Duration::from_secs(cx.config.mcp.timeout_secs.max(1)),
                ..RunLimits::default()
            },
            log,
            whole: false,
            usage: Some(Box::new(metered)),
        };
        answer.run(spec).await;
    });
    Ok(rx)
}

/// A playground answer, as the answer pipeline sees it: its items carry
/// the text, the tool calls as they start and finish, then `DONE` or an
/// error.
struct PlaygroundAnswer;

fn tool_item(tool: PlaygroundTool) -> PlaygroundItem {
    PlaygroundItem {
        message: Some(String::new()),
        tool: Some(Some(tool)),
        ..Default::default()
    }
}

#[async_trait::async_trait]
impl Area for PlaygroundAnswer {
    type Event = PlaygroundItem;

    fn content(&self, piece: String) -> PlaygroundItem {
        message(piece)
    }

    fn tool_started(&self, id: String, name: String, input: Value) -> Option<PlaygroundItem> {
        Some(tool_item(PlaygroundTool {
            id,
            name,
            input,
            output: None,
            successful: None,
            error: None,
        }))
    }

    fn tool_finished(&self, f: ToolFinished) -> Option<PlaygroundItem> {
        Some(tool_item(PlaygroundTool {
            id: f.id,
            name: f.name,
            input: f.input,
            output: f.output,
            successful: Some(f.successful),
            error: Some(f.error),
        }))
    }

    async fn close(
        &self,
        out: &mut Out<PlaygroundItem>,
        outcome: Outcome,
        _stored: Stored,
        _usage: Option<crate::providers::Usage>,
    ) {
        match outcome.error() {
            None if matches!(outcome, Outcome::Complete) => {
                out.emit(message("DONE")).await;
            }
            None => {}
            Some((_, text)) => {
                out.emit(error(text)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pagination_hints_are_found_in_structured_or_text_content() {
        let structured = json!({"content": [], "structuredContent":
            {"messages": [], "nextPageToken": "p2", "resultSizeEstimate": 42}});
        assert_eq!(pagination_hint(&structured), Some(("p2".into(), Some(42))));
        let text = json!({"content": [{"type": "text",
            "text": "{\"data\": {\"nextPageToken\": \"p3\"}}"}]});
        assert_eq!(pagination_hint(&text), Some(("p3".into(), None)));
        let last = json!({"content": [{"type": "text", "text": "{\"messages\": []}"}]});
        assert_eq!(pagination_hint(&last), None);
        let empty = json!({"structuredContent": {"nextPageToken": ""}});
        assert_eq!(pagination_hint(&empty), None);
    }

    #[test]
    fn the_hint_goes_into_the_description() {
        let hint = PaginationHint {
            tool: "list".into(),
            next_page_token: "p2".into(),
            result_size_estimate: Some(5),
        };
        let d = described("Lists.", Some(&hint));
        assert!(d.starts_with("Lists.\n\n"), "{d}");
        assert!(
            d.contains("\"pageToken\": \"p2\"") && d.contains("about 5 results"),
            "{d}"
        );
        assert_eq!(described("Lists.", None), "Lists.");
        assert!(asks_for_more("Show me MORE please"));
        assert!(!asks_for_more("list my messages"));
    }
}
