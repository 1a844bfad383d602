-- Reading a chat (issue #35) fetches the caller's ratings of its messages
-- with a statement of its own, pipelined beside the active path, instead
-- of joining every path row to the feedback: five mostly empty columns on
-- each of a long path's rows cost a fifth of the read. This index finds
-- one person's ratings in one chat; it also serves what the index on
-- `user_id` alone served (the cascade from an account, its deletion's
-- batches), which it replaces.
CREATE INDEX message_feedback_user_chat_idx ON message_feedback (user_id, chat_id);
DROP INDEX message_feedback_user_idx;
