-- OpenTelemetry (issue #37): work queued during a traced request keeps
-- the request's W3C `traceparent`, so the worker's span (an ingestion
-- job, a webhook delivery) joins the trace that queued it, and the
-- webhook receiver gets it too. Null while tracing is off.
ALTER TABLE webhook_deliveries
    ADD COLUMN traceparent text CHECK (length(traceparent) <= 128);
ALTER TABLE kb_jobs
    ADD COLUMN traceparent text CHECK (length(traceparent) <= 128);
