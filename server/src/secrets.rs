//! Secrets at rest: authenticated encryption (XChaCha20-Poly1305) with a
//! server key, for values the server must read back later (invitation
//! tokens today; provider keys, object-store credentials and OAuth tokens
//! in the areas to come). Values only ever *compared* (passwords, API keys)
//! are hashed instead, never stored here.
//!
//! A sealed value is `version (1) ‖ key id (1) ‖ nonce (24) ‖ ciphertext ‖
//! tag (16)`. The caller binds it to its row with associated data (e.g.
//! `invitation:<id>`), so a ciphertext copied into another row does not
//! open. Several keys can be configured: every one of them opens what it
//! sealed (the key id says which), and one (the writing key) seals. To
//! rotate: add a new key, make it the writing key, and keep the old ones
//! until nothing sealed with them is left.
//!
//! Keys come from `secrets.keys` / `WORKSPACE_SECRET_KEYS` (`ID:BASE64`
//! entries, 32-byte keys, ids 1 to 255) and `secrets.write_key` /
//! `WORKSPACE_SECRET_WRITE_KEY` (default: the highest id), and from the
//! key file (see [`crate::keys`]), where key 0 is the generated one. Never
//! from the database: whoever reads it must not hold the keys too.

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use std::collections::BTreeMap;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 24;
const HEADER_LEN: usize = 2 + NONCE_LEN;
/// The id of the generated key (configured keys use 1 to 255).
pub const GENERATED_KEY_ID: u8 = 0;

/// Why a sealed value did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("the sealed value is malformed")]
    Malformed,
    #[error("no key with id {0} is configured")]
    UnknownKey(u8),
    #[error("the sealed value does not authenticate (wrong key or associated data)")]
    Inauthentic,
}

/// The server's encryption keys.
#[derive(Clone)]
pub struct Secrets {
    keys: BTreeMap<u8, XChaCha20Poly1305>,
    write_key: u8,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("key_ids", &self.keys.keys().collect::<Vec<_>>())
            .field("write_key", &self.write_key)
            .finish()
    }
}

/// Parses one `ID:BASE64` key entry.
pub fn parse_key(entry: &str) -> anyhow::Result<(u8, [u8; 32])> {
    let (id, key) = entry
        .trim()
        .split_once(':')
        .ok_or_else(|| anyhow::anyhow!("a secret key is `ID:BASE64` (ID 1 to 255)"))?;
    let id: u8 = id
        .trim()
        .parse()
        .ok()
        .filter(|id| *id != GENERATED_KEY_ID)
        .ok_or_else(|| anyhow::anyhow!("a secret key id is 1 to 255"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key.trim())
        .map_err(|_| anyhow::anyhow!("secret key {id} is not valid base64"))?;
    let key: [u8; 32] = bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("secret key {id} must be 32 bytes"))?;
    Ok((id, key))
}

impl Secrets {
    /// Keys by id, sealing with `write_key` (which must be among them).
    pub fn new(keys: &[(u8, [u8; 32])], write_key: u8) -> anyhow::Result<Secrets> {
        let keys: BTreeMap<u8, XChaCha20Poly1305> = keys
            .iter()
            .map(|(id, key)| (*id, XChaCha20Poly1305::new(&(*key).into())))
            .collect();
        if !keys.contains_key(&write_key) {
            anyhow::bail!("the writing secret key {write_key} is not among the configured keys");
        }
        Ok(Secrets { keys, write_key })
    }

    /// Seals `plaintext`, bound to `associated_data`.
    pub fn seal(&self, plaintext: &[u8], associated_data: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::fill(&mut nonce);
        let cipher = &self.keys[&self.write_key];
        let sealed = cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad: associated_data,
                },
            )
            // Only fails for messages beyond 256 GiB.
            .unwrap_or_default();
        let mut out = Vec::with_capacity(HEADER_LEN + sealed.len());
        out.push(VERSION);
        out.push(self.write_key);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// Opens a value sealed with any configured key.
    pub fn open(&self, sealed: &[u8], associated_data: &[u8]) -> Result<Vec<u8>, OpenError> {
        if sealed.len() < HEADER_LEN + 16 || sealed[0] != VERSION {
            return Err(OpenError::Malformed);
        }
        let key_id = sealed[1];
        let cipher = self
            .keys
            .get(&key_id)
            .ok_or(OpenError::UnknownKey(key_id))?;
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&sealed[2..HEADER_LEN]);
        cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &sealed[HEADER_LEN..],
                    aad: associated_data,
                },
            )
            .map_err(|_| OpenError::Inauthentic)
    }

    /// The id of the key that seals.
    pub fn write_key(&self) -> u8 {
        self.write_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> [u8; 32] {
        [byte; 32]
    }

    #[test]
    fn seal_and_open() {
        let s = Secrets::new(&[(1, key(1))], 1).unwrap();
        let sealed = s.seal(b"token", b"invitation:1");
        assert_eq!(sealed[0], VERSION);
        assert_eq!(sealed[1], 1);
        assert!(!sealed.windows(5).any(|w| w == b"token"));
        assert_eq!(s.open(&sealed, b"invitation:1").unwrap(), b"token");
        // Two seals of one value differ (random nonces).
        assert_ne!(s.seal(b"token", b"a"), s.seal(b"token", b"a"));
    }

    #[test]
    fn associated_data_binds_the_row() {
        let s = Secrets::new(&[(1, key(1))], 1).unwrap();
        let sealed = s.seal(b"token", b"invitation:1");
        assert!(matches!(
            s.open(&sealed, b"invitation:2"),
            Err(OpenError::Inauthentic)
        ));
    }

    #[test]
    fn tampering_is_detected() {
        let s = Secrets::new(&[(1, key(1))], 1).unwrap();
        let mut sealed = s.seal(b"token", b"x");
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert!(matches!(s.open(&sealed, b"x"), Err(OpenError::Inauthentic)));
        assert!(matches!(
            s.open(&sealed[..10], b"x"),
            Err(OpenError::Malformed)
        ));
    }

    #[test]
    fn rotation_reads_old_keys_and_writes_the_new_one() {
        let old = Secrets::new(&[(1, key(1))], 1).unwrap();
        let sealed_old = old.seal(b"old", b"x");
        let rotated = Secrets::new(&[(1, key(1)), (2, key(2))], 2).unwrap();
        assert_eq!(rotated.open(&sealed_old, b"x").unwrap(), b"old");
        let sealed_new = rotated.seal(b"new", b"x");
        assert_eq!(sealed_new[1], 2);
        assert!(matches!(
            old.open(&sealed_new, b"x"),
            Err(OpenError::UnknownKey(2))
        ));
        // A different key under the same id does not open it.
        let impostor = Secrets::new(&[(2, key(9))], 2).unwrap();
        assert!(matches!(
            impostor.open(&sealed_new, b"x"),
            Err(OpenError::Inauthentic)
        ));
    }

    #[test]
    fn key_entries() {
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(parse_key(&format!("3:{b64}")).unwrap(), (3, [7u8; 32]));
        assert!(parse_key(&format!("0:{b64}")).is_err());
        assert!(parse_key(&format!("256:{b64}")).is_err());
        assert!(parse_key("1:short").is_err());
        assert!(parse_key(&b64).is_err());
        assert!(Secrets::new(&[(1, key(1))], 2).is_err());
    }
}
