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
    /// `{public_url}/invite/accept?token=...`, password-reset links
    /// `{public_url}/reset-password?token=...` and chat share links
    /// `{public_url}/share/<token>`. Unset: this server's own address (the
    /// one it bound; `localhost` for an unspecified IP such as `0.0.0.0`),
    /// where the server serves small pages for all three itself.
    pub public_url: Option<String>,
    /// Give up on an SMTP exchange after this many seconds.
    pub smtp_timeout_secs: u64,
    /// The address the server bound, once it has (the default of
    /// `public_url`).
    #[serde(skip)]
    bound_url: std::sync::Arc<std::sync::OnceLock<String>>,
}

impl MailConfig {
    /// The base of the links in e-mails, without a trailing `/`:
    /// `public_url`, else this server's own address.
    pub fn link_base(&self) -> String {
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => self
                .bound_url
                .get()
                .cloned()
                .unwrap_or_else(|| "http://127.0.0.1:8080".to_string()),
        }
    }

    /// Records the address the server bound (shared by every clone of the
    /// configuration; the first call wins).
    pub fn set_bound_address(&self, addr: std::net::SocketAddr) {
        let host = match addr.ip() {
            ip if ip.is_unspecified() => "localhost".to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        let _ = self.bound_url.set(format!("http://{host}:{}", addr.port()));
    }
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
            public_url: None,
            smtp_timeout_secs: 10,
            bound_url: Default::default(),
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

#[cfg(test)]
mod tests {
    use super::MailConfig;

    #[test]
    fn links_default_to_the_bound_address() {
        let mail = MailConfig::default();
        mail.set_bound_address("127.0.0.1:41234".parse().unwrap());
        assert_eq!(mail.link_base(), "http://127.0.0.1:41234");
        let any = MailConfig::default();
        any.set_bound_address("0.0.0.0:8080".parse().unwrap());
        assert_eq!(any.clone().link_base(), "http://localhost:8080");
        let v6 = MailConfig::default();
        v6.set_bound_address("[::1]:8080".parse().unwrap());
        assert_eq!(v6.link_base(), "http://[::1]:8080");
        let set = MailConfig {
            public_url: Some("https://app.example.com/".into()),
            ..MailConfig::default()
        };
        set.set_bound_address("127.0.0.1:1".parse().unwrap());
        assert_eq!(set.link_base(), "https://app.example.com");
    }
}
