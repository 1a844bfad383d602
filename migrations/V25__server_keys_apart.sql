-- The server's generated keys are kept apart from the data they protect:
-- in a key file (default <data dir>/server.keys) or the configuration,
-- never in the database (see server/src/keys.rs). Keys that older versions
-- kept in server_secrets are moved into the key file at the next start
-- (embedded database) or by `workspace-server keys export` (DATABASE_URL),
-- then deleted from it; the table stays for that move.
--
-- What the database keeps instead is a fingerprint of each key of the key
-- file (SHA-256 over a label and the key; it reveals nothing of the key),
-- so that a server started with another key file than the one this data
-- was made with refuses to start rather than logging everyone out and
-- failing to open sealed secrets.
CREATE TABLE server_key_fingerprints (
    name        text PRIMARY KEY,
    fingerprint bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
