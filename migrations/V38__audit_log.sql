-- The audit log (issue #36): one row per change of state or access and
-- per security event, append-only, chained per organization by a hash.
--
-- `audit_events` is partitioned by month on `occurred_at`. Rows are only
-- ever inserted: a trigger refuses UPDATE, DELETE and TRUNCATE, whoever
-- asks. Retention (`audit.retention_days`) drops whole partitions whose
-- every row is older than the retention (`audit_drop_partitions`), never
-- single rows; partitions are created ahead of time
-- (`audit_ensure_partitions`, run by the migration and by every
-- instance's maintenance task). There is no default partition: an insert
-- whose month has no partition fails (and so does the change it records),
-- which the maintenance task keeps from happening by creating the next
-- months in advance.
--
-- The chain: each organization (the nil uuid for system-level events,
-- which have no organization) has a head in `audit_chain_heads`: the last
-- `seq` and `hash`. Recording an event updates the head (a row lock held
-- until the recording transaction ends, so writers of one organization
-- take turns and their `seq`s have no gaps) and inserts the row with
--   seq       = head.seq + 1
--   prev_hash = head.hash (32 zero bytes for the first)
--   hash      = SHA-256(prev_hash || int8send(seq) || payload)
-- where `payload` is the canonical encoding of the row's other columns
-- (`datastore::audit::canonical`), computed by the server. `audit
-- verify` recomputes every hash from the stored columns: a row changed
-- (with the trigger disabled) or removed breaks the chain at its `seq`.
--
-- `audit_retention_marks` keeps, per chain, the last `seq` and `hash` that
-- retention dropped, so that verification knows where the remaining chain
-- must start (a row removed at the start is found too).
--
-- No foreign keys: the log outlives the organizations, users and objects
-- it names (an organization's deletion cascades nowhere into it).

CREATE SEQUENCE audit_events_id_seq AS bigint;

CREATE TABLE audit_events (
    id              bigint NOT NULL DEFAULT nextval('audit_events_id_seq'),
    occurred_at     timestamptz NOT NULL,
    -- The chain: the organization, or the nil uuid for system events.
    chain_id        uuid NOT NULL,
    seq             bigint NOT NULL CHECK (seq > 0),
    prev_hash       bytea NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash            bytea NOT NULL CHECK (octet_length(hash) = 32),
    organization_id uuid,
    -- user | token | deployment_key | system | anonymous
    actor_kind      text NOT NULL,
    -- The user, token or deployment; NULL for system and anonymous.
    actor_id        uuid,
    -- The user behind a token (a service account's user for its tokens).
    actor_user_id   uuid,
    action          text NOT NULL,
    target_kind     text,
    target_id       text,
    -- success | failure | denied
    outcome         text NOT NULL,
    address         text,
    user_agent      text,
    request_id      text,
    details         jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (id, occurred_at)
) PARTITION BY RANGE (occurred_at);

ALTER SEQUENCE audit_events_id_seq OWNED BY audit_events.id;

-- Reading: an organization's events newest first, everything newest
-- first, a chain in order (verification), by actor.
CREATE INDEX audit_events_org_idx ON audit_events (organization_id, id DESC);
CREATE INDEX audit_events_id_idx ON audit_events (id DESC);
CREATE INDEX audit_events_chain_idx ON audit_events (chain_id, seq);
CREATE INDEX audit_events_actor_idx ON audit_events (actor_user_id, id DESC);

CREATE TABLE audit_chain_heads (
    chain_id  uuid PRIMARY KEY,
    seq       bigint NOT NULL DEFAULT 0,
    -- The hash before the last row's (kept so one UPDATE ... RETURNING
    -- yields both the row's prev_hash and its hash).
    prev_hash bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000',
    hash      bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000'
);

CREATE TABLE audit_retention_marks (
    chain_id uuid PRIMARY KEY,
    -- The last seq dropped by retention and its hash.
    seq      bigint NOT NULL,
    hash     bytea NOT NULL
);

-- Append-only: no UPDATE, DELETE or TRUNCATE of audit rows.
CREATE FUNCTION audit_events_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_events_no_update
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_refuse();
CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_refuse();

-- Creates the monthly partitions from the current month to `months_ahead`
-- months after it (existing ones are kept). The caller serializes
-- (an advisory lock), so two instances do not race on one name.
CREATE FUNCTION audit_ensure_partitions(months_ahead integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    first date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
    m date;
    name text;
BEGIN
    FOR i IN 0..months_ahead LOOP
        m := (first + make_interval(months => i))::date;
        name := format('audit_events_y%sm%s', to_char(m, 'YYYY'), to_char(m, 'MM'));
        IF to_regclass(name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF audit_events FOR VALUES FROM (%L) TO (%L)',
                name,
                (m::timestamp AT TIME ZONE 'UTC'),
                ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC'));
            -- Partitions inherit the row triggers; TRUNCATE of a
            -- partition by name is refused too.
            EXECUTE format(
                'CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON %I '
                'FOR EACH STATEMENT EXECUTE FUNCTION audit_events_refuse()', name);
        END IF;
    END LOOP;
END;
$$;

-- Drops every partition whose upper bound is at or before `before` (all
-- its rows are older), after recording per chain the last seq and hash it
-- held in `audit_retention_marks`. Returns the dropped partitions' names.
CREATE FUNCTION audit_drop_partitions(before timestamptz) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT c.relname AS name,
               (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                             'TO \(''([^'']+)''\)'))[1]::timestamptz AS upper_bound
          FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'audit_events'::regclass
         ORDER BY 2
    LOOP
        CONTINUE WHEN part.upper_bound IS NULL OR part.upper_bound > before;
        EXECUTE format(
            'INSERT INTO audit_retention_marks (chain_id, seq, hash) '
            'SELECT DISTINCT ON (chain_id) chain_id, seq, hash FROM %I '
            'ORDER BY chain_id, seq DESC '
            'ON CONFLICT (chain_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash '
            'WHERE audit_retention_marks.seq < EXCLUDED.seq', part.name);
        EXECUTE format('DROP TABLE %I', part.name);
        RETURN NEXT part.name;
    END LOOP;
END;
$$;

SELECT audit_ensure_partitions(3);

-- The system chain exists from the start; organizations' heads are made
-- by their first event.
INSERT INTO audit_chain_heads (chain_id) VALUES ('00000000-0000-0000-0000-000000000000');

-- Reading the organization's audit log: held by the admin and owner
-- system roles through `*:read` and `*:*`; needed by personal access
-- tokens as a scope.
INSERT INTO permissions (id, name, description)
VALUES (gen_random_uuid(), 'audit:read', 'Read the organization''s audit log (admins)')
ON CONFLICT DO NOTHING;
