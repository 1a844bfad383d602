-- The planner's view of a chat's active path (issue #35). Rows of one
-- chat and `on_path` are correlated: a big chat's path is a small part of
-- its messages, while most rows of the table (short chats) are on their
-- path. Without statistics on the pair the planner multiplies the two
-- selectivities and expects a 10,000-message chat's 1,000-message path to
-- be 9,600 rows: it then sorts a bitmap scan, in parallel workers, instead
-- of reading the path index (chat_id, depth) in order. The most common
-- (chat_id, on_path) pairs are exactly the big chats whose plans matter.
CREATE STATISTICS chat_messages_path_stats (mcv) ON chat_id, on_path FROM chat_messages;
ANALYZE chat_messages;
