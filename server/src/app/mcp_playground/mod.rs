//! The MCP playground: a chat whose model may call the tools of the
//! caller's MCP instances (Direct MCP mode, through the agent runtime's
//! tool loop), or that recommends servers to connect (Intelligent
//! Discovery).
//!
//! Two modes: [`direct`] (the model calls the tools of the caller's MCP
//! instances) and [`discovery`] (which configured servers would help).

mod direct;
mod discovery;

pub use direct::{MORE_WORDS, pagination_hint};
pub use discovery::{
    DISCOVERY_EMBED_BUDGET, DISCOVERY_MODEL_BUDGET, DISCOVERY_TEXT_MAX_CHARS, DISCOVERY_THRESHOLD,
    DISCOVERY_WORD_BONUS,
};

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::error::Error;
use std::sync::Arc;
use tokio::sync::mpsc;
use workspace_api::mcp::{PlaygroundChat, PlaygroundItem};

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

pub(super) fn message(text: impl Into<String>) -> PlaygroundItem {
    PlaygroundItem {
        message: Some(text.into()),
        tool: Some(None),
        ..Default::default()
    }
}

pub(super) fn error(text: impl Into<String>) -> PlaygroundItem {
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
    let model = model(cx, body.model.as_deref())?;
    if ids.is_empty() {
        let servers = discovery::discover(cx, access, &body.content, &model).await?;
        return Ok(discovery::recommend(servers));
    }
    direct::answer(handle, access, body, ids, model).await
}

pub(super) fn words(text: &str) -> std::collections::HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| w.to_lowercase())
        .collect()
}
