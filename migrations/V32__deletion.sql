-- Organizations and accounts that end: deleting an organization and
-- everything it holds, deleting an account (see server/src/app/deletion.rs).
--
-- An organization whose deletion was requested is unusable at once: the
-- authorization statement admits no member of it, its list and name checks
-- leave it out, signed download links of its files stop working. Its
-- contents are then removed in bounded batches by a durable job.
ALTER TABLE organizations ADD COLUMN deletion_requested_at timestamptz;

-- The durable deletion jobs, claimed with FOR UPDATE SKIP LOCKED by the
-- deletion workers of every server instance, with a lease (`locked_until`)
-- that the worker renews, as kb_jobs are. A job works through its kind's
-- steps in order (`step` names the current one); each batch is its own
-- transaction that first checks the lease and adds to the counters, so a
-- job interrupted anywhere resumes at its step on any instance.
--
-- No foreign keys to what a job deletes: the job outlives the organization
-- (its status stays readable) and the account.
CREATE TABLE deletion_jobs (
    id               uuid PRIMARY KEY,
    kind             text NOT NULL CHECK (kind IN ('organization', 'account')),
    organization_id  uuid,
    user_id          uuid,
    -- The organization's name (or the account's e-mail) when requested,
    -- for the status once the row is gone.
    subject_name     text NOT NULL,
    -- Who asked (the status is theirs to read).
    requested_by     uuid NOT NULL,
    state            text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'done', 'failed')),
    step             text NOT NULL,
    rows_deleted     bigint NOT NULL DEFAULT 0,
    files_deleted    bigint NOT NULL DEFAULT 0,
    grants_revoked   integer NOT NULL DEFAULT 0,
    -- MCP grants whose revocation at the provider still failed at the
    -- job's last attempt (their tokens were deleted here all the same).
    grants_unrevoked integer NOT NULL DEFAULT 0,
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 10,
    run_after        timestamptz NOT NULL DEFAULT now(),
    locked_by        uuid,
    locked_until     timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CONSTRAINT deletion_jobs_subject CHECK (
        (kind = 'organization' AND organization_id IS NOT NULL AND user_id IS NULL)
        OR (kind = 'account' AND user_id IS NOT NULL AND organization_id IS NULL))
);
-- One deletion per organization and per account.
CREATE UNIQUE INDEX deletion_jobs_org_key ON deletion_jobs (organization_id)
    WHERE organization_id IS NOT NULL;
CREATE UNIQUE INDEX deletion_jobs_user_key ON deletion_jobs (user_id)
    WHERE user_id IS NOT NULL;
CREATE INDEX deletion_jobs_claim_idx ON deletion_jobs (run_after)
    WHERE state IN ('queued', 'running');
CREATE INDEX deletion_jobs_requester_idx ON deletion_jobs (requested_by, created_at);

-- An account's deletion clears its authorship of the conversation messages
-- that stay (in organizations that remain), in batches: found by this index
-- rather than by scanning every message.
CREATE INDEX conversation_messages_created_by_idx ON conversation_messages (created_by)
    WHERE created_by IS NOT NULL;

-- An account's private chats, found without scanning everyone's (the
-- account deletion's batches, and the cascade of a user row).
CREATE INDEX chats_user_idx ON chats (user_id);

-- An account's uploads (its export lists them; its deletion's cascade
-- clears their uploader).
CREATE INDEX files_uploaded_by_idx ON files (uploaded_by) WHERE uploaded_by IS NOT NULL;
