-- Files (chat uploads) and knowledge bases: sources, documents, chunks with
-- their embeddings (pgvector) and full-text vectors, and the durable
-- ingestion jobs that fill them.

CREATE EXTENSION IF NOT EXISTS vector;

-- An uploaded file. The bytes live in the object store under
-- `storage_key`; `extracted_text` is filled when the format allows.
CREATE TABLE files (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    uploaded_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    chat_id          uuid,
    message_id       uuid NOT NULL,
    filename         text NOT NULL,
    content_type     text NOT NULL,
    file_size        bigint NOT NULL CHECK (file_size >= 0),
    sha256           text NOT NULL,
    storage_key      text NOT NULL,
    extracted_text   text,
    extraction_error text,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_org_idx ON files (organization_id, created_at DESC, id);

CREATE TABLE knowledge_bases (
    id                   uuid PRIMARY KEY,
    organization_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    created_by           uuid REFERENCES users (id) ON DELETE SET NULL,
    name                 text NOT NULL,
    description          text NOT NULL,
    -- The name of the configured embedder; a knowledge base keeps it.
    embedding_model      text NOT NULL,
    embedding_dimensions integer NOT NULL CHECK (embedding_dimensions IN (384, 768, 1024, 1536)),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_bases_org_idx ON knowledge_bases (organization_id, created_at DESC, id);

-- Sources and documents take `clock_timestamp()`, so that the ones made in
-- one transaction keep their order (listings are oldest first).
-- A source of documents. `config` holds the public part of its
-- configuration only; credentials are sealed in `sealed_credentials`
-- (server/src/secrets.rs, bound to the source id).
CREATE TABLE kb_sources (
    id                 uuid PRIMARY KEY,
    organization_id    uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kb_id              uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    type               text NOT NULL CHECK (type IN ('file', 'web', 'object_store')),
    config             jsonb NOT NULL,
    sealed_credentials bytea,
    status             text NOT NULL DEFAULT 'processing'
        CHECK (status IN ('processing', 'completed', 'failed')),
    error              text,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX kb_sources_kb_idx ON kb_sources (kb_id, created_at, id);

-- One document of a source: an uploaded file, a web page or an object.
CREATE TABLE kb_documents (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kb_id           uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    source_id       uuid NOT NULL REFERENCES kb_sources (id) ON DELETE CASCADE,
    -- file: the file id; web: the URL; object_store: the object key.
    locator         text NOT NULL,
    title           text NOT NULL,
    content_type    text,
    size_bytes      bigint,
    status          text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
    error           text,
    chunk_count     integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT kb_documents_locator_key UNIQUE (source_id, locator)
);
CREATE INDEX kb_documents_kb_idx ON kb_documents (kb_id, created_at, id);

-- Chunks. `embedding` has the knowledge base's dimensions (`dims`); HNSW
-- indexes are partial, one per supported dimension, on a cast expression
-- (an index needs a fixed dimension). `tsv` is the full-text vector.
CREATE TABLE kb_chunks (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kb_id           uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    document_id     uuid NOT NULL REFERENCES kb_documents (id) ON DELETE CASCADE,
    position        integer NOT NULL,
    content         text NOT NULL,
    metadata        jsonb NOT NULL DEFAULT '{}',
    dims            integer NOT NULL,
    embedding       vector NOT NULL,
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    CONSTRAINT kb_chunks_dims_check CHECK (vector_dims(embedding) = dims)
);
CREATE INDEX kb_chunks_document_idx ON kb_chunks (document_id, position);
CREATE INDEX kb_chunks_kb_idx ON kb_chunks (kb_id);
CREATE INDEX kb_chunks_tsv_idx ON kb_chunks USING gin (tsv);
CREATE INDEX kb_chunks_hnsw_384 ON kb_chunks
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE dims = 384;
CREATE INDEX kb_chunks_hnsw_768 ON kb_chunks
    USING hnsw ((embedding::vector(768)) vector_cosine_ops) WHERE dims = 768;
CREATE INDEX kb_chunks_hnsw_1024 ON kb_chunks
    USING hnsw ((embedding::vector(1024)) vector_cosine_ops) WHERE dims = 1024;
CREATE INDEX kb_chunks_hnsw_1536 ON kb_chunks
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WHERE dims = 1536;

-- Durable ingestion jobs, claimed with FOR UPDATE SKIP LOCKED by the
-- workers of every server instance. A running job holds a lease
-- (`locked_until`) that its worker extends; an expired lease makes the job
-- claimable again. `expand` lists a source's documents; `ingest` extracts,
-- chunks and embeds one document.
CREATE TABLE kb_jobs (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kb_id           uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    source_id       uuid NOT NULL REFERENCES kb_sources (id) ON DELETE CASCADE,
    document_id     uuid REFERENCES kb_documents (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('expand', 'ingest')),
    state           text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL DEFAULT 5,
    run_after       timestamptz NOT NULL DEFAULT now(),
    locked_by       uuid,
    locked_until    timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX kb_jobs_claim_idx ON kb_jobs (run_after) WHERE state IN ('queued', 'running');
CREATE INDEX kb_jobs_source_idx ON kb_jobs (source_id);
