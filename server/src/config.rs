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
}

/// Encryption keys for secrets at rest.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsConfig {
    /// `ID:BASE64` entries (ids 1 to 255, 32-byte keys). Every key opens
    /// what it sealed. Empty: a key generated once and kept in the
    /// database.
    pub keys: Vec<String>,
    /// The id of the key that seals new values (default: the highest).
    pub write_key: Option<u8>,
}

impl std::fmt::Debug for SecretsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsConfig")
            .field("keys", &format_args!("[{} redacted]", self.keys.len()))
            .field("write_key", &self.write_key)
            .finish()
    }
}

/// Secret keys by id, and the id of the writing key.
pub type SecretKeys = (Vec<(u8, [u8; 32])>, u8);

impl SecretsConfig {
    /// The configured keys, parsed, and the writing key id; `None` when no
    /// key is configured.
    pub fn parsed(&self) -> Result<Option<SecretKeys>> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let keys = self
            .keys
            .iter()
            .map(|k| crate::secrets::parse_key(k))
            .collect::<Result<Vec<_>>>()?;
        let write = match self.write_key {
            Some(id) => id,
            None => keys.iter().map(|(id, _)| *id).max().unwrap_or_default(),
        };
        Ok(Some((keys, write)))
    }
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
    /// Shared, pipelined connections for the short statements every
    /// request runs (the authorization lookup), besides the pool; `0`: one
    /// per two CPUs, 1 to 4. Fewer connections carry bigger pipelined
    /// batches: on 2 CPUs, one connection served `users/me` about 30 %
    /// faster than two, and four were slower still.
    pub shared_connections: usize,
    /// Where the embedded cluster and its binaries live when `url` is unset
    /// (default: `WORKSPACE_DATA_DIR`, else `/var/lib/workspace` as root,
    /// else `~/.local/share/workspace`).
    pub data_dir: Option<PathBuf>,
    /// PEM file of extra CA certificates that database server certificates
    /// may chain to (e.g. a managed database's CA bundle); the system's
    /// roots are always trusted. TLS itself follows the URL's `sslmode`.
    pub ca_file: Option<PathBuf>,
    /// After a failed connection attempt, the first wait before the next
    /// one, in milliseconds; doubles per failure (jittered), up to
    /// `reconnect_backoff_max_ms`. Meanwhile requests that need the
    /// database fail fast with `503 database_unavailable`.
    pub reconnect_backoff_initial_ms: u64,
    /// The longest wait between connection attempts, in milliseconds.
    pub reconnect_backoff_max_ms: u64,
}

impl DatabaseConfig {
    /// `shared_connections`, with `0` resolved.
    pub fn shared_connections(&self) -> usize {
        match self.shared_connections {
            0 => std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4)),
            n => n,
        }
    }

    pub fn backoff(&self) -> crate::db::health::Backoff {
        crate::db::health::Backoff {
            initial: std::time::Duration::from_millis(self.reconnect_backoff_initial_ms),
            max: std::time::Duration::from_millis(self.reconnect_backoff_max_ms),
        }
    }
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
    /// Password hashes (argon2id, 19 MiB each) computed at once. Default:
    /// the number of CPU cores.
    pub hash_concurrency: Option<usize>,
    /// Requests that may wait for a hashing slot; beyond that they are
    /// answered `503 server_busy` with `Retry-After` at once.
    pub hash_queue: usize,
    /// Longest wait for a hashing slot, in milliseconds (then `503`).
    pub hash_max_wait_ms: u64,
}

/// Request limits over a sliding window, per client address (the TCP
/// peer) and for all clients together; counted in PostgreSQL so that they
/// hold across instances. `0` disables a limit. Beyond a limit:
/// `429 rate_limited` with `Retry-After`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitsConfig {
    /// The window, in seconds.
    pub window_secs: u64,
    /// `POST /api/auth/login` per client address and window.
    pub login_per_address: u32,
    /// `POST /api/auth/login` for all clients, per window.
    pub login_global: u32,
    /// `POST /api/auth/signup` and `signup_invite` per client address.
    pub signup_per_address: u32,
    /// `POST /api/auth/signup` and `signup_invite` for all clients.
    pub signup_global: u32,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        RateLimitsConfig {
            window_secs: 60,
            login_per_address: 30,
            login_global: 1200,
            signup_per_address: 10,
            signup_global: 300,
        }
    }
}

/// Leases of streamed answers (chat and conversations): the instance that
/// generates an answer renews its lease (a heartbeat on the message row);
/// every instance sweeps now and then, and at start-up, for answers whose
/// lease expired (their instance died) and closes them as `failed`
/// (`answer_interrupted`), keeping their text and ending their stream.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamsConfig {
    /// How often the generating instance renews its answers' leases, in
    /// seconds.
    pub heartbeat_secs: u64,
    /// An answer whose lease was not renewed for this long is closed, in
    /// seconds (at least twice `heartbeat_secs`).
    pub lease_secs: u64,
    /// How often every instance sweeps for expired leases, in seconds.
    pub sweep_interval_secs: u64,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        StreamsConfig {
            heartbeat_secs: 5,
            lease_secs: 30,
            sweep_interval_secs: 10,
        }
    }
}

/// Limits of the HTTP server itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Longest time to receive a request body once its headers arrived, in
    /// seconds (then `408 request_timeout`).
    pub body_read_timeout_secs: u64,
    /// Most client connections open at once (at the limit, new connections
    /// wait in the kernel's backlog until one closes). Unset: 8192, or the
    /// process's open-file limit less 256 when that is lower.
    pub max_connections: Option<usize>,
    /// A new connection that sends nothing for this long is closed, in
    /// seconds.
    pub first_byte_timeout_secs: u64,
    /// Request headers must arrive within this time once a request began,
    /// and an idle keep-alive connection is closed after it, in seconds.
    pub header_read_timeout_secs: u64,
    /// The reverse proxies and load balancers in front of the server
    /// (addresses or CIDR ranges). A request from one of them is the
    /// client's found in `X-Forwarded-For`: its rightmost address that is
    /// not itself a trusted proxy. Empty: the TCP peer is the client and
    /// `X-Forwarded-For` is ignored (anyone could write it). The client
    /// address keys the per-address rate limits.
    #[serde(deserialize_with = "deserialize_nets")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// At shutdown (SIGTERM, Ctrl-C), how long in-flight requests, the
    /// answers this instance generates and its knowledge-base jobs may take
    /// to finish, in seconds. WebSockets close at once (1001) and workers
    /// claim no new job. Past it, the instance's unfinished answers are
    /// closed `failed` (`answer_interrupted`, text kept, a last `error`
    /// event ends their streams), its jobs go back to the queue (due at
    /// once, the attempt not counted) and it stops. Keep it below the
    /// orchestrator's kill timeout (Kubernetes: 30 s by default).
    pub shutdown_grace_secs: u64,
}

/// Addresses or CIDR ranges (`10.0.0.0/8`, `::1`).
fn deserialize_nets<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ipnet::IpNet>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| {
            s.parse::<ipnet::IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "trusted proxy {s:?} is not an address or a CIDR range"
                    ))
                })
        })
        .collect()
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            body_read_timeout_secs: 30,
            max_connections: None,
            first_byte_timeout_secs: 10,
            header_read_timeout_secs: 30,
            trusted_proxies: Vec::new(),
            shutdown_grace_secs: 20,
        }
    }
}

impl HttpConfig {
    /// The client of a request from `peer` (see `trusted_proxies`):
    /// `forwarded_for` are the request's `X-Forwarded-For` values in
    /// order. Walking the chain from the right, every hop added by a
    /// trusted proxy is believed; the first untrusted address is the
    /// client. An entry that is not an address (or `address:port`) stops
    /// the walk at the last hop believed.
    pub fn client_address<'a>(
        &self,
        peer: std::net::IpAddr,
        forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    ) -> std::net::IpAddr {
        let trusted = |a: std::net::IpAddr| {
            let a = a.to_canonical();
            self.trusted_proxies.iter().any(|n| n.contains(&a))
        };
        let mut client = peer.to_canonical();
        if !trusted(client) {
            return client;
        }
        for value in forwarded_for.rev() {
            for hop in value.rsplit(',') {
                let hop = hop.trim();
                let parsed = hop
                    .parse::<std::net::IpAddr>()
                    .or_else(|_| hop.parse::<std::net::SocketAddr>().map(|s| s.ip()));
                match parsed {
                    Ok(addr) => {
                        client = addr.to_canonical();
                        if !trusted(client) {
                            return client;
                        }
                    }
                    Err(_) => return client,
                }
            }
        }
        client
    }

    /// The connection cap: the configured one, else 8192 or the open-file
    /// limit less 256 (room for database connections and files).
    pub fn max_connections(&self) -> usize {
        if let Some(n) = self.max_connections {
            return n.max(1);
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
        } else {
            usize::MAX
        };
        8192.min(files.saturating_sub(256)).max(16)
    }
}

/// The Prometheus text endpoint `GET /metrics`, on a listener of its own.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where `/metrics` is served. Unset (the default): not served.
    /// Keep it on a private address (e.g. `127.0.0.1:9090`).
    pub bind_address: Option<SocketAddr>,
    /// When set, `/metrics` requires `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

impl std::fmt::Debug for MetricsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsConfig")
            .field("bind_address", &self.bind_address)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
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

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProvidersConfig {
    /// Offer the built-in offline development model (`offline-dev-model`).
    pub offline_model: bool,
    /// Pause between the offline model's chunks, in milliseconds.
    pub offline_chunk_delay_ms: u64,
    /// Timeout of the TCP (and TLS) connection to a provider, in seconds.
    /// There is no total timeout: answers stream as long as they last.
    pub connect_timeout_secs: u64,
    /// Longest wait for the response headers or for the next piece of an
    /// answer, in seconds.
    pub idle_timeout_secs: u64,
    /// Retries of a request that failed before any of the answer arrived
    /// (connection errors, 429, 5xx, a stream that broke before its first
    /// piece).
    pub max_retries: u32,
    /// Backoff before the first retry, in milliseconds; doubles each time.
    /// A provider's `Retry-After` is honoured up to 10 seconds.
    pub retry_backoff_ms: u64,
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        ProvidersConfig {
            offline_model: true,
            offline_chunk_delay_ms: 20,
            connect_timeout_secs: 10,
            idle_timeout_secs: 120,
            max_retries: 2,
            retry_backoff_ms: 250,
        }
    }
}

/// The wire protocol and brand of a model provider.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI chat completions; model names start with `gpt-` or `o1`.
    Openai,
    /// Anthropic Messages API; model names start with `claude-`.
    Anthropic,
    /// DeepSeek (OpenAI-compatible); model names start with `deepseek-`.
    Deepseek,
    /// Gemini's OpenAI-compatible endpoint; model names start with `gemini-`.
    Gemini,
    /// Any other OpenAI-compatible server (Ollama, vLLM, ...); `base_url`
    /// is required.
    OpenaiCompatible,
}

impl ProviderKind {
    pub const BRANDED: [ProviderKind; 4] = [
        ProviderKind::Openai,
        ProviderKind::Anthropic,
        ProviderKind::Deepseek,
        ProviderKind::Gemini,
    ];

    /// The name shown as a model's `provider`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Deepseek => "deepseek",
            ProviderKind::Gemini => "gemini",
            ProviderKind::OpenaiCompatible => "openai_compatible",
        }
    }

    /// The provider a model name belongs to by its prefix (`gpt-` or `o1`,
    /// `claude-`, `deepseek-`, `gemini-`), as in the MCP playground.
    pub fn for_model_name(name: &str) -> Option<ProviderKind> {
        if name.starts_with("gpt-") || name.starts_with("o1") {
            Some(ProviderKind::Openai)
        } else if name.starts_with("claude-") {
            Some(ProviderKind::Anthropic)
        } else if name.starts_with("deepseek-") {
            Some(ProviderKind::Deepseek)
        } else if name.starts_with("gemini-") {
            Some(ProviderKind::Gemini)
        } else {
            None
        }
    }

    /// The provider's public endpoint (None: it must be configured).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Openai => Some("https://api.openai.com/v1"),
            ProviderKind::Anthropic => Some("https://api.anthropic.com"),
            ProviderKind::Deepseek => Some("https://api.deepseek.com/v1"),
            ProviderKind::Gemini => Some("https://generativelanguage.googleapis.com/v1beta/openai"),
            ProviderKind::OpenaiCompatible => None,
        }
    }

    /// Prefix of the environment variables that register this provider's
    /// models (`<P>_API_KEY`, `<P>_BASE_URL`, `<P>_MODELS`).
    fn env_prefix(self) -> &'static str {
        match self {
            ProviderKind::Openai => "OPENAI",
            ProviderKind::Anthropic => "ANTHROPIC",
            ProviderKind::Deepseek => "DEEPSEEK",
            ProviderKind::Gemini => "GEMINI",
            ProviderKind::OpenaiCompatible => "OPENAI_COMPATIBLE",
        }
    }

    /// Models registered from the environment when `<P>_MODELS` is unset.
    fn default_models(self) -> &'static [&'static str] {
        match self {
            ProviderKind::Openai => &["gpt-4o-mini"],
            ProviderKind::Anthropic => &["claude-sonnet-4-5"],
            ProviderKind::Deepseek => &["deepseek-chat"],
            ProviderKind::Gemini => &["gemini-2.0-flash"],
            ProviderKind::OpenaiCompatible => &[],
        }
    }
}

/// One `[[models]]` entry.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The name clients see; unique.
    pub name: String,
    /// Default: inferred from the name's prefix.
    #[serde(default)]
    pub provider: Option<ProviderKind>,
    /// The model name sent to the provider (default: `name`).
    #[serde(default)]
    pub upstream_model: Option<String>,
    /// Default: the provider's public endpoint.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The API key. Prefer `api_key_env`.
    #[serde(default)]
    pub api_key: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Largest answer in tokens (sent as `max_tokens`; Anthropic requires
    /// one, default 4096 there).
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ModelConfig")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("upstream_model", &self.upstream_model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl ModelConfig {
    /// The configured or inferred provider.
    pub fn provider_kind(&self) -> Option<ProviderKind> {
        self.provider
            .or_else(|| ProviderKind::for_model_name(&self.name))
    }
}

/// The name of the built-in development model.
pub const OFFLINE_MODEL_NAME: &str = "offline-dev-model";

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
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: None,
            pool_size: 16,
            shared_connections: 0,
            data_dir: None,
            ca_file: None,
            reconnect_backoff_initial_ms: 100,
            reconnect_backoff_max_ms: 2000,
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
            hash_concurrency: None,
            hash_queue: 64,
            hash_max_wait_ms: 10_000,
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

impl AuthConfig {
    /// The configured hashing concurrency, or the number of CPU cores.
    pub fn hash_concurrency(&self) -> usize {
        self.hash_concurrency.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        })
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
            self.mail.public_url = url;
        }
        // Each section applies its own overrides.
        self.fetch.apply_env(&get);
        self.kb.apply_env(&get);
        self.files.apply_env(&get)?;
        self.transcription.apply_env(&get);
        crate::mcp::config::apply_env(&mut self.mcp, &get);
        self.apply_provider_env(&get)
    }

    /// `<P>_API_KEY` and `<P>_BASE_URL` (P = OPENAI, ANTHROPIC, DEEPSEEK,
    /// GEMINI): when either is set, the models named in `<P>_MODELS`
    /// (comma-separated, each with the provider's prefix; default one
    /// current model) are offered, unless the file already configures a
    /// model of that name. Entries with `api_key_env` get their key here.
    fn apply_provider_env(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        for model in &mut self.models {
            if model.api_key.is_none()
                && let Some(var) = &model.api_key_env
            {
                model.api_key = get(var).filter(|v| !v.is_empty());
            }
        }
        for kind in ProviderKind::BRANDED {
            let prefix = kind.env_prefix();
            let key = get(&format!("{prefix}_API_KEY")).filter(|v| !v.is_empty());
            let base_url = get(&format!("{prefix}_BASE_URL")).filter(|v| !v.is_empty());
            if key.is_none() && base_url.is_none() {
                continue;
            }
            let names: Vec<String> =
                match get(&format!("{prefix}_MODELS")).filter(|v| !v.is_empty()) {
                    Some(list) => list
                        .split(',')
                        .map(|n| n.trim().to_string())
                        .filter(|n| !n.is_empty())
                        .collect(),
                    None => kind
                        .default_models()
                        .iter()
                        .map(|n| n.to_string())
                        .collect(),
                };
            for name in names {
                if ProviderKind::for_model_name(&name) != Some(kind) {
                    bail!(
                        "{prefix}_MODELS: {name:?} does not have the {} model-name prefix",
                        kind.as_str()
                    );
                }
                if self.models.iter().any(|m| m.name == name) {
                    continue;
                }
                self.models.push(ModelConfig {
                    name,
                    provider: Some(kind),
                    upstream_model: None,
                    base_url: base_url.clone(),
                    api_key: key.clone(),
                    api_key_env: None,
                    max_tokens: None,
                });
            }
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
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
            let Some(kind) = model.provider_kind() else {
                bail!(
                    "models: {name:?}: set `provider` (the name has no known prefix: \
                     gpt-/o1, claude-, deepseek-, gemini-)"
                );
            };
            match model.base_url.as_deref().or(kind.default_base_url()) {
                None => bail!(
                    "models: {name:?}: `base_url` is required for {}",
                    kind.as_str()
                ),
                Some(url) => {
                    let parsed = reqwest::Url::parse(url)
                        .with_context(|| format!("models: {name:?}: base_url {url:?}"))?;
                    if !matches!(parsed.scheme(), "http" | "https") {
                        bail!("models: {name:?}: base_url must be http or https");
                    }
                }
            }
        }
        crate::mcp::config::validate(&self.mcp, &self.mcp_servers)?;
        if self.providers.connect_timeout_secs == 0 || self.providers.idle_timeout_secs == 0 {
            bail!(
                "providers.connect_timeout_secs and providers.idle_timeout_secs must be positive"
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

#[cfg(test)]
mod client_address_tests {
    use super::HttpConfig;
    use std::net::IpAddr;

    fn config(trusted: &[&str]) -> HttpConfig {
        HttpConfig {
            trusted_proxies: trusted.iter().map(|t| t.parse().unwrap()).collect(),
            ..HttpConfig::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let c = config(&[]);
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["203.0.113.7"].into_iter()),
            ip("10.0.0.5")
        );
    }

    #[test]
    fn a_trusted_proxy_forwards_the_rightmost_untrusted_hop() {
        let c = config(&["10.0.0.0/8", "192.0.2.1/32"]);
        // The load balancer (10.0.0.5) forwards for a client.
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["203.0.113.7"].into_iter()),
            ip("203.0.113.7")
        );
        // A client cannot pick its address by prepending one: the hops a
        // trusted proxy did not add are not believed.
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["198.51.100.1, 203.0.113.7"].into_iter()),
            ip("203.0.113.7")
        );
        // Two proxies, in two headers; ports and IPv4-mapped addresses.
        assert_eq!(
            c.client_address(
                ip("::ffff:10.0.0.5"),
                ["203.0.113.7:5123", "192.0.2.1"].into_iter()
            ),
            ip("203.0.113.7")
        );
        // An untrusted peer's header is ignored.
        assert_eq!(
            c.client_address(ip("198.51.100.9"), ["203.0.113.7"].into_iter()),
            ip("198.51.100.9")
        );
        // Garbage stops at the last hop believed; no header: the proxy.
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["nonsense"].into_iter()),
            ip("10.0.0.5")
        );
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["203.0.113.7", ""].into_iter()),
            ip("10.0.0.5")
        );
        assert_eq!(
            c.client_address(ip("10.0.0.5"), std::iter::empty()),
            ip("10.0.0.5")
        );
    }
}
