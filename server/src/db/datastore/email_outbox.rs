//! The outbox of the default mailer.

use super::Datastore;
use crate::error::Error;
use crate::mailer::Email;
use uuid::Uuid;

impl Datastore {
    /// Stores an e-mail; returns its outbox id.
    pub async fn email_outbox_insert(&self, email: &Email) -> Result<Uuid, Error> {
        let conn = self.conn().await?;
        let id = Uuid::new_v4();
        conn.execute(
            "INSERT INTO email_outbox (id, to_address, subject, body_text, kind) \
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &id,
                &email.to,
                &email.subject,
                &email.body_text,
                &email.kind,
            ],
        )
        .await?;
        Ok(id)
    }

    /// The newest e-mails of the outbox (system administrators only: the
    /// `SystemAdmin` grant is the authority).
    pub async fn email_outbox_recent(
        &self,
        _admin: &crate::authz::SystemAdmin,
        limit: i64,
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                "SELECT id, to_address, subject, body_text, kind, created_at FROM email_outbox \
                 ORDER BY created_at DESC, id LIMIT $1",
                &[&limit],
            )
            .await?)
    }
}
