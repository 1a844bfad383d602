//! The durable ingestion jobs of knowledge bases (`kb_jobs`), as the
//! workers of every server instance see them.
//!
//! A worker claims one job with `FOR UPDATE SKIP LOCKED` and holds a lease
//! (`locked_until`) that it renews; a job whose lease ran out (its worker
//! crashed or lost the database) is claimable again. Every write of a
//! worker first checks that it still holds the lease, in the transaction
//! that writes, so a worker that lost its job (lease taken over, knowledge
//! base or document deleted) changes nothing.
//!
//! A job is not a request: its authority is the claimed row itself, whose
//! organization and knowledge base filter every statement here.

use super::Datastore;
use crate::db::enums::{
    KbDocumentStatus, KbIngestStage, KbJobKind, KbJobState, KbSourceStatus, KbSourceType,
};
use crate::error::Error;
use uuid::Uuid;

/// The NOTIFY channel on which new and re-queued jobs wake idle workers
/// (`NOTIFY kb_jobs`, sent in the transactions that queue them).
pub const KB_JOBS_CHANNEL: &str = "kb_jobs";

/// A job this worker holds.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    pub id: Uuid,
    pub org_id: Uuid,
    pub kb_id: Uuid,
    pub source_id: Uuid,
    pub document_id: Option<Uuid>,
    pub kind: KbJobKind,
    /// This attempt's number, from 1.
    pub attempts: i32,
    pub max_attempts: i32,
    /// The worker holding the lease.
    pub worker: Uuid,
    /// The `traceparent` of the trace that queued it (tracing on).
    pub traceparent: Option<String>,
}

/// What an ingest job works on.
pub struct IngestTarget {
    pub source_type: KbSourceType,
    /// file: the file id; web: the URL; object_store: the object key.
    pub locator: String,
    pub title: String,
    pub source_config: serde_json::Value,
    pub sealed_credentials: Option<Vec<u8>>,
    pub embedding_model: String,
    pub dimensions: i32,
    /// The upload of a file document (`None` once deleted).
    pub file: Option<FileTarget>,
}

pub struct FileTarget {
    pub storage_key: String,
    pub content_type: String,
    pub file_size: i64,
    pub extracted_text: Option<String>,
}

/// A chunk to store.
pub struct NewChunk {
    pub content: String,
    pub metadata: serde_json::Value,
    pub embedding: Vec<f32>,
}

/// What an ingest job learnt about its document.
pub struct DocumentFacts<'a> {
    pub title: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub size_bytes: Option<i64>,
}

/// A document an expand job found.
pub struct ListedDocument {
    pub locator: String,
    pub title: String,
    pub size_bytes: Option<i64>,
}

/// Outcome of a failed attempt.
pub enum Failure<'a> {
    /// Retry after `backoff_secs`.
    Retry { error: &'a str, backoff_secs: f64 },
    /// Fail for good.
    Final { error: &'a str },
}

/// The lease check every write of a worker starts with.
const HOLDS_LEASE: &str = "SELECT 1 FROM kb_jobs WHERE id = $1 AND locked_by = $2 \
     AND state = $3 FOR UPDATE";

impl Datastore {
    /// Claims the next due job (queued and due, or running with an expired
    /// lease) for `worker`, marking its document `processing`.
    pub async fn kb_job_claim(
        &self,
        worker: Uuid,
        lease_secs: f64,
    ) -> Result<Option<ClaimedJob>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                "WITH next AS ( \
                     SELECT id FROM kb_jobs \
                     WHERE (state = 'queued' AND run_after <= now()) \
                        OR (state = 'running' AND locked_until < now()) \
                     ORDER BY run_after, created_at \
                     LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 UPDATE kb_jobs j SET state = $3, attempts = j.attempts + 1, \
                     locked_by = $1, locked_until = now() + make_interval(secs => $2), \
                     stage = $4, chunks_done = 0, chunks_total = NULL, progress_at = now(), \
                     updated_at = now() \
                 FROM next WHERE j.id = next.id \
                 RETURNING j.id, j.organization_id, j.kb_id, j.source_id, j.document_id, \
                     j.kind, j.attempts, j.max_attempts, j.traceparent",
                &[
                    &worker,
                    &lease_secs,
                    &KbJobState::Running,
                    &KbIngestStage::Extracting,
                ],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let job = ClaimedJob {
            id: row.get("id"),
            org_id: row.get("organization_id"),
            kb_id: row.get("kb_id"),
            source_id: row.get("source_id"),
            document_id: row.get("document_id"),
            kind: row.get("kind"),
            attempts: row.get("attempts"),
            max_attempts: row.get("max_attempts"),
            worker,
            traceparent: row.get("traceparent"),
        };
        if let Some(document) = job.document_id {
            tx.execute(
                "UPDATE kb_documents SET status = $4, updated_at = now() \
                 WHERE id = $1 AND organization_id = $2 AND status <> $3",
                &[
                    &document,
                    &job.org_id,
                    &KbDocumentStatus::Completed,
                    &KbDocumentStatus::Processing,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Some(job))
    }

    /// Hands a claimed job back (its instance stops): queued and due at
    /// once, the attempt not counted. `false` when the job was no longer
    /// this worker's.
    /// Its document shows `pending` again (not `processing`: no worker has
    /// it until another instance claims it).
    pub async fn kb_job_release(&self, job: &ClaimedJob) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "UPDATE kb_jobs SET state = $4, attempts = greatest(attempts - 1, 0), \
                     locked_by = NULL, locked_until = NULL, run_after = now(), \
                     updated_at = now() \
                 WHERE id = $1 AND locked_by = $2 AND state = $3",
                &[
                    &job.id,
                    &job.worker,
                    &KbJobState::Running,
                    &KbJobState::Queued,
                ],
            )
            .await?;
        if n == 1
            && let Some(document) = job.document_id
        {
            tx.execute(
                "UPDATE kb_documents SET status = $3, updated_at = now() \
                 WHERE id = $1 AND organization_id = $2 AND status = $4",
                &[
                    &document,
                    &job.org_id,
                    &KbDocumentStatus::Pending,
                    &KbDocumentStatus::Processing,
                ],
            )
            .await?;
        }
        // Another instance's idle workers take it at once.
        tx.execute("NOTIFY kb_jobs", &[]).await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Renews the lease; `false` when the job is no longer this worker's
    /// (taken over, or deleted with its knowledge base or document).
    pub async fn kb_job_heartbeat(&self, job: &ClaimedJob, lease_secs: f64) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE kb_jobs SET locked_until = now() + make_interval(secs => $3) \
                 WHERE id = $1 AND locked_by = $2 AND state = $4",
                &[&job.id, &job.worker, &lease_secs, &KbJobState::Running],
            )
            .await?;
        Ok(n == 1)
    }

    /// Records how far this attempt of an ingest job got: its `stage` and,
    /// once the text is split, `chunks_done` of `chunks_total` embedded.
    /// `false` when the job is no longer this worker's (nothing written).
    /// The worker calls it with growing counts; the row's checks refuse
    /// more done than total.
    pub async fn kb_job_progress(
        &self,
        job: &ClaimedJob,
        stage: KbIngestStage,
        chunks_done: i32,
        chunks_total: Option<i32>,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE kb_jobs SET stage = $5, chunks_done = $6, chunks_total = $7, \
                     progress_at = now() \
                 WHERE id = $1 AND organization_id = $2 AND locked_by = $3 AND state = $4",
                &[
                    &job.id,
                    &job.org_id,
                    &job.worker,
                    &KbJobState::Running,
                    &stage,
                    &chunks_done,
                    &chunks_total,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// The document of an ingest job and what it needs (`None` when it was
    /// deleted).
    pub async fn kb_job_target(&self, job: &ClaimedJob) -> Result<Option<IngestTarget>, Error> {
        let Some(document) = job.document_id else {
            return Ok(None);
        };
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT s.type, d.locator, d.title, s.config, s.sealed_credentials, \
                        k.embedding_model, k.embedding_dimensions, \
                        f.storage_key, f.content_type, f.file_size, f.extracted_text \
                 FROM kb_documents d \
                 JOIN kb_sources s ON s.id = d.source_id \
                 JOIN knowledge_bases k ON k.id = d.kb_id \
                 LEFT JOIN files f ON s.type = $4 AND f.id::text = d.locator \
                      AND f.organization_id = d.organization_id \
                 WHERE d.id = $1 AND d.organization_id = $2 AND d.kb_id = $3",
                &[&document, &job.org_id, &job.kb_id, &KbSourceType::File],
            )
            .await?;
        Ok(row.map(|r| {
            let storage_key: Option<String> = r.get("storage_key");
            IngestTarget {
                source_type: r.get("type"),
                locator: r.get("locator"),
                title: r.get("title"),
                source_config: r.get("config"),
                sealed_credentials: r.get("sealed_credentials"),
                embedding_model: r.get("embedding_model"),
                dimensions: r.get("embedding_dimensions"),
                file: storage_key.map(|storage_key| FileTarget {
                    storage_key,
                    content_type: r.get("content_type"),
                    file_size: r.get("file_size"),
                    extracted_text: r.get("extracted_text"),
                }),
            }
        }))
    }

    /// The configuration of an expand job's source.
    pub async fn kb_job_source(
        &self,
        job: &ClaimedJob,
    ) -> Result<Option<(serde_json::Value, Option<Vec<u8>>)>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT config, sealed_credentials FROM kb_sources \
                 WHERE id = $1 AND organization_id = $2 AND kb_id = $3",
                &[&job.source_id, &job.org_id, &job.kb_id],
            )
            .await?;
        Ok(row.map(|r| (r.get("config"), r.get("sealed_credentials"))))
    }

    /// Stores a document's chunks (replacing any earlier ones), marks it
    /// `completed` and the job done, in one transaction. `false` when the
    /// job was no longer this worker's (nothing written).
    pub async fn kb_job_store_chunks(
        &self,
        job: &ClaimedJob,
        dimensions: i32,
        facts: &DocumentFacts<'_>,
        chunks: &[NewChunk],
    ) -> Result<bool, Error> {
        let Some(document) = job.document_id else {
            return Ok(false);
        };
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if tx
            .query_opt(HOLDS_LEASE, &[&job.id, &job.worker, &KbJobState::Running])
            .await?
            .is_none()
        {
            return Ok(false);
        }
        tx.execute(
            "DELETE FROM kb_chunks WHERE document_id = $1 AND organization_id = $2",
            &[&document, &job.org_id],
        )
        .await?;
        for (position, chunk) in chunks.iter().enumerate() {
            let position = position as i32;
            let embedding = pgvector::Vector::from(chunk.embedding.clone());
            tx.execute(
                "INSERT INTO kb_chunks (id, organization_id, kb_id, document_id, position, \
                     content, metadata, dims, embedding) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &Uuid::new_v4(),
                    &job.org_id,
                    &job.kb_id,
                    &document,
                    &position,
                    &chunk.content,
                    &chunk.metadata,
                    &dimensions,
                    &embedding,
                ],
            )
            .await?;
        }
        let count = chunks.len() as i32;
        tx.execute(
            "UPDATE kb_documents SET status = $7, error = NULL, chunk_count = $3, \
                 title = coalesce($4, title), content_type = coalesce($5, content_type), \
                 size_bytes = coalesce($6, size_bytes), updated_at = now() \
             WHERE id = $1 AND organization_id = $2",
            &[
                &document,
                &job.org_id,
                &count,
                &facts.title,
                &facts.content_type,
                &facts.size_bytes,
                &KbDocumentStatus::Completed,
            ],
        )
        .await?;
        finish_job(&tx, job).await?;
        let event = serde_json::json!({
            "kb_id": job.kb_id,
            "source_id": job.source_id,
            "document_id": document,
            "title": facts.title,
            "chunk_count": count,
        });
        super::webhook_outbox::enqueue(&tx, job.org_id, "document.ingested", &event, None).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Adds the documents an expand job listed, with their ingest jobs, and
    /// marks it done. `false` when the job was no longer this worker's.
    pub async fn kb_job_store_listing(
        &self,
        job: &ClaimedJob,
        documents: &[ListedDocument],
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if tx
            .query_opt(HOLDS_LEASE, &[&job.id, &job.worker, &KbJobState::Running])
            .await?
            .is_none()
        {
            return Ok(false);
        }
        for doc in documents {
            tx.execute(
                "INSERT INTO kb_documents (id, organization_id, kb_id, source_id, locator, \
                     title, size_bytes) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (source_id, locator) DO NOTHING",
                &[
                    &Uuid::new_v4(),
                    &job.org_id,
                    &job.kb_id,
                    &job.source_id,
                    &doc.locator,
                    &doc.title,
                    &doc.size_bytes,
                ],
            )
            .await?;
        }
        tx.execute(
            "INSERT INTO kb_jobs (id, organization_id, kb_id, source_id, document_id, kind, \
                 max_attempts, traceparent) \
             SELECT gen_random_uuid(), d.organization_id, d.kb_id, d.source_id, d.id, \
                    $4, $3, $5 \
             FROM kb_documents d \
             WHERE d.source_id = $1 AND d.organization_id = $2 \
               AND NOT EXISTS (SELECT 1 FROM kb_jobs j WHERE j.document_id = d.id)",
            &[
                &job.source_id,
                &job.org_id,
                &job.max_attempts,
                &KbJobKind::Ingest,
                &crate::telemetry::current_traceparent(),
            ],
        )
        .await?;
        finish_job(&tx, job).await?;
        tx.execute("NOTIFY kb_jobs", &[]).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records a failed attempt: queued again after a backoff, or failed
    /// for good (the document, or for an expand job the source, shows the
    /// error). The document's `error` shows a retried attempt's error too,
    /// so a slow document says why it is slow.
    pub async fn kb_job_fail(&self, job: &ClaimedJob, failure: Failure<'_>) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if tx
            .query_opt(HOLDS_LEASE, &[&job.id, &job.worker, &KbJobState::Running])
            .await?
            .is_none()
        {
            return Ok(());
        }
        match failure {
            Failure::Retry {
                error,
                backoff_secs,
            } => {
                tx.execute(
                    "UPDATE kb_jobs SET state = $4, locked_by = NULL, locked_until = NULL, \
                         run_after = now() + make_interval(secs => $2), last_error = $3, \
                         updated_at = now() \
                     WHERE id = $1",
                    &[&job.id, &backoff_secs, &error, &KbJobState::Queued],
                )
                .await?;
                if let Some(document) = job.document_id {
                    let shown = format!(
                        "attempt {} of {} failed, retrying: {error}",
                        job.attempts, job.max_attempts
                    );
                    tx.execute(
                        "UPDATE kb_documents SET status = $4, error = $3, \
                             updated_at = now() \
                         WHERE id = $1 AND organization_id = $2",
                        &[&document, &job.org_id, &shown, &KbDocumentStatus::Pending],
                    )
                    .await?;
                }
            }
            Failure::Final { error } => {
                tx.execute(
                    "UPDATE kb_jobs SET state = $3, locked_by = NULL, \
                         locked_until = NULL, last_error = $2, updated_at = now() \
                     WHERE id = $1",
                    &[&job.id, &error, &KbJobState::Failed],
                )
                .await?;
                match job.document_id {
                    Some(document) => {
                        tx.execute(
                            "UPDATE kb_documents SET status = $4, error = $3, \
                                 updated_at = now() \
                             WHERE id = $1 AND organization_id = $2",
                            &[&document, &job.org_id, &error, &KbDocumentStatus::Failed],
                        )
                        .await?;
                        let event = serde_json::json!({
                            "kb_id": job.kb_id,
                            "source_id": job.source_id,
                            "document_id": document,
                            "error": error,
                            "attempts": job.attempts,
                        });
                        super::webhook_outbox::enqueue(
                            &tx,
                            job.org_id,
                            "document.failed",
                            &event,
                            None,
                        )
                        .await?;
                    }
                    None => {
                        tx.execute(
                            "UPDATE kb_sources SET status = $4, error = $3, \
                                 updated_at = now() \
                             WHERE id = $1 AND organization_id = $2",
                            &[&job.source_id, &job.org_id, &error, &KbSourceStatus::Failed],
                        )
                        .await?;
                    }
                }
                super::kb::settle_source(&tx, job.source_id).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Queues a failed document again (a fresh budget of attempts).
    pub async fn kb_retry_document(
        &self,
        grant: &crate::authz::Grant<crate::authz::on::Kb, crate::authz::perm::KbWrite>,
        document_id: Uuid,
    ) -> Result<(), Error> {
        let kb_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                "SELECT status, source_id FROM kb_documents \
                 WHERE id = $1 AND organization_id = $2 AND kb_id = $3 FOR UPDATE",
                &[&document_id, &grant.org_id(), &kb_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "document" })?;
        let status: crate::db::enums::KbDocumentStatus = row.get("status");
        let source_id: Uuid = row.get("source_id");
        if status != crate::db::enums::KbDocumentStatus::Failed {
            return Err(Error::Conflict {
                code: "document_not_failed",
                message: "only a failed document can be retried".to_string(),
            });
        }
        tx.execute(
            "UPDATE kb_documents SET status = $2, error = NULL, updated_at = now() \
             WHERE id = $1",
            &[&document_id, &KbDocumentStatus::Pending],
        )
        .await?;
        tx.execute(
            "UPDATE kb_jobs SET state = $3, attempts = 0, run_after = now(), \
                 last_error = NULL, locked_by = NULL, locked_until = NULL, updated_at = now() \
             WHERE document_id = $1 AND organization_id = $2",
            &[&document_id, &grant.org_id(), &KbJobState::Queued],
        )
        .await?;
        tx.execute(
            "UPDATE kb_sources SET status = $2, error = NULL, updated_at = now() \
             WHERE id = $1",
            &[&source_id, &KbSourceStatus::Processing],
        )
        .await?;
        tx.execute("NOTIFY kb_jobs", &[]).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Marks the job done and settles its source.
async fn finish_job(tx: &super::Tx<'_>, job: &ClaimedJob) -> Result<(), Error> {
    tx.execute(
        "UPDATE kb_jobs SET state = $2, locked_by = NULL, locked_until = NULL, \
             last_error = NULL, updated_at = now() \
         WHERE id = $1",
        &[&job.id, &KbJobState::Done],
    )
    .await?;
    super::kb::settle_source(tx, job.source_id).await
}
