//! Knowledge bases, their sources and documents. Every query is filtered by
//! the caller's organization (the `OrgAccess`), and by knowledge base.

use super::Datastore;
use super::audit;
use crate::audit::Event;
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::{
    KbDocumentStatus, KbIngestStage, KbJobKind, KbJobState, KbSourceStatus, KbSourceType,
};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

db_row! {
    /// A knowledge base with its derived state.
    pub struct KbRow {
        pub id: Uuid = "k.id",
        pub org_id: Uuid = "k.organization_id",
        pub name: String = "k.name",
        pub description: String = "k.description",
        pub embedding_model: String = "k.embedding_model",
        pub embedding_dimensions: i32 = "k.embedding_dimensions",
        /// Any source still `processing`.
        pub processing: bool = "EXISTS (SELECT 1 FROM kb_sources s WHERE s.kb_id = k.id AND s.status = 'processing')",
        pub document_count: i64 = "(SELECT count(*) FROM kb_documents d WHERE d.kb_id = k.id)",
        pub created_at: DateTime<Utc> = "k.created_at",
        pub updated_at: DateTime<Utc> = "k.updated_at",
    }
}

/// The columns of [`KbRow`] for `knowledge_bases k`.
const KB_COLUMNS: &str = KbRow::COLUMNS;

db_row! {
    pub struct SourceRow {
        pub id: Uuid = "s.id",
        pub kb_id: Uuid = "s.kb_id",
        pub source_type: KbSourceType = "s.type",
        /// The public configuration (no credentials).
        pub config: serde_json::Value = "s.config",
        pub status: KbSourceStatus = "s.status",
        pub error: Option<String> = "s.error",
        pub document_count: i64 = "(SELECT count(*) FROM kb_documents d WHERE d.source_id = s.id)",
        pub documents_done: i64 = "(SELECT count(*) FROM kb_documents d WHERE d.source_id = s.id AND d.status IN ('completed', 'failed'))",
        pub documents_failed: i64 = "(SELECT count(*) FROM kb_documents d WHERE d.source_id = s.id AND d.status = 'failed')",
        pub created_at: DateTime<Utc> = "s.created_at",
    }
}

const SOURCE_COLUMNS: &str = SourceRow::COLUMNS;

pub struct DocumentRow {
    pub id: Uuid,
    pub source_id: Uuid,
    pub source_type: KbSourceType,
    /// An object-store source's bucket.
    pub bucket: Option<String>,
    pub locator: String,
    pub title: String,
    pub content_type: Option<String>,
    pub size_bytes: Option<i64>,
    pub status: KbDocumentStatus,
    pub error: Option<String>,
    pub chunk_count: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl DocumentRow {
    fn from_row(r: &tokio_postgres::Row) -> DocumentRow {
        DocumentRow {
            id: r.get("id"),
            source_id: r.get("source_id"),
            source_type: r.get("type"),
            bucket: r.get("bucket"),
            locator: r.get("locator"),
            title: r.get("title"),
            content_type: r.get("content_type"),
            size_bytes: r.get("size_bytes"),
            status: r.get("status"),
            error: r.get("error"),
            chunk_count: r.get("chunk_count"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

/// A document known when its source is added (a file or a URL).
pub struct NewDocument {
    pub locator: String,
    pub title: String,
}

/// A source to insert, with its documents known up front (file and web
/// sources) or an `expand` job that lists them (object_store sources).
pub struct NewSource {
    pub id: Uuid,
    pub source_type: KbSourceType,
    pub config: serde_json::Value,
    pub sealed_credentials: Option<Vec<u8>>,
    /// File sources: the uploads whose ids these are must exist in the
    /// organization.
    pub file_ids: Vec<Uuid>,
    pub documents: Vec<NewDocument>,
    pub expand: bool,
}

/// A knowledge base to create.
#[derive(Clone, Copy)]
pub struct NewKb<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub embedding_model: &'a str,
    pub dimensions: i32,
}

/// Most sources of one knowledge base.
pub const SOURCES_PER_KB_MAX: i64 = 100;

db_row! {
    /// A document whose ingest job is running, with the job's progress.
    pub struct DocumentProgressRow {
        pub document_id: Uuid = "d.id",
        pub source_id: Uuid = "d.source_id",
        pub title: String = "d.title",
        pub stage: KbIngestStage = "j.stage",
        pub chunks_done: i32 = "j.chunks_done",
        pub chunks_total: Option<i32> = "j.chunks_total",
        pub attempt: i32 = "j.attempts",
        pub updated_at: DateTime<Utc> = "coalesce(j.progress_at, j.updated_at)",
    }
}

/// Most documents in progress listed at once: ingestion runs `kb.workers`
/// jobs per instance, so more would need over 50 instances.
pub const IN_PROGRESS_MAX: i64 = 100;

/// Progress counts of one knowledge base.
pub struct IngestionCounts {
    pub processing: bool,
    pub documents_total: i64,
    pub documents_done: i64,
    pub documents_failed: i64,
}

impl Datastore {
    /// Creates a knowledge base with its sources, their documents and their
    /// jobs, in one transaction.
    pub async fn kb_create(
        &self,
        grant: &Grant<on::Org, perm::KbWrite>,
        kb: &NewKb<'_>,
        sources: &[NewSource],
        max_attempts: i32,
    ) -> Result<KbRow, Error> {
        let NewKb {
            name,
            description,
            embedding_model,
            dimensions,
        } = *kb;
        let id = Uuid::new_v4();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO knowledge_bases (id, organization_id, created_by, name, description, \
                 embedding_model, embedding_dimensions) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &id,
                &grant.org_id(),
                &grant.user_id(),
                &name,
                &description,
                &embedding_model,
                &dimensions,
            ],
        )
        .await?;
        for source in sources {
            insert_source(&tx, grant, id, source, max_attempts).await?;
        }
        let row = tx
            .query_one(
                &format!("SELECT {KB_COLUMNS} FROM knowledge_bases k WHERE k.id = $1"),
                &[&id],
            )
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "kb.create").target("knowledge_base", id),
        )
        .await?;
        tx.commit().await?;
        Ok(KbRow::from_row(&row))
    }

    /// A page of the organization's knowledge bases, newest first.
    pub async fn kb_list(
        &self,
        access: &OrgAccess,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<KbRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {KB_COLUMNS} FROM knowledge_bases k WHERE k.organization_id = $1 \
                     ORDER BY k.created_at DESC, k.id LIMIT $2 OFFSET $3"
                ),
                &[&access.org_id(), &limit, &offset],
            )
            .await?;
        Ok(rows.iter().map(KbRow::from_row).collect())
    }

    /// Ready knowledge bases with documents, by name (at most 100).
    pub async fn kb_available(&self, access: &OrgAccess) -> Result<Vec<KbRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT * FROM (SELECT {KB_COLUMNS} FROM knowledge_bases k \
                        WHERE k.organization_id = $1) x \
                     WHERE NOT x.processing AND x.document_count > 0 \
                     ORDER BY lower(x.name), x.id LIMIT 100"
                ),
                &[&access.org_id()],
            )
            .await?;
        Ok(rows.iter().map(KbRow::from_row).collect())
    }

    /// One knowledge base of the organization.
    pub async fn kb_get(&self, access: &OrgAccess, kb_id: Uuid) -> Result<KbRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {KB_COLUMNS} FROM knowledge_bases k \
                     WHERE k.organization_id = $1 AND k.id = $2"
                ),
                &[&access.org_id(), &kb_id],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "knowledge base",
            })?;
        Ok(KbRow::from_row(&row))
    }

    /// The sources of a knowledge base, oldest first.
    pub async fn kb_sources(
        &self,
        access: &OrgAccess,
        kb_id: Uuid,
    ) -> Result<Vec<SourceRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {SOURCE_COLUMNS} FROM kb_sources s \
                     WHERE s.organization_id = $1 AND s.kb_id = $2 \
                     ORDER BY s.created_at, s.id LIMIT {SOURCES_PER_KB_MAX}"
                ),
                &[&access.org_id(), &kb_id],
            )
            .await?;
        Ok(rows.iter().map(SourceRow::from_row).collect())
    }

    /// Renames or re-describes a knowledge base.
    pub async fn kb_update(
        &self,
        grant: &Grant<on::Kb, perm::KbWrite>,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<KbRow, Error> {
        let kb_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                "UPDATE knowledge_bases SET name = COALESCE($3, name), \
                     description = COALESCE($4, description), updated_at = now() \
                 WHERE organization_id = $1 AND id = $2 RETURNING id",
                &[&grant.org_id(), &kb_id, &name, &description],
            )
            .await?;
        if row.is_none() {
            return Err(Error::NotFound {
                what: "knowledge base",
            });
        }

        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "kb.update").target("knowledge_base", kb_id),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        self.kb_get(grant, kb_id).await
    }

    /// Deletes a knowledge base; its sources, documents, chunks and jobs go
    /// with it (foreign keys cascade).
    pub async fn kb_delete(&self, grant: &Grant<on::Kb, perm::KbDelete>) -> Result<(), Error> {
        let kb_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM knowledge_bases WHERE organization_id = $1 AND id = $2",
                &[&grant.org_id(), &kb_id],
            )
            .await?;
        if n == 0 {
            return Err(Error::NotFound {
                what: "knowledge base",
            });
        }
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "kb.delete").target("knowledge_base", kb_id),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(())
    }

    /// Adds a source (at most [`SOURCES_PER_KB_MAX`] per knowledge base;
    /// the knowledge base row is locked for the count).
    pub async fn kb_add_source(
        &self,
        grant: &Grant<on::Kb, perm::KbWrite>,
        source: &NewSource,
        max_attempts: i32,
    ) -> Result<SourceRow, Error> {
        let kb_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let count: i64 = tx
            .query_opt(
                "SELECT (SELECT count(*) FROM kb_sources s WHERE s.kb_id = k.id) AS sources \
                 FROM knowledge_bases k WHERE k.organization_id = $1 AND k.id = $2 \
                 FOR UPDATE",
                &[&grant.org_id(), &kb_id],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "knowledge base",
            })?
            .get("sources");
        if count >= SOURCES_PER_KB_MAX {
            return Err(Error::invalid(
                "too_many_sources",
                format!("a knowledge base has at most {SOURCES_PER_KB_MAX} sources"),
            ));
        }
        insert_source(&tx, grant, kb_id, source, max_attempts).await?;
        tx.execute(
            "UPDATE knowledge_bases SET updated_at = now() WHERE id = $1",
            &[&kb_id],
        )
        .await?;
        let row = tx
            .query_one(
                &format!("SELECT {SOURCE_COLUMNS} FROM kb_sources s WHERE s.id = $1"),
                &[&source.id],
            )
            .await?;
        tx.commit().await?;
        Ok(SourceRow::from_row(&row))
    }

    /// A page of a knowledge base's documents, oldest first, and the total
    /// (one snapshot).
    pub async fn kb_documents(
        &self,
        access: &OrgAccess,
        kb_id: Uuid,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<DocumentRow>, i64), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.snapshot().await?;
        let exists = tx
            .query_opt(
                "SELECT 1 FROM knowledge_bases WHERE organization_id = $1 AND id = $2",
                &[&access.org_id(), &kb_id],
            )
            .await?;
        if exists.is_none() {
            return Err(Error::NotFound {
                what: "knowledge base",
            });
        }
        let rows = tx
            .query(
                "SELECT d.id, d.source_id, s.type, s.config->>'bucket_name' AS bucket, \
                        d.locator, d.title, d.content_type, \
                        d.size_bytes, d.status, d.error, d.chunk_count, d.created_at, \
                        d.updated_at \
                 FROM kb_documents d JOIN kb_sources s ON s.id = d.source_id \
                 WHERE d.organization_id = $1 AND d.kb_id = $2 \
                 ORDER BY d.created_at, d.id LIMIT $3 OFFSET $4",
                &[&access.org_id(), &kb_id, &limit, &offset],
            )
            .await?;
        let total: i64 = tx
            .query_one(
                "SELECT count(*) AS total FROM kb_documents \
                 WHERE organization_id = $1 AND kb_id = $2",
                &[&access.org_id(), &kb_id],
            )
            .await?
            .get("total");
        tx.commit().await?;
        Ok((rows.iter().map(DocumentRow::from_row).collect(), total))
    }

    /// Deletes one document (its chunks and jobs cascade) and settles its
    /// source's status.
    pub async fn kb_delete_document(
        &self,
        grant: &Grant<on::Kb, perm::KbDelete>,
        document_id: Uuid,
    ) -> Result<(), Error> {
        let kb_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let source_id: Uuid = tx
            .query_opt(
                "DELETE FROM kb_documents WHERE organization_id = $1 AND kb_id = $2 AND id = $3 \
                 RETURNING source_id",
                &[&grant.org_id(), &kb_id, &document_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "document" })?
            .get("source_id");
        settle_source(&tx, source_id).await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "kb.document_delete")
                .target("knowledge_base", kb_id)
                .details(serde_json::json!({"document_id": document_id})),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// What a search needs before it embeds the query, in one round trip:
    /// the knowledge base's embedder and dimensions, and whether it holds
    /// any chunk (`404` when not visible). The existence check stops at
    /// the first chunk (the `kb_id` index): a count would read every chunk
    /// of the knowledge base (25 ms at 100,000).
    pub async fn kb_search_target(
        &self,
        access: &OrgAccess,
        kb_id: Uuid,
    ) -> Result<SearchTarget, Error> {
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                "SELECT k.embedding_model, k.embedding_dimensions, \
                        EXISTS (SELECT 1 FROM kb_chunks c WHERE c.kb_id = k.id) AS has_chunks \
                 FROM knowledge_bases k WHERE k.organization_id = $1 AND k.id = $2",
                &[&access.org_id(), &kb_id],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "knowledge base",
            })?;
        Ok(SearchTarget {
            embedding_model: row.get("embedding_model"),
            embedding_dimensions: row.get("embedding_dimensions"),
            has_chunks: row.get("has_chunks"),
        })
    }

    /// Hybrid search of one knowledge base (see [`search_sql`]).
    pub async fn kb_search(
        &self,
        access: &OrgAccess,
        kb_id: Uuid,
        query: &SearchQuery<'_>,
    ) -> Result<Vec<SearchHit>, Error> {
        let sql = search_sql(query.embedding.len()).ok_or_else(|| {
            Error::internal(format!("no index for {} dimensions", query.embedding.len()))
        })?;
        let candidates = i64::from(query.limit.saturating_mul(4).max(40));
        let mut conn = self.conn().await?;
        // Two round trips: BEGIN, then the transaction's settings and the
        // statement sent together; the read-only transaction ends without
        // waiting ([`Tx::end_read`]).
        let tx = conn.transaction().await?;
        let embedding = pgvector::Vector::from(query.embedding.to_vec());
        let ef_search = candidates.max(40).to_string();
        let rows = tx
            .query_after(
                // A filtered HNSW scan keeps scanning until it has enough
                // rows (pgvector 0.8), instead of silently returning fewer.
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), \
                        set_config('hnsw.ef_search', $1, true)",
                &[&ef_search],
                sql,
                &[
                    &access.org_id(),
                    &kb_id,
                    &embedding,
                    &query.text,
                    &candidates,
                    &query.score_threshold,
                    &i64::from(query.limit),
                    &query.document_ids,
                    &query.source_ids,
                    &query.source_type,
                    &query.metadata,
                ],
            )
            .await?;
        tx.end_read();
        Ok(rows
            .iter()
            .map(|r| SearchHit {
                chunk_id: r.get("chunk_id"),
                document_id: r.get("document_id"),
                content: r.get("content"),
                metadata: r.get("metadata"),
                score: r.get("score"),
                title: r.get("title"),
                locator: r.get("locator"),
                source_type: r.get("source_type"),
            })
            .collect())
    }

    /// Document counts of a knowledge base.
    pub async fn kb_ingestion_counts(
        &self,
        access: &OrgAccess,
        kb_id: Uuid,
    ) -> Result<IngestionCounts, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT EXISTS (SELECT 1 FROM kb_sources s WHERE s.kb_id = k.id \
                            AND s.status = $6) AS processing, \
                        (SELECT count(*) FROM kb_documents d WHERE d.kb_id = k.id) \
                            AS documents_total, \
                        (SELECT count(*) FROM kb_documents d WHERE d.kb_id = k.id \
                            AND d.status IN ($4, $5)) AS documents_done, \
                        (SELECT count(*) FROM kb_documents d WHERE d.kb_id = k.id \
                            AND d.status = $3) AS documents_failed \
                 FROM knowledge_bases k WHERE k.organization_id = $1 AND k.id = $2",
                &[
                    &access.org_id(),
                    &kb_id,
                    &KbDocumentStatus::Failed,
                    &KbDocumentStatus::Completed,
                    &KbDocumentStatus::Failed,
                    &KbSourceStatus::Processing,
                ],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "knowledge base",
            })?;
        Ok(IngestionCounts {
            processing: row.get("processing"),
            documents_total: row.get("documents_total"),
            documents_done: row.get("documents_done"),
            documents_failed: row.get("documents_failed"),
        })
    }

    /// The documents of a knowledge base being ingested now (their job
    /// running), with the progress their workers recorded, oldest job
    /// first; at most [`IN_PROGRESS_MAX`].
    pub async fn kb_documents_in_progress(
        &self,
        access: &OrgAccess,
        kb_id: Uuid,
    ) -> Result<Vec<DocumentProgressRow>, Error> {
        let conn = self.conn().await?;
        // `state = 'running'` stays a literal: it selects the partial
        // index kb_jobs_running_idx.
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM kb_jobs j \
                     JOIN kb_documents d ON d.id = j.document_id \
                          AND d.organization_id = j.organization_id \
                     WHERE j.organization_id = $1 AND j.kb_id = $2 AND j.state = 'running' \
                       AND j.stage IS NOT NULL \
                     ORDER BY j.created_at, j.id LIMIT $3",
                    DocumentProgressRow::COLUMNS
                ),
                &[&access.org_id(), &kb_id, &IN_PROGRESS_MAX],
            )
            .await?;
        Ok(rows.iter().map(DocumentProgressRow::from_row).collect())
    }
}

/// Inserts a source, its known documents and their jobs.
async fn insert_source(
    tx: &super::Tx<'_>,
    access: &OrgAccess,
    kb_id: Uuid,
    source: &NewSource,
    max_attempts: i32,
) -> Result<(), Error> {
    let org = access.org_id();
    tx.execute(
        "INSERT INTO kb_sources (id, organization_id, kb_id, type, config, sealed_credentials) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &source.id,
            &org,
            &kb_id,
            &source.source_type,
            &source.config,
            &source.sealed_credentials,
        ],
    )
    .await?;
    if !source.file_ids.is_empty() {
        // Files of the organization only; an id of another organization
        // looks like a missing one.
        let n = tx
            .execute(
                "INSERT INTO kb_documents (id, organization_id, kb_id, source_id, locator, title, \
                     content_type, size_bytes) \
                 SELECT gen_random_uuid(), f.organization_id, $3, $4, f.id::text, f.filename, \
                        f.content_type, f.file_size \
                 FROM files f WHERE f.organization_id = $1 AND f.id = ANY($2) \
                 ON CONFLICT (source_id, locator) DO NOTHING",
                &[&org, &source.file_ids, &kb_id, &source.id],
            )
            .await?;
        let mut distinct = source.file_ids.clone();
        distinct.sort();
        distinct.dedup();
        if n as usize != distinct.len() {
            return Err(Error::invalid(
                "invalid_source",
                "every file id must be an upload of this organization",
            ));
        }
    }
    for doc in &source.documents {
        tx.execute(
            "INSERT INTO kb_documents (id, organization_id, kb_id, source_id, locator, title) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (source_id, locator) DO NOTHING",
            &[
                &Uuid::new_v4(),
                &org,
                &kb_id,
                &source.id,
                &doc.locator,
                &doc.title,
            ],
        )
        .await?;
    }
    // One ingest job per document, or one expand job; each joins the
    // current trace when it runs (tracing on).
    let traceparent = crate::telemetry::current_traceparent();
    if source.expand {
        tx.execute(
            "INSERT INTO kb_jobs (id, organization_id, kb_id, source_id, kind, max_attempts, \
                 traceparent) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &Uuid::new_v4(),
                &org,
                &kb_id,
                &source.id,
                &KbJobKind::Expand,
                &max_attempts,
                &traceparent,
            ],
        )
        .await?;
    } else {
        tx.execute(
            "INSERT INTO kb_jobs (id, organization_id, kb_id, source_id, document_id, kind, \
                 max_attempts, traceparent) \
             SELECT gen_random_uuid(), d.organization_id, d.kb_id, d.source_id, d.id, $2, $3, $4 \
             FROM kb_documents d WHERE d.source_id = $1",
            &[&source.id, &KbJobKind::Ingest, &max_attempts, &traceparent],
        )
        .await?;
    }
    tx.execute("NOTIFY kb_jobs", &[]).await?;
    Ok(())
}

/// Settles a source once it has no unfinished job left: `failed` when it
/// has documents and every one failed, else `completed` (failed documents
/// show their errors; a source that failed to list stays `failed`).
///
/// The source's row is locked first, so the transactions finishing its
/// jobs settle one after the other: the later one's check (a statement of
/// its own, so a fresh snapshot under READ COMMITTED) sees the earlier
/// one's job done. Without the lock, two jobs finishing together each saw
/// the other still running and the source stayed `processing` for ever.
pub(crate) async fn settle_source(tx: &super::Tx<'_>, source_id: Uuid) -> Result<(), Error> {
    tx.execute(
        "SELECT 1 FROM kb_sources WHERE id = $1 FOR UPDATE",
        &[&source_id],
    )
    .await?;
    tx.execute(
        "UPDATE kb_sources s SET \
             status = CASE WHEN EXISTS (SELECT 1 FROM kb_documents d WHERE d.source_id = s.id) \
                  AND NOT EXISTS (SELECT 1 FROM kb_documents d WHERE d.source_id = s.id \
                                  AND d.status <> $8) \
                  THEN $6 ELSE $7 END, \
             error = CASE WHEN EXISTS (SELECT 1 FROM kb_documents d WHERE d.source_id = s.id) \
                  AND NOT EXISTS (SELECT 1 FROM kb_documents d WHERE d.source_id = s.id \
                                  AND d.status <> $5) \
                  THEN 'every document failed (see their errors)' ELSE NULL END, \
             updated_at = now() \
         WHERE s.id = $1 AND s.status = $4 \
           AND NOT EXISTS (SELECT 1 FROM kb_jobs j WHERE j.source_id = s.id \
                           AND j.state IN ($2, $3))",
        &[
            &source_id,
            &KbJobState::Queued,
            &KbJobState::Running,
            &KbSourceStatus::Processing,
            &KbDocumentStatus::Failed,
            &KbSourceStatus::Failed,
            &KbSourceStatus::Completed,
            &KbDocumentStatus::Failed,
        ],
    )
    .await?;
    Ok(())
}

/// What a search of a knowledge base needs first
/// ([`Datastore::kb_search_target`]).
pub struct SearchTarget {
    pub embedding_model: String,
    pub embedding_dimensions: i32,
    pub has_chunks: bool,
}

/// What to search for.
pub struct SearchQuery<'a> {
    /// The query, embedded once by the knowledge base's embedder.
    pub embedding: &'a [f32],
    pub text: &'a str,
    pub limit: u32,
    pub score_threshold: f64,
    pub document_ids: Option<Vec<Uuid>>,
    pub source_ids: Option<Vec<String>>,
    pub source_type: Option<&'a str>,
    pub metadata: Option<serde_json::Value>,
}

/// One hit of a search.
pub struct SearchHit {
    pub chunk_id: Uuid,
    pub document_id: Uuid,
    pub content: String,
    pub metadata: serde_json::Value,
    pub score: f64,
    pub title: String,
    pub locator: String,
    pub source_type: KbSourceType,
}

/// The hybrid search statement for embeddings of `$d` dimensions (the
/// HNSW indexes are partial, one per dimension, on a cast expression the
/// statement repeats). The query vector is the parameter itself in the
/// `ORDER BY`, never a column of a joined row: only an ordering by
/// `column <=> parameter` can be an index scan.
///
/// Up to `$5` candidates come from each side: the nearest chunks by cosine
/// distance (HNSW, or an exact scan of the knowledge base when the planner
/// finds that cheaper) and the best full-text matches (`websearch_to_tsquery`
/// ranked by `ts_rank_cd`). At most 2,000 full-text matches are ranked (the
/// first the index yields): ranking reads every match's `tsv`, 140 ms for
/// 28,000 matches, and words that common in a knowledge base say little,
/// so the vector side carries such a question. They are fused by reciprocal rank (k = 60) with
/// the vector side weighted by its cosine similarity:
/// `score = (max(cos, 0) * 61 / (60 + rank_vec) + 61 / (60 + rank_text)) / 2`,
/// so 1 is a chunk ranked first by both with identical meaning, a chunk
/// first by keywords only scores 0.5, and a chunk that is merely the
/// nearest of unrelated ones scores about its (low) similarity / 2.
/// Parameters: `$1` organization, `$2` knowledge base, `$3` query vector,
/// `$4` query text, `$5` candidates, `$6` threshold, `$7` limit, `$8`
/// document ids, `$9` source ids (text), `$10` source type, `$11` metadata
/// containment (each filter ignored when null).
macro_rules! search_sql {
    ($d:literal) => {
        concat!(
            "WITH q AS (SELECT websearch_to_tsquery('english', $4) AS tq), \
             vec AS MATERIALIZED ( \
                 SELECT c.id, (c.embedding::vector(",
            $d,
            ")) <=> $3::vector(",
            $d,
            ") AS dist \
                 FROM kb_chunks c \
                 WHERE c.dims = ",
            $d,
            " AND c.organization_id = $1 AND c.kb_id = $2 \
                   AND ($8::uuid[] IS NULL OR c.document_id = ANY($8)) \
                   AND ($9::text[] IS NULL OR c.metadata->>'source_id' = ANY($9)) \
                   AND ($10::text IS NULL OR c.metadata->>'source_type' = $10) \
                   AND ($11::jsonb IS NULL OR c.metadata @> $11) \
                 ORDER BY (c.embedding::vector(",
            $d,
            ")) <=> $3::vector(",
            $d,
            ") LIMIT $5), \
             vec_ranked AS ( \
                 SELECT id, dist, row_number() OVER (ORDER BY dist, id) AS r FROM vec), \
             matches AS MATERIALIZED ( \
                 SELECT c.id, c.tsv FROM kb_chunks c, q \
                 WHERE c.organization_id = $1 AND c.kb_id = $2 AND c.tsv @@ q.tq \
                   AND ($8::uuid[] IS NULL OR c.document_id = ANY($8)) \
                   AND ($9::text[] IS NULL OR c.metadata->>'source_id' = ANY($9)) \
                   AND ($10::text IS NULL OR c.metadata->>'source_type' = $10) \
                   AND ($11::jsonb IS NULL OR c.metadata @> $11) \
                 LIMIT 2000), \
             fts AS ( \
                 SELECT m.id, row_number() OVER \
                     (ORDER BY ts_rank_cd(m.tsv, q.tq) DESC, m.id) AS r \
                 FROM matches m, q \
                 ORDER BY ts_rank_cd(m.tsv, q.tq) DESC, m.id LIMIT $5), \
             fused AS ( \
                 SELECT coalesce(v.id, f.id) AS id, \
                     ((coalesce(greatest(1 - v.dist, 0) * 61.0 / (60 + v.r), 0) \
                      + coalesce(61.0 / (60 + f.r), 0)) / 2)::float8 AS score \
                 FROM vec_ranked v FULL JOIN fts f ON f.id = v.id) \
             SELECT c.id AS chunk_id, c.document_id, c.content, c.metadata, fused.score, \
                    d.title, d.locator, s.type AS source_type \
             FROM fused \
             JOIN kb_chunks c ON c.id = fused.id \
             JOIN kb_documents d ON d.id = c.document_id \
             JOIN kb_sources s ON s.id = d.source_id \
             WHERE fused.score >= $6::float8 \
             ORDER BY fused.score DESC, c.id LIMIT $7"
        )
    };
}

/// The search statement of a dimension the chunk table indexes.
pub fn search_sql(dimensions: usize) -> Option<&'static str> {
    match dimensions {
        384 => Some(search_sql!("384")),
        768 => Some(search_sql!("768")),
        1024 => Some(search_sql!("1024")),
        1536 => Some(search_sql!("1536")),
        _ => None,
    }
}
