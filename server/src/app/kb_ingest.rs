//! Knowledge-base ingestion: the workers that run the durable `kb_jobs`.
//!
//! Every server instance runs `kb.workers` workers (default 2), through
//! the job machinery shared with other durable jobs ([`super::jobs`]): a
//! worker claims a due job (`FOR UPDATE SKIP LOCKED`), renews its lease
//! every third of `kb.lease_secs` while it works, and writes its result in
//! one transaction that first checks it still holds the lease. Workers
//! wake on `NOTIFY kb_jobs` (sent when jobs are added) and otherwise look
//! every `kb.poll_interval_ms`.
//!
//! - `expand` (object_store sources) lists the bucket prefix and adds a
//!   document and an `ingest` job per object.
//! - `ingest` reads one document (an upload from the file store, a web
//!   page, an object), extracts its text, splits it into token-sized
//!   chunks with overlap (the local model's tokenizer, `text-splitter`),
//!   embeds them with the knowledge base's embedder and stores them with
//!   their full-text vectors.
//!
//! A transient failure (network, 429/5xx, embedder still provisioning) is
//! retried with exponential backoff (`kb.retry_backoff_secs`, doubling, at
//! most 10 minutes) up to `kb.max_attempts`; a permanent one (corrupt file,
//! too deep, too large, an extraction out of time, a page that dribbles or
//! lies about its length, robots.txt, wrong credentials) fails the document
//! at once. Either way the document shows the error, and other documents go
//! on. Every attempt has a deadline (`kb.job_timeout_secs`): past it the
//! attempt is dropped (its extraction worker killed) and the document
//! fails with that reason, so a document holds a worker for at most that
//! long. A worker that dies
//! mid-job loses its lease; the job is taken over when the lease expires.
//! A server that stops claims no new job, lets the jobs in progress finish
//! for `http.shutdown_grace_secs`, then hands the rest back to the queue
//! (due at once, the attempt not counted). A job of an organization being
//! deleted is cancelled (`failed`): its worker loses the lease and writes
//! nothing more.

use super::jobs::{self, Held};
use crate::db::datastore::Datastore;
use crate::db::datastore::kb_jobs::{
    ClaimedJob, DocumentFacts, Failure, IngestTarget, ListedDocument, NewChunk,
};
use crate::db::enums::{KbIngestStage, KbJobKind, KbSourceType};
use crate::embedder::{EmbedError, EmbedderRegistry};
use crate::kb_config::{FetchConfig, FilesConfig, KbConfig};
use crate::kb_sources::{Content, SourceError};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Texts per embedder call.
const EMBED_BATCH: usize = 64;

/// What the workers need.
pub struct Ingestion {
    /// Records the embedding calls (one record per batch).
    pub usage: crate::usage::UsageRecorder,
    pub datastore: Datastore,
    pub files: Arc<dyn crate::storage::FileStore>,
    pub embedders: EmbedderRegistry,
    pub secrets: crate::secrets::Secrets,
    pub kb: KbConfig,
    pub fetch: FetchConfig,
    pub files_config: FilesConfig,
    /// The guarded client of source fetches.
    pub http: reqwest::Client,
    /// How the workers run (`NOTIFY kb_jobs`, `kb.poll_interval_ms`,
    /// `kb.lease_secs`, the server's shutdown).
    pub jobs: jobs::Settings,
    pub log: slog::Logger,
}

/// Why a job's attempt failed.
enum JobError {
    Transient(String),
    Permanent(String),
    /// The job is no longer this worker's (its lease was taken over, or it
    /// was deleted): stop, write nothing.
    LeaseLost,
}

impl From<SourceError> for JobError {
    fn from(e: SourceError) -> Self {
        match e {
            SourceError::Transient(m) => JobError::Transient(m),
            SourceError::Permanent(m) => JobError::Permanent(m),
        }
    }
}

impl From<EmbedError> for JobError {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Transient(m) => JobError::Transient(m),
            EmbedError::Permanent(m) => JobError::Permanent(m),
        }
    }
}

impl From<crate::error::Error> for JobError {
    fn from(e: crate::error::Error) -> Self {
        // Database trouble: worth another attempt.
        JobError::Transient(format!("{e}"))
    }
}

/// Starts the workers of this instance.
pub fn start(ingestion: Arc<Ingestion>) -> Vec<tokio::task::JoinHandle<()>> {
    let workers = ingestion.kb.workers;
    jobs::start(ingestion, workers)
}

impl jobs::Queue for Ingestion {
    type Job = ClaimedJob;

    fn settings(&self) -> &jobs::Settings {
        &self.jobs
    }

    async fn claim(
        &self,
        worker: Uuid,
        lease_secs: f64,
    ) -> Result<Option<ClaimedJob>, crate::error::Error> {
        self.datastore.kb_job_claim(worker, lease_secs).await
    }

    async fn heartbeat(
        &self,
        job: &ClaimedJob,
        lease_secs: f64,
    ) -> Result<bool, crate::error::Error> {
        self.datastore.kb_job_heartbeat(job, lease_secs).await
    }

    async fn release(&self, job: &ClaimedJob) -> Result<bool, crate::error::Error> {
        self.datastore.kb_job_release(job).await
    }

    async fn run(&self, job: ClaimedJob) {
        // The job's span joins the trace that queued it (tracing on); its
        // statements, fetches and embeddings are its children.
        let span = crate::telemetry::job(job.traceparent.as_deref(), || {
            (
                format!("kb {}", job.kind.as_str()),
                vec![
                    opentelemetry::KeyValue::new("workspace.job_id", job.id.to_string()),
                    opentelemetry::KeyValue::new(
                        "workspace.organization_id",
                        job.org_id.to_string(),
                    ),
                    opentelemetry::KeyValue::new("workspace.kb_id", job.kb_id.to_string()),
                    opentelemetry::KeyValue::new("workspace.job.attempt", i64::from(job.attempts)),
                ],
            )
        });
        match &span {
            Some(span) => span.run(run(self, job)).await,
            None => run(self, job).await,
        }
    }
}

/// Runs one job while renewing its lease; stops working on it as soon as
/// the lease is lost.
async fn run(ing: &Ingestion, job: ClaimedJob) {
    let mut log = ing
        .log
        .new(slog::o!("job" => job.id.to_string(), "kind" => job.kind.as_str()));
    if let Some(trace_id) = crate::telemetry::current_trace_id() {
        log = log.new(slog::o!("trace_id" => trace_id));
    }
    let deadline = Duration::from_secs(ing.kb.job_timeout_secs.max(1));
    let work = async {
        if job.attempts > job.max_attempts {
            return Err(JobError::Permanent(format!(
                "gave up after {} attempts (workers stopped while processing it)",
                job.max_attempts
            )));
        }
        let attempt = async {
            match job.kind {
                KbJobKind::Expand => expand(ing, &job).await,
                KbJobKind::Ingest => ingest(ing, &job).await,
            }
        };
        // Past the deadline the attempt is dropped where it is: a fetch
        // is abandoned, an extraction worker killed (kill_on_drop), an
        // embedding batch's answer ignored. Final: the same document
        // would take as long again, and the worker is needed for others.
        tokio::time::timeout(deadline, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(JobError::Permanent(format!(
                    "ingestion took longer than {} s (kb.job_timeout_secs) and was stopped",
                    deadline.as_secs()
                )))
            })
    };
    let result = match jobs::hold(ing, &job, work, &log).await {
        Held::Done(result) => result,
        Held::LeaseLost | Held::HandedBack => return,
    };
    let Err(error) = result else {
        return;
    };
    if let JobError::Transient(m) | JobError::Permanent(m) = &error {
        crate::telemetry::fail_current(m);
    }
    let failure = match &error {
        JobError::LeaseLost => {
            slog::info!(log, "kb worker: lost the job's lease; leaving it");
            return;
        }
        JobError::Transient(m) if job.attempts < job.max_attempts => {
            slog::info!(log, "kb job failed; retrying"; "error" => m.as_str(),
                "attempt" => job.attempts);
            Failure::Retry {
                error: m,
                backoff_secs: jobs::backoff_secs(ing.kb.retry_backoff_secs, job.attempts),
            }
        }
        JobError::Transient(m) | JobError::Permanent(m) => {
            slog::info!(log, "kb job failed"; "error" => m.as_str(), "attempt" => job.attempts);
            Failure::Final { error: m }
        }
    };
    if let Err(e) = ing.datastore.kb_job_fail(&job, failure).await {
        // The lease runs out and the job is taken over.
        slog::warn!(log, "kb worker: recording a failure failed"; "error" => %e);
    }
}

/// The credentials of an object_store source, opened.
fn s3_source(
    ing: &Ingestion,
    source_id: Uuid,
    config: &serde_json::Value,
    sealed: Option<&[u8]>,
) -> Result<crate::kb_sources::s3::S3Source, JobError> {
    let field = |name: &str| {
        config
            .get(name)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let sealed =
        sealed.ok_or_else(|| JobError::Permanent("the source has no credentials".to_string()))?;
    let ad = crate::app::kb::source_credentials_ad(source_id);
    let opened = ing
        .secrets
        .open(sealed, ad.as_bytes())
        .map_err(|_| JobError::Permanent("the source's credentials cannot be opened".into()))?;
    let creds: serde_json::Value = serde_json::from_slice(&opened)
        .map_err(|_| JobError::Permanent("the source's credentials are unreadable".into()))?;
    let cred = |name: &str| {
        creds
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    Ok(crate::kb_sources::s3::S3Source {
        bucket: field("bucket_name").unwrap_or_default(),
        prefix: field("prefix").unwrap_or_default(),
        region: field("cloud_region").unwrap_or_default(),
        endpoint_url: field("endpoint_url"),
        access_key_id: cred("access_key_id"),
        secret_access_key: cred("secret_access_key"),
    })
}

async fn expand(ing: &Ingestion, job: &ClaimedJob) -> Result<(), JobError> {
    let Some((config, sealed)) = ing.datastore.kb_job_source(job).await? else {
        return Ok(());
    };
    let source = s3_source(ing, job.source_id, &config, sealed.as_deref())?;
    let objects =
        crate::kb_sources::s3::list(&source, ing.fetch.allow_private_networks, &ing.kb).await?;
    let documents: Vec<ListedDocument> = objects
        .into_iter()
        .map(|o| ListedDocument {
            title: o.key.rsplit('/').next().unwrap_or(&o.key).to_string(),
            locator: o.key,
            size_bytes: i64::try_from(o.size).ok(),
        })
        .collect();
    ing.datastore.kb_job_store_listing(job, &documents).await?;
    Ok(())
}

/// A document's text and what was learnt on the way.
struct Text {
    text: String,
    content_type: Option<String>,
    title: Option<String>,
    size: Option<i64>,
    url: Option<String>,
}

async fn ingest(ing: &Ingestion, job: &ClaimedJob) -> Result<(), JobError> {
    let Some(target) = ing.datastore.kb_job_target(job).await? else {
        // Deleted meanwhile: nothing to do (the job went with it).
        return Ok(());
    };
    let embedder = ing.embedders.get(&target.embedding_model).ok_or_else(|| {
        JobError::Permanent(format!(
            "the embedder {:?} is no longer configured",
            target.embedding_model
        ))
    })?;
    let doc = read_text(ing, job, &target).await?;
    let markdown = doc.content_type.as_deref() == Some("text/markdown");
    let tokenizer = ing.embedders.local.tokenizer().await.ok();
    let text = doc.text;
    let (tokens, overlap) = (ing.kb.chunk_tokens.max(16), ing.kb.chunk_overlap);
    let pieces = tokio::task::spawn_blocking(move || {
        let pieces = chunk_text(&text, markdown, tokenizer.as_ref(), tokens, overlap);
        (text, pieces)
    })
    .await
    .map_err(|e| JobError::Permanent(format!("chunking failed: {e}")));
    let (text, pieces) = pieces?;
    let title = doc.title.clone().unwrap_or_else(|| target.title.clone());
    // The text is at most `files.max_extracted_bytes` (10 MiB by default:
    // about 13,000 chunks of 200 tokens), which bounds the chunks of one
    // document, their vectors held here and the rows of the transaction
    // that stores them. A 300-page book is about 600 chunks.
    let total = i32::try_from(pieces.len())
        .map_err(|_| JobError::Permanent("the document has too many chunks".into()))?;
    progress(ing, job, KbIngestStage::Embedding, 0, Some(total)).await?;
    let pages = Pages::of(&text);
    let mut chunks = Vec::with_capacity(pieces.len());
    for batch in pieces.chunks(EMBED_BATCH) {
        let texts: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
        let started = std::time::Instant::now();
        let embedded = embedder.embed(&texts).await;
        // Recorded for the organization (an ingestion has no member):
        // the input estimated from its characters.
        let chars: usize = texts.iter().map(String::len).sum();
        ing.usage.record_call(
            crate::usage::Caller {
                org_id: job.org_id,
                user_id: None,
                token_id: None,
                deployment_id: None,
            },
            "embedding",
            &target.embedding_model,
            "embedder",
            (crate::usage::estimate_tokens(chars), 0, false),
            started,
            if embedded.is_ok() {
                "complete"
            } else {
                "embedder_failed"
            },
        );
        let vectors = embedded?;
        if vectors.len() != texts.len()
            || vectors
                .iter()
                .any(|v| v.len() != target.dimensions as usize)
        {
            return Err(JobError::Permanent(format!(
                "the embedder returned vectors of the wrong shape (expected {} of {})",
                texts.len(),
                target.dimensions
            )));
        }
        for ((offset, content), embedding) in batch.iter().zip(vectors) {
            let mut metadata = serde_json::json!({
                "document_id": job.document_id,
                "source_id": job.source_id,
                "source_type": target.source_type.as_str(),
                "title": title,
                "position": chunks.len(),
            });
            if let Some(url) = &doc.url {
                metadata["url"] = serde_json::json!(url);
            }
            if let Some(page) = pages.at(*offset) {
                metadata["page"] = serde_json::json!(page);
            }
            if let Some(sheet) = sheet_at(&text, *offset) {
                metadata["sheet"] = serde_json::json!(sheet);
            }
            chunks.push(NewChunk {
                content: content.clone(),
                metadata,
                embedding,
            });
        }
        let done = chunks.len() as i32;
        progress(ing, job, KbIngestStage::Embedding, done, Some(total)).await?;
    }
    progress(ing, job, KbIngestStage::Storing, total, Some(total)).await?;
    let facts = DocumentFacts {
        title: doc.title.as_deref(),
        content_type: doc.content_type.as_deref(),
        size_bytes: doc.size,
    };
    // All chunks in one transaction: the document is searchable completely
    // or not at all, and a retry replaces (never duplicates) them.
    if !ing
        .datastore
        .kb_job_store_chunks(job, target.dimensions, &facts, &chunks)
        .await?
    {
        return Err(JobError::LeaseLost);
    }
    Ok(())
}

/// Records the job's progress (`GET /api/kb/ingestion_status` shows it);
/// stops the job when it is no longer this worker's.
async fn progress(
    ing: &Ingestion,
    job: &ClaimedJob,
    stage: KbIngestStage,
    done: i32,
    total: Option<i32>,
) -> Result<(), JobError> {
    match ing
        .datastore
        .kb_job_progress(job, stage, done, total)
        .await?
    {
        true => Ok(()),
        false => Err(JobError::LeaseLost),
    }
}

/// Reads and extracts one document.
async fn read_text(
    ing: &Ingestion,
    job: &ClaimedJob,
    target: &IngestTarget,
) -> Result<Text, JobError> {
    let budget = crate::extract::Budget::from_config(&ing.files_config);
    match target.source_type {
        KbSourceType::File => {
            let file = target
                .file
                .as_ref()
                .ok_or_else(|| JobError::Permanent("the uploaded file was deleted".into()))?;
            let text = match &file.extracted_text {
                Some(text) => text.clone(),
                None => {
                    let bytes = read_file(ing, &file.storage_key, file.file_size).await?;
                    extract(&file.content_type, bytes, budget).await?
                }
            };
            Ok(Text {
                text,
                content_type: Some(file.content_type.clone()),
                title: None,
                size: Some(file.file_size),
                url: None,
            })
        }
        KbSourceType::Web => {
            let limits = crate::kb_sources::web::WebLimits {
                max_bytes: ing.fetch.max_bytes,
                timeout: Duration::from_secs(ing.fetch.timeout_secs),
                user_agent: ing.fetch.user_agent.clone(),
                allow_private: ing.fetch.allow_private_networks,
            };
            let fetched =
                crate::kb_sources::web::fetch(&ing.http, &target.locator, &limits).await?;
            let (text, content_type, title) =
                content_text(fetched.content, &fetched.final_locator, budget).await?;
            Ok(Text {
                text,
                content_type: Some(content_type),
                title: fetched.title.or(title),
                size: i64::try_from(fetched.size_bytes).ok(),
                url: Some(fetched.final_locator),
            })
        }
        KbSourceType::ObjectStore => {
            let Some((config, sealed)) = ing.datastore.kb_job_source(job).await? else {
                return Err(JobError::Permanent("the source was deleted".into()));
            };
            let source = s3_source(ing, job.source_id, &config, sealed.as_deref())?;
            let fetched = crate::kb_sources::s3::get(
                &source,
                ing.fetch.allow_private_networks,
                &target.locator,
                ing.fetch.max_bytes,
            )
            .await?;
            let (text, content_type, title) =
                content_text(fetched.content, &target.locator, budget).await?;
            Ok(Text {
                text,
                content_type: Some(content_type),
                title: fetched.title.or(title),
                size: i64::try_from(fetched.size_bytes).ok(),
                url: None,
            })
        }
    }
}

/// The text, content type and title (an HTML page's) of fetched content.
async fn content_text(
    content: Content,
    locator: &str,
    budget: crate::extract::Budget,
) -> Result<(String, String, Option<String>), JobError> {
    match content {
        Content::Bytes {
            content_type,
            bytes,
        } => {
            let document =
                crate::extract::extract_document(&content_type, bytes, Some(locator), budget)
                    .await
                    .map_err(job_error)?;
            Ok((document.text, content_type, document.title))
        }
    }
}

async fn extract(
    content_type: &str,
    bytes: bytes::Bytes,
    budget: crate::extract::Budget,
) -> Result<String, JobError> {
    crate::extract::extract(content_type, bytes, budget)
        .await
        .map_err(job_error)
}

/// Every extraction failure is final: corrupt, encrypted, unsupported,
/// too large for the worker's memory, and out of time too (a document
/// that kept the parser busy for `files.extraction_timeout_secs` does so
/// again: retried, it held a worker for minutes and stayed `processing`).
fn job_error(e: crate::extract::ExtractError) -> JobError {
    JobError::Permanent(e.to_string())
}

async fn read_file(ing: &Ingestion, key: &str, size: i64) -> Result<bytes::Bytes, JobError> {
    let mut stream = ing
        .files
        .read(key)
        .await
        .map_err(|e| JobError::Transient(format!("reading the upload: {e}")))?;
    let mut out = Vec::with_capacity(size.clamp(0, 64 << 20) as usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| JobError::Transient(format!("reading the upload: {e}")))?;
        out.extend_from_slice(&chunk);
    }
    Ok(out.into())
}

/// Deepest Markdown structure split along its structure. The splitter's
/// Markdown parser slows down steeply with nesting (measured: a list
/// nested 200 deep, 40 KB, 4 s; 400 deep, 160 KB, 45 s, on a blocking
/// thread no deadline can stop): deeper text is split as plain text.
const MAX_MARKDOWN_DEPTH: usize = 32;

/// The deepest nesting a line of `text` opens: its leading block-quote and
/// list markers, and its indentation in steps of two columns.
fn markdown_depth(text: &str) -> usize {
    text.lines()
        .map(|line| {
            let (mut markers, mut columns) = (0, 0);
            for c in line.chars() {
                match c {
                    '>' | '-' | '*' | '+' => markers += 1,
                    ' ' => columns += 1,
                    '\t' => columns += 4,
                    _ => break,
                }
            }
            markers + columns / 2
        })
        .max()
        .unwrap_or(0)
}

/// Splits `text` into chunks of at most `tokens` tokens (of `tokenizer`;
/// without one, about four characters a token) sharing `overlap` tokens
/// with their neighbours, along the largest semantic units that fit
/// (Markdown structure when `markdown`, else paragraphs, sentences,
/// words). Returns each chunk's byte offset and text.
pub fn chunk_text(
    text: &str,
    markdown: bool,
    tokenizer: Option<&tokenizers::Tokenizer>,
    tokens: usize,
    overlap: usize,
) -> Vec<(usize, String)> {
    use text_splitter::{Characters, ChunkConfig, MarkdownSplitter, TextSplitter};
    let overlap = overlap.min(tokens / 2);
    let markdown = markdown && markdown_depth(text) <= MAX_MARKDOWN_DEPTH;
    fn collect<'a>(it: impl Iterator<Item = (usize, &'a str)>) -> Vec<(usize, String)> {
        it.filter(|(_, c)| !c.trim().is_empty())
            .map(|(o, c)| (o, c.to_string()))
            .collect()
    }
    match tokenizer {
        Some(tokenizer) => {
            let Ok(config) = ChunkConfig::new(tokens).with_overlap(overlap) else {
                return vec![(0, text.to_string())];
            };
            let config = config.with_sizer(tokenizer);
            if markdown {
                collect(MarkdownSplitter::new(config).chunk_indices(text))
            } else {
                collect(TextSplitter::new(config).chunk_indices(text))
            }
        }
        None => {
            let Ok(config) = ChunkConfig::new(tokens * 4).with_overlap(overlap * 4) else {
                return vec![(0, text.to_string())];
            };
            let config = config.with_sizer(Characters);
            if markdown {
                collect(MarkdownSplitter::new(config).chunk_indices(text))
            } else {
                collect(TextSplitter::new(config).chunk_indices(text))
            }
        }
    }
}

/// Where the pages of a text separated by form feeds (PDF extraction)
/// begin, found once for all its chunks.
struct Pages {
    /// The byte offsets of the form feeds, in order.
    breaks: Vec<usize>,
}

impl Pages {
    fn of(text: &str) -> Pages {
        Pages {
            breaks: text.match_indices('\u{c}').map(|(i, _)| i).collect(),
        }
    }

    /// The page (from 1) at `offset`, if the text has pages.
    fn at(&self, offset: usize) -> Option<usize> {
        if self.breaks.is_empty() {
            return None;
        }
        // Form feeds before `offset` (one at `offset` ends that page).
        Some(self.breaks.partition_point(|&b| b < offset) + 1)
    }
}

/// The sheet at `offset` of an extracted workbook (`# Sheet: NAME` lines).
fn sheet_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset.min(text.len()))?;
    let start = before.rfind("# Sheet: ").or_else(|| {
        // The chunk may begin at the heading itself.
        text.get(offset..)?
            .starts_with("# Sheet: ")
            .then_some(offset)
    })?;
    let line = text[start + "# Sheet: ".len()..].lines().next()?;
    Some(line.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_overlap_and_cover_the_text() {
        let text = (0..400)
            .map(|i| format!("Sentence number {i} talks about topic {}.", i % 7))
            .collect::<Vec<_>>()
            .join(" ");
        let chunks = chunk_text(&text, false, None, 50, 10);
        assert!(chunks.len() > 10, "{} chunks", chunks.len());
        for (offset, chunk) in &chunks {
            assert!(chunk.len() <= 200, "chunk of {} chars", chunk.len());
            assert_eq!(&text[*offset..*offset + chunk.len()], chunk.as_str());
        }
        // Neighbours share text.
        let (o1, c1) = &chunks[1];
        let (o0, c0) = &chunks[0];
        assert!(o0 + c0.len() > *o1, "no overlap between {c0:?} and {c1:?}");
        assert!(chunks.last().unwrap().1.contains("Sentence number 399"));
    }

    #[test]
    fn deeply_nested_markdown_is_split_as_plain_text() {
        let list: String = (0..400)
            .map(|i| format!("{}- item {i}\n", "  ".repeat(i)))
            .collect();
        assert_eq!(markdown_depth(&list), 400);
        assert_eq!(markdown_depth("# Title\n\n- a\n  - b\n> quote\n"), 2);
        let quotes = ">".repeat(100_000) + " deep\n";
        for text in [list, quotes] {
            let started = std::time::Instant::now();
            let chunks = chunk_text(&text, true, None, 200, 30);
            assert!(!chunks.is_empty());
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "{:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn pages_and_sheets_are_found() {
        let pdf = "first page\u{c}second page\u{c}third";
        let pages = Pages::of(pdf);
        assert_eq!(pages.at(0), Some(1));
        assert_eq!(pages.at(pdf.find("second").unwrap()), Some(2));
        assert_eq!(pages.at(pdf.find("second").unwrap() - 1), Some(1));
        assert_eq!(pages.at(pdf.find("third").unwrap()), Some(3));
        assert_eq!(Pages::of("no pages").at(3), None);
        let xlsx = "# Sheet: Q1\na\tb\n# Sheet: Q2\nc\td\n";
        assert_eq!(sheet_at(xlsx, 0).as_deref(), Some("Q1"));
        assert_eq!(
            sheet_at(xlsx, xlsx.find("c\td").unwrap()).as_deref(),
            Some("Q2")
        );
        assert_eq!(sheet_at("plain", 2), None);
    }
}
