-- Model catalog and the Conversation area: conversations, their model
-- sessions and messages.

-- The language models known to the service. Rows are upserted by name at
-- every start from the configuration, so a model keeps its id across
-- restarts; a model removed from the configuration stays (sessions refer to
-- it) but is no longer offered.
CREATE TABLE models (
    id             uuid PRIMARY KEY,
    name           text NOT NULL,
    provider       text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT models_name_key UNIQUE (name)
);

CREATE TABLE conversations (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    title           text NOT NULL,
    is_archived     boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_org_idx ON conversations (organization_id, updated_at DESC, id);

CREATE TABLE conversation_sessions (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    model_id        uuid NOT NULL REFERENCES models (id),
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    status          text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'completed')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_sessions_conv_idx
    ON conversation_sessions (organization_id, conversation_id, created_at, id);

-- Messages of all sessions of a conversation. `seq` gives the one stable
-- order (insertion order) used for history and pagination.
CREATE TABLE conversation_messages (
    id              uuid PRIMARY KEY,
    seq             bigserial NOT NULL,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    session_id      uuid NOT NULL REFERENCES conversation_sessions (id) ON DELETE CASCADE,
    role            text NOT NULL CHECK (role IN ('user', 'assistant')),
    content         text NOT NULL,
    -- complete; for assistant answers cut short: cancelled (the client went
    -- away) or failed (the provider failed mid-answer).
    status          text NOT NULL DEFAULT 'complete'
        CHECK (status IN ('complete', 'cancelled', 'failed')),
    -- The error code of a failed answer (never provider secrets).
    error_code      text,
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    -- Usage reported by the provider for an assistant answer.
    input_tokens    integer,
    output_tokens   integer,
    cached_tokens   integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT conversation_messages_seq_key UNIQUE (seq)
);
CREATE INDEX conversation_messages_conv_idx
    ON conversation_messages (organization_id, conversation_id, seq);
CREATE INDEX conversation_messages_session_idx
    ON conversation_messages (session_id, seq);
