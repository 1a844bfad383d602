-- Pagination hints of MCP tool outputs: the `nextPageToken` (and
-- `resultSizeEstimate`) of a tool's latest output, per user, instance and
-- tool, so that asking for "more" continues where the last page ended (see
-- server/src/app/mcp_playground.rs). Forgotten when the tool answers a
-- last page, and with the instance.
CREATE TABLE mcp_pagination_hints (
    instance_id          uuid NOT NULL REFERENCES mcp_instances (id) ON DELETE CASCADE,
    tool                 text NOT NULL,
    organization_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id              uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    next_page_token      text NOT NULL,
    result_size_estimate bigint,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, tool)
);
