//! Delivery over SMTP with lettre.

use super::{Email, MailError, Mailer};
use anyhow::Context;
use lettre::message::{Mailbox, header::ContentType};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::time::Duration;

pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl SmtpMailer {
    /// `url`: `smtp://[user:password@]host[:port][?tls=required|opportunistic]`
    /// or `smtps://...` (see lettre's `from_url`).
    pub fn new(url: &str, from: &str, timeout: Duration) -> anyhow::Result<SmtpMailer> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .with_context(|| format!("mail.smtp_url {}", redacted(url)))?
            .timeout(Some(timeout))
            .build();
        let from = from
            .parse()
            .with_context(|| format!("mail.from {from:?}"))?;
        Ok(SmtpMailer { transport, from })
    }
}

/// The URL without its credentials, for logs and errors.
pub fn redacted(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://***@{}", &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[async_trait::async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, email: &Email) -> Result<(), MailError> {
        let to: Mailbox = email
            .to
            .parse()
            .map_err(|e| MailError(format!("recipient {:?}: {e}", email.to)))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(email.subject.clone())
            .header(ContentType::TEXT_PLAIN)
            .body(email.body_text.clone())
            .map_err(|e| MailError(format!("building the message: {e}")))?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| MailError(format!("SMTP delivery: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redacted("smtp://user:secret@mail.example:587?tls=required"),
            "smtp://***@mail.example:587?tls=required"
        );
        assert_eq!(redacted("smtp://127.0.0.1:25"), "smtp://127.0.0.1:25");
    }
}
