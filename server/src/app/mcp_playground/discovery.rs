//! Intelligent Discovery: which configured MCP servers would help with a
//! message.
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
//! Model-assisted discovery: when the request's model (or the default one:
//! `mcp.playground_model`, else the first configured model) is a real
//! provider's and not the built-in offline model, that model is asked
//! first: it gets the catalog, one numbered line per server (the same
//! text as embedded), and the message, and answers with a JSON array of
//! the numbers of the servers that would help, best first (`[]` for
//! none). That answer is the recommendation. When the model fails, takes
//! longer than [`DISCOVERY_MODEL_BUDGET`] or answers anything but such an
//! array, discovery ranks by meaning or words as above.

use super::{message, words};
use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::error::Error;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;
use workspace_api::mcp::{PlaygroundItem, PlaygroundServers};

/// The recommendation as the stream's items: the servers, then `DONE`.
pub(super) fn recommend(servers: Vec<uuid::Uuid>) -> mpsc::Receiver<PlaygroundItem> {
    let (tx, rx) = mpsc::channel(2);
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
    rx
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
    access: &OrgAccess,
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
        crate::usage::Metered::new(
            cx.usage.clone(),
            crate::app::usage::member(access),
            "discovery",
            model,
            Vec::new(),
        )
        .asking(&request),
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
pub(super) async fn discover(
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
        && let Some(ids) = ask_model(cx, access, model, content, &catalog, access.log()).await
    {
        return Ok(ids);
    }
    let local = cx.embedders.local.clone();
    if crate::embedder::local::is_provisioned(local.model_dir()) {
        let query: String = content.chars().take(DISCOVERY_TEXT_MAX_CHARS).collect();
        let texts: Vec<String> = catalog.iter().map(|(_, t)| t.clone()).collect();
        let count = texts.len();
        let task = crate::telemetry::spawn(async move {
            let embedder: &dyn crate::embedder::Embedder = local.as_ref();
            let query = vec![embedder.embed_query(&query).await?];
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
}
