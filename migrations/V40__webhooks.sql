-- Webhooks (issue #36): organizations subscribe HTTPS endpoints to events;
-- deliveries are signed as the Standard Webhooks specification says and
-- sent from an outbox that every instance drains.
--
-- An event is queued in the transaction of the change it reports
-- (`datastore::webhooks::enqueue`): one `webhook_events` row (the payload,
-- once) and one `webhook_deliveries` row per enabled endpoint subscribed to
-- its type, or nothing at all when no endpoint is. Workers claim due
-- deliveries with `FOR UPDATE SKIP LOCKED` and a lease (`locked_until`):
-- a delivery whose instance died is claimed again once its lease ran out.

CREATE TABLE webhook_endpoints (
    id                   uuid PRIMARY KEY,
    organization_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    url                  text NOT NULL,
    description          text NOT NULL DEFAULT '',
    -- Event types, exact (`member.joined`), by prefix (`audit.*`) or all
    -- (`*`).
    event_types          text[] NOT NULL,
    -- The signing secret (its 24 to 64 random bytes), sealed with the
    -- server's key, bound to `webhook_endpoint:<id>`.
    sealed_secret        bytea NOT NULL,
    -- The secret before the last rotation, valid until
    -- `previous_expires_at` (deliveries carry both signatures until then).
    sealed_previous      bytea,
    previous_expires_at  timestamptz,
    enabled              boolean NOT NULL DEFAULT true,
    -- Why a disabled endpoint is: `manual` or `failing`.
    disabled_reason      text,
    disabled_at          timestamptz,
    -- Deliveries failed for good in a row (reset by a success), and when
    -- the first of them failed.
    consecutive_failures integer NOT NULL DEFAULT 0,
    failing_since        timestamptz,
    last_success_at      timestamptz,
    created_by           uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_endpoints_disabled_reason_check
        CHECK (disabled_reason IS NULL OR disabled_reason IN ('manual', 'failing'))
);

CREATE INDEX webhook_endpoints_org_idx ON webhook_endpoints (organization_id, created_at, id);

CREATE TABLE webhook_events (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    event_type      text NOT NULL,
    payload         jsonb NOT NULL,
    -- Makes queueing an event idempotent where the change may be written
    -- twice (an answer stored again after the database came back).
    dedupe_key      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_events_dedupe_key UNIQUE (organization_id, dedupe_key)
);

CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    endpoint_id       uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id          uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    event_type        text NOT NULL,
    -- pending: waits for `next_attempt_at`; sending: claimed (its lease is
    -- `locked_until`); delivered: answered 2xx; failed: out of attempts or
    -- its endpoint was disabled.
    status            text NOT NULL DEFAULT 'pending',
    attempts          integer NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    locked_by         uuid,
    locked_until      timestamptz,
    last_attempt_at   timestamptz,
    -- The last attempt: the HTTP status (none when no answer came), the
    -- time it took, the first bytes of the answer, or why it failed.
    response_status   integer,
    latency_ms        integer,
    response_snippet  text,
    last_error        text,
    delivered_at      timestamptz,
    -- The delivery this one replays (a new `webhook-id`).
    replay_of         uuid,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_deliveries_status_check
        CHECK (status IN ('pending', 'sending', 'delivered', 'failed'))
);

-- What the workers claim: due pending deliveries and expired leases.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE status IN ('pending', 'sending');
-- The delivery log: an organization's, an endpoint's, newest first.
CREATE INDEX webhook_deliveries_org_idx
    ON webhook_deliveries (organization_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_endpoint_idx
    ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

-- Managing webhooks: held by the admin and owner system roles through
-- `*:read` and `*:*`; needed by personal access tokens as scopes.
INSERT INTO permissions (id, name, description)
VALUES (gen_random_uuid(), 'webhooks:read', 'See the organization''s webhooks and deliveries (admins)'),
       (gen_random_uuid(), 'webhooks:write', 'Manage the organization''s webhooks (admins)')
ON CONFLICT DO NOTHING;
