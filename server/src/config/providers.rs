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
            answer_timeout_secs: 600,
            max_retries: 2,
            retry_backoff_ms: 250,
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
            .finish()
    }
}

impl ModelConfig {
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
                    context_tokens: None,
                    input: None,
                    reasoning: None,
                    max_output_tokens: None,
                });
            }
        }
        Ok(())
    }
}
