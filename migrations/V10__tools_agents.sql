-- Tools, agents and agent deployments.

-- Tool categories belong to one organization.
CREATE TABLE tool_categories (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    description     text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX tool_categories_name_key ON tool_categories (organization_id, lower(name));

-- A tool belongs to the organization that created it; `is_public` tools are
-- readable (and usable) by every organization.
CREATE TABLE tools (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    category_id     uuid NOT NULL REFERENCES tool_categories (id),
    name            text NOT NULL,
    description     text NOT NULL,
    is_active       boolean NOT NULL DEFAULT true,
    version         text NOT NULL,
    logo_url        text,
    is_public       boolean NOT NULL DEFAULT false,
    configuration   jsonb NOT NULL,
    inputs          jsonb NOT NULL,
    outputs         jsonb NOT NULL,
    settings        jsonb NOT NULL,
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX tools_name_key ON tools (organization_id, lower(name));
CREATE INDEX tools_category_idx ON tools (category_id);
CREATE INDEX tools_public_idx ON tools (name, id) WHERE is_public;

-- Agents. `status` is the lifecycle state (see the API documentation).
CREATE TABLE agents (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    description     text NOT NULL,
    agent_type      text NOT NULL,
    model_id        uuid NOT NULL REFERENCES models (id),
    params          jsonb NOT NULL,
    is_public       boolean NOT NULL DEFAULT false,
    status          text NOT NULL DEFAULT 'created'
        CHECK (status IN ('created', 'configured', 'testing', 'ready', 'deployed', 'active')),
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_org_idx ON agents (organization_id, created_at DESC, id);

-- The tools of an agent, in order, with their configuration values.
CREATE TABLE agent_tools (
    agent_id   uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    tool_id    uuid NOT NULL REFERENCES tools (id),
    position   integer NOT NULL,
    config     jsonb NOT NULL,
    PRIMARY KEY (agent_id, tool_id)
);
CREATE INDEX agent_tools_tool_idx ON agent_tools (tool_id);

-- Deployments of an agent. The API key is stored as its SHA-256 only.
CREATE TABLE agent_deployments (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    agent_id        uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    channel         text NOT NULL CHECK (channel IN ('widget', 'api', 'sdk', 'iframe')),
    allowed_origins text[] NOT NULL DEFAULT '{}',
    rate_limit_per_minute integer NOT NULL,
    status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    key_hash        bytea NOT NULL,
    key_prefix      text NOT NULL,
    key_expires_at  timestamptz,
    key_created_at  timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz,
    request_count   bigint NOT NULL DEFAULT 0,
    input_tokens    bigint NOT NULL DEFAULT 0,
    output_tokens   bigint NOT NULL DEFAULT 0,
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT agent_deployments_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX agent_deployments_agent_idx ON agent_deployments (agent_id, created_at, id);

-- Per-deployment request counts in one-minute windows (the rate limit, shared
-- by every server instance).
CREATE TABLE deployment_rate_windows (
    deployment_id uuid NOT NULL REFERENCES agent_deployments (id) ON DELETE CASCADE,
    window_start  timestamptz NOT NULL,
    count         integer NOT NULL,
    PRIMARY KEY (deployment_id, window_start)
);
