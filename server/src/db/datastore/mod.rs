//! Data access, one module per resource.

pub mod conversations;
pub mod email_outbox;
pub mod invitations;
pub mod login_failures;
pub mod models;
pub mod organizations;
pub mod roles;
pub mod secrets;
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

impl Datastore {
    pub fn new(pool: Pool) -> Datastore {
        Datastore { pool }
    }

    pub(crate) async fn conn(&self) -> Result<deadpool_postgres::Object, Error> {
        Ok(self.pool.get().await?)
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.query_one("SELECT 1", &[]).await?;
        Ok(())
    }
}
