//! Data access, one module per resource.

pub mod account_export;
pub mod agents;
pub mod audit;
pub mod chat;
pub mod chat_folders;
pub mod chat_search;
pub mod chat_shares;
pub mod chat_transfer;
pub mod conversations;
pub mod deletion;
pub mod deployments;
pub mod email_outbox;
pub mod feedback;
pub mod files;
pub mod invitations;
pub mod kb;
pub mod kb_jobs;
pub mod login_failures;
pub mod mcp;
pub mod model_deployments;
pub mod models;
pub mod organizations;
pub mod password_resets;
pub mod rate_limits;
pub mod roles;
pub mod scim;
pub mod secrets;
pub mod service_accounts;
pub mod sessions;
pub mod sso;
pub mod streams;
pub mod tokens;
pub mod tools;
pub mod usage;
pub mod users;
pub mod webhook_outbox;
pub mod webhooks;

use crate::db::health::DbHealth;
use crate::db::pipeline::{Pipelines, Shared};
use crate::error::Error;
use deadpool_postgres::Pool;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// One page of a list: `LIMIT` and `OFFSET` (the app layer validates
/// them against each list's bounds).
#[derive(Clone, Copy, Debug)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}

/// SQLSTATE of a unique violation.
pub(crate) fn is_unique_violation(error: &tokio_postgres::Error, constraint: &str) -> bool {
    error.as_db_error().is_some_and(|db| {
        db.code() == &tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db.constraint() == Some(constraint)
    })
}

/// The handle to the database that every app module uses.
#[derive(Clone)]
pub struct Datastore {
    pool: Pool,
    /// Shared connections for the statements every request runs.
    pipelines: Arc<Pipelines>,
    health: Arc<DbHealth>,
}

type Params<'a> = &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)];

/// Generates the statement-running methods shared by [`Conn`] and [`Tx`]:
/// each prepares its SQL once per connection (deadpool-postgres'
/// `prepare_cached`) and then only binds and executes, so PostgreSQL
/// neither parses nor plans a statement again on that connection.
macro_rules! cached_statements {
    ($inner:ident) => {
        /// Tells the breaker about a failed statement.
        fn seen(&self, error: tokio_postgres::Error) -> tokio_postgres::Error {
            self.health.observe(&error);
            error
        }

        /// The statement for `sql`, prepared once per connection.
        async fn prepare(
            &self,
            sql: &str,
        ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
            self.$inner
                .prepare_cached(sql)
                .await
                .map_err(|e| self.seen(e))
        }

        /// Runs a statement and returns its rows.
        pub async fn query(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
            // The statement's span (while tracing is on), ended with it.
            let _span = crate::telemetry::statement(sql);
            let statement = self.prepare(sql).await?;
            self.$inner
                .query(&statement, params)
                .await
                .map_err(|e| self.seen(e))
        }

        /// Runs a statement that returns exactly one row.
        pub async fn query_one(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
            // The statement's span (while tracing is on), ended with it.
            let _span = crate::telemetry::statement(sql);
            let statement = self.prepare(sql).await?;
            self.$inner
                .query_one(&statement, params)
                .await
                .map_err(|e| self.seen(e))
        }

        /// Runs a statement that returns at most one row.
        pub async fn query_opt(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
            // The statement's span (while tracing is on), ended with it.
            let _span = crate::telemetry::statement(sql);
            let statement = self.prepare(sql).await?;
            self.$inner
                .query_opt(&statement, params)
                .await
                .map_err(|e| self.seen(e))
        }

        /// Runs `statements` in order, sent together (one round trip once
        /// they are prepared), and returns each one's rows; or the first error
        /// in statement order (a statement after a failed one fails too: the
        /// transaction is aborted, so the first error is the cause). For
        /// statements that do not need an earlier one's answer to be written:
        /// the caller looks at the rows in order, and returning an error rolls
        /// the whole transaction back.
        pub async fn pipeline<const N: usize>(
            &self,
            statements: [(&str, Params<'_>); N],
        ) -> Result<[Vec<tokio_postgres::Row>; N], tokio_postgres::Error> {
            // One span for the pipeline (while tracing is on), named by its
            // first statement.
            let _span = statements
                .first()
                .and_then(|(sql, _)| crate::telemetry::statement(sql));
            // All prepared before any is sent, so that they are sent in this
            // order (`join_all` polls them in order; each is sent at its first
            // poll).
            let mut prepared = Vec::with_capacity(N);
            for (sql, _) in &statements {
                prepared.push(self.prepare(sql).await?);
            }
            let answers = futures::future::join_all(
                prepared
                    .iter()
                    .zip(&statements)
                    .map(|(statement, (_, params))| self.$inner.query(statement, params)),
            )
            .await;
            let mut rows: [Vec<tokio_postgres::Row>; N] = std::array::from_fn(|_| Vec::new());
            for (slot, answer) in rows.iter_mut().zip(answers) {
                *slot = answer.map_err(|e| self.seen(e))?;
            }
            Ok(rows)
        }

        /// Runs a statement and returns the number of rows it changed.
        pub async fn execute(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<u64, tokio_postgres::Error> {
            // The statement's span (while tracing is on), ended with it.
            let _span = crate::telemetry::statement(sql);
            let statement = self.prepare(sql).await?;
            self.$inner
                .execute(&statement, params)
                .await
                .map_err(|e| self.seen(e))
        }
    };
}

/// A pooled connection. Every statement goes through its per-connection
/// statement cache; this type is the only way the datastore reaches the
/// database.
pub(crate) struct Conn {
    client: deadpool_postgres::Object,
    health: Arc<DbHealth>,
}

impl Conn {
    cached_statements!(client);

    /// Starts a transaction (rolled back when dropped without `commit`).
    pub async fn transaction(&mut self) -> Result<Tx<'_>, tokio_postgres::Error> {
        let health = &self.health;
        let tx = self
            .client
            .transaction()
            .await
            .inspect_err(|e| health.observe(e))?;
        Ok(Tx { tx, health })
    }

    /// Starts a read-only, repeatable-read transaction: every statement in
    /// it sees the same snapshot (a page and its total agree).
    pub async fn snapshot(&mut self) -> Result<Tx<'_>, tokio_postgres::Error> {
        let health = &self.health;
        let tx = self
            .client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .inspect_err(|e| health.observe(e))?;
        Ok(Tx { tx, health })
    }
}

/// A shared, pipelined connection (see [`crate::db::pipeline`]), for a
/// statement PostgreSQL answers in microseconds.
pub(crate) struct Quick {
    shared: Arc<Shared>,
    health: Arc<DbHealth>,
}

// Not every statement method is used through a shared connection yet.
#[allow(dead_code)]
impl Quick {
    cached_statements!(shared);

    /// Runs the statements of `batch` in order, sent together with one
    /// `Sync` (one round trip, one implicit transaction: see
    /// `vendor/tokio-postgres/PATCHES.md`); each statement's rows.
    pub(crate) async fn query_batch(
        &self,
        batch: tokio_postgres::Batch,
    ) -> Result<Vec<Vec<tokio_postgres::Row>>, tokio_postgres::BatchError> {
        self.shared.query_batch(batch).await.inspect_err(|e| {
            self.health.observe(&e.error);
        })
    }
}

/// A transaction on a [`Conn`], with the same cached statements.
pub(crate) struct Tx<'a> {
    tx: deadpool_postgres::Transaction<'a>,
    health: &'a DbHealth,
}

impl Tx<'_> {
    cached_statements!(tx);

    /// Runs `first`, then `sql`, sent together (pipelined: one round
    /// trip for both once they are prepared); the rows of `sql`.
    pub async fn query_after(
        &self,
        first: &str,
        first_params: Params<'_>,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        // Both prepared before either is sent, so that they are sent
        // in this order.
        let (before, statement) = (self.prepare(first).await?, self.prepare(sql).await?);
        let (done, rows) = tokio::join!(
            self.tx.execute(&before, first_params),
            self.tx.query(&statement, params)
        );
        done.map_err(|e| self.seen(e))?;
        rows.map_err(|e| self.seen(e))
    }

    /// Ends a transaction that only read: rolled back, which costs no
    /// round trip (the `ROLLBACK` is sent as the connection goes back to
    /// the pool, ahead of its next statement).
    pub fn end_read(self) {
        drop(self.tx);
    }

    pub async fn commit(self) -> Result<(), tokio_postgres::Error> {
        let health = self.health;
        self.tx.commit().await.inspect_err(|e| health.observe(e))
    }
}

impl Datastore {
    /// The datastore on `pool` and the shared connections `pipelines`.
    pub fn new(pool: Pool, pipelines: Pipelines, backoff: crate::db::health::Backoff) -> Datastore {
        Datastore {
            pool,
            pipelines: Arc::new(pipelines),
            health: Arc::new(DbHealth::new(backoff)),
        }
    }

    /// The database's availability, as this instance sees it.
    pub fn health(&self) -> &DbHealth {
        &self.health
    }

    /// The pool's size and idle connections.
    pub fn pool_status(&self) -> deadpool_postgres::Status {
        self.pool.status()
    }

    /// A pooled connection. While the database is known to be down (see
    /// [`DbHealth`]) this fails fast with `503 database_unavailable`,
    /// without a connection attempt.
    pub(crate) async fn conn(&self) -> Result<Conn, Error> {
        use deadpool_postgres::{PoolError, TimeoutType};
        if !self.health.admit(Instant::now()) {
            return Err(crate::error::database_unavailable(
                "database unavailable: waiting before reconnecting",
            ));
        }
        match self.pool.get().await {
            Ok(client) => {
                self.health.succeeded(Instant::now());
                Ok(Conn {
                    client,
                    health: self.health.clone(),
                })
            }
            // Every connection stayed in use for the pool's whole wait: the
            // database answers, this instance has more work than
            // connections. Said honestly, with when to retry.
            Err(PoolError::Timeout(TimeoutType::Wait)) => {
                self.health.pool_exhausted.fetch_add(1, Ordering::Relaxed);
                Err(Error::Busy {
                    code: "server_busy",
                    message: "the server is busy (every database connection is in use); \
                              retry shortly"
                        .to_string(),
                    retry_after_secs: 1,
                })
            }
            Err(error) => {
                // Failing to connect says the database is unreachable.
                self.health.failed(Instant::now());
                Err(error.into())
            }
        }
    }

    /// The shared, pipelined connections: how many are open, and how many
    /// there may be.
    pub fn shared_connections(&self) -> (usize, usize) {
        self.pipelines.status()
    }

    /// A shared, pipelined connection, for one of the short statements
    /// every request runs (see [`crate::db::pipeline`]): no pool checkout,
    /// and under load one round trip carries several requests' statements.
    pub(crate) async fn quick(&self) -> Result<Quick, Error> {
        Ok(Quick {
            shared: self.pipelines.get(&self.health).await?,
            health: self.health.clone(),
        })
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.query_one("SELECT 1", &[]).await?;
        Ok(())
    }
}
