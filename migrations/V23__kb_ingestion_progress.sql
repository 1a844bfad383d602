-- Progress of a running ingest job, shown per document by
-- `GET /api/kb/ingestion_status` (in the database, not in a server's
-- memory: any instance answers for the jobs of every instance). Reset when
-- an attempt starts (`stage` 'extracting', no chunks yet), then written by
-- its worker once per embedded batch, under the job's lease. The chunks
-- themselves are still stored all at once, when the document completes.
ALTER TABLE kb_jobs
    ADD COLUMN stage text CHECK (stage IN ('extracting', 'embedding', 'storing')),
    ADD COLUMN chunks_done integer NOT NULL DEFAULT 0 CHECK (chunks_done >= 0),
    ADD COLUMN chunks_total integer CHECK (chunks_total >= 0),
    ADD COLUMN progress_at timestamptz,
    ADD CONSTRAINT kb_jobs_chunks_within_total
        CHECK (chunks_total IS NULL OR chunks_done <= chunks_total);

-- The running jobs of a knowledge base (the status endpoint's list).
CREATE INDEX kb_jobs_running_idx ON kb_jobs (kb_id) WHERE state = 'running';
