-- Tenancy: per-organization feature gates and quotas.
--
-- A NULL column means "use the server's configured default" (config
-- `[features]`), so changing a default reaches every organization that has
-- no override of its own.
CREATE TABLE organization_features (
    organization_id  uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    team_members     boolean,
    file_upload      boolean,
    chat_uploads     boolean,
    mcp_sessions     integer CHECK (mcp_sessions >= 0),
    daily_chat_limit integer CHECK (daily_chat_limit >= 0),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Organization names are compared case-insensitively per member.
CREATE INDEX organizations_lower_name_idx ON organizations (lower(name));

-- Role names are unique per organization regardless of case.
CREATE UNIQUE INDEX roles_org_lower_name_key ON roles (organization_id, lower(name));
