//! Embedding models behind one trait: the local all-MiniLM-L6-v2 (the
//! zero-configuration default) and OpenAI-compatible `/v1/embeddings`
//! endpoints. A knowledge base names one by `embedding_model` and keeps
//! it.

use std::sync::Arc;

pub mod local;
pub mod openai;

pub use local::LocalMiniLm;

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// Worth retrying later (network, 429, 5xx, model still provisioning).
    #[error("{0}")]
    Transient(String),
    /// Retrying will not help.
    #[error("{0}")]
    Permanent(String),
}

/// An embedding model.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// The name knowledge bases choose.
    fn name(&self) -> &str;
    /// Length of every vector.
    fn dimensions(&self) -> usize;
    /// Embeds a batch of texts; one unit-length vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Embeds one search query: the same vector [`Embedder::embed`] gives
    /// for it, on the path a person waits on (the local model runs it at
    /// once instead of behind ingestion batches).
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed(&[text.to_string()])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| EmbedError::Permanent("the embedder returned no vector".to_string()))
    }
    /// Whether a query can be embedded without first loading (or
    /// downloading) a model: a search only starts one speculatively then.
    fn ready(&self) -> bool {
        true
    }
}

/// Query vectors recently computed, by embedder and text: repeated
/// questions (common in chat: the same knowledge base asked again, a
/// retried message) skip the model. Bounded by entries; each holds one
/// vector (1.5 KB at 384 dimensions). Process memory is right here: a
/// cache, recomputed on a miss, nothing another instance needs.
pub struct QueryCache {
    vectors: quick_cache::sync::Cache<(String, String), Arc<[f32]>>,
}

/// Query vectors kept (about 6 MB at 384 dimensions).
pub const QUERY_CACHE_ENTRIES: usize = 4096;
/// Queries longer than this are not cached (they are rarely repeated).
const QUERY_CACHE_MAX_CHARS: usize = 2000;

impl QueryCache {
    pub fn new(entries: usize) -> QueryCache {
        QueryCache {
            vectors: quick_cache::sync::Cache::new(entries),
        }
    }

    /// The vector of `text` by `embedder`, from the cache or computed (and
    /// kept).
    pub async fn embed(
        &self,
        embedder: &dyn Embedder,
        text: &str,
    ) -> Result<Arc<[f32]>, EmbedError> {
        if text.len() > QUERY_CACHE_MAX_CHARS {
            return Ok(embedder.embed_query(text).await?.into());
        }
        let key = (embedder.name().to_string(), text.to_string());
        if let Some(vector) = self.vectors.get(&key) {
            return Ok(vector);
        }
        let vector: Arc<[f32]> = embedder.embed_query(text).await?.into();
        self.vectors.insert(key, vector.clone());
        Ok(vector)
    }
}

/// The embedders this server offers, by name.
#[derive(Clone)]
pub struct EmbedderRegistry {
    entries: Vec<Arc<dyn Embedder>>,
    /// The built-in model (also the tokenizer chunks are measured with).
    pub local: Arc<LocalMiniLm>,
    /// Recent query vectors of every embedder.
    pub queries: Arc<QueryCache>,
}

impl EmbedderRegistry {
    pub fn new(local: Arc<LocalMiniLm>, entries: Vec<Arc<dyn Embedder>>) -> EmbedderRegistry {
        EmbedderRegistry {
            entries,
            local,
            queries: Arc::new(QueryCache::new(QUERY_CACHE_ENTRIES)),
        }
    }

    /// The embedder named `name`, compared without regard to case or
    /// surrounding blanks (`all-MiniLM-L6-v2`, the model's published name,
    /// is `all-minilm-l6-v2`); knowledge bases store the canonical name.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Embedder>> {
        let name = name.trim();
        self.entries
            .iter()
            .find(|e| e.name().eq_ignore_ascii_case(name))
            .cloned()
    }

    /// The embedder every knowledge base uses when only one is configured
    /// (the usual case: the local model) and it is ready, so a search may
    /// start embedding its query before it has read which embedder its
    /// knowledge base uses (and whether it has chunks: a search of an
    /// empty knowledge base must not wait for a model to download).
    pub fn only(&self) -> Option<Arc<dyn Embedder>> {
        match self.entries.as_slice() {
            [one] if one.ready() => Some(one.clone()),
            _ => None,
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name().to_string()).collect()
    }
}

/// The dimensions the chunk table indexes (one partial HNSW index each).
pub const SUPPORTED_DIMENSIONS: [usize; 4] = [384, 768, 1024, 1536];

/// The configured embedders: the local one, then `[[embedders]]`.
pub fn registry(
    config: &crate::config::Config,
    data_dir: &std::path::Path,
) -> anyhow::Result<EmbedderRegistry> {
    let model_dir = config.kb.local_model_dir.clone().unwrap_or_else(|| {
        data_dir
            .join("models")
            .join(crate::kb_config::LOCAL_EMBEDDER)
    });
    let local = Arc::new(LocalMiniLm::new(model_dir));
    let mut entries: Vec<Arc<dyn Embedder>> = vec![local.clone()];
    for e in &config.embedders {
        if !SUPPORTED_DIMENSIONS.contains(&(e.dimensions as usize)) {
            anyhow::bail!(
                "embedder {:?}: dimensions must be one of {SUPPORTED_DIMENSIONS:?}",
                e.name
            );
        }
        if entries.iter().any(|x| x.name() == e.name) {
            anyhow::bail!("embedder {:?} is configured twice", e.name);
        }
        if e.kind == crate::kb_config::EmbedderKind::Local {
            anyhow::bail!("embedder {:?}: the local embedder is built in", e.name);
        }
        // The key is read from the named environment variable at start.
        let api_key = match &e.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                anyhow::anyhow!(
                    "embedder {:?}: environment variable {var} is not set",
                    e.name
                )
            })?),
            None => None,
        };
        entries.push(Arc::new(openai::OpenAiEmbedder::new(e, api_key)?));
    }
    Ok(EmbedderRegistry::new(local, entries))
}
