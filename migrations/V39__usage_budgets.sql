-- Usage and cost of every model call, and budgets (issue #36).
--
-- `usage_records`: one row per model call (a whole answer of the agent
-- runtime with its tool steps, a transcription, an embedding batch),
-- written in batches by each instance's usage recorder (`usage.rs`).
-- `cost_micros` is computed at write time from the configuration's price
-- table (USD per million tokens = micro-dollars per token).
CREATE TABLE usage_records (
    id              bigserial PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The member the call was for (none for a deployment key's call);
    -- detached when the account is deleted.
    user_id         uuid REFERENCES users (id) ON DELETE SET NULL,
    -- The personal access token the request came with, the deployment
    -- whose key it came with (kept as ids: reports outlive them).
    token_id        uuid,
    deployment_id   uuid,
    -- chat, prompt, conversation, agent_test, deployment, playground,
    -- rag, transcription, embedding.
    kind            text NOT NULL,
    model_id        uuid,
    model_name      text NOT NULL,
    provider        text NOT NULL,
    input_tokens    bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens   bigint NOT NULL CHECK (output_tokens >= 0),
    -- `reported`: the provider's figures; `estimated`: counted here
    -- (characters / 4) because the provider reported none.
    token_source    text NOT NULL CHECK (token_source IN ('reported', 'estimated')),
    cost_micros     bigint NOT NULL CHECK (cost_micros >= 0),
    latency_ms      integer NOT NULL CHECK (latency_ms >= 0),
    -- complete, cancelled, or the error code of a failed call.
    outcome         text NOT NULL,
    created_at      timestamptz NOT NULL
);
CREATE INDEX usage_records_org_time ON usage_records (organization_id, created_at);
-- An account's deletion detaches its rows in batches.
CREATE INDEX usage_records_user ON usage_records (user_id) WHERE user_id IS NOT NULL;

-- Budgets: a limit on tokens or cost (micro-dollars) per UTC day or month
-- for the organization, one member, one personal access token or one
-- deployment key.
CREATE TABLE budgets (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    scope             text NOT NULL CHECK (scope IN ('organization', 'user', 'token', 'deployment')),
    subject_id        uuid,
    metric            text NOT NULL CHECK (metric IN ('tokens', 'cost')),
    period            text NOT NULL CHECK (period IN ('day', 'month')),
    limit_value       bigint NOT NULL CHECK (limit_value > 0),
    threshold_percent integer CHECK (threshold_percent BETWEEN 1 AND 100),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK ((scope = 'organization') = (subject_id IS NULL))
);
CREATE UNIQUE INDEX budgets_unique ON budgets
    (organization_id, scope, coalesce(subject_id, '00000000-0000-0000-0000-000000000000'::uuid),
     metric, period);

-- What each budget has spent and holds reserved in one period. A call is
-- admitted when `spent + reserved < limit` on every counter that applies
-- (checked and reserved atomically by `budget_admit`); at its end the
-- recorder replaces its reservation by what it used. `notified_at` is set
-- once per period when the threshold is crossed.
CREATE TABLE budget_counters (
    budget_id    uuid NOT NULL REFERENCES budgets (id) ON DELETE CASCADE,
    period_start timestamptz NOT NULL,
    spent        bigint NOT NULL DEFAULT 0,
    reserved     bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    running      integer NOT NULL DEFAULT 0 CHECK (running >= 0),
    notified_at  timestamptz,
    PRIMARY KEY (budget_id, period_start)
);

-- The start of the current period of `period` (UTC).
CREATE FUNCTION budget_period_start(period text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT date_trunc(CASE period WHEN 'day' THEN 'day' ELSE 'month' END,
                      now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;

-- Admits a call or refuses it, in one statement: the counters of every
-- budget that applies (the organization's; the user's, token's and
-- deployment's when given) are made and locked in id order (no deadlock
-- between concurrent admissions), checked, and only if all pass each gets
-- the call's reservation (`p_tokens` for a tokens budget, `p_cost`
-- micro-dollars for a cost budget). Returns one row per reservation, or
-- one row with `refused` for the first budget that is spent.
CREATE FUNCTION budget_admit(p_org uuid, p_user uuid, p_token uuid, p_deployment uuid,
                             p_tokens bigint, p_cost bigint)
RETURNS TABLE (budget_id uuid, period_start timestamptz, metric text, amount bigint,
               refused boolean, scope text, limit_value bigint, reset_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
    c record;
    ps timestamptz;
    ids uuid[] := '{}';
    starts timestamptz[] := '{}';
    metrics text[] := '{}';
    amounts bigint[] := '{}';
BEGIN
    FOR b IN
        SELECT * FROM budgets x
        WHERE x.organization_id = p_org
          AND (x.scope = 'organization'
               OR (x.scope = 'user' AND x.subject_id = p_user)
               OR (x.scope = 'token' AND x.subject_id = p_token)
               OR (x.scope = 'deployment' AND x.subject_id = p_deployment))
        ORDER BY x.id
    LOOP
        ps := budget_period_start(b.period);
        INSERT INTO budget_counters AS k (budget_id, period_start) VALUES (b.id, ps)
            ON CONFLICT DO NOTHING;
        SELECT k.spent, k.reserved INTO c FROM budget_counters k
            WHERE k.budget_id = b.id AND k.period_start = ps FOR UPDATE;
        IF c.spent + c.reserved >= b.limit_value THEN
            RETURN QUERY SELECT b.id, ps, b.metric, 0::bigint, true, b.scope, b.limit_value,
                CASE b.period WHEN 'day' THEN ps + interval '1 day' ELSE ps + interval '1 month' END;
            RETURN;
        END IF;
        ids := ids || b.id;
        starts := starts || ps;
        metrics := metrics || b.metric;
        amounts := amounts || CASE b.metric WHEN 'tokens' THEN p_tokens ELSE p_cost END;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        UPDATE budget_counters k SET reserved = k.reserved + amounts[i], running = k.running + 1
            WHERE k.budget_id = ids[i] AND k.period_start = starts[i];
        RETURN QUERY SELECT ids[i], starts[i], metrics[i], amounts[i], false, NULL::text,
            NULL::bigint, NULL::timestamptz;
    END LOOP;
END
$$;

-- Reading the organization's usage and budgets, and managing budgets: the
-- admin and owner system roles hold them through `*:read` and `*:write`.
INSERT INTO permissions (id, name, description)
VALUES (gen_random_uuid(), 'usage:read', 'Read the organization''s usage, cost and budgets (admins)'),
       (gen_random_uuid(), 'usage:write', 'Manage the organization''s budgets (admins)')
ON CONFLICT DO NOTHING;
