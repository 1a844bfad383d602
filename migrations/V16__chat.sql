-- The Chat area: chat sessions (private to their user), their messages,
-- the numbered events of every streamed answer (for resumable streams
-- across server instances) and single-use WebSocket tickets.

CREATE TABLE chats (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The owner: a chat is visible to this user only.
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title           text NOT NULL,
    status          text NOT NULL DEFAULT 'ACTIVE'
        CHECK (status IN ('ACTIVE', 'ARCHIVED', 'DELETED')),
    settings        jsonb,
    -- Accumulated token usage of the chat's answers.
    input_tokens    bigint NOT NULL DEFAULT 0,
    output_tokens   bigint NOT NULL DEFAULT 0,
    cached_tokens   bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chats_owner_idx ON chats (organization_id, user_id, updated_at DESC, id);

CREATE TABLE chat_messages (
    id                uuid PRIMARY KEY,
    seq               bigserial NOT NULL,
    organization_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    chat_id           uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    role              text NOT NULL CHECK (role IN ('USER', 'MODEL')),
    content           text NOT NULL,
    parent_message_id uuid,
    model_id          uuid REFERENCES models (id),
    agent_id          uuid,
    prompt_data       jsonb,
    metadata          jsonb NOT NULL DEFAULT '{}',
    -- streaming while the answer is generated; complete, stopped (the
    -- stop operation), failed (the provider failed).
    status            text NOT NULL DEFAULT 'complete'
        CHECK (status IN ('streaming', 'complete', 'stopped', 'failed')),
    error_code        text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chat_messages_seq_key UNIQUE (seq)
);
CREATE INDEX chat_messages_chat_idx ON chat_messages (chat_id, seq);

-- Every event of a streamed answer, numbered from 1 (the SSE `id:`).
-- Written in order by the instance generating the answer, announced with
-- NOTIFY chat_stream '<message_id>:<seq>'.
CREATE TABLE chat_stream_events (
    message_id uuid NOT NULL REFERENCES chat_messages (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    event      jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_id, seq)
);

-- Single-use tickets that open the chat WebSocket (no token in the URL).
CREATE TABLE chat_ws_tickets (
    ticket_hash     text PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at      timestamptz NOT NULL
);
