-- What a current model takes and gives beyond text.
--
-- An answer's reasoning (a model's thinking, streamed apart from its
-- content) is stored beside the answer, never inside its content.
ALTER TABLE chat_messages ADD COLUMN reasoning text;
ALTER TABLE conversation_messages ADD COLUMN reasoning text;

-- The form of an upload a model is sent, made once on first use and kept
-- beside the upload so an image of an earlier turn is re-sent without
-- being decoded again: for an image, the prepared image (decoded,
-- downscaled to the providers' maximum, re-encoded without metadata); for
-- a PDF, its page count. `error` remembers why an upload could not be
-- prepared (a corrupt image or PDF is not parsed again). Deleted with the
-- upload.
CREATE TABLE file_renditions (
    file_id          uuid PRIMARY KEY REFERENCES files (id) ON DELETE CASCADE,
    organization_id  uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    media_type       text,
    width            integer,
    height           integer,
    data             bytea,
    pages            integer,
    error_code       text,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((data IS NULL) = (media_type IS NULL)),
    CHECK (error IS NULL OR (data IS NULL AND pages IS NULL))
);
CREATE INDEX file_renditions_org_idx ON file_renditions (organization_id);
