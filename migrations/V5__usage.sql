-- Daily usage per organization, for the `daily_chat_limit` quota. One row
-- per organization and UTC day; incremented atomically with the message it
-- counts, so the limit holds across server instances.
CREATE TABLE organization_daily_usage (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    day             date NOT NULL,
    chat_messages   integer NOT NULL DEFAULT 0 CHECK (chat_messages >= 0),
    PRIMARY KEY (organization_id, day)
);
