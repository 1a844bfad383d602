-- Personal access tokens (issue #34): bearer tokens for automation that
-- act for their user within their scopes. Only the SHA-256 of the secret
-- is kept; `prefix` (its first 12 characters) lets a person recognise it.
CREATE TABLE personal_access_tokens (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL,
    prefix text NOT NULL,
    secret_hash bytea NOT NULL UNIQUE,
    scopes text[] NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at timestamptz
);

CREATE INDEX personal_access_tokens_user ON personal_access_tokens (user_id, created_at DESC);
