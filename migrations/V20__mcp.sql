-- The MCP area: the catalog of configured MCP servers (synced by name at
-- start, so ids are stable across restarts), their tool lists cached with a
-- TTL, per-user connection sessions (OAuth state, PKCE verifier and tokens
-- sealed at rest) and the instances created from active sessions.

CREATE TABLE mcp_servers (
    id            uuid PRIMARY KEY,
    -- The configured name: the key of the sync.
    name          text NOT NULL UNIQUE,
    toolkit_name  text NOT NULL,
    toolkit_slug  text NOT NULL,
    toolkit_logo  text,
    url           text NOT NULL,
    auth          text NOT NULL CHECK (auth IN ('oauth', 'none')),
    -- false: no longer in the configuration (kept for its sessions, not listed).
    configured    boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The tools of a server as last listed over MCP (shared by every instance of
-- the service), fresh for `mcp.tools_cache_ttl_secs`.
CREATE TABLE mcp_tool_cache (
    server_id   uuid PRIMARY KEY REFERENCES mcp_servers (id) ON DELETE CASCADE,
    -- The endpoint the list came from: a changed URL makes the entry stale.
    url         text NOT NULL,
    tools       jsonb NOT NULL,
    fetched_at  timestamptz NOT NULL DEFAULT now()
);

-- Dynamic client registrations (RFC 7591), one per server and redirect URI.
CREATE TABLE mcp_oauth_clients (
    server_id     uuid NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    redirect_uri  text NOT NULL,
    -- Sealed JSON {client_id, client_secret?}; associated data: the server id.
    client_sealed bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server_id, redirect_uri)
);

-- A user's connection to a server in one organization.
CREATE TABLE mcp_sessions (
    id               uuid PRIMARY KEY,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    server_id        uuid NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    status           text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'active', 'needs_reauth', 'failed')),
    flow_type        text,
    -- SHA-256 of the OAuth `state`; cleared when used (single use).
    state_hash       bytea UNIQUE,
    state_expires_at timestamptz,
    -- Sealed JSON of the pending flow (PKCE verifier, client, endpoints);
    -- associated data: the session id.
    flow_sealed      bytea,
    -- Sealed JSON of the tokens; associated data: the session id.
    tokens_sealed    bytea,
    token_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_sessions_org_idx ON mcp_sessions (organization_id, status);
CREATE INDEX mcp_sessions_owner_idx ON mcp_sessions (organization_id, user_id);

-- An instance: what a user uses of an active session. Visible to its user
-- in its organization only.
CREATE TABLE mcp_instances (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    server_id       uuid NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    session_id      uuid NOT NULL UNIQUE REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    name            text NOT NULL,
    -- SHA-256 of the gateway URL's secret (generate_url); null until made.
    gateway_secret_hash bytea UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_instances_owner_idx ON mcp_instances (organization_id, user_id, created_at, id);
