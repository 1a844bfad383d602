//! The MCP playground: a chat whose model may call the tools of the
//! caller's MCP instances (Direct MCP mode, through the agent runtime's
//! tool loop), or that recommends servers to connect (Intelligent
//! Discovery).
//!
//! Discovery ranks the catalog by meaning when the local embedding model
//! (all-MiniLM-L6-v2) is provisioned: the message and, per server, one
//! text (name, toolkit, then its cached tools as `name: first sentence of
//! the description`, up to [`DISCOVERY_TEXT_MAX_CHARS`]) are embedded. A
//! server scores the cosine similarity of the two plus
//! [`DISCOVERY_WORD_BONUS`] per word (3+ letters, not a stop word, at most
//! three) the message shares with its name, toolkit and tools' names and
//! descriptions; servers scoring at least [`DISCOVERY_THRESHOLD`] are
//! recommended, best first. The catalog's vectors are kept in a
//! content-addressed cache in process memory (keyed by the SHA-256 of the
//! model and text: a pure cache, recomputed by any instance that lacks
//! it; one short text per server). Embedding runs in a
//! task of its own with a budget of [`DISCOVERY_EMBED_BUDGET`]: past it
//! the request is answered by words while the task finishes filling the
//! cache. Without the model (not downloaded yet, or failing), or past the
//! budget, discovery ranks by words: servers sharing words (lowercase, 3+
//! letters) with the message, most shared first; servers sharing none are
//! not recommended.
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
//! Model-assisted discovery: when the request's model (or the default one:
//! `mcp.playground_model`, else the first configured model) is a real
//! provider's and not the built-in offline model, that model is asked
//! first: it gets the catalog, one numbered line per server (the same
//! text as embedded), and the message, and answers with a JSON array of
//! the numbers of the servers that would help, best first (`[]` for
//! none). That answer is the recommendation. When the model fails, takes
//! longer than [`DISCOVERY_MODEL_BUDGET`] or answers anything but such an
//! array, discovery ranks by meaning or words as above.

use crate::app::answer::{Answer, Area, Out, Outcome, Stored, ToolFinished};
use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::db::datastore::mcp::{GatewayTarget, PaginationHint};
use crate::db::enums::McpSessionStatus;
use crate::error::Error;
use crate::mcp::McpError;
use crate::runtime::{RunLimits, RunSpec, RuntimeTool, model_tool_name};
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
    if ids.is_empty() {
        let (tx, rx) = mpsc::channel(2);
        let model = model(cx, body.model.as_deref())?;
        let servers = discover(cx, access, &body.content, &model).await?;
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
    let access = access.clone();
    let log = access.log().clone();
    let (mut answer, rx) = Answer::direct(cx, PlaygroundAnswer, 64, log.clone());
    tokio::spawn(async move {
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
            history: vec![crate::providers::ChatMessage::user(body.content)],
            tools,
            limits: RunLimits {
                tool_timeout: std::time::Duration::from_secs(cx.config.mcp.timeout_secs.max(1)),
                ..RunLimits::default()
            },
            log,
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

fn words(text: &str) -> std::collections::HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| w.to_lowercase())
        .collect()
}

/// The least score (cosine similarity with all-MiniLM-L6-v2's unit
/// vectors, plus the word bonus) for a server to be recommended. Measured
/// on the tests' catalogs: unrelated messages score -0.02 to 0.16
/// ("Bonjour", a server without tools), requests on a server's subject
/// without a shared word 0.33 to 0.40 ("Will it rain in Paris tomorrow?"
/// against a weather forecast tool).
pub const DISCOVERY_THRESHOLD: f32 = 0.25;

/// Added to the similarity per word the message shares with a server (at
/// most three words): exact names of tools or services count even when
/// the server's text is long.
pub const DISCOVERY_WORD_BONUS: f32 = 0.1;

/// Words that say nothing about a server (not counted for the bonus).
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "you", "your", "with", "this", "that", "from", "are", "can", "please",
    "what", "how", "all", "any", "was", "will", "have", "has", "not", "but", "use", "get", "into",
    "about", "there", "their", "them", "then", "than", "some", "could", "would", "should",
];

/// Longest text embedded per server (characters; the model reads about
/// 256 tokens).
pub const DISCOVERY_TEXT_MAX_CHARS: usize = 600;

/// Longest wait for the embeddings of a discovery request (the first
/// request after a start also loads the model).
pub const DISCOVERY_EMBED_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

/// The text a server is known by: its name and toolkit, then its cached
/// tools as `name: first sentence of the description`, clipped. One text
/// per server keeps embedding cheap (one text per tool costs about ten
/// times more on a large server).
fn server_text(
    server: &crate::db::datastore::mcp::McpServerRow,
    tools: &[crate::mcp::ListedTool],
) -> String {
    let mut text = format!("{} ({}).", server.name, server.toolkit_name);
    for t in tools {
        let name = t.name.replace(['_', '-'], " ");
        let first = t
            .description
            .split_inclusive(['.', '\n'])
            .next()
            .unwrap_or("")
            .trim();
        let mut tool = name;
        if !first.is_empty() {
            tool.push_str(": ");
            tool.push_str(first);
        }
        if !tool.ends_with('.') {
            tool.push('.');
        }
        text.push(' ');
        text.push_str(&tool);
    }
    text.chars().take(DISCOVERY_TEXT_MAX_CHARS).collect()
}

/// Embedded texts' vectors by SHA-256 of (model, text).
type VectorCache = std::sync::Mutex<std::collections::HashMap<Vec<u8>, Arc<Vec<f32>>>>;

/// Vectors of texts embedded before, by SHA-256 of (model, text): a pure
/// cache (any instance recomputes what it lacks), bounded.
fn vector_cache() -> &'static VectorCache {
    static CACHE: std::sync::OnceLock<VectorCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

const VECTOR_CACHE_MAX: usize = 20_000;

/// One vector per text, from the cache or embedded (in one batch).
async fn embed_cached(
    embedder: &dyn crate::embedder::Embedder,
    texts: &[String],
) -> Result<Vec<Arc<Vec<f32>>>, crate::embedder::EmbedError> {
    let key = |t: &String| {
        let mut h = <sha2::Sha256 as sha2::Digest>::new();
        sha2::Digest::update(&mut h, embedder.name().as_bytes());
        sha2::Digest::update(&mut h, [0u8]);
        sha2::Digest::update(&mut h, t.as_bytes());
        sha2::Digest::finalize(h).to_vec()
    };
    let keys: Vec<Vec<u8>> = texts.iter().map(key).collect();
    let mut out: Vec<Option<Arc<Vec<f32>>>> = {
        let cache = vector_cache().lock().unwrap_or_else(|e| e.into_inner());
        keys.iter().map(|k| cache.get(k).cloned()).collect()
    };
    let missing: Vec<usize> = (0..texts.len()).filter(|i| out[*i].is_none()).collect();
    if !missing.is_empty() {
        let batch: Vec<String> = missing.iter().map(|i| texts[*i].clone()).collect();
        let vectors = embedder.embed(&batch).await?;
        if vectors.len() != batch.len() {
            return Err(crate::embedder::EmbedError::Permanent(
                "the embedder returned a wrong number of vectors".into(),
            ));
        }
        let mut cache = vector_cache().lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() + vectors.len() > VECTOR_CACHE_MAX {
            cache.clear();
        }
        for (i, v) in missing.into_iter().zip(vectors) {
            let v = Arc::new(v);
            cache.insert(keys[i].clone(), v.clone());
            out[i] = Some(v);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    // The embedders return unit vectors.
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// How long model-assisted discovery waits for the model's answer.
pub const DISCOVERY_MODEL_BUDGET: std::time::Duration = std::time::Duration::from_secs(15);

/// The catalog's numbers (1-based) in a model's answer: the first JSON
/// array of the text, of numbers within the catalog, duplicates dropped;
/// `None` when there is no such array.
fn picked_numbers(answer: &str, catalog_len: usize) -> Option<Vec<usize>> {
    let start = answer.find('[')?;
    let end = start + answer[start..].find(']')?;
    let values: Vec<Value> = serde_json::from_str(&answer[start..=end]).ok()?;
    let mut picked = Vec::new();
    for v in values {
        let n = v.as_u64()? as usize;
        if n == 0 || n > catalog_len {
            return None;
        }
        if !picked.contains(&n) {
            picked.push(n);
        }
    }
    Some(picked)
}

/// Asks `model` which servers of the catalog help with `content`; `None`
/// when it fails or its answer is not usable (see [`picked_numbers`]).
async fn ask_model(
    cx: &ServerContext,
    model: &crate::providers::ModelEntry,
    content: &str,
    catalog: &[(crate::db::datastore::mcp::McpServerRow, String)],
    log: &slog::Logger,
) -> Option<Vec<uuid::Uuid>> {
    let mut system = String::from(
        "You recommend MCP servers (providers of tools) for a user's request. \
         The servers, one per line as `number: description`:\n",
    );
    for (i, (_, text)) in catalog.iter().enumerate() {
        system.push_str(&format!("{}: {text}\n", i + 1));
    }
    system.push_str(
        "Answer with a JSON array of the numbers of the servers whose tools would help \
         with the request, most useful first, for example [2, 1]; answer [] when none \
         would help. Answer with the array only.",
    );
    let request = crate::providers::ChatRequest {
        messages: vec![
            crate::providers::ChatMessage::system(system),
            crate::providers::ChatMessage::user(content.chars().take(2000).collect::<String>()),
        ],
        max_tokens: Some(64),
        ..Default::default()
    };
    let answer = crate::providers::ask(
        model.chat.as_ref(),
        &request,
        &cx.models.retry,
        log,
        DISCOVERY_MODEL_BUDGET,
    )
    .await;
    let Some(answer) = answer else {
        slog::info!(
            log,
            "MCP discovery: the model did not answer; ranking by meaning or words"
        );
        return None;
    };
    let Some(numbers) = picked_numbers(&answer, catalog.len()) else {
        slog::info!(log, "MCP discovery: the model's answer is not a list of servers; \
            ranking by meaning or words"; "answer_chars" => answer.chars().count());
        return None;
    };
    Some(numbers.into_iter().map(|n| catalog[n - 1].0.id).collect())
}

/// The configured servers for the message, best first: as `model` says
/// when it is a real provider's, else (or when it fails) by embedding
/// similarity when the local model is there, else by shared words.
async fn discover(
    cx: &ServerContext,
    access: &OrgAccess,
    content: &str,
    model: &crate::providers::ModelEntry,
) -> Result<Vec<uuid::Uuid>, Error> {
    let mut catalog: Vec<(crate::db::datastore::mcp::McpServerRow, String)> = Vec::new();
    let mut all_words = Vec::new();
    for server in cx.datastore.mcp_servers_list(access).await? {
        let tools = match cx
            .datastore
            .mcp_tool_cache_get(server.id, &server.url)
            .await?
        {
            Some((tools, _)) => {
                serde_json::from_value::<Vec<crate::mcp::ListedTool>>(tools).unwrap_or_default()
            }
            None => Vec::new(),
        };
        // Words see whole descriptions.
        let mut all = format!(
            "{} {} {}",
            server.name, server.toolkit_name, server.toolkit_slug
        );
        for t in &tools {
            all.push(' ');
            all.push_str(&t.name);
            all.push(' ');
            all.push_str(&t.description);
        }
        let text = server_text(&server, &tools);
        catalog.push((server, text));
        all_words.push(words(&all));
    }
    if model.provider != "offline"
        && !catalog.is_empty()
        && let Some(ids) = ask_model(cx, model, content, &catalog, access.log()).await
    {
        return Ok(ids);
    }
    let local = cx.embedders.local.clone();
    if crate::embedder::local::is_provisioned(local.model_dir()) {
        let query: String = content.chars().take(DISCOVERY_TEXT_MAX_CHARS).collect();
        let texts: Vec<String> = catalog.iter().map(|(_, t)| t.clone()).collect();
        let count = texts.len();
        let task = tokio::spawn(async move {
            let embedder: &dyn crate::embedder::Embedder = local.as_ref();
            let query = embedder.embed(&[query]).await?;
            let vectors = embed_cached(embedder, &texts).await?;
            Ok::<_, crate::embedder::EmbedError>((query, vectors))
        });
        match tokio::time::timeout(DISCOVERY_EMBED_BUDGET, task).await {
            Ok(Ok(Ok((query, vectors)))) if query.len() == 1 && vectors.len() == count => {
                let wanted: std::collections::HashSet<String> = words(content)
                    .into_iter()
                    .filter(|w| !STOP_WORDS.contains(&w.as_str()))
                    .collect();
                let mut scored = Vec::new();
                for (((server, _), v), server_words) in catalog.iter().zip(&vectors).zip(&all_words)
                {
                    let shared = server_words.intersection(&wanted).count().min(3);
                    let score = cosine(&query[0], v) + DISCOVERY_WORD_BONUS * shared as f32;
                    slog::debug!(access.log(), "MCP discovery score";
                        "server" => &server.name, "score" => score);
                    if score >= DISCOVERY_THRESHOLD {
                        scored.push((score, server.name.clone(), server.id));
                    }
                }
                scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                return Ok(scored.into_iter().map(|(_, _, id)| id).collect());
            }
            Ok(Ok(Ok(_))) => slog::warn!(access.log(), "MCP discovery: wrong number of vectors"),
            Ok(Ok(Err(e))) => slog::warn!(access.log(), "MCP discovery by embeddings failed; \
                using words"; "error" => %e),
            Ok(Err(e)) => slog::warn!(access.log(), "MCP discovery task failed"; "error" => %e),
            Err(_) => slog::info!(
                access.log(),
                "MCP discovery: embedding takes longer than \
                the budget; using words (the vectors are cached when ready)"
            ),
        }
    }
    let wanted = words(content);
    let mut scored = Vec::new();
    for ((server, _), server_words) in catalog.into_iter().zip(all_words) {
        let score = server_words.intersection(&wanted).count();
        if score > 0 {
            scored.push((score, server.name, server.id));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(scored.into_iter().map(|(_, _, id)| id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_models_ranking_is_the_first_array_of_catalog_numbers() {
        assert_eq!(picked_numbers("[2, 1]", 3), Some(vec![2, 1]));
        assert_eq!(
            picked_numbers("Sure: [3,3,1] hope it helps", 3),
            Some(vec![3, 1])
        );
        assert_eq!(picked_numbers("[]", 3), Some(vec![]));
        assert_eq!(picked_numbers("[4]", 3), None);
        assert_eq!(picked_numbers("[0]", 3), None);
        assert_eq!(picked_numbers("[\"Weather\"]", 3), None);
        assert_eq!(picked_numbers("Weather, then Calendar", 3), None);
        assert_eq!(picked_numbers("[1, 2", 3), None);
    }

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
