-- Resumable conversation streams and answer leases.
--
-- The events of a streamed conversation answer, numbered from 1 (the SSE
-- `id:`), like chat_stream_events: written in order by the instance that
-- generates the answer and announced with NOTIFY chat_stream
-- '<message_id>:<seq>' (the channel carries both areas' answers; message
-- ids are UUIDs, unique across both). One table per message table keeps the
-- foreign key, so deleting a conversation deletes its events.
CREATE TABLE conversation_stream_events (
    message_id uuid NOT NULL REFERENCES conversation_messages (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    event      jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_id, seq)
);

-- The lease of a streaming answer: the generating instance refreshes
-- heartbeat_at every `streams.heartbeat_secs`; an answer still `streaming`
-- whose heartbeat is older than `streams.lease_secs` lost its instance and
-- is closed by the sweeper of any instance (status `failed`, error_code
-- `answer_interrupted`, text kept, a last `error` event appended).
ALTER TABLE chat_messages ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE conversation_messages ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX chat_messages_streaming_idx ON chat_messages (heartbeat_at)
    WHERE status = 'streaming';
CREATE INDEX conversation_messages_streaming_idx ON conversation_messages (heartbeat_at)
    WHERE status = 'streaming';
