//! Authentication, rate limits of logins and signups, and the keys that
//! encrypt secrets at rest.

use anyhow::Result;
use serde::Deserialize;

/// Encryption keys for secrets at rest.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsConfig {
    /// `ID:BASE64` entries (ids 1 to 255, 32-byte keys). Every key opens
    /// what it sealed. Empty: the key file's (see `key_file`).
    pub keys: Vec<String>,
    /// The id of the key that seals new values (default: the highest).
    pub write_key: Option<u8>,
    /// The key file holding the keys the configuration leaves out (the
    /// token secret, the generated sealing key; see `keys.rs`). Default:
    /// `<data dir>/server.keys` with the embedded database (generated at
    /// the first start); none with `DATABASE_URL` (`workspace-server keys
    /// generate --file PATH` makes one). `WORKSPACE_KEY_FILE`.
    pub key_file: Option<std::path::PathBuf>,
    /// Whether a missing key file is generated at start: set by the server
    /// itself for the embedded database, never with `DATABASE_URL`.
    #[serde(skip)]
    pub generate_key_file: bool,
}

impl std::fmt::Debug for SecretsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsConfig")
            .field("keys", &format_args!("[{} redacted]", self.keys.len()))
            .field("write_key", &self.write_key)
            .field("key_file", &self.key_file)
            .finish()
    }
}

/// Secret keys by id, and the id of the writing key.
pub type SecretKeys = (Vec<(u8, [u8; 32])>, u8);

impl SecretsConfig {
    /// The configured keys, parsed, and the writing key id; `None` when no
    /// key is configured.
    pub fn parsed(&self) -> Result<Option<SecretKeys>> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let keys = self
            .keys
            .iter()
            .map(|k| crate::secrets::parse_key(k))
            .collect::<Result<Vec<_>>>()?;
        let write = match self.write_key {
            Some(id) => id,
            None => keys.iter().map(|(id, _)| *id).max().unwrap_or_default(),
        };
        Ok(Some((keys, write)))
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// HS256 signing secret for access tokens (at least 32 bytes). When
    /// unset, the key file's (see `secrets.key_file`), never the
    /// database's.
    pub jwt_secret: Option<String>,
    /// Access-token (JWT) lifetime in seconds (default 15 minutes).
    /// Clients get a new one with their refresh token
    /// (`POST /api/auth/refresh`); a revoked session's access tokens are
    /// refused at once whatever their lifetime.
    pub token_lifetime_secs: u64,
    /// Refresh-token lifetime in seconds (default 30 days). Each refresh
    /// issues a new refresh token with this lifetime, so a session ends
    /// after this long without a refresh (or when revoked).
    pub refresh_token_lifetime_secs: u64,
    /// How long a password-reset link works, in seconds (default one hour).
    pub password_reset_lifetime_secs: u64,
    /// Failed logins per e-mail address allowed within `login_window_secs`.
    pub login_max_failures: u32,
    /// Window of the failed-login limit, in seconds.
    pub login_window_secs: u64,
    /// E-mail addresses of system administrators (who manage the global
    /// permission catalog and organizations' feature gates).
    pub system_admins: Vec<String>,
    /// The first account to sign up on a database with no account yet
    /// becomes a system administrator. Default (unset): on with the
    /// embedded database (a fresh development install has someone to read
    /// the outbox and set feature gates), off with `DATABASE_URL` (a
    /// deployment names its administrators in `system_admins`).
    pub first_account_admin: Option<bool>,
    /// Password hashes (argon2id, 19 MiB each) computed at once. Default:
    /// the number of CPU cores.
    pub hash_concurrency: Option<usize>,
    /// Requests that may wait for a hashing slot; beyond that they are
    /// answered `503 server_busy` with `Retry-After` at once.
    pub hash_queue: usize,
    /// Longest wait for a hashing slot, in milliseconds (then `503`).
    pub hash_max_wait_ms: u64,
}

/// Request limits over a sliding window, per client address (the TCP
/// peer) and for all clients together; counted in PostgreSQL so that they
/// hold across instances. `0` disables a limit. Beyond a limit:
/// `429 rate_limited` with `Retry-After`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitsConfig {
    /// The window, in seconds.
    pub window_secs: u64,
    /// `POST /api/auth/login` per client address and window.
    pub login_per_address: u32,
    /// `POST /api/auth/login` for all clients, per window.
    pub login_global: u32,
    /// `POST /api/auth/signup` and `signup_invite` per client address.
    pub signup_per_address: u32,
    /// `POST /api/auth/signup` and `signup_invite` for all clients.
    pub signup_global: u32,
    /// `POST /api/auth/forgot_password` per client address and window.
    pub forgot_password_per_address: u32,
    /// `POST /api/auth/forgot_password` per e-mail address and hour
    /// (whether or not an account has that address).
    pub forgot_password_per_email: u32,
    /// `POST /api/auth/reset_password` per client address and window (a
    /// bound on guessing tokens, on top of their 256 random bits).
    pub reset_password_per_address: u32,
    /// `GET /api/shared` (reading a chat's share link) per client address
    /// and window (a bound on guessing tokens, on top of their 256 random
    /// bits).
    pub shared_chat_per_address: u32,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        RateLimitsConfig {
            window_secs: 60,
            login_per_address: 30,
            login_global: 1200,
            signup_per_address: 10,
            signup_global: 300,
            forgot_password_per_address: 10,
            forgot_password_per_email: 5,
            reset_password_per_address: 10,
            shared_chat_per_address: 60,
        }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            jwt_secret: None,
            token_lifetime_secs: 15 * 60,
            refresh_token_lifetime_secs: 30 * 24 * 3600,
            password_reset_lifetime_secs: 3600,
            login_max_failures: 5,
            login_window_secs: 15 * 60,
            system_admins: Vec::new(),
            first_account_admin: None,
            hash_concurrency: None,
            hash_queue: 64,
            hash_max_wait_ms: 10_000,
        }
    }
}

impl AuthConfig {
    /// The configured hashing concurrency, or the number of CPU cores.
    pub fn hash_concurrency(&self) -> usize {
        self.hash_concurrency.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        })
    }
}
