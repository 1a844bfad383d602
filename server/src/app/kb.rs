//! Knowledge bases: validation, sources (credentials sealed), views.

use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::kb::{
    DocumentProgressRow, DocumentRow, KbRow, NewDocument, NewSource, SourceRow,
};
use crate::db::enums as db;
use crate::error::Error;
use std::sync::Arc;
use uuid::Uuid;
use workspace_api::kb::{
    AvailableKnowledgeBase, DESCRIPTION_MAX, DocumentProgress, DocumentStatus, IngestionStage,
    KbCreate, KbCreated, KbDeleted, KbDetail, KbDocument, KbDocumentsPage, KbDocumentsQuery,
    KbIngestionStatus, KbListQuery, KbStatus, KbSummary, KbUpdate, KbUpdated, NAME_MAX,
    PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX, SOURCE_ITEMS_MAX, SOURCES_MAX, Source, SourceAdded,
    SourceConfigView, SourceInput, SourceProgress, SourceStatus, SourceType,
};

/// Longest URL of a web source, in bytes.
const URL_MAX: usize = 2048;

fn kb_status(processing: bool) -> KbStatus {
    if processing {
        KbStatus::Processing
    } else {
        KbStatus::Ready
    }
}

fn source_type(t: db::KbSourceType) -> SourceType {
    match t {
        db::KbSourceType::File => SourceType::File,
        db::KbSourceType::Web => SourceType::Web,
        db::KbSourceType::ObjectStore => SourceType::ObjectStore,
    }
}

fn source_status(s: db::KbSourceStatus) -> SourceStatus {
    match s {
        db::KbSourceStatus::Processing => SourceStatus::Processing,
        db::KbSourceStatus::Completed => SourceStatus::Completed,
        db::KbSourceStatus::Failed => SourceStatus::Failed,
    }
}

fn document_status(s: db::KbDocumentStatus) -> DocumentStatus {
    match s {
        db::KbDocumentStatus::Pending => DocumentStatus::Pending,
        db::KbDocumentStatus::Processing => DocumentStatus::Processing,
        db::KbDocumentStatus::Completed => DocumentStatus::Completed,
        db::KbDocumentStatus::Failed => DocumentStatus::Failed,
    }
}

fn source_view(row: SourceRow) -> Source {
    Source {
        id: row.id,
        source_type: source_type(row.source_type),
        // Only public fields are ever stored in `config`.
        config: serde_json::from_value(row.config).unwrap_or_default(),
        status: source_status(row.status),
        document_count: row.document_count,
        error: row.error,
        created_at: row.created_at,
    }
}

fn summary(row: KbRow) -> KbSummary {
    KbSummary {
        id: row.id,
        name: row.name,
        description: row.description,
        embedding_model: row.embedding_model,
        status: kb_status(row.processing),
        document_count: row.document_count,
        org_id: row.org_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn document_view(row: DocumentRow) -> KbDocument {
    let (url, file_id) = match row.source_type {
        db::KbSourceType::File => (None, row.locator.parse().ok()),
        db::KbSourceType::Web => (Some(row.locator.clone()), None),
        // An object is named as the document says: `s3://bucket/key`.
        db::KbSourceType::ObjectStore => (
            Some(match &row.bucket {
                Some(bucket) => format!("s3://{bucket}/{}", row.locator),
                None => row.locator.clone(),
            }),
            None,
        ),
    };
    KbDocument {
        id: row.id,
        source_id: row.source_id,
        source_type: source_type(row.source_type),
        title: row.title,
        url,
        file_id,
        content_type: row.content_type,
        size_bytes: row.size_bytes,
        status: document_status(row.status),
        chunk_count: row.chunk_count,
        error: row.error,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn name(name: &str) -> Result<&str, Error> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX {
        return Err(Error::invalid(
            "invalid_name",
            format!("the name must be 1 to {NAME_MAX} characters"),
        ));
    }
    Ok(name)
}

fn description(description: &str) -> Result<&str, Error> {
    if description.chars().count() > DESCRIPTION_MAX {
        return Err(Error::invalid(
            "invalid_description",
            format!("the description must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(description)
}

fn invalid_source(message: impl Into<String>) -> Error {
    Error::invalid("invalid_source", message)
}

/// Checks a source and turns it into rows: public config apart, the
/// credentials sealed and bound to the new source's id.
pub(crate) fn new_source(cx: &ServerContext, input: SourceInput) -> Result<NewSource, Error> {
    let id = Uuid::new_v4();
    match input {
        SourceInput::File(c) => {
            if c.file_ids.is_empty() || c.file_ids.len() > SOURCE_ITEMS_MAX {
                return Err(invalid_source(format!(
                    "a file source has 1 to {SOURCE_ITEMS_MAX} file ids"
                )));
            }
            let view = SourceConfigView {
                file_ids: Some(c.file_ids.clone()),
                ..Default::default()
            };
            Ok(NewSource {
                id,
                source_type: db::KbSourceType::File,
                config: serde_json::to_value(view).map_err(Error::internal)?,
                sealed_credentials: None,
                file_ids: c.file_ids,
                documents: Vec::new(),
                expand: false,
            })
        }
        SourceInput::Web(c) => {
            if c.urls.is_empty() || c.urls.len() > SOURCE_ITEMS_MAX {
                return Err(invalid_source(format!(
                    "a web source has 1 to {SOURCE_ITEMS_MAX} URLs"
                )));
            }
            let mut documents = Vec::new();
            for url in &c.urls {
                let parsed = reqwest::Url::parse(url.trim())
                    .map_err(|_| invalid_source(format!("{url:?} is not a URL")))?;
                if url.len() > URL_MAX
                    || !matches!(parsed.scheme(), "http" | "https")
                    || parsed.host_str().is_none()
                {
                    return Err(invalid_source(
                        "web URLs must be http or https with a host, at most 2048 characters",
                    ));
                }
                documents.push(NewDocument {
                    locator: parsed.to_string(),
                    title: parsed.to_string(),
                });
            }
            let view = SourceConfigView {
                urls: Some(documents.iter().map(|d| d.locator.clone()).collect()),
                ..Default::default()
            };
            Ok(NewSource {
                id,
                source_type: db::KbSourceType::Web,
                config: serde_json::to_value(view).map_err(Error::internal)?,
                sealed_credentials: None,
                file_ids: Vec::new(),
                documents,
                expand: false,
            })
        }
        SourceInput::ObjectStore(c) => {
            let bucket_ok = (3..=63).contains(&c.bucket_name.len())
                && c.bucket_name
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ".-".contains(ch));
            if !bucket_ok {
                return Err(invalid_source(
                    "bucket_name must be 3 to 63 lowercase letters, digits, dots or hyphens",
                ));
            }
            if c.prefix.len() > 1024
                || c.cloud_region.is_empty()
                || c.cloud_region.len() > 64
                || c.cloud_access_key_id.len() > 256
                || c.cloud_secret_access_key.len() > 256
            {
                return Err(invalid_source(
                    "prefix is at most 1024 characters, cloud_region 1 to 64, credentials at most 256",
                ));
            }
            if let Some(endpoint) = &c.endpoint_url {
                let parsed = reqwest::Url::parse(endpoint)
                    .map_err(|_| invalid_source("endpoint_url is not a URL"))?;
                if endpoint.len() > URL_MAX || !matches!(parsed.scheme(), "http" | "https") {
                    return Err(invalid_source("endpoint_url must be an http or https URL"));
                }
            }
            let credentials = serde_json::json!({
                "access_key_id": c.cloud_access_key_id,
                "secret_access_key": c.cloud_secret_access_key,
            });
            let sealed = cx.secrets.seal(
                credentials.to_string().as_bytes(),
                source_credentials_ad(id).as_bytes(),
            );
            let view = SourceConfigView {
                bucket_name: Some(c.bucket_name),
                prefix: Some(c.prefix),
                cloud_region: Some(c.cloud_region),
                endpoint_url: c.endpoint_url,
                ..Default::default()
            };
            Ok(NewSource {
                id,
                source_type: db::KbSourceType::ObjectStore,
                config: serde_json::to_value(view).map_err(Error::internal)?,
                sealed_credentials: Some(sealed),
                file_ids: Vec::new(),
                documents: Vec::new(),
                expand: true,
            })
        }
    }
}

/// The associated data binding sealed credentials to their source.
pub(crate) fn source_credentials_ad(source_id: Uuid) -> String {
    format!("kb_source:{source_id}")
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::KbWrite>,
    body: KbCreate,
) -> Result<KbCreated, Error> {
    let name = name(&body.name)?;
    let description = description(&body.description)?;
    let embedder = cx.embedders.get(&body.embedding_model).ok_or_else(|| {
        Error::invalid(
            "unknown_embedding_model",
            format!(
                "embedding_model must be one of: {}",
                cx.embedders.names().join(", ")
            ),
        )
    })?;
    if body.sources.len() > SOURCES_MAX {
        return Err(invalid_source(format!(
            "at most {SOURCES_MAX} sources at creation"
        )));
    }
    let sources = body
        .sources
        .into_iter()
        .map(|s| new_source(cx, s))
        .collect::<Result<Vec<_>, _>>()?;
    let row = cx
        .datastore
        .kb_create(
            grant,
            &crate::db::datastore::kb::NewKb {
                name,
                description,
                embedding_model: embedder.name(),
                dimensions: embedder.dimensions() as i32,
            },
            &sources,
            cx.config.kb.max_attempts,
        )
        .await?;
    slog::info!(grant.log(), "knowledge base created"; "kb_id" => row.id.to_string(),
        "sources" => sources.len());
    Ok(KbCreated {
        id: row.id,
        name: row.name,
        description: row.description,
        created_at: row.created_at,
        updated_at: row.updated_at,
        org_id: row.org_id,
        // A new knowledge base with sources is processing; one without
        // sources has nothing to ingest.
        status: kb_status(row.processing),
    })
}

/// Checks `page`/`limit` and returns (page, limit, offset).
fn paging(page: Option<u32>, limit: Option<u32>) -> Result<(u32, u32, i64), Error> {
    let page = page.unwrap_or(1);
    let limit = limit.unwrap_or(PAGE_LIMIT_DEFAULT);
    if page == 0 || page > 100_000 || limit == 0 || limit > PAGE_LIMIT_MAX {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("page is 1 to 100000 and limit 1 to {PAGE_LIMIT_MAX}"),
        ));
    }
    Ok((page, limit, i64::from(page - 1) * i64::from(limit)))
}

pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    query: KbListQuery,
) -> Result<Vec<KbSummary>, Error> {
    let (_, limit, offset) = paging(query.page, query.limit)?;
    let rows = cx
        .datastore
        .kb_list(access, i64::from(limit), offset)
        .await?;
    Ok(rows.into_iter().map(summary).collect())
}

pub async fn get(cx: &ServerContext, access: &OrgAccess, kb_id: Uuid) -> Result<KbDetail, Error> {
    let row = cx.datastore.kb_get(access, kb_id).await?;
    let sources = cx.datastore.kb_sources(access, kb_id).await?;
    let s = summary(row);
    Ok(KbDetail {
        id: s.id,
        name: s.name,
        description: s.description,
        embedding_model: s.embedding_model,
        status: s.status,
        document_count: s.document_count,
        org_id: s.org_id,
        created_at: s.created_at,
        updated_at: s.updated_at,
        sources: sources.into_iter().map(source_view).collect(),
    })
}

pub async fn update(
    cx: &ServerContext,
    grant: &Grant<on::Kb, perm::KbWrite>,
    body: KbUpdate,
) -> Result<KbUpdated, Error> {
    let name = body.name.as_deref().map(name).transpose()?;
    let description = body.description.as_deref().map(description).transpose()?;
    let row = cx.datastore.kb_update(grant, name, description).await?;
    Ok(KbUpdated {
        id: row.id,
        name: row.name,
        description: row.description,
        updated_at: row.updated_at,
    })
}

pub async fn delete(
    cx: &ServerContext,
    grant: &Grant<on::Kb, perm::KbDelete>,
) -> Result<KbDeleted, Error> {
    let kb_id = grant.id();
    cx.datastore.kb_delete(grant).await?;
    slog::info!(grant.log(), "knowledge base deleted"; "kb_id" => kb_id.to_string());
    Ok(KbDeleted {
        success: true,
        message: "knowledge base deleted".to_string(),
    })
}

pub async fn add_source(
    cx: &ServerContext,
    grant: &Grant<on::Kb, perm::KbWrite>,
    body: SourceInput,
) -> Result<SourceAdded, Error> {
    let source = new_source(cx, body)?;
    let row = cx
        .datastore
        .kb_add_source(grant, &source, cx.config.kb.max_attempts)
        .await?;
    Ok(SourceAdded {
        source_id: row.id,
        kb_id: row.kb_id,
        source_type: source_type(row.source_type),
        status: source_status(row.status),
        created_at: row.created_at,
    })
}

pub async fn list_documents(
    cx: &ServerContext,
    access: &OrgAccess,
    query: KbDocumentsQuery,
) -> Result<KbDocumentsPage, Error> {
    let (page, limit, offset) = paging(query.page, query.limit)?;
    let (rows, total) = cx
        .datastore
        .kb_documents(access, query.kb_id, i64::from(limit), offset)
        .await?;
    Ok(KbDocumentsPage {
        documents: rows.into_iter().map(document_view).collect(),
        total,
        page,
        limit,
    })
}

pub async fn delete_document(
    cx: &ServerContext,
    grant: &Grant<on::Kb, perm::KbDelete>,
    document_id: Uuid,
) -> Result<KbDeleted, Error> {
    cx.datastore.kb_delete_document(grant, document_id).await?;
    Ok(KbDeleted {
        success: true,
        message: "document deleted".to_string(),
    })
}

pub async fn retry_document(
    cx: &ServerContext,
    grant: &Grant<on::Kb, perm::KbWrite>,
    document_id: Uuid,
) -> Result<KbDeleted, Error> {
    cx.datastore.kb_retry_document(grant, document_id).await?;
    Ok(KbDeleted {
        success: true,
        message: "document queued for ingestion".to_string(),
    })
}

pub async fn ingestion_status(
    cx: &ServerContext,
    access: &OrgAccess,
    kb_id: Uuid,
) -> Result<KbIngestionStatus, Error> {
    let counts = cx.datastore.kb_ingestion_counts(access, kb_id).await?;
    let sources = cx.datastore.kb_sources(access, kb_id).await?;
    let in_progress = cx.datastore.kb_documents_in_progress(access, kb_id).await?;
    Ok(KbIngestionStatus {
        kb_id,
        status: kb_status(counts.processing),
        documents_total: counts.documents_total,
        documents_done: counts.documents_done,
        documents_failed: counts.documents_failed,
        sources: sources
            .into_iter()
            .map(|s| SourceProgress {
                source_id: s.id,
                source_type: source_type(s.source_type),
                status: source_status(s.status),
                documents_total: s.document_count,
                documents_done: s.documents_done,
                documents_failed: s.documents_failed,
                error: s.error,
            })
            .collect(),
        in_progress: in_progress.into_iter().map(document_progress).collect(),
    })
}

/// A running ingest job's progress as the API shows it.
fn document_progress(row: DocumentProgressRow) -> DocumentProgress {
    let stage = match row.stage {
        db::KbIngestStage::Extracting => IngestionStage::Extracting,
        db::KbIngestStage::Embedding => IngestionStage::Embedding,
        db::KbIngestStage::Storing => IngestionStage::Storing,
    };
    DocumentProgress {
        document_id: row.document_id,
        source_id: row.source_id,
        title: row.title,
        stage,
        chunks_done: i64::from(row.chunks_done),
        chunks_total: row.chunks_total.map(i64::from),
        percent: progress_percent(stage, row.chunks_done, row.chunks_total),
        attempt: row.attempt,
        updated_at: row.updated_at,
    }
}

/// `done` of `total` in whole percent, rounded down: 0 until the total is
/// known, 100 once storing (a document without chunks included).
fn progress_percent(stage: IngestionStage, done: i32, total: Option<i32>) -> u8 {
    match (stage, total) {
        (IngestionStage::Storing, _) => 100,
        (_, Some(total)) if total > 0 => {
            let done = i64::from(done.clamp(0, total));
            (done * 100 / i64::from(total)) as u8
        }
        _ => 0,
    }
}

pub async fn available(
    cx: &ServerContext,
    access: &OrgAccess,
) -> Result<Vec<AvailableKnowledgeBase>, Error> {
    let rows = cx.datastore.kb_available(access).await?;
    Ok(rows
        .into_iter()
        .map(|r| AvailableKnowledgeBase {
            id: r.id,
            name: r.name,
            description: r.description,
            status: kb_status(r.processing),
            embedding_model: r.embedding_model,
            document_count: r.document_count,
        })
        .collect())
}

fn check_query(query: &str, limit: Option<u32>) -> Result<(), Error> {
    let len = query.trim().chars().count();
    if len == 0 || query.chars().count() > workspace_api::kb::QUERY_MAX {
        return Err(Error::invalid(
            "invalid_query",
            "the query must be 1 to 2000 characters",
        ));
    }
    if limit.is_some_and(|l| l == 0 || l > workspace_api::kb::SEARCH_LIMIT_MAX) {
        return Err(Error::invalid("invalid_query", "limit is 1 to 50"));
    }
    Ok(())
}

/// Default `limit` of search and query.
const SEARCH_LIMIT_DEFAULT: u32 = 10;
/// Default `score_threshold`.
const SCORE_THRESHOLD_DEFAULT: f64 = 0.1;

/// Retrieves the best chunks of a knowledge base for `query`.
async fn retrieve(
    cx: &ServerContext,
    access: &OrgAccess,
    kb_id: Uuid,
    query: &str,
    limit: u32,
    score_threshold: f64,
    filters: Option<workspace_api::kb::KbSearchFilters>,
) -> Result<Vec<crate::db::datastore::kb::SearchHit>, Error> {
    let embed = |embedder: Arc<dyn crate::embedder::Embedder>| async move {
        let started = std::time::Instant::now();
        let embedded = cx.embedders.queries.embed(embedder.as_ref(), query).await;
        // The search's embedding, for the member (a cached query embeds
        // nothing new but counts the same).
        cx.usage.record_call(
            crate::app::usage::member(access),
            "embedding",
            embedder.name(),
            "embedder",
            (crate::usage::estimate_tokens(query.len()), 0, false),
            started,
            if embedded.is_ok() {
                "complete"
            } else {
                "embedder_unavailable"
            },
        );
        embedded.map_err(|e| Error::Unavailable {
            code: "embedder_unavailable",
            message: format!("embedding the query failed: {e}"),
        })
    };
    // With one embedder configured, every knowledge base uses it: the
    // query's embedding (milliseconds of CPU) runs beside the lookup
    // instead of after it. Its outcome counts only if the knowledge base
    // turns out to have chunks and that embedder.
    let lookup = cx.datastore.kb_search_target(access, kb_id);
    let (target, early) = match cx.embedders.only() {
        Some(only) => {
            let (target, vector) = tokio::join!(lookup, embed(only.clone()));
            (target?, Some((only, vector)))
        }
        None => (lookup.await?, None),
    };
    let model = target.embedding_model;
    let filters = filters.unwrap_or_default();
    if filters.metadata.as_ref().is_some_and(|m| m.len() > 20)
        || filters.document_ids.as_ref().is_some_and(|d| d.len() > 100)
        || filters.source_ids.as_ref().is_some_and(|d| d.len() > 100)
    {
        return Err(Error::invalid(
            "invalid_query",
            "filters name at most 100 documents, 100 sources and 20 metadata keys",
        ));
    }
    // An empty knowledge base needs no embedding (nor a provisioned model).
    if !target.has_chunks {
        return Ok(Vec::new());
    }
    let embedder = cx.embedders.get(&model).ok_or_else(|| Error::Unavailable {
        code: "embedder_unavailable",
        message: format!("the knowledge base's embedder {model:?} is not configured"),
    })?;
    let embedding = match early {
        Some((only, vector)) if Arc::ptr_eq(&only, &embedder) => vector?,
        _ => embed(embedder).await?,
    };
    let search = crate::db::datastore::kb::SearchQuery {
        embedding: &embedding,
        text: query,
        limit,
        score_threshold,
        document_ids: filters.document_ids,
        source_ids: filters
            .source_ids
            .map(|ids| ids.iter().map(Uuid::to_string).collect()),
        source_type: filters.source_type.map(|t| match t {
            SourceType::File => "file",
            SourceType::Web => "web",
            SourceType::ObjectStore => "object_store",
        }),
        metadata: filters.metadata.map(serde_json::Value::Object),
    };
    cx.datastore.kb_search(access, kb_id, &search).await
}

pub async fn search(
    cx: &ServerContext,
    access: &OrgAccess,
    kb_id: Uuid,
    body: workspace_api::kb::KbSearchRequest,
) -> Result<workspace_api::kb::KbSearchResponse, Error> {
    check_query(&body.query, body.limit)?;
    let threshold = body.score_threshold.unwrap_or(SCORE_THRESHOLD_DEFAULT);
    if !(0.0..=1.0).contains(&threshold) {
        return Err(Error::invalid("invalid_query", "score_threshold is 0 to 1"));
    }
    let hits = retrieve(
        cx,
        access,
        kb_id,
        &body.query,
        body.limit.unwrap_or(SEARCH_LIMIT_DEFAULT),
        threshold,
        body.filters,
    )
    .await?;
    Ok(workspace_api::kb::KbSearchResponse {
        results: hits
            .into_iter()
            .map(|h| workspace_api::kb::KbSearchResult {
                document_id: h.document_id,
                chunk_id: h.chunk_id,
                content: h.content,
                score: h.score,
                metadata: h.metadata,
            })
            .collect(),
    })
}

/// The instructions of a knowledge-base answer.
const QUERY_SYSTEM_PROMPT: &str = "Answer the question using only the numbered excerpts. \
     Cite every excerpt you use as [n] right after the statement it supports. If the excerpts \
     do not contain the answer, say that the knowledge base does not cover it.";

/// The user message of a knowledge-base answer: the numbered excerpts,
/// then the question.
fn query_prompt(question: &str, sources: &[workspace_api::kb::KbCitation]) -> String {
    let mut out = String::from("Excerpts:\n");
    for s in sources {
        out.push_str(&format!(
            "[{}] {}\n{}\n\n",
            s.index,
            s.title,
            s.content.trim()
        ));
    }
    if sources.is_empty() {
        out.push_str("(none found)\n\n");
    }
    out.push_str("Question: ");
    out.push_str(question);
    out
}

pub async fn query(
    cx: &ServerContext,
    access: &OrgAccess,
    kb_id: Uuid,
    body: workspace_api::kb::KbQueryRequest,
) -> Result<http::Response<dropshot::Body>, Error> {
    use crate::providers::{ChatEvent, ChatMessage, ChatRequest};
    use futures::StreamExt;
    use workspace_api::kb::{KbCitation, KbQueryResponse, KbQueryStreamEvent};
    check_query(&body.query, body.limit)?;
    if body.temperature.is_some_and(|t| !(0.0..=1.0).contains(&t))
        || body.max_tokens.is_some_and(|m| m == 0 || m > 32000)
    {
        return Err(Error::invalid(
            "invalid_query",
            "temperature is 0 to 1 and max_tokens 1 to 32000",
        ));
    }
    let model = crate::app::models::pick(cx, body.model_id)?;
    crate::app::models::check_available(&model).await?;
    let hits = retrieve(
        cx,
        access,
        kb_id,
        &body.query,
        body.limit.unwrap_or(SEARCH_LIMIT_DEFAULT),
        SCORE_THRESHOLD_DEFAULT,
        None,
    )
    .await?;
    let sources: Vec<KbCitation> = hits
        .into_iter()
        .enumerate()
        .map(|(i, h)| KbCitation {
            index: i as u32 + 1,
            document_id: h.document_id,
            chunk_id: h.chunk_id,
            url: (h.source_type == db::KbSourceType::Web).then(|| {
                h.metadata
                    .get("url")
                    .and_then(|u| u.as_str())
                    .unwrap_or(&h.locator)
                    .to_string()
            }),
            title: h.title,
            content: h.content,
            score: h.score,
        })
        .collect();
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system(QUERY_SYSTEM_PROMPT),
            ChatMessage::user(query_prompt(&body.query, &sources)),
        ],
        tools: Vec::new(),
        max_tokens: body.max_tokens.or(model.max_tokens),
        temperature: body.temperature.map(|t| t as f32),
        reasoning: None,
        whole: false,
        continue_final: false,
    };
    let log = cx.log.clone();
    let retry = cx.models.retry.clone();
    // The budgets, then the call metered (see `app::usage`).
    let input_chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
    let metered = crate::app::usage::admit(
        cx,
        crate::app::usage::member(access),
        "rag",
        &model,
        input_chars,
        request.max_tokens,
    )
    .await?;
    let started = match crate::providers::start(model.chat.as_ref(), &request, &retry, &log).await {
        Ok(stream) => Ok(metered.wrap(input_chars, stream)),
        Err(e) => {
            metered.failed(input_chars, e.error_code());
            Err(e)
        }
    };
    if !body.stream.unwrap_or(false) {
        let mut stream = started.map_err(provider_error)?;
        let mut answer = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(provider_error)? {
                ChatEvent::Text(t) => answer.push_str(&t),
                // Another deployment answers from the beginning.
                ChatEvent::Route(route) if route.restart => answer.clear(),
                ChatEvent::Finish(_) => break,
                _ => {}
            }
        }
        let body =
            serde_json::to_vec(&KbQueryResponse { answer, sources }).map_err(Error::internal)?;
        return http::Response::builder()
            .status(http::StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(dropshot::Body::from(body))
            .map_err(Error::internal);
    }
    // Streamed: a model that fails before answering is still a 4xx/5xx.
    let mut stream = started.map_err(provider_error)?;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    // The answer ends when the member is suspended or removed meanwhile.
    let mut watch = crate::app::streams::MemberWatch::new(&cx.datastore, &cx.chat_hub, access);
    crate::telemetry::spawn(async move {
        let revoked = watch.revoked();
        tokio::pin!(revoked);
        let message_id = Uuid::new_v4().to_string();
        if tx
            .send(KbQueryStreamEvent::Sources { sources })
            .await
            .is_err()
            || tx
                .send(KbQueryStreamEvent::Start { message_id })
                .await
                .is_err()
        {
            return;
        }
        loop {
            let event = tokio::select! {
                biased;
                () = &mut revoked => {
                    let _ = tx
                        .send(KbQueryStreamEvent::Error {
                            error_code: crate::app::streams::MEMBERSHIP_REVOKED.to_string(),
                            message: crate::app::streams::MEMBERSHIP_REVOKED_MESSAGE.to_string(),
                        })
                        .await;
                    return;
                }
                event = stream.next() => event,
            };
            let Some(event) = event else { break };
            let out = match event {
                Ok(ChatEvent::Text(t)) => KbQueryStreamEvent::Content { content: t },
                Ok(ChatEvent::Finish(_)) => break,
                // This stream cannot take back what it sent: an answer
                // that must start over on another deployment fails.
                Ok(ChatEvent::Route(route)) if route.restart => {
                    let e = crate::providers::ProviderError::new(
                        crate::providers::ProviderErrorKind::Interrupted,
                        "the answer must start over",
                    );
                    let _ = tx
                        .send(KbQueryStreamEvent::Error {
                            error_code: e.error_code().to_string(),
                            message: e.public_message().to_string(),
                        })
                        .await;
                    return;
                }
                Ok(_) => continue,
                Err(e) => {
                    let _ = tx
                        .send(KbQueryStreamEvent::Error {
                            error_code: e.error_code().to_string(),
                            message: e.public_message().to_string(),
                        })
                        .await;
                    return;
                }
            };
            if tx.send(out).await.is_err() {
                // The client left: dropping the stream cancels the model.
                return;
            }
        }
        let _ = tx.send(KbQueryStreamEvent::End).await;
    });
    crate::sse::response(rx).map_err(|e| Error::internal(e.internal_message))
}

/// A provider failure as the API's error.
fn provider_error(e: crate::providers::ProviderError) -> Error {
    Error::Unavailable {
        code: e.error_code(),
        message: e.public_message().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_percent_rounds_down_and_ends_at_storing() {
        use IngestionStage::{Embedding, Extracting, Storing};
        assert_eq!(progress_percent(Extracting, 0, None), 0);
        assert_eq!(progress_percent(Embedding, 0, Some(732)), 0);
        assert_eq!(progress_percent(Embedding, 64, Some(732)), 8);
        assert_eq!(progress_percent(Embedding, 731, Some(732)), 99);
        assert_eq!(progress_percent(Embedding, 732, Some(732)), 100);
        assert_eq!(progress_percent(Storing, 732, Some(732)), 100);
        // A document without chunks is stored at once.
        assert_eq!(progress_percent(Storing, 0, Some(0)), 100);
        assert_eq!(progress_percent(Embedding, 0, Some(0)), 0);
        // Never above 100, whatever the row says.
        assert_eq!(progress_percent(Embedding, 900, Some(732)), 100);
    }
}
