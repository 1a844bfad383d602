//! Types of the Knowledge base area (`/api/kb`) and of
//! `GET /api/chat/available_knowledge_bases`.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Longest knowledge base name, in characters.
pub const NAME_MAX: usize = 200;
/// Longest description, in characters.
pub const DESCRIPTION_MAX: usize = 2000;
/// Most sources in one `create`.
pub const SOURCES_MAX: usize = 20;
/// Most URLs of a web source, and most file ids of a file source.
pub const SOURCE_ITEMS_MAX: usize = 100;
/// Longest search or query text, in characters.
pub const QUERY_MAX: usize = 2000;
/// Largest `limit` of search and query.
pub const SEARCH_LIMIT_MAX: u32 = 50;
/// Default `limit` of search and query (the spec's 10 chunks).
pub const SEARCH_LIMIT_DEFAULT: u32 = 10;
/// Default `score_threshold` (the spec's 0.1).
pub const SCORE_THRESHOLD_DEFAULT: f64 = 0.1;
/// Largest page of `list` and `list_documents`.
pub const PAGE_LIMIT_MAX: u32 = 100;
/// Default page size of `list` and `list_documents`.
pub const PAGE_LIMIT_DEFAULT: u32 = 20;

/// Query naming an organization, with optional paging (`GET /api/kb/list`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// 1-based page, default 1.
    #[schemars(range(min = 1, max = 100000))]
    pub page: Option<u32>,
    /// 1 to 100, default 20.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// Query naming one knowledge base.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbQuery {
    /// The knowledge base.
    pub kb_id: Uuid,
}

/// Query of `GET /api/kb/list_documents`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbDocumentsQuery {
    /// The knowledge base.
    pub kb_id: Uuid,
    /// 1-based page, default 1.
    #[schemars(range(min = 1, max = 100000))]
    pub page: Option<u32>,
    /// 1 to 100, default 20.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// Query of `DELETE /api/kb/delete_document`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbDocumentQuery {
    /// The knowledge base.
    pub kb_id: Uuid,
    /// The document, of the knowledge base `kb_id`.
    pub document_id: Uuid,
}

/// The kind of a source.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SourceType {
    File,
    Web,
    ObjectStore,
}

/// Configuration of a `file` source.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSourceConfig {
    /// Ids returned by `POST /api/chat/upload_file` in the same
    /// organization; 1 to 100.
    #[schemars(length(min = 1, max = 100))]
    pub file_ids: Vec<Uuid>,
}

/// Configuration of a `web` source.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSourceConfig {
    /// `http` or `https` URLs, 1 to 100, each at most 2048 characters.
    #[schemars(length(min = 1, max = 100))]
    pub urls: Vec<String>,
}

/// Configuration of an `object_store` source (S3-compatible).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObjectStoreSourceConfig {
    /// 3 to 63 characters.
    #[schemars(length(min = 3, max = 63))]
    pub bucket_name: String,
    /// Key prefix (empty: the whole bucket); at most 1024 characters.
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub prefix: String,
    /// Write-only: stored encrypted, never returned.
    #[schemars(length(max = 256))]
    pub cloud_access_key_id: String,
    /// Write-only: stored encrypted, never returned.
    #[schemars(length(max = 256))]
    pub cloud_secret_access_key: String,
    /// e.g. `us-east-1`; at most 64 characters.
    #[schemars(length(min = 1, max = 64))]
    pub cloud_region: String,
    /// An S3-compatible endpoint (MinIO, R2, ...); default: AWS. Addressed
    /// path-style when set.
    #[serde(default)]
    #[schemars(length(max = 2048))]
    pub endpoint_url: Option<String>,
}

/// A source to add: `{type, config}`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "type", content = "config", rename_all = "snake_case")]
pub enum SourceInput {
    File(FileSourceConfig),
    Web(WebSourceConfig),
    ObjectStore(ObjectStoreSourceConfig),
}

/// The public part of a source's configuration: the fields of its type,
/// without credentials.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct SourceConfigView {
    #[schemars(with = "crate::schema::Nullable<Vec<Uuid>>")]
    pub file_ids: Option<Vec<Uuid>>,
    #[schemars(with = "crate::schema::Nullable<Vec<String>>")]
    pub urls: Option<Vec<String>>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub bucket_name: Option<String>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub prefix: Option<String>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub cloud_region: Option<String>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub endpoint_url: Option<String>,
}

/// Body of `POST /api/kb/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbCreate {
    /// 1 to 200 characters after trimming.
    #[schemars(length(min = 1, max = 200))]
    pub name: String,
    /// At most 2000 characters.
    #[schemars(length(max = 2000))]
    pub description: String,
    /// One of the configured embedders (`all-minilm-l6-v2` by default).
    #[schemars(length(min = 1, max = 200))]
    pub embedding_model: String,
    /// 0 to 20 sources.
    #[schemars(length(max = 20))]
    pub sources: Vec<SourceInput>,
}

/// Body of `PUT /api/kb/update`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct KbUpdate {
    #[serde(default)]
    #[schemars(length(min = 1, max = 200))]
    pub name: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
}

/// A knowledge base's readiness: `processing` while any of its sources is
/// being ingested, `ready` otherwise.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KbStatus {
    Processing,
    Ready,
}

/// A source's state: `processing` until all its documents are done,
/// `completed` then (a failed document does not fail its source), `failed`
/// when its documents could not be listed at all.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    Processing,
    Completed,
    Failed,
}

/// A document's state.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DocumentStatus {
    Pending,
    Processing,
    Completed,
    Failed,
}

/// Response of `POST /api/kb/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbCreated {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    pub org_id: Uuid,
    pub status: KbStatus,
}

/// A knowledge base in `GET /api/kb/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbSummary {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub embedding_model: String,
    pub status: KbStatus,
    pub document_count: i64,
    pub org_id: Uuid,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A source of a knowledge base.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Source {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub source_type: SourceType,
    pub config: SourceConfigView,
    pub status: SourceStatus,
    pub document_count: i64,
    /// Why the source failed (`status` `failed`).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// Response of `GET /api/kb/get`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbDetail {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub embedding_model: String,
    pub status: KbStatus,
    pub document_count: i64,
    pub org_id: Uuid,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// Oldest first; at most 20 sources are created at once, and
    /// `add_source` refuses more than 100 per knowledge base.
    pub sources: Vec<Source>,
}

/// Response of `PUT /api/kb/update`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbUpdated {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// `{success, message}` of the delete operations.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbDeleted {
    pub success: bool,
    pub message: String,
}

/// Response of `POST /api/kb/add_source`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SourceAdded {
    pub source_id: Uuid,
    pub kb_id: Uuid,
    #[serde(rename = "type")]
    pub source_type: SourceType,
    pub status: SourceStatus,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// A document of a knowledge base.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbDocument {
    pub id: Uuid,
    pub source_id: Uuid,
    #[serde(rename = "type")]
    pub source_type: SourceType,
    /// The file name, the page title or the object key.
    pub title: String,
    /// The URL of a web document (the `s3://bucket/key` of an object).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub url: Option<String>,
    /// The uploaded file of a `file` document.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub file_id: Option<Uuid>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub content_type: Option<String>,
    /// Size of the original in bytes, once fetched.
    #[schemars(with = "crate::schema::Nullable<i64>")]
    pub size_bytes: Option<i64>,
    pub status: DocumentStatus,
    pub chunk_count: i32,
    /// Why ingestion failed (`status` `failed`).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Response of `GET /api/kb/list_documents`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbDocumentsPage {
    pub documents: Vec<KbDocument>,
    pub total: i64,
    pub page: u32,
    pub limit: u32,
}

/// Body of `POST /api/kb/search`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbSearchRequest {
    /// 1 to 2000 characters.
    #[schemars(length(min = 1, max = 2000))]
    pub query: String,
    /// 1 to 50, default 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// 0 to 1, default 0.1.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub score_threshold: Option<f64>,
    #[serde(default)]
    pub filters: Option<KbSearchFilters>,
}

/// Metadata filters of a search; all given ones must hold.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KbSearchFilters {
    /// Only chunks of these documents (at most 100).
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub document_ids: Option<Vec<Uuid>>,
    /// Only chunks of these sources (at most 100).
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub source_ids: Option<Vec<Uuid>>,
    /// Only chunks of sources of this type.
    #[serde(default)]
    pub source_type: Option<SourceType>,
    /// Only chunks whose metadata contains this JSON object (e.g.
    /// `{"page": 3}` or `{"sheet": "Q1"}`); at most 20 keys.
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One search hit.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbSearchResult {
    pub document_id: Uuid,
    pub chunk_id: Uuid,
    pub content: String,
    /// 0 to 1, higher is better: the reciprocal-rank fusion of the vector
    /// and full-text rankings, the vector side weighted by its cosine
    /// similarity (see `POST /api/kb/search`).
    pub score: f64,
    /// `document_id`, `source_id`, `source_type`, `title`, `position`,
    /// plus `url`, `page` or `sheet` where known.
    pub metadata: serde_json::Value,
}

/// Response of `POST /api/kb/search`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbSearchResponse {
    pub results: Vec<KbSearchResult>,
}

/// Body of `POST /api/kb/query`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbQueryRequest {
    /// 1 to 2000 characters.
    #[schemars(length(min = 1, max = 2000))]
    pub query: String,
    /// One of `GET /api/models/list` (default: the first offered model).
    #[serde(default)]
    pub model_id: Option<Uuid>,
    /// Chunks retrieved, 1 to 50, default 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// 0 to 1.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub temperature: Option<f64>,
    /// 1 to 32000.
    #[serde(default)]
    #[schemars(range(min = 1, max = 32000))]
    pub max_tokens: Option<u32>,
    /// Answer as Server-Sent Events instead of JSON.
    #[serde(default)]
    pub stream: Option<bool>,
}

/// A numbered source of an answer: `[n]` in the answer cites it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbCitation {
    /// The number the answer cites, from 1.
    pub index: u32,
    pub document_id: Uuid,
    pub chunk_id: Uuid,
    pub title: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub url: Option<String>,
    pub content: String,
    pub score: f64,
}

/// Response of `POST /api/kb/query` (without `stream`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbQueryResponse {
    pub answer: String,
    pub sources: Vec<KbCitation>,
}

/// One Server-Sent Event of `POST /api/kb/query` with `"stream": true`,
/// sent as `data: <json>` and a blank line: `sources` first, then the
/// conversation stream's `start`, `content`... and `end` (or `error`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KbQueryStreamEvent {
    /// The numbered excerpts the answer may cite as `[n]`.
    Sources { sources: Vec<KbCitation> },
    /// The answer begins (`message_id` identifies this answer).
    Start { message_id: String },
    /// The next piece of the answer, in order.
    Content { content: String },
    /// The answer is complete.
    End,
    /// The model failed mid-answer; the stream ends here, without `end`.
    Error { error_code: String, message: String },
}

/// Progress of one source in `GET /api/kb/ingestion_status`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SourceProgress {
    pub source_id: Uuid,
    #[serde(rename = "type")]
    pub source_type: SourceType,
    pub status: SourceStatus,
    pub documents_total: i64,
    pub documents_done: i64,
    pub documents_failed: i64,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
}

/// What happens to a document being ingested, in order.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum IngestionStage {
    /// Reading the document, extracting its text and splitting it into
    /// chunks (`chunks_total` is not known yet).
    Extracting,
    /// Embedding its chunks in batches: `chunks_done` of `chunks_total`.
    Embedding,
    /// Every chunk is embedded; they are being written. The document
    /// becomes searchable, all of it at once, when this ends.
    Storing,
}

/// A document being ingested now, in `GET /api/kb/ingestion_status`.
///
/// The figures are the current attempt's: an attempt after a failure
/// starts again from `extracting` with no chunks done. They are recorded
/// in the database by the worker (on any server instance) once per batch
/// of embedded chunks, so every instance reports the same.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct DocumentProgress {
    pub document_id: Uuid,
    pub source_id: Uuid,
    /// The document's title (an upload's file name, a page's title, an
    /// object's name), as `GET /api/kb/list_documents` shows it.
    pub title: String,
    pub stage: IngestionStage,
    /// Chunks embedded so far; `chunks_total` while `storing`.
    pub chunks_done: i64,
    /// The document's chunks, once its text is split (`null` while
    /// `extracting`).
    #[schemars(with = "crate::schema::Nullable<i64>")]
    pub chunks_total: Option<i64>,
    /// 0 to 100, for a progress bar: `chunks_done` of `chunks_total` in
    /// whole percent, rounded down (0 while `extracting`, 100 while
    /// `storing`). Never goes down within an attempt.
    #[schemars(range(min = 0, max = 100))]
    pub percent: u8,
    /// This attempt's number, from 1.
    pub attempt: i32,
    /// When the figures last changed (the attempt started, a batch was
    /// embedded, storing began). A worker that died leaves it behind; its
    /// job is taken over when its lease runs out.
    pub updated_at: DateTime<Utc>,
}

/// Response of `GET /api/kb/ingestion_status`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct KbIngestionStatus {
    pub kb_id: Uuid,
    pub status: KbStatus,
    /// Documents known so far (a source still being listed adds more).
    pub documents_total: i64,
    /// Documents finished, completed or failed.
    pub documents_done: i64,
    pub documents_failed: i64,
    pub sources: Vec<SourceProgress>,
    /// The documents being ingested right now, with their progress, oldest
    /// first (at most 100). A document leaves the list when it is
    /// completed, failed, or waiting for another attempt; pending
    /// documents are not listed (they count in `documents_total` only).
    pub in_progress: Vec<DocumentProgress>,
}

/// A knowledge base usable in chat (`GET /api/chat/available_knowledge_bases`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AvailableKnowledgeBase {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// Always `ready`: only knowledge bases that finished ingesting are
    /// offered (the agreed shape carries it, so one view serves both lists).
    pub status: KbStatus,
    pub embedding_model: String,
    pub document_count: i64,
}

/// Declares the JSON answer of `kb_query` beside its `text/event-stream`
/// one (dropshot documents a raw response as `*/*`; the streaming patch
/// of [`crate::openapi_document`] declares the stream).
pub(crate) fn patch_document(doc: &mut openapiv3::OpenAPI) {
    use openapiv3::{MediaType, ReferenceOr, StatusCode};
    let settings = schemars::r#gen::SchemaSettings::openapi3();
    let mut generator = schemars::r#gen::SchemaGenerator::new(settings);
    generator.subschema_for::<KbQueryResponse>();
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, schema) in generator.take_definitions() {
        let schema: openapiv3::Schema =
            serde_json::from_value(serde_json::to_value(schema).expect("schema serialises"))
                .expect("schemars emits OpenAPI 3 schemas");
        components
            .schemas
            .entry(name)
            .or_insert(ReferenceOr::Item(schema));
    }
    if let Some(ReferenceOr::Item(item)) = doc.paths.paths.get_mut("/api/files/download")
        && let Some(op) = item.get.as_mut()
    {
        let mut response = openapiv3::Response {
            description: "The file's bytes, with its content type".to_string(),
            ..Default::default()
        };
        response.content.insert(
            "application/octet-stream".to_string(),
            MediaType {
                schema: Some(ReferenceOr::Item(openapiv3::Schema {
                    schema_data: Default::default(),
                    schema_kind: openapiv3::SchemaKind::Type(openapiv3::Type::String(
                        openapiv3::StringType {
                            format: openapiv3::VariantOrUnknownOrEmpty::Item(
                                openapiv3::StringFormat::Binary,
                            ),
                            ..Default::default()
                        },
                    )),
                })),
                ..Default::default()
            },
        );
        op.responses.default = None;
        op.responses
            .responses
            .insert(StatusCode::Code(200), ReferenceOr::Item(response));
    }
    let Some(ReferenceOr::Item(item)) = doc.paths.paths.get_mut("/api/kb/query") else {
        return;
    };
    let Some(op) = item.post.as_mut() else {
        return;
    };
    if let Some(ReferenceOr::Item(response)) =
        op.responses.responses.get_mut(&StatusCode::Code(200))
    {
        response.description =
            "The answer as JSON, or with `stream` Server-Sent Events (`data: <json>` lines)"
                .to_string();
        response.content.insert(
            "application/json".to_string(),
            MediaType {
                schema: Some(ReferenceOr::Reference {
                    reference: "#/components/schemas/KbQueryResponse".to_string(),
                }),
                ..Default::default()
            },
        );
        response.content.insert(
            "text/event-stream".to_string(),
            MediaType {
                schema: Some(ReferenceOr::Reference {
                    reference: "#/components/schemas/KbQueryStreamEvent".to_string(),
                }),
                ..Default::default()
            },
        );
    }
}
