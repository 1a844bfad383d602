-- Feedback on answers (issue #35): a person's rating, up or down, with an
-- optional comment and tags, of an answer of one of their own chats
-- (`chat_messages`, role MODEL) or of a conversation of their organization
-- (`conversation_messages`, role assistant). One rating per person per
-- answer: rating again changes it (`updated_at`), deleting removes it.
--
-- The answer is named by one of two columns, each a foreign key that
-- cascades with its message (and so with its chat or conversation);
-- `area` says which, and the check keeps the pair consistent. `chat_id` or
-- `conversation_id` and `model_id` are copied from the answer when it is
-- rated, for the organization's list filters. The rows go with their
-- organization and with their rater's account.
CREATE TABLE message_feedback (
    id                      uuid PRIMARY KEY,
    organization_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id                 uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    area                    text NOT NULL CHECK (area IN ('chat', 'conversation')),
    chat_message_id         uuid REFERENCES chat_messages (id) ON DELETE CASCADE,
    conversation_message_id uuid REFERENCES conversation_messages (id) ON DELETE CASCADE,
    chat_id                 uuid,
    conversation_id         uuid,
    rating                  text NOT NULL CHECK (rating IN ('up', 'down')),
    comment                 text CHECK (char_length(comment) BETWEEN 1 AND 2000),
    tags                    text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 10),
    model_id                uuid REFERENCES models (id),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT message_feedback_target_check CHECK (
        (area = 'chat'
            AND chat_message_id IS NOT NULL AND chat_id IS NOT NULL
            AND conversation_message_id IS NULL AND conversation_id IS NULL)
        OR (area = 'conversation'
            AND conversation_message_id IS NOT NULL AND conversation_id IS NOT NULL
            AND chat_message_id IS NULL AND chat_id IS NULL)),
    -- One rating per person per answer; the leading message column also
    -- serves the cascades from the messages.
    CONSTRAINT message_feedback_chat_key UNIQUE (chat_message_id, user_id),
    CONSTRAINT message_feedback_conversation_key UNIQUE (conversation_message_id, user_id)
);
-- The organization's list and export: newest first, keyset pages.
CREATE INDEX message_feedback_org_idx
    ON message_feedback (organization_id, created_at DESC, id DESC);
-- The cascade from an account, and an account deletion's batches.
CREATE INDEX message_feedback_user_idx ON message_feedback (user_id);

-- Reading the organization's feedback (the list and the export): held by
-- the admin and owner system roles through `*:read` and `*:*`; needed by
-- personal access tokens as a scope.
INSERT INTO permissions (id, name, description)
VALUES (gen_random_uuid(), 'feedback:read', 'Read the feedback given on answers (admins)')
ON CONFLICT DO NOTHING;
