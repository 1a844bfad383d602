//! Server configuration: a TOML file (optional) plus environment overrides.
//!
//! Precedence, lowest first: built-in defaults, the file named by
//! `--config` or `WORKSPACE_CONFIG`, environment variables, command-line
//! flags. See `workspace.example.toml` for every key.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod audit;
mod auth;
pub mod capabilities;
mod database;
mod deletion;
mod http;
mod mail;
mod providers;
mod usage;
mod webhooks;

pub use audit::AuditConfig;
pub use auth::{AuthConfig, RateLimitsConfig, SecretKeys, SecretsConfig};
pub use database::DatabaseConfig;
pub use deletion::DeletionConfig;
pub use http::{HttpConfig, MetricsConfig, StreamsConfig, raise_open_file_limit};
pub use mail::{LogConfig, MailConfig};
pub use providers::{
    DEFAULT_CONTEXT_TOKENS, DeploymentConfig, ModelConfig, OFFLINE_MODEL_NAME, ProviderKind,
    ProvidersConfig, ResolvedDeployment,
};
pub use usage::{Price, UsageConfig};
pub use webhooks::WebhooksConfig;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The file this configuration was read from (not a key of it): the
    /// tool sandbox refuses to run where it could see it.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// Address the HTTP server listens on.
    pub bind_address: SocketAddr,
    /// Largest accepted request body, in bytes.
    pub request_body_max_bytes: usize,
    pub database: DatabaseConfig,
    pub auth: AuthConfig,
    /// Login and signup rate limits, shared by every instance.
    pub rate_limits: RateLimitsConfig,
    /// Leases of answers being generated (chat and conversations).
    pub streams: StreamsConfig,
    /// Server-side limits of HTTP connections and request bodies.
    pub http: HttpConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Keys that encrypt secrets at rest (see `secrets.rs`).
    pub secrets: SecretsConfig,
    pub features: FeatureDefaults,
    pub mail: MailConfig,
    pub log: LogConfig,
    /// How the server talks to model providers.
    pub providers: ProvidersConfig,
    /// The language models offered, besides the offline development model.
    pub models: Vec<ModelConfig>,
    /// Uploaded files (see `kb_config.rs` for these sections).
    pub files: crate::kb_config::FilesConfig,
    pub storage: crate::kb_config::StorageConfig,
    pub kb: crate::kb_config::KbConfig,
    pub fetch: crate::kb_config::FetchConfig,
    /// Embedders besides the local `all-minilm-l6-v2`.
    pub embedders: Vec<crate::kb_config::EmbedderConfig>,
    /// The sandbox that runs tool code.
    pub sandbox: crate::sandbox::SandboxConfig,
    /// Speech to text for `POST /api/chat/transcribe`.
    pub transcription: crate::transcribe::TranscriptionConfig,
    /// MCP: where OAuth flows land, the tool-list cache, timeouts.
    pub mcp: crate::mcp::config::McpConfig,
    /// The MCP servers offered to users (`[[mcp_servers]]`).
    pub mcp_servers: Vec<crate::mcp::config::McpServerConfig>,
    /// The jobs that delete organizations and accounts.
    pub deletion: DeletionConfig,
    /// The audit log's retention.
    pub audit: AuditConfig,
    /// The price table of model calls, usage recording and budgets.
    pub usage: UsageConfig,
    /// Webhook deliveries (issue #36).
    pub webhooks: WebhooksConfig,
    /// OpenTelemetry traces (issue #37), off unless a collector is named.
    pub telemetry: crate::telemetry::TelemetryConfig,
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

impl Default for Config {
    fn default() -> Self {
        Config {
            source: None,
            bind_address: "127.0.0.1:8080".parse().expect("valid default address"),
            request_body_max_bytes: 1024 * 1024,
            database: DatabaseConfig::default(),
            auth: AuthConfig::default(),
            rate_limits: RateLimitsConfig::default(),
            streams: StreamsConfig::default(),
            http: HttpConfig::default(),
            metrics: MetricsConfig::default(),
            secrets: SecretsConfig::default(),
            features: FeatureDefaults::default(),
            mail: MailConfig::default(),
            log: LogConfig::default(),
            providers: ProvidersConfig::default(),
            models: Vec::new(),
            files: Default::default(),
            storage: Default::default(),
            kb: Default::default(),
            fetch: Default::default(),
            embedders: Vec::new(),
            sandbox: crate::sandbox::SandboxConfig::default(),
            transcription: Default::default(),
            mcp: Default::default(),
            mcp_servers: Vec::new(),
            deletion: DeletionConfig::default(),
            audit: AuditConfig::default(),
            usage: UsageConfig::default(),
            webhooks: WebhooksConfig::default(),
            telemetry: Default::default(),
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
                let mut config: Config = toml::from_str(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?;
                config.source = Some(std::path::absolute(&path).unwrap_or(path));
                config
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
        if let Some(path) = get("DATABASE_CA_FILE").filter(|v| !v.is_empty()) {
            self.database.ca_file = Some(PathBuf::from(path));
        }
        if let Some(addr) = get("BIND_ADDRESS").filter(|v| !v.is_empty()) {
            self.bind_address = addr
                .parse()
                .with_context(|| format!("BIND_ADDRESS {addr:?}"))?;
        }
        if let Some(secret) = get("WORKSPACE_JWT_SECRET").filter(|v| !v.is_empty()) {
            self.auth.jwt_secret = Some(secret);
        }
        if let Some(keys) = get("WORKSPACE_SECRET_KEYS").filter(|v| !v.is_empty()) {
            self.secrets.keys = keys
                .split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect();
        }
        if let Some(path) = get("WORKSPACE_KEY_FILE").filter(|v| !v.is_empty()) {
            self.secrets.key_file = Some(PathBuf::from(path));
        }
        if let Some(id) = get("WORKSPACE_SECRET_WRITE_KEY").filter(|v| !v.is_empty()) {
            self.secrets.write_key = Some(
                id.parse()
                    .with_context(|| format!("WORKSPACE_SECRET_WRITE_KEY {id:?}"))?,
            );
        }
        if let Some(secs) = get("WORKSPACE_TOKEN_LIFETIME_SECS").filter(|v| !v.is_empty()) {
            self.auth.token_lifetime_secs = secs
                .parse()
                .with_context(|| format!("WORKSPACE_TOKEN_LIFETIME_SECS {secs:?}"))?;
        }
        if let Some(secs) = get("WORKSPACE_REFRESH_TOKEN_LIFETIME_SECS").filter(|v| !v.is_empty()) {
            self.auth.refresh_token_lifetime_secs = secs
                .parse()
                .with_context(|| format!("WORKSPACE_REFRESH_TOKEN_LIFETIME_SECS {secs:?}"))?;
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
        if let Some(addr) = get("WORKSPACE_METRICS_BIND").filter(|v| !v.is_empty()) {
            self.metrics.bind_address = Some(
                addr.parse()
                    .with_context(|| format!("WORKSPACE_METRICS_BIND {addr:?}"))?,
            );
        }
        if let Some(token) = get("WORKSPACE_METRICS_TOKEN").filter(|v| !v.is_empty()) {
            self.metrics.token = Some(token);
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
            self.mail.public_url = Some(url);
        }
        if let Some(url) = get("WORKSPACE_OTLP_ENDPOINT")
            .or_else(|| get("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .filter(|v| !v.is_empty())
        {
            self.telemetry.otlp_endpoint = Some(url);
        }
        // The standard variable: `OTEL_TRACES_SAMPLER_ARG` is the ratio of
        // the `parentbased_traceidratio` sampler, the only one offered.
        if let Some(ratio) = get("WORKSPACE_TRACE_SAMPLE_RATIO")
            .or_else(|| get("OTEL_TRACES_SAMPLER_ARG"))
            .filter(|v| !v.is_empty())
        {
            self.telemetry.sample_ratio = Some(ratio.trim().parse().map_err(|_| {
                anyhow::anyhow!("the trace sample ratio {ratio:?} is not a number from 0 to 1")
            })?);
        }
        if let Some(origins) = get("WORKSPACE_CORS_ORIGINS").filter(|v| !v.is_empty()) {
            self.http.cors_allowed_origins = origins
                .split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(http::parse_origin)
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow::anyhow!("WORKSPACE_CORS_ORIGINS: {e}"))?;
        }
        // Each section applies its own overrides.
        self.fetch.apply_env(&get);
        self.kb.apply_env(&get);
        self.files.apply_env(&get)?;
        self.transcription.apply_env(&get);
        self.deletion.apply_env(&get)?;
        self.audit.apply_env(&get)?;
        self.usage.apply_env(&get)?;
        self.webhooks.apply_env(&get)?;
        crate::mcp::config::apply_env(&mut self.mcp, &get);
        self.apply_provider_env(&get)
    }

    pub fn validate(&self) -> Result<()> {
        if let Some(ratio) = self.telemetry.sample_ratio
            && !(0.0..=1.0).contains(&ratio)
        {
            bail!("telemetry.sample_ratio: {ratio} is not from 0 to 1");
        }
        if let Some((keys, write)) = self.secrets.parsed()? {
            crate::secrets::Secrets::new(&keys, write)?;
        }
        if let Some(secret) = &self.auth.jwt_secret
            && secret.len() < 32
        {
            bail!("auth.jwt_secret must be at least 32 bytes");
        }
        if self.auth.token_lifetime_secs == 0 {
            bail!("auth.token_lifetime_secs must be positive");
        }
        if self.auth.refresh_token_lifetime_secs < self.auth.token_lifetime_secs {
            bail!("auth.refresh_token_lifetime_secs must be at least auth.token_lifetime_secs");
        }
        if self.auth.password_reset_lifetime_secs == 0
            || self.auth.password_reset_lifetime_secs > 24 * 3600
        {
            bail!("auth.password_reset_lifetime_secs must be 1 to 86400");
        }
        if self.auth.login_max_failures == 0 || self.auth.login_window_secs == 0 {
            bail!("auth.login_max_failures and auth.login_window_secs must be positive");
        }
        if self.auth.hash_concurrency == Some(0) || self.auth.hash_max_wait_ms == 0 {
            bail!("auth.hash_concurrency and auth.hash_max_wait_ms must be positive");
        }
        // Counters are kept an hour (the janitor), so a longer window would
        // start counting again early.
        if self.rate_limits.window_secs == 0 || self.rate_limits.window_secs > 3600 {
            bail!("rate_limits.window_secs must be 1 to 3600");
        }
        if self.streams.heartbeat_secs == 0
            || self.streams.sweep_interval_secs == 0
            || self.streams.lease_secs < 2 * self.streams.heartbeat_secs
        {
            bail!(
                "streams.heartbeat_secs and streams.sweep_interval_secs must be positive, and \
                 streams.lease_secs at least twice streams.heartbeat_secs"
            );
        }
        self.deletion.validate()?;
        self.audit.validate()?;
        self.usage.validate()?;
        self.webhooks.validate()?;
        if self.http.body_read_timeout_secs == 0 {
            bail!("http.body_read_timeout_secs must be positive");
        }
        if self.database.pool_size == 0 {
            bail!("database.pool_size must be positive");
        }
        if self.database.reconnect_backoff_initial_ms == 0
            || self.database.reconnect_backoff_max_ms < self.database.reconnect_backoff_initial_ms
        {
            bail!(
                "database.reconnect_backoff_initial_ms must be positive and at most \
                 database.reconnect_backoff_max_ms"
            );
        }
        if self.mail.from.parse::<lettre::message::Mailbox>().is_err() {
            bail!("mail.from {:?} is not an e-mail address", self.mail.from);
        }
        if let Some(url) = &self.mail.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
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
        let mut names = std::collections::HashSet::new();
        for model in &self.models {
            let name = &model.name;
            if name.trim().is_empty() || name.trim() != name || name.len() > 200 {
                bail!("models: {name:?} is not a valid model name");
            }
            if name == OFFLINE_MODEL_NAME {
                bail!("models: {name:?} is the built-in development model's name");
            }
            if !names.insert(name.as_str()) {
                bail!("models: {name:?} is configured twice");
            }
            if model.context_tokens == Some(0) {
                bail!("models: {name:?}: context_tokens must be positive");
            }
            if model.max_output_tokens == Some(0) {
                bail!("models: {name:?}: max_output_tokens must be positive");
            }
            if let (Some(max), Some(out)) = (model.max_tokens, model.max_output_tokens)
                && max > out
            {
                bail!("models: {name:?}: max_tokens ({max}) is above max_output_tokens ({out})");
            }
            model.resolved_deployments()?;
        }
        for model in &self.models {
            let name = &model.name;
            let lists = [
                ("fallbacks", &model.fallbacks),
                ("context_window_fallbacks", &model.context_window_fallbacks),
                ("content_policy_fallbacks", &model.content_policy_fallbacks),
            ];
            for (key, list) in lists {
                for fallback in list.iter() {
                    if fallback == name {
                        bail!("models: {name:?}: {key} names the model itself");
                    }
                    let known = fallback == OFFLINE_MODEL_NAME && self.providers.offline_model
                        || names.contains(fallback.as_str());
                    if !known {
                        bail!("models: {name:?}: {key} names {fallback:?}, which is not a model");
                    }
                }
            }
        }
        crate::mcp::config::validate(&self.mcp, &self.mcp_servers)?;
        if self.providers.connect_timeout_secs == 0
            || self.providers.idle_timeout_secs == 0
            || self.providers.answer_timeout_secs == 0
            || self.providers.first_event_timeout_secs == 0
            || self.providers.fail_window_secs == 0
            || self.providers.allowed_fails == 0
        {
            bail!(
                "providers.connect_timeout_secs, idle_timeout_secs, answer_timeout_secs, \
                 first_event_timeout_secs, fail_window_secs and allowed_fails must be positive"
            );
        }
        Ok(())
    }

    /// The configured log level. Accepts the usual spellings in any case:
    /// `trace`, `debug`, `info`, `warn`/`warning`, `error`/`err`,
    /// `critical`/`crit`/`fatal`.
    pub fn log_level(&self) -> Result<dropshot::ConfigLoggingLevel> {
        use dropshot::ConfigLoggingLevel::*;
        Ok(match self.log.level.trim().to_ascii_lowercase().as_str() {
            "trace" => Trace,
            "debug" => Debug,
            "info" => Info,
            "warn" | "warning" => Warn,
            "error" | "err" => Error,
            "critical" | "crit" | "fatal" => Critical,
            other => {
                bail!("unknown log level {other:?} (trace, debug, info, warn, error or critical)")
            }
        })
    }

    /// The configured log level as slog's.
    pub fn slog_level(&self) -> Result<slog::Level> {
        use dropshot::ConfigLoggingLevel::*;
        Ok(match self.log_level()? {
            Trace => slog::Level::Trace,
            Debug => slog::Level::Debug,
            Info => slog::Level::Info,
            Warn => slog::Level::Warning,
            Error => slog::Level::Error,
            Critical => slog::Level::Critical,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_level_spellings() {
        let level = |s: &str| {
            let mut c = Config::default();
            c.log.level = s.to_string();
            c.slog_level()
        };
        assert_eq!(level("warning").unwrap(), slog::Level::Warning);
        assert_eq!(level("WARN").unwrap(), slog::Level::Warning);
        assert_eq!(level(" Error ").unwrap(), slog::Level::Error);
        assert_eq!(level("err").unwrap(), slog::Level::Error);
        assert_eq!(level("crit").unwrap(), slog::Level::Critical);
        assert_eq!(level("fatal").unwrap(), slog::Level::Critical);
        assert_eq!(level("trace").unwrap(), slog::Level::Trace);
        assert!(level("verbose").is_err());
        let mut c = Config::default();
        c.apply_env(|k| (k == "WORKSPACE_LOG_LEVEL").then(|| "warning".to_string()))
            .unwrap();
        c.validate().unwrap();
    }

    #[test]
    fn example_config_parses() {
        let text = include_str!("../../workspace.example.toml");
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
                "WORKSPACE_REFRESH_TOKEN_LIFETIME_SECS" => Some("86400".into()),
                "WORKSPACE_SMTP_URL" => Some("smtp://127.0.0.1:2525".into()),
                "WORKSPACE_PUBLIC_URL" => Some("https://app.example.com".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.database.url.as_deref(), Some("postgresql://db/x"));
        assert_eq!(config.bind_address.port(), 9000);
        assert_eq!(config.auth.token_lifetime_secs, 60);
        assert_eq!(config.auth.refresh_token_lifetime_secs, 86400);
        assert_eq!(
            config.mail.smtp_url.as_deref(),
            Some("smtp://127.0.0.1:2525")
        );
        assert_eq!(
            config.mail.public_url.as_deref(),
            Some("https://app.example.com")
        );
        config.validate().unwrap();
    }

    #[test]
    fn a_lease_must_outlast_two_heartbeats() {
        let mut config = Config::default();
        config.validate().unwrap();
        config.streams.lease_secs = 2 * config.streams.heartbeat_secs - 1;
        assert!(config.validate().is_err());
        config.streams = StreamsConfig {
            heartbeat_secs: 0,
            ..StreamsConfig::default()
        };
        assert!(config.validate().is_err());
        config.streams = StreamsConfig {
            sweep_interval_secs: 0,
            ..StreamsConfig::default()
        };
        assert!(config.validate().is_err());
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
    fn provider_env_registers_prefixed_models() {
        let mut config = Config::default();
        config
            .apply_env(|name| match name {
                "OPENAI_API_KEY" => Some("sk-test".into()),
                "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/".into()),
                "ANTHROPIC_MODELS" => Some("claude-a, claude-b".into()),
                _ => None,
            })
            .unwrap();
        config.validate().unwrap();
        let names: Vec<&str> = config.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["gpt-4o-mini", "claude-a", "claude-b"]);
        assert_eq!(config.models[0].api_key.as_deref(), Some("sk-test"));
        assert_eq!(config.models[1].provider, Some(ProviderKind::Anthropic));
        assert!(!format!("{config:?}").contains("sk-test"));

        let mut config = Config::default();
        let bad = config.apply_env(|name| match name {
            "DEEPSEEK_API_KEY" => Some("k".into()),
            "DEEPSEEK_MODELS" => Some("gpt-4o".into()),
            _ => None,
        });
        assert!(bad.is_err());
    }

    #[test]
    fn model_entries_are_validated() {
        let parse = |text: &str| toml::from_str::<Config>(text).unwrap().validate();
        assert!(parse("[[models]]\nname = \"gpt-4o\"\n").is_ok());
        assert!(parse("[[models]]\nname = \"llama3\"\n").is_err());
        assert!(
            parse("[[models]]\nname = \"llama3\"\nprovider = \"openai_compatible\"\n").is_err()
        );
        assert!(
            parse(
                "[[models]]\nname = \"llama3\"\nprovider = \"openai_compatible\"\n\
                 base_url = \"http://127.0.0.1:11434/v1\"\n"
            )
            .is_ok()
        );
        assert!(
            parse("[[models]]\nname = \"offline-dev-model\"\nprovider = \"openai\"\n").is_err()
        );
        assert!(parse("[[models]]\nname = \"gpt-a\"\n[[models]]\nname = \"gpt-a\"\n").is_err());
        assert_eq!(
            ProviderKind::for_model_name("o1-mini"),
            Some(ProviderKind::Openai)
        );
        assert_eq!(
            ProviderKind::for_model_name("gemini-2.0-flash"),
            Some(ProviderKind::Gemini)
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<Config>("bind_adress = \"x\"").is_err());
    }
}
