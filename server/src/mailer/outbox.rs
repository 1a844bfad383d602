//! The default mailer: the `email_outbox` table plus a log line.

use super::{Email, MailError, Mailer};
use crate::db::Datastore;

pub struct OutboxMailer {
    datastore: Datastore,
    log: slog::Logger,
}

impl OutboxMailer {
    pub fn new(datastore: Datastore, log: slog::Logger) -> OutboxMailer {
        OutboxMailer { datastore, log }
    }
}

#[async_trait::async_trait]
impl Mailer for OutboxMailer {
    async fn send(&self, email: &Email) -> Result<(), MailError> {
        let id = self
            .datastore
            .email_outbox_insert(&email.to, &email.subject, &email.body_text, email.kind)
            .await
            .map_err(|e| MailError(format!("writing the outbox: {e}")))?;
        // The body can hold a token: it stays in the table, out of the log.
        slog::info!(self.log, "e-mail written to the outbox";
            "outbox_id" => id.to_string(),
            "kind" => email.kind,
            "to" => &email.to,
            "subject" => &email.subject);
        Ok(())
    }
}
