//! Model providers and the language models offered.

use anyhow::{Result, bail};
use serde::Deserialize;

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
    /// Longest wait for an answer asked for in one piece (an OpenAI-style
    /// provider answering a completion its client did not stream), in
    /// seconds: such an answer arrives only once the model has written all
    /// of it, so the idle timeout cannot bound it.
    pub answer_timeout_secs: u64,
    /// Retries of a request that failed before any of the answer arrived
    /// (connection errors, 429, 5xx, a stream that broke before its first
    /// piece).
    pub max_retries: u32,
    /// Backoff before the first retry, in milliseconds; doubles each time,
    /// with jitter (a random 50 to 100 % of it). A provider's `Retry-After`
    /// is honoured up to 10 seconds.
    pub retry_backoff_ms: u64,
    /// Failures of one deployment within `fail_window_secs` (counted by
    /// every instance together, in the database) after which it cools
    /// down. A `429`, a `529` (overloaded) and a refused connection cool
    /// it down at once.
    pub allowed_fails: u32,
    /// The window in which a deployment's failures are counted, in seconds.
    pub fail_window_secs: u64,
    /// How long a failing deployment is left alone, in seconds (a `429`'s
    /// `Retry-After`, up to `max_cooldown_secs`, wins). Once it ends, one
    /// request (of one instance) tries the deployment again; the others
    /// keep to the other deployments until that probe answers.
    pub cooldown_secs: u64,
    /// The longest cooldown a provider's `Retry-After` may ask for, in
    /// seconds.
    pub max_cooldown_secs: u64,
    /// Longest wait for the first piece of an answer (its first text,
    /// reasoning or tool call) before the request moves to the next
    /// deployment, in seconds. Later pieces are bounded by
    /// `idle_timeout_secs`.
    pub first_event_timeout_secs: u64,
    /// How long the deployments' health read for a routed model serves
    /// this instance's next answers of it, in milliseconds (0: read for
    /// every answer). A failure this instance counts is seen at once;
    /// another instance's within this time.
    pub health_ttl_ms: u64,
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        ProvidersConfig {
            offline_model: true,
            offline_chunk_delay_ms: 20,
            connect_timeout_secs: 10,
            idle_timeout_secs: 120,
            answer_timeout_secs: 600,
            max_retries: 2,
            retry_backoff_ms: 250,
            allowed_fails: 3,
            fail_window_secs: 60,
            cooldown_secs: 30,
            max_cooldown_secs: 300,
            first_event_timeout_secs: 60,
            health_ttl_ms: 100,
        }
    }
}

/// The wire protocol and brand of a model provider.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI chat completions; model names start with `gpt-`, `o1`, `o3`
    /// or `o4`.
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
        if name.starts_with("gpt-")
            || name.starts_with("o1")
            || name.starts_with("o3")
            || name.starts_with("o4")
        {
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
    /// The model's context window in tokens (default
    /// [`DEFAULT_CONTEXT_TOKENS`]): an answer sends the most recent turns
    /// of its history that fit beside the system prompt, the new message
    /// (with its sources) and the answer's `max_tokens`.
    #[serde(default)]
    pub context_tokens: Option<u32>,
    /// What the model takes: `text` and any of `image` and `pdf` (default:
    /// from the table of known model names, else text only).
    #[serde(default)]
    pub input: Option<Vec<workspace_api::conversations::ModelInput>>,
    /// How the model reasons: `none`, `effort` (OpenAI
    /// `reasoning_effort`), `budget` (Anthropic `thinking.budget_tokens`)
    /// or `always` (DeepSeek-R1 style `reasoning_content`); default from
    /// the table, else `none`.
    #[serde(default)]
    pub reasoning: Option<workspace_api::conversations::ReasoningMode>,
    /// The largest answer the model gives (bounds `max_tokens` and a
    /// reasoning budget); default from the table, else 4096.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// Where the model is served: several upstreams (keys, regions,
    /// providers) answering as one model, chosen by weight among the
    /// healthy ones. Empty: the model's own `provider`, `base_url`,
    /// `api_key` and `upstream_model` form one deployment, `default`;
    /// otherwise those keys are each deployment's defaults.
    #[serde(default)]
    pub deployments: Vec<DeploymentConfig>,
    /// Models tried in order when every deployment of this one failed (a
    /// fallback's own fallbacks are not followed).
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Models tried in order when the request does not fit this model's
    /// context window (the provider said so): say, the same family with a
    /// larger window. Without them such an error is the answer's.
    #[serde(default)]
    pub context_window_fallbacks: Vec<String>,
    /// Models tried in order when the provider refuses the content (a
    /// content-policy error). Empty (the default): the refusal is the
    /// answer's, as another model is not asked what one refused.
    #[serde(default)]
    pub content_policy_fallbacks: Vec<String>,
}

/// One `[[models.deployments]]` entry: an upstream serving the model.
/// Unset keys come from the model.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentConfig {
    /// Unique within the model (shown in streams, metrics and to admins;
    /// default `d1`, `d2`, … by position).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub provider: Option<ProviderKind>,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The API key. Prefer `api_key_env`.
    #[serde(default)]
    pub api_key: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub upstream_model: Option<String>,
    /// Its share of the requests among the healthy deployments (default
    /// 1; 0: only when every other deployment is unavailable).
    #[serde(default)]
    pub weight: Option<u32>,
    /// Requests a minute it may be sent, counted by every instance
    /// together; past it the request goes to another deployment.
    #[serde(default)]
    pub rpm: Option<u32>,
    /// Tokens (input and output) a minute it may be sent, counted by every
    /// instance together, as `rpm`.
    #[serde(default)]
    pub tpm: Option<u32>,
    /// Whether an answer broken off on another deployment continues here
    /// from its partial text, sent as the assistant's prefix (default:
    /// on for Anthropic, which continues a final assistant message; off
    /// for the OpenAI-style providers, which do not; an OpenAI-compatible
    /// server that does, such as vLLM, is sent
    /// `continue_final_message: true` and `add_generation_prompt: false`).
    /// Without it such an answer restarts from the beginning.
    #[serde(default)]
    pub prefill: Option<bool>,
}

impl std::fmt::Debug for DeploymentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("DeploymentConfig")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("upstream_model", &self.upstream_model)
            .field("weight", &self.weight)
            .field("rpm", &self.rpm)
            .field("tpm", &self.tpm)
            .field("prefill", &self.prefill)
            .finish()
    }
}

/// A deployment with the model's defaults applied (see
/// [`ModelConfig::resolved_deployments`]).
#[derive(Clone)]
pub struct ResolvedDeployment {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: String,
    pub api_key: Option<String>,
    pub upstream_model: String,
    pub weight: u32,
    pub rpm: Option<u32>,
    pub tpm: Option<u32>,
    pub prefill: bool,
}

impl ResolvedDeployment {
    /// What identifies the deployment's configuration without revealing
    /// its key: a SHA-256 of its URL, upstream model and key, cut to 16
    /// hex digits. A deployment disabled by a `401` stays disabled until
    /// this changes.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(self.base_url.as_bytes());
        hash.update([0]);
        hash.update(self.upstream_model.as_bytes());
        hash.update([0]);
        hash.update(self.api_key.as_deref().unwrap_or("").as_bytes());
        hash.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The context window assumed for a model that does not configure
/// `context_tokens` (and for the offline model): smaller than every
/// current hosted model's, so a long history is cut by the server, not
/// refused by the provider.
pub const DEFAULT_CONTEXT_TOKENS: u32 = 32_768;

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
            .field("context_tokens", &self.context_tokens)
            .field("input", &self.input)
            .field("reasoning", &self.reasoning)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("deployments", &self.deployments)
            .field("fallbacks", &self.fallbacks)
            .field("context_window_fallbacks", &self.context_window_fallbacks)
            .field("content_policy_fallbacks", &self.content_policy_fallbacks)
            .finish()
    }
}

impl ModelConfig {
    /// A model of this name with nothing else set (the provider inferred
    /// from the name).
    pub fn named(name: impl Into<String>) -> ModelConfig {
        ModelConfig {
            name: name.into(),
            provider: None,
            upstream_model: None,
            base_url: None,
            api_key: None,
            api_key_env: None,
            max_tokens: None,
            context_tokens: None,
            input: None,
            reasoning: None,
            max_output_tokens: None,
            deployments: Vec::new(),
            fallbacks: Vec::new(),
            context_window_fallbacks: Vec::new(),
            content_policy_fallbacks: Vec::new(),
        }
    }

    /// Its deployments with the model's defaults applied: the model's own
    /// keys as one deployment, `default`, when it lists none. An error
    /// names what is missing (the configuration's validation).
    pub fn resolved_deployments(&self) -> Result<Vec<ResolvedDeployment>> {
        let own = DeploymentConfig {
            name: Some("default".into()),
            ..DeploymentConfig::default()
        };
        let listed: &[DeploymentConfig] = if self.deployments.is_empty() {
            std::slice::from_ref(&own)
        } else {
            &self.deployments
        };
        let name = &self.name;
        let mut resolved: Vec<ResolvedDeployment> = Vec::with_capacity(listed.len());
        for (i, d) in listed.iter().enumerate() {
            let label = d.name.clone().unwrap_or_else(|| format!("d{}", i + 1));
            if label.is_empty()
                || label.len() > 64
                || !label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                bail!(
                    "models: {name:?}: deployment name {label:?} must be 1 to 64 letters, \
                     digits, '-', '_' or '.'"
                );
            }
            if resolved.iter().any(|r| r.name == label) {
                bail!("models: {name:?}: deployment {label:?} is configured twice");
            }
            let Some(kind) = d.provider.or_else(|| self.provider_kind()) else {
                bail!(
                    "models: {name:?}: set `provider` (the name has no known prefix: \
                     gpt-/o1/o3/o4, claude-, deepseek-, gemini-)"
                );
            };
            let Some(base_url) = d
                .base_url
                .as_deref()
                .or(self.base_url.as_deref())
                .or(kind.default_base_url())
            else {
                bail!(
                    "models: {name:?}: `base_url` is required for {}",
                    kind.as_str()
                );
            };
            let parsed = reqwest::Url::parse(base_url)
                .map_err(|e| anyhow::anyhow!("models: {name:?}: base_url {base_url:?}: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("models: {name:?}: base_url must be http or https");
            }
            let weight = d.weight.unwrap_or(1);
            if weight > 1000 {
                bail!("models: {name:?}: deployment {label:?}: weight must be at most 1000");
            }
            if d.rpm == Some(0) || d.tpm == Some(0) {
                bail!("models: {name:?}: deployment {label:?}: rpm and tpm must be positive");
            }
            resolved.push(ResolvedDeployment {
                name: label,
                kind,
                base_url: base_url.to_string(),
                api_key: d.api_key.clone().or_else(|| self.api_key.clone()),
                upstream_model: d
                    .upstream_model
                    .clone()
                    .or_else(|| self.upstream_model.clone())
                    .unwrap_or_else(|| self.name.clone()),
                weight,
                rpm: d.rpm,
                tpm: d.tpm,
                prefill: d.prefill.unwrap_or(kind == ProviderKind::Anthropic),
            });
        }
        Ok(resolved)
    }

    /// The configured or inferred provider.
    pub fn provider_kind(&self) -> Option<ProviderKind> {
        self.provider
            .or_else(|| ProviderKind::for_model_name(&self.name))
    }

    /// What the model takes and gives: its own fields, else the table of
    /// known names (by the upstream name when it has one, the name a
    /// provider knows the model by).
    pub fn capabilities(&self) -> super::capabilities::Capabilities {
        super::capabilities::resolve(
            self.upstream_model.as_deref().unwrap_or(&self.name),
            self.input.as_deref(),
            self.reasoning,
            self.max_output_tokens,
        )
    }
}

/// The name of the built-in development model.
pub const OFFLINE_MODEL_NAME: &str = "offline-dev-model";

impl super::Config {
    /// `<P>_API_KEY` and `<P>_BASE_URL` (P = OPENAI, ANTHROPIC, DEEPSEEK,
    /// GEMINI): when either is set, the models named in `<P>_MODELS`
    /// (comma-separated, each with the provider's prefix; default one
    /// current model) are offered, unless the file already configures a
    /// model of that name. Entries with `api_key_env` get their key here.
    pub(super) fn apply_provider_env(
        &mut self,
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<()> {
        for model in &mut self.models {
            if model.api_key.is_none()
                && let Some(var) = &model.api_key_env
            {
                model.api_key = get(var).filter(|v| !v.is_empty());
            }
            for deployment in &mut model.deployments {
                if deployment.api_key.is_none()
                    && let Some(var) = &deployment.api_key_env
                {
                    deployment.api_key = get(var).filter(|v| !v.is_empty());
                }
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
                    provider: Some(kind),
                    base_url: base_url.clone(),
                    api_key: key.clone(),
                    ..ModelConfig::named(name)
                });
            }
        }
        Ok(())
    }
}
