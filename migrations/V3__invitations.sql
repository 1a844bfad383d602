-- Invitations to organizations, and the outbox of e-mails sent by the
-- default mailer.

CREATE TABLE invitations (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- Normalised (trimmed, lower-cased) address.
    email            text NOT NULL,
    -- Deleting a role removes its invitations (the roles area refuses to
    -- delete roles that members hold).
    role_id          uuid NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
    invited_by       uuid REFERENCES users (id) ON DELETE SET NULL,
    -- The user pre-created by POST /api/users/invite (NULL for
    -- POST /api/invitations/create).
    invited_user_id  uuid REFERENCES users (id) ON DELETE CASCADE,
    -- SHA-256 of the token; the token itself is never stored.
    token_hash       bytea NOT NULL,
    message          text,
    -- Stored state. `expired` is derived from `expires_at` when reading; it
    -- is stored only when a newer invitation replaces an expired one.
    status           text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    accepted_at      timestamptz,
    accepted_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
    revoked_at       timestamptz,
    CONSTRAINT invitations_token_hash_key UNIQUE (token_hash),
    CONSTRAINT invitations_email_normalized CHECK (email = lower(btrim(email)))
);
-- At most one stored-pending invitation per address and organization.
CREATE UNIQUE INDEX invitations_pending_email_key
    ON invitations (organization_id, email) WHERE status = 'pending';
CREATE INDEX invitations_org_created_idx ON invitations (organization_id, created_at DESC);

-- E-mails handed to the default (outbox) mailer. Nothing is lost when no
-- SMTP server is configured: a delivery process (or a person) can read them.
CREATE TABLE email_outbox (
    id         uuid PRIMARY KEY,
    to_address text NOT NULL,
    subject    text NOT NULL,
    body_text  text NOT NULL,
    -- What the mail is about, e.g. `invitation`, `user_invite`.
    kind       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
CREATE INDEX email_outbox_created_idx ON email_outbox (created_at);
