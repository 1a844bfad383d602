//! The outbox of the default mailer.

use super::Datastore;
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

db_row! {
    /// A stored e-mail.
    pub struct OutboxRow {
        pub id: Uuid = "id",
        pub to_address: String = "to_address",
        pub subject: String = "subject",
        pub body_text: String = "body_text",
        pub kind: String = "kind",
        pub created_at: DateTime<Utc> = "created_at",
    }
}

impl Datastore {
    /// Stores an e-mail; returns its outbox id. (The fields, not the
    /// mailer's `Email`: the data layer knows nothing of the mailer, which
    /// sits above it.)
    pub async fn email_outbox_insert(
        &self,
        to: &str,
        subject: &str,
        body_text: &str,
        kind: &str,
    ) -> Result<Uuid, Error> {
        let conn = self.conn().await?;
        let id = Uuid::new_v4();
        conn.execute(
            "INSERT INTO email_outbox (id, to_address, subject, body_text, kind) \
             VALUES ($1, $2, $3, $4, $5)",
            &[&id, &to, &subject, &body_text, &kind],
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
    ) -> Result<Vec<OutboxRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM email_outbox ORDER BY created_at DESC, id LIMIT $1",
                    OutboxRow::COLUMNS
                ),
                &[&limit],
            )
            .await?;
        Ok(rows.iter().map(OutboxRow::from_row).collect())
    }
}
