-- Sessions (issue #34 item 1) and password resets (item 2).
--
-- A login (or an accepted invitation) starts a session. Its access tokens
-- (JWTs) carry the session id as their `sid` claim, and every request's
-- authorization statement checks the session row, so a revoked session's
-- tokens are refused by every instance at their next request. Refresh
-- tokens are random and stored only as their SHA-256; each refresh rotates
-- the token (the old one is marked `rotated_at`), and presenting a rotated
-- token again revokes the whole session (reuse detection, RFC 9700 §4.14).
CREATE TABLE sessions (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    -- The last login or refresh (not every request: that would be a write
    -- per request; access tokens are short-lived, so this is at most one
    -- access-token lifetime behind).
    last_used_at   timestamptz NOT NULL DEFAULT now(),
    -- The client address and User-Agent of that login or refresh.
    ip_address     inet,
    user_agent     text,
    -- The current refresh token's expiry: a session unused for the refresh
    -- lifetime ends.
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    -- logout, revoked, others_revoked, refresh_token_reused,
    -- password_reset, password_changed.
    revoked_reason text,
    CONSTRAINT sessions_user_agent_len CHECK (char_length(user_agent) <= 512)
);
CREATE INDEX sessions_user_live_idx ON sessions (user_id, created_at) WHERE revoked_at IS NULL;
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

CREATE TABLE refresh_tokens (
    -- SHA-256 of the token; the token itself is never stored.
    token_hash bytea PRIMARY KEY,
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    issued_at  timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    -- Set when this token was exchanged: presenting it again is reuse.
    rotated_at timestamptz
);
CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id);
CREATE INDEX refresh_tokens_rotated_idx ON refresh_tokens (rotated_at) WHERE rotated_at IS NOT NULL;

-- Single-use password-reset tokens (SHA-256 only), valid for an hour.
-- A request for an address without an account writes a row too, with no
-- user (it can never be redeemed): both cases do the same work, so the
-- answer's timing does not tell whether the address has an account.
CREATE TABLE password_resets (
    token_hash bytea PRIMARY KEY,
    user_id    uuid REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX password_resets_user_idx ON password_resets (user_id);
CREATE INDEX password_resets_expires_idx ON password_resets (expires_at);

-- When the password last changed (reset or change). Access tokens issued
-- before sessions existed (no `sid` claim) are refused once the password
-- changed after they were issued, so a reset also ends them.
ALTER TABLE users ADD COLUMN password_changed_at timestamptz;
