//! Outgoing e-mail and logging.

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MailConfig {
    /// SMTP server as a URL: `smtp://[user:password@]host[:port]` (plain,
    /// upgraded with STARTTLS when `?tls=required` or
    /// `?tls=opportunistic`) or `smtps://...` (implicit TLS). When unset,
    /// e-mails go to the `email_outbox` table (and a log line) instead.
    pub smtp_url: Option<String>,
    /// The `From` header of every e-mail.
    pub from: String,
    /// The frontend's base URL; acceptance links are
    /// `{public_url}/invite/accept?token=...`.
    pub public_url: String,
    /// Give up on an SMTP exchange after this many seconds.
    pub smtp_timeout_secs: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// trace, debug, info, warn, error or critical.
    pub level: String,
}

impl Default for MailConfig {
    fn default() -> Self {
        MailConfig {
            smtp_url: None,
            from: "Workspace <no-reply@localhost>".to_string(),
            public_url: "http://localhost:3000".to_string(),
            smtp_timeout_secs: 10,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".to_string(),
        }
    }
}
