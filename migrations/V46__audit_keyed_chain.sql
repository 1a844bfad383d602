-- The audit chain keyed (issue #51, item 2). Rows written from now on are
-- chained with HMAC-SHA256 under a key of the server's key file (never in
-- the database), not with plain SHA-256: whoever can write the database
-- without the key file can no longer recompute the chain after changing,
-- adding or removing a row.
--
-- `keyed_from` is each chain's first keyed `seq`. Rows before it were
-- hashed by an earlier version with plain SHA-256 and are verified that
-- way; the server seals that prefix in the first signed checkpoint it
-- publishes outside the database (each checkpoint states the chain's
-- `keyed_from`, and `audit verify` takes it from the newest checkpoint,
-- so moving it in the database later changes nothing). Chains begun
-- after this migration are keyed from their first row (the default).
ALTER TABLE audit_chain_heads ADD COLUMN keyed_from bigint NOT NULL DEFAULT 1;
UPDATE audit_chain_heads SET keyed_from = seq + 1;
