//! Server configuration: a TOML file (optional) plus environment overrides.
//!
//! Precedence, lowest first: built-in defaults, the file named by
//! `--config` or `WORKSPACE_CONFIG`, environment variables, command-line
//! flags. See `workspace.example.toml` for every key.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server listens on.
    pub bind_address: SocketAddr,
    /// Largest accepted request body, in bytes.
    pub request_body_max_bytes: usize,
    pub database: DatabaseConfig,
    pub auth: AuthConfig,
    pub features: FeatureDefaults,
    pub mail: MailConfig,
    pub log: LogConfig,
}

/// Feature gates and quotas of organizations without overrides of their
/// own (see `PUT /api/org/features`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeatureDefaults {
    pub team_members: bool,
    pub file_upload: bool,
    pub chat_uploads: bool,
    pub mcp_sessions: u32,
    pub daily_chat_limit: u32,
}

impl Default for FeatureDefaults {
    fn default() -> Self {
        FeatureDefaults {
            team_members: true,
            file_upload: true,
            chat_uploads: true,
            mcp_sessions: 10,
            daily_chat_limit: 1000,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// PostgreSQL URL. When unset the server runs a private cluster under
    /// `data_dir` (see `workspace-embedded-db`).
    pub url: Option<String>,
    /// Connections in the pool.
    pub pool_size: usize,
    /// Where the embedded cluster and its binaries live when `url` is unset
    /// (default: `WORKSPACE_DATA_DIR`, else `/var/lib/workspace` as root,
    /// else `~/.local/share/workspace`).
    pub data_dir: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// HS256 signing secret for access tokens (at least 32 bytes). When
    /// unset, a random secret is generated once and kept in the database so
    /// that every instance shares it.
    pub jwt_secret: Option<String>,
    /// Access token lifetime in seconds.
    pub token_lifetime_secs: u64,
    /// Failed logins per e-mail address allowed within `login_window_secs`.
    pub login_max_failures: u32,
    /// Window of the failed-login limit, in seconds.
    pub login_window_secs: u64,
    /// E-mail addresses of system administrators (who manage the global
    /// permission catalog and organizations' feature gates).
    pub system_admins: Vec<String>,
}

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

impl Default for Config {
    fn default() -> Self {
        Config {
            bind_address: "127.0.0.1:8080".parse().expect("valid default address"),
            request_body_max_bytes: 1024 * 1024,
            database: DatabaseConfig::default(),
            auth: AuthConfig::default(),
            features: FeatureDefaults::default(),
            mail: MailConfig::default(),
            log: LogConfig::default(),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: None,
            pool_size: 16,
            data_dir: None,
        }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            jwt_secret: None,
            token_lifetime_secs: 3600,
            login_max_failures: 5,
            login_window_secs: 15 * 60,
            system_admins: Vec::new(),
        }
    }
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

impl Config {
    /// Reads the file (if any), then applies environment overrides.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        let path = path
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("WORKSPACE_CONFIG").map(PathBuf::from));
        let mut config = match path {
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => Config::default(),
        };
        config.apply_env(|name| std::env::var(name).ok())?;
        config.validate()?;
        Ok(config)
    }

    /// Applies the environment overrides, read through `get`.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(url) = get("DATABASE_URL").filter(|v| !v.is_empty()) {
            self.database.url = Some(url);
        }
        if let Some(addr) = get("BIND_ADDRESS").filter(|v| !v.is_empty()) {
            self.bind_address = addr
                .parse()
                .with_context(|| format!("BIND_ADDRESS {addr:?}"))?;
        }
        if let Some(secret) = get("WORKSPACE_JWT_SECRET").filter(|v| !v.is_empty()) {
            self.auth.jwt_secret = Some(secret);
        }
        if let Some(secs) = get("WORKSPACE_TOKEN_LIFETIME_SECS").filter(|v| !v.is_empty()) {
            self.auth.token_lifetime_secs = secs
                .parse()
                .with_context(|| format!("WORKSPACE_TOKEN_LIFETIME_SECS {secs:?}"))?;
        }
        if let Some(level) = get("WORKSPACE_LOG_LEVEL").filter(|v| !v.is_empty()) {
            self.log.level = level;
        }
        if let Some(admins) = get("WORKSPACE_SYSTEM_ADMINS").filter(|v| !v.is_empty()) {
            self.auth.system_admins = admins
                .split(',')
                .map(|a| a.trim().to_lowercase())
                .filter(|a| !a.is_empty())
                .collect();
        }
        if let Some(dir) = get("WORKSPACE_DATA_DIR").filter(|v| !v.is_empty()) {
            self.database.data_dir = Some(PathBuf::from(dir));
        }
        if let Some(url) = get("WORKSPACE_SMTP_URL").filter(|v| !v.is_empty()) {
            self.mail.smtp_url = Some(url);
        }
        if let Some(from) = get("WORKSPACE_MAIL_FROM").filter(|v| !v.is_empty()) {
            self.mail.from = from;
        }
        if let Some(url) = get("WORKSPACE_PUBLIC_URL").filter(|v| !v.is_empty()) {
            self.mail.public_url = url;
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
        if let Some(secret) = &self.auth.jwt_secret
            && secret.len() < 32
        {
            bail!("auth.jwt_secret must be at least 32 bytes");
        }
        if self.auth.token_lifetime_secs == 0 {
            bail!("auth.token_lifetime_secs must be positive");
        }
        if self.auth.login_max_failures == 0 || self.auth.login_window_secs == 0 {
            bail!("auth.login_max_failures and auth.login_window_secs must be positive");
        }
        if self.database.pool_size == 0 {
            bail!("database.pool_size must be positive");
        }
        if self.mail.from.parse::<lettre::message::Mailbox>().is_err() {
            bail!("mail.from {:?} is not an e-mail address", self.mail.from);
        }
        if !(self.mail.public_url.starts_with("http://")
            || self.mail.public_url.starts_with("https://"))
        {
            bail!("mail.public_url must start with http:// or https://");
        }
        if let Some(url) = &self.mail.smtp_url
            && !(url.starts_with("smtp://") || url.starts_with("smtps://"))
        {
            bail!("mail.smtp_url must start with smtp:// or smtps://");
        }
        if self.mail.smtp_timeout_secs == 0 {
            bail!("mail.smtp_timeout_secs must be positive");
        }
        self.log_level()?;
        Ok(())
    }

    pub fn log_level(&self) -> Result<dropshot::ConfigLoggingLevel> {
        use dropshot::ConfigLoggingLevel::*;
        Ok(match self.log.level.as_str() {
            "trace" => Trace,
            "debug" => Debug,
            "info" => Info,
            "warn" => Warn,
            "error" => Error,
            "critical" => Critical,
            other => bail!("unknown log level {other:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_parses() {
        let text = include_str!("../workspace.example.toml");
        let config: Config = toml::from_str(text).expect("example config parses");
        config.validate().expect("example config is valid");
    }

    #[test]
    fn env_overrides_file_values() {
        let mut config = Config::default();
        config
            .apply_env(|name| match name {
                "DATABASE_URL" => Some("postgresql://db/x".into()),
                "BIND_ADDRESS" => Some("0.0.0.0:9000".into()),
                "WORKSPACE_TOKEN_LIFETIME_SECS" => Some("60".into()),
                "WORKSPACE_SMTP_URL" => Some("smtp://127.0.0.1:2525".into()),
                "WORKSPACE_PUBLIC_URL" => Some("https://app.example.com".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.database.url.as_deref(), Some("postgresql://db/x"));
        assert_eq!(config.bind_address.port(), 9000);
        assert_eq!(config.auth.token_lifetime_secs, 60);
        assert_eq!(
            config.mail.smtp_url.as_deref(),
            Some("smtp://127.0.0.1:2525")
        );
        assert_eq!(config.mail.public_url, "https://app.example.com");
        config.validate().unwrap();
    }

    #[test]
    fn short_secret_is_rejected() {
        let mut config = Config::default();
        config.auth.jwt_secret = Some("short".into());
        assert!(config.validate().is_err());
        assert!(
            Config {
                bind_address: "127.0.0.1:0".parse().unwrap(),
                ..Config::default()
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<Config>("bind_adress = \"x\"").is_err());
    }
}
