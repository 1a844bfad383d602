-- Organization service accounts (issue #34): principals for automation that
-- belong to one organization, hold a role there like any member, never log
-- in (no password; their address is not a valid e-mail address, so no
-- signup or invitation can reach them) and act through personal access
-- tokens. They go with their organization.
ALTER TABLE users ADD COLUMN service_account_of uuid REFERENCES organizations (id) ON DELETE CASCADE;
ALTER TABLE users ADD COLUMN created_by uuid REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX users_service_account_of_idx ON users (service_account_of)
    WHERE service_account_of IS NOT NULL;
