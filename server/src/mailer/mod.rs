//! Outgoing e-mail.
//!
//! Everything the server sends goes through the [`Mailer`] trait. With
//! `mail.smtp_url` configured it is [`SmtpMailer`] (lettre, over plain SMTP,
//! STARTTLS or implicit TLS); by default it is [`OutboxMailer`], which writes
//! each e-mail to the `email_outbox` table and logs a line (never the body,
//! which may hold a token), so nothing is lost and tests can read what was
//! sent.
//!
//! Callers send only after their database transaction committed, so a slow
//! or failing mail server never holds a transaction open.

mod outbox;
mod smtp;

pub use outbox::OutboxMailer;
pub use smtp::SmtpMailer;

use crate::config::MailConfig;
use crate::db::Datastore;
use std::sync::Arc;

/// One plain-text e-mail to one recipient.
#[derive(Clone, Debug)]
pub struct Email {
    pub to: String,
    pub subject: String,
    pub body_text: String,
    /// What the mail is about (`invitation`, `user_invite`), for the outbox
    /// and the log.
    pub kind: &'static str,
}

/// Why an e-mail could not be handed over.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MailError(pub String);

#[async_trait::async_trait]
pub trait Mailer: Send + Sync {
    /// Hands the e-mail over for delivery.
    async fn send(&self, email: &Email) -> Result<(), MailError>;
}

/// The mailer the configuration asks for.
pub fn from_config(
    config: &MailConfig,
    datastore: &Datastore,
    log: &slog::Logger,
) -> anyhow::Result<Arc<dyn Mailer>> {
    Ok(match &config.smtp_url {
        Some(url) => {
            slog::info!(log, "e-mail goes to the SMTP server";
                "server" => smtp::redacted(url));
            Arc::new(SmtpMailer::new(
                url,
                &config.from,
                std::time::Duration::from_secs(config.smtp_timeout_secs),
            )?)
        }
        None => {
            slog::info!(
                log,
                "no SMTP server configured: e-mail goes to the email_outbox table"
            );
            Arc::new(OutboxMailer::new(datastore.clone(), log.clone()))
        }
    })
}
