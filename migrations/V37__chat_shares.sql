-- Share links of chats (issue #35): a read-only snapshot of a chat's
-- active path, taken when the link is made, readable by anyone holding
-- the link's token (`GET /api/shared?token=...`, no account needed).
--
-- `id` is the owner's handle (list, revoke). The token is shown once, in
-- the answer that creates the link; only its SHA-256 is kept
-- (`token_hash`), as for personal access tokens. `snapshot` holds the
-- messages as a reader sees them (role, content, time, the model's
-- name): never prompt data, metadata, upload or user ids. Revoking keeps
-- the row for the owner's list but empties the snapshot.
--
-- The share goes with its chat, its user and its organization (cascade).
-- A reader is answered only while the owner is an active member of an
-- organization whose deletion was not requested, so a removed member's,
-- a deleted account's or a deleted organization's links stop at once,
-- before the deletion job reaches the rows.

CREATE TABLE chat_shares (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    chat_id         uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    token_hash      bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    -- The chat's title when the link was made.
    title           text NOT NULL,
    -- The messages (a JSON array of SharedMessage); '[]' once revoked.
    snapshot        jsonb NOT NULL,
    message_count   integer NOT NULL CHECK (message_count >= 0),
    views           bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz
);

-- The owner's list (newest first), and the live count per user.
CREATE INDEX chat_shares_owner_idx
    ON chat_shares (organization_id, user_id, created_at DESC, id);
-- The cascade from a chat, and the list filtered by chat.
CREATE INDEX chat_shares_chat_idx ON chat_shares (chat_id);
-- The cascade from a user (an account's deletion).
CREATE INDEX chat_shares_user_idx ON chat_shares (user_id);
