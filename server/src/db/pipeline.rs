//! Shared, pipelined connections for the short statements every request
//! runs (the authorization lookup, the caller's own account, the first
//! pages of the conversation list).
//!
//! A pooled connection ([`super::datastore::Conn`]) belongs to one request
//! at a time: its statement goes out, PostgreSQL wakes up, answers and
//! sleeps again, once per statement. These few connections are instead
//! shared by every request: `tokio-postgres` queues the statements of
//! concurrent requests on one connection and writes them together, and
//! PostgreSQL answers them back to back, so under load one write, one
//! wake-up and one read carry several requests' statements (measured with
//! `cargo xtask bench api`).
//!
//! A statement here waits for the ones queued before it on the same
//! connection, so only statements that PostgreSQL answers in microseconds
//! (index lookups returning a row or a few) may use it; anything else, and
//! every transaction, takes a pooled connection. Nothing session-scoped
//! (`SET`, session advisory locks, `LISTEN`) may run here.
//!
//! A connection that closes (the database restarted, the network broke) is
//! replaced on its next use; while the database is down the breaker of
//! [`super::health::DbHealth`] answers for it, as for the pool.

use super::health::DbHealth;
use crate::error::Error;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio_postgres_rustls::MakeRustlsConnect;

/// One shared connection and its prepared statements.
pub(crate) struct Shared {
    client: tokio_postgres::Client,
    statements: RwLock<HashMap<String, tokio_postgres::Statement>>,
}

impl std::ops::Deref for Shared {
    type Target = tokio_postgres::Client;
    fn deref(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

impl Shared {
    /// The statement for `sql`, prepared once on this connection.
    pub(crate) async fn prepare_cached(
        &self,
        sql: &str,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        if let Some(statement) = self
            .statements
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(sql)
        {
            return Ok(statement.clone());
        }
        // Two requests may prepare the same statement at once; the second
        // insert replaces an equivalent statement.
        let statement = self.client.prepare(sql).await?;
        self.statements
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

/// The shared connections, used in turn.
pub struct Pipelines {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    slots: Box<[Slot]>,
    next: AtomicUsize,
}

struct Slot {
    current: RwLock<Option<Arc<Shared>>>,
    /// Held while (re)connecting, so one request connects and the others
    /// wait for its connection.
    connecting: tokio::sync::Mutex<()>,
}

/// How long connecting may take (as for the pool's new connections).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Pipelines {
    /// `count` shared connections (at least one), opened on first use.
    pub fn new(config: tokio_postgres::Config, tls: MakeRustlsConnect, count: usize) -> Pipelines {
        let slots = (0..count.max(1))
            .map(|_| Slot {
                current: RwLock::new(None),
                connecting: tokio::sync::Mutex::new(()),
            })
            .collect();
        Pipelines {
            config,
            tls,
            slots,
            next: AtomicUsize::new(0),
        }
    }

    /// How many shared connections are open, and how many there may be.
    pub(crate) fn status(&self) -> (usize, usize) {
        let open = self.slots.iter().filter(|s| s.open().is_some()).count();
        (open, self.slots.len())
    }

    /// The next shared connection, connecting it if it is not open.
    pub(crate) async fn get(&self, health: &DbHealth) -> Result<Arc<Shared>, Error> {
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        if let Some(shared) = slot.open() {
            return Ok(shared);
        }
        let _connecting = slot.connecting.lock().await;
        if let Some(shared) = slot.open() {
            return Ok(shared);
        }
        if !health.admit(Instant::now()) {
            return Err(crate::error::database_unavailable(
                "database unavailable: waiting before reconnecting",
            ));
        }
        let connected =
            tokio::time::timeout(CONNECT_TIMEOUT, self.config.connect(self.tls.clone())).await;
        let (client, connection) = match connected {
            Ok(Ok(pair)) => pair,
            Ok(Err(error)) => {
                health.failed(Instant::now());
                return Err(crate::error::database_unavailable(format!(
                    "database unavailable: {}",
                    crate::error::chain(&error)
                )));
            }
            Err(_) => {
                health.failed(Instant::now());
                return Err(crate::error::database_unavailable(
                    "database unavailable: connecting timed out",
                ));
            }
        };
        health.succeeded(Instant::now());
        // The connection's I/O task; it ends when the connection closes,
        // and the slot then reconnects on its next use.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let shared = Arc::new(Shared {
            client,
            statements: RwLock::new(HashMap::new()),
        });
        *slot.current.write().unwrap_or_else(|p| p.into_inner()) = Some(shared.clone());
        Ok(shared)
    }
}

impl Slot {
    fn open(&self) -> Option<Arc<Shared>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|s| !s.client.is_closed())
            .cloned()
    }
}
