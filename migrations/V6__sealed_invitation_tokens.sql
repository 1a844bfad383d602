-- Invitation tokens, sealed (XChaCha20-Poly1305 with a server key, bound to
-- the invitation id; see server/src/secrets.rs) so that `invitations/get`
-- can show the token and `resend` can send the same link again, as the
-- spec's state table says. Look-ups still go by `token_hash` (SHA-256).
-- NULL for invitations created before this migration: their token was
-- never stored and cannot be shown.
ALTER TABLE invitations ADD COLUMN token_sealed bytea;
