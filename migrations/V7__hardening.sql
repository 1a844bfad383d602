-- Hardening: request rate limits shared by every instance, and assistant
-- answers stored while they stream.

-- Fixed-window request counters (login and signup rate limits), one row per
-- bucket ('login:addr:<ip>', 'login:all', ...) and window. Incremented with
-- INSERT ... ON CONFLICT, so the limits hold across server instances;
-- windows older than an hour are purged.
CREATE TABLE rate_limit_counters (
    bucket       text NOT NULL,
    window_start timestamptz NOT NULL,
    hits         integer NOT NULL,
    PRIMARY KEY (bucket, window_start)
);
CREATE INDEX rate_limit_counters_window_idx ON rate_limit_counters (window_start);

-- Failed logins are purged once they leave the window.
CREATE INDEX login_failures_failed_at_idx ON login_failures (failed_at);

-- An assistant answer is inserted, `streaming`, with the user's message and
-- updated while it streams, so what reached the client is in the database.
ALTER TABLE conversation_messages DROP CONSTRAINT conversation_messages_status_check;
ALTER TABLE conversation_messages ADD CONSTRAINT conversation_messages_status_check
    CHECK (status IN ('complete', 'cancelled', 'failed', 'streaming'));
ALTER TABLE conversation_messages ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
