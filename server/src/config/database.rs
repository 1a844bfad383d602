//! The database: an external PostgreSQL or the embedded one, the pool.

use serde::Deserialize;
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// PostgreSQL URL. When unset the server runs a private cluster under
    /// `data_dir` (see `workspace-embedded-db`).
    pub url: Option<String>,
    /// Connections in the pool.
    pub pool_size: usize,
    /// The longest wait for a free pooled connection, in milliseconds;
    /// then the request is answered `503 server_busy` with `Retry-After`
    /// (the database answers; this instance has more work than
    /// connections).
    pub pool_wait_ms: u64,
    /// Shared, pipelined connections for the short statements every
    /// request runs (the authorization lookup), besides the pool; `0`: one
    /// per two CPUs, 1 to 4. Fewer connections carry bigger pipelined
    /// batches: on 2 CPUs, one connection served `users/me` about 30 %
    /// faster than two, and four were slower still.
    pub shared_connections: usize,
    /// Where the embedded cluster and its binaries live when `url` is unset
    /// (default: `WORKSPACE_DATA_DIR`, else `/var/lib/workspace` as root,
    /// else `~/.local/share/workspace`).
    pub data_dir: Option<PathBuf>,
    /// PEM file of extra CA certificates that database server certificates
    /// may chain to (e.g. a managed database's CA bundle); the system's
    /// roots are always trusted. TLS itself follows the URL's `sslmode`.
    pub ca_file: Option<PathBuf>,
    /// After a failed connection attempt, the first wait before the next
    /// one, in milliseconds; doubles per failure (jittered), up to
    /// `reconnect_backoff_max_ms`. Meanwhile requests that need the
    /// database fail fast with `503 database_unavailable`.
    pub reconnect_backoff_initial_ms: u64,
    /// The longest wait between connection attempts, in milliseconds.
    pub reconnect_backoff_max_ms: u64,
}

impl DatabaseConfig {
    /// `shared_connections`, with `0` resolved.
    pub fn shared_connections(&self) -> usize {
        match self.shared_connections {
            0 => std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4)),
            n => n,
        }
    }

    pub fn backoff(&self) -> crate::db::health::Backoff {
        crate::db::health::Backoff {
            initial: std::time::Duration::from_millis(self.reconnect_backoff_initial_ms),
            max: std::time::Duration::from_millis(self.reconnect_backoff_max_ms),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: None,
            pool_size: 16,
            pool_wait_ms: 10_000,
            shared_connections: 0,
            data_dir: None,
            ca_file: None,
            reconnect_backoff_initial_ms: 100,
            reconnect_backoff_max_ms: 2000,
        }
    }
}
