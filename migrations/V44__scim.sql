-- SCIM 2.0 provisioning per organization (issue #37): the organization's
-- SCIM bearer token (only its SHA-256) and how groups map to roles, and
-- the Users and Groups its identity provider provisioned, each one JSON
-- document (the resource's canonical attributes plus id and meta).
CREATE TABLE scim_configs (
    organization_id    uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    -- SHA-256 of the bearer token (`wscim_…`, 256 random bits); NULL
    -- until one is issued.
    token_hash         bytea UNIQUE,
    token_prefix       text,
    token_created_at   timestamptz,
    token_last_used_at timestamptz,
    -- [{"group": <displayName>, "role": <role name>}], first match wins.
    role_mappings      jsonb NOT NULL DEFAULT '[]',
    default_role       text NOT NULL DEFAULT 'member',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE scim_resources (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES scim_configs (organization_id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('User', 'Group')),
    doc             jsonb NOT NULL,
    version         bigint NOT NULL DEFAULT 1,
    -- Users: the account it is linked to (once it has an e-mail address).
    user_id         uuid REFERENCES users (id) ON DELETE SET NULL,
    -- Users: lower(userName), unique in the organization.
    user_name_lower text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'User') = (user_name_lower IS NOT NULL))
);
CREATE UNIQUE INDEX scim_users_name_idx ON scim_resources (organization_id, user_name_lower)
    WHERE kind = 'User';
CREATE UNIQUE INDEX scim_users_account_idx ON scim_resources (organization_id, user_id)
    WHERE kind = 'User' AND user_id IS NOT NULL;
CREATE INDEX scim_resources_list_idx ON scim_resources (organization_id, kind, created_at, id);
-- A user's groups: `doc -> 'members' @> '[{"value": "<id>"}]'`.
CREATE INDEX scim_groups_members_idx ON scim_resources USING gin ((doc -> 'members') jsonb_path_ops)
    WHERE kind = 'Group';
