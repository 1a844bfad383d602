//! Data access, one module per resource.

pub mod agents;
pub mod conversations;
pub mod email_outbox;
pub mod files;
pub mod invitations;
pub mod kb;
pub mod login_failures;
pub mod models;
pub mod organizations;
pub mod roles;
pub mod secrets;
pub mod tools;
pub mod users;

use crate::error::Error;
use deadpool_postgres::Pool;

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
}

type Params<'a> = &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)];

/// Generates the statement-running methods shared by [`Conn`] and [`Tx`]:
/// each prepares its SQL once per connection (deadpool-postgres'
/// `prepare_cached`) and then only binds and executes, so PostgreSQL
/// neither parses nor plans a statement again on that connection.
macro_rules! cached_statements {
    ($inner:ident) => {
        /// Runs a statement and returns its rows.
        pub async fn query(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
            let statement = self.$inner.prepare_cached(sql).await?;
            self.$inner.query(&statement, params).await
        }

        /// Runs a statement that returns exactly one row.
        pub async fn query_one(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
            let statement = self.$inner.prepare_cached(sql).await?;
            self.$inner.query_one(&statement, params).await
        }

        /// Runs a statement that returns at most one row.
        pub async fn query_opt(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
            let statement = self.$inner.prepare_cached(sql).await?;
            self.$inner.query_opt(&statement, params).await
        }

        /// Runs a statement and returns the number of rows it changed.
        pub async fn execute(
            &self,
            sql: &str,
            params: Params<'_>,
        ) -> Result<u64, tokio_postgres::Error> {
            let statement = self.$inner.prepare_cached(sql).await?;
            self.$inner.execute(&statement, params).await
        }
    };
}

/// A pooled connection. Every statement goes through its per-connection
/// statement cache; this type is the only way the datastore reaches the
/// database.
pub(crate) struct Conn {
    client: deadpool_postgres::Object,
}

impl Conn {
    cached_statements!(client);

    /// Starts a transaction (rolled back when dropped without `commit`).
    pub async fn transaction(&mut self) -> Result<Tx<'_>, tokio_postgres::Error> {
        Ok(Tx {
            tx: self.client.transaction().await?,
        })
    }

    /// Starts a read-only, repeatable-read transaction: every statement in
    /// it sees the same snapshot (a page and its total agree).
    pub async fn snapshot(&mut self) -> Result<Tx<'_>, tokio_postgres::Error> {
        Ok(Tx {
            tx: self
                .client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?,
        })
    }
}

/// A transaction on a [`Conn`], with the same cached statements.
pub(crate) struct Tx<'a> {
    tx: deadpool_postgres::Transaction<'a>,
}

impl Tx<'_> {
    cached_statements!(tx);

    pub async fn commit(self) -> Result<(), tokio_postgres::Error> {
        self.tx.commit().await
    }
}

impl Datastore {
    pub fn new(pool: Pool) -> Datastore {
        Datastore { pool }
    }

    pub(crate) async fn conn(&self) -> Result<Conn, Error> {
        Ok(Conn {
            client: self.pool.get().await?,
        })
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.query_one("SELECT 1", &[]).await?;
        Ok(())
    }
}
