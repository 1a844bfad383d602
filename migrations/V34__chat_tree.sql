-- A chat's messages form a tree: every message names its parent
-- (`parent_message_id`, NULL for a first message). Editing a question adds
-- a sibling question, regenerating an answer adds a sibling answer. The
-- chat remembers its active path, root to leaf, which is what `GET
-- /api/chat` shows and what the model is sent as history.
--
-- Columns kept by every writer of chat_messages (send, edit, regenerate,
-- switch, import), under the chat's row lock (`UPDATE chats ...` first):
--   depth          0 for a first message, its parent's depth + 1;
--   sibling_index  its position among its siblings (same chat and parent)
--                  from 1, in creation order;
--   siblings       how many siblings it has, itself included;
--   previous_sibling_id, next_sibling_id
--                  its neighbours among them (NULL at the ends);
--   children       how many messages name it as their parent;
--   on_path        whether it is on the chat's active path: exactly the
--                  ancestors of the chat's leaf and the leaf (at most one
--                  per depth, which the unique index enforces);
--   selected_at    when it last became part of the active path (switching
--                  to a message descends through the most recently
--                  selected child at each level).
-- chats.leaf_id is the active path's last message (NULL: no message);
-- chats.roots counts the first messages (the siblings at depth 0).
--
-- Existing chats are single branches: every message is kept, the one
-- path runs from the first message to the newest.

ALTER TABLE chat_messages
    ADD COLUMN depth integer,
    ADD COLUMN sibling_index integer,
    ADD COLUMN siblings integer NOT NULL DEFAULT 1,
    ADD COLUMN previous_sibling_id uuid,
    ADD COLUMN next_sibling_id uuid,
    ADD COLUMN children integer NOT NULL DEFAULT 0 CHECK (children >= 0),
    ADD COLUMN on_path boolean NOT NULL DEFAULT false,
    ADD COLUMN selected_at timestamptz NOT NULL DEFAULT now();

ALTER TABLE chats
    ADD COLUMN leaf_id uuid,
    ADD COLUMN roots integer NOT NULL DEFAULT 0 CHECK (roots >= 0);

-- A parent outside the message's chat (never written, but not enforced
-- before) makes the message a first message.
UPDATE chat_messages m SET parent_message_id = NULL
WHERE parent_message_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM chat_messages p
                  WHERE p.id = m.parent_message_id AND p.chat_id = m.chat_id);

WITH RECURSIVE walk AS (
    SELECT id, 0 AS depth FROM chat_messages WHERE parent_message_id IS NULL
    UNION ALL
    SELECT c.id, w.depth + 1 FROM chat_messages c JOIN walk w ON c.parent_message_id = w.id
)
UPDATE chat_messages m SET depth = walk.depth FROM walk WHERE walk.id = m.id;

-- A cycle (impossible through the API) would leave depth unset: such
-- messages become first messages of their own.
UPDATE chat_messages SET parent_message_id = NULL, depth = 0 WHERE depth IS NULL;

UPDATE chat_messages m SET sibling_index = s.n, siblings = s.total, previous_sibling_id = s.prev,
    next_sibling_id = s.next, selected_at = m.created_at
FROM (SELECT id, row_number() OVER w AS n, count(*) OVER (PARTITION BY chat_id, parent_message_id) AS total,
             lag(id) OVER w AS prev, lead(id) OVER w AS next
      FROM chat_messages WINDOW w AS (PARTITION BY chat_id, parent_message_id ORDER BY seq)) s
WHERE s.id = m.id;

UPDATE chat_messages m SET children = k.n
FROM (SELECT parent_message_id AS id, count(*) AS n FROM chat_messages
      WHERE parent_message_id IS NOT NULL GROUP BY parent_message_id) k
WHERE k.id = m.id;

UPDATE chats c SET roots = r.n
FROM (SELECT chat_id, count(*) AS n FROM chat_messages
      WHERE parent_message_id IS NULL GROUP BY chat_id) r
WHERE r.chat_id = c.id;

-- The leaf: each chat's newest message; the path: its ancestors.
UPDATE chats c SET leaf_id = l.id
FROM (SELECT DISTINCT ON (chat_id) chat_id, id FROM chat_messages ORDER BY chat_id, seq DESC) l
WHERE l.chat_id = c.id;

WITH RECURSIVE up AS (
    SELECT m.id, m.parent_message_id FROM chats c JOIN chat_messages m ON m.id = c.leaf_id
    UNION ALL
    SELECT p.id, p.parent_message_id FROM chat_messages p JOIN up ON p.id = up.parent_message_id
)
UPDATE chat_messages m SET on_path = true FROM up WHERE up.id = m.id;

ALTER TABLE chat_messages
    ALTER COLUMN depth SET NOT NULL,
    ALTER COLUMN sibling_index SET NOT NULL,
    ADD CONSTRAINT chat_messages_depth_check
        CHECK (depth >= 0 AND sibling_index >= 1 AND siblings >= sibling_index);
-- No foreign key from parent_message_id: messages go with their chat (or
-- in batches when an organization or account is deleted), and a cascade
-- down a deep tree would nest one trigger per level.

ALTER TABLE chats
    ADD CONSTRAINT chats_leaf_fkey
        FOREIGN KEY (leaf_id) REFERENCES chat_messages (id) ON DELETE SET NULL;

-- The active path, in order, by one index range (and at most one message
-- per depth on it).
CREATE UNIQUE INDEX chat_messages_path_idx ON chat_messages (chat_id, depth) WHERE on_path;
-- A message's children (and the first messages: parent NULL) in order.
CREATE INDEX chat_messages_children_idx
    ON chat_messages (chat_id, parent_message_id, sibling_index);
