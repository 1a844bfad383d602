-- Single sign-on per organization (issue #37): an organization's OpenID
-- Connect provider, the e-mail domains it vouches for, sign-ins under way
-- (shared by every server instance), and the provider's subjects linked
-- to accounts.
CREATE TABLE sso_providers (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    issuer          text NOT NULL,
    client_id       text NOT NULL,
    -- Sealed with the server's secret keys (bound to the organization id).
    client_secret   bytea NOT NULL,
    groups_claim    text NOT NULL,
    -- [{"group": ..., "role": ...}], role names of the organization.
    role_mappings   jsonb NOT NULL,
    default_role    text,
    enforced        boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sso_domains (
    domain          text PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES sso_providers (organization_id) ON DELETE CASCADE
);
CREATE INDEX sso_domains_org_idx ON sso_domains (organization_id);

CREATE TABLE sso_logins (
    -- SHA-256 of the state: the state itself is only in the browser.
    state_hash      bytea PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES sso_providers (organization_id) ON DELETE CASCADE,
    nonce           text NOT NULL,
    pkce_verifier   text NOT NULL,
    redirect_uri    text NOT NULL,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX sso_logins_expiry_idx ON sso_logins (expires_at);

CREATE TABLE sso_identities (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    issuer          text NOT NULL,
    subject         text NOT NULL,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_login_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, issuer, subject)
);
CREATE INDEX sso_identities_user_idx ON sso_identities (user_id);

-- A session started by single sign-on acts in that organization only; a
-- personal access token made in such a session likewise.
ALTER TABLE sessions ADD COLUMN sso_organization_id uuid
    REFERENCES organizations (id) ON DELETE CASCADE;
ALTER TABLE personal_access_tokens ADD COLUMN sso_organization_id uuid
    REFERENCES organizations (id) ON DELETE CASCADE;
