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
}

/// The embedders this server offers, by name.
#[derive(Clone)]
pub struct EmbedderRegistry {
    entries: Vec<Arc<dyn Embedder>>,
    /// The built-in model (also the tokenizer chunks are measured with).
    pub local: Arc<LocalMiniLm>,
}

impl EmbedderRegistry {
    pub fn new(local: Arc<LocalMiniLm>, entries: Vec<Arc<dyn Embedder>>) -> EmbedderRegistry {
        EmbedderRegistry { entries, local }
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
