//! The configured models and the clients that serve them.

use super::ChatModel;
use super::anthropic::AnthropicClient;
use super::offline::OfflineModel;
use super::openai::OpenAiClient;
use super::router::{Deployment, RoutedModel, RouterContext};
use crate::config::capabilities::{self, Capabilities};
use crate::config::{Config, DEFAULT_CONTEXT_TOKENS, OFFLINE_MODEL_NAME, ProviderKind};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// When and how often to retry a provider, and how long to wait for data.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub backoff: Duration,
    pub idle_timeout: Duration,
    /// Longest wait for an answer asked for in one piece
    /// ([`super::ChatRequest::whole`]).
    pub answer_timeout: Duration,
}

/// A model as configured, before it has its id.
pub struct ModelSpec {
    pub name: String,
    /// `openai`, `anthropic`, `deepseek`, `gemini`, `openai_compatible` or
    /// `offline`.
    pub provider: String,
    pub max_tokens: Option<u32>,
    /// The context window in tokens (see `ModelConfig::context_tokens`).
    pub context_tokens: u32,
    /// What it takes and gives (see `config::capabilities`).
    pub capabilities: Capabilities,
    /// Where it is served (at least one).
    pub deployments: Vec<Arc<Deployment>>,
    /// `fallbacks`, `context_window_fallbacks`, `content_policy_fallbacks`.
    pub fallbacks: [Vec<String>; 3],
}

/// A model the server offers.
#[derive(Clone)]
pub struct ModelEntry {
    pub id: Uuid,
    pub name: String,
    pub provider: String,
    pub max_tokens: Option<u32>,
    /// The context window in tokens (see `ModelConfig::context_tokens`).
    pub context_tokens: u32,
    /// What it takes and gives (see `config::capabilities`).
    pub capabilities: Arc<Capabilities>,
    /// The model as callers use it: [`Self::routed`], routing among its
    /// deployments and fallbacks.
    pub chat: Arc<dyn ChatModel>,
    pub routed: Arc<RoutedModel>,
}

impl ModelEntry {
    /// A model answered by one client, not routed (no deployments' health
    /// is read or written): for tests and tools that hold a client.
    pub fn direct(
        name: &str,
        provider: &str,
        context_tokens: u32,
        capabilities: Capabilities,
        client: Arc<dyn ChatModel>,
    ) -> ModelEntry {
        let deployment = Arc::new(Deployment {
            name: "default".into(),
            provider: provider.into(),
            weight: 1,
            rpm: None,
            tpm: None,
            prefill: false,
            fingerprint: String::new(),
            key_id: String::new(),
            client,
        });
        let routed = Arc::new(RoutedModel::new(
            name.into(),
            vec![deployment],
            Default::default(),
            &capabilities,
            None,
        ));
        ModelEntry {
            id: Uuid::new_v4(),
            name: name.into(),
            provider: provider.into(),
            max_tokens: None,
            context_tokens,
            capabilities: Arc::new(capabilities),
            chat: routed.clone(),
            routed,
        }
    }
}

/// The models this server offers, sorted by name.
pub struct ModelRegistry {
    entries: Vec<ModelEntry>,
    pub retry: RetryPolicy,
}

/// The HTTP client for providers: a connect timeout but no total timeout,
/// since answers stream as long as they last.
pub fn http_client(config: &Config) -> Result<reqwest::Client> {
    crate::fetch::operator_client()
        .connect_timeout(Duration::from_secs(config.providers.connect_timeout_secs))
        .pool_idle_timeout(Duration::from_secs(60))
        .user_agent(concat!("workspace-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the provider HTTP client")
}

/// Builds a client for every configured model (plus the offline model
/// unless disabled). The configuration was validated.
pub fn configured_models(config: &Config) -> Result<Vec<ModelSpec>> {
    let http = http_client(config)?;
    let mut specs = Vec::new();
    if config.providers.offline_model {
        let client = Arc::new(OfflineModel {
            chunk_delay: Duration::from_millis(config.providers.offline_chunk_delay_ms),
        });
        specs.push(ModelSpec {
            name: OFFLINE_MODEL_NAME.to_string(),
            provider: "offline".to_string(),
            max_tokens: None,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            capabilities: capabilities::offline(),
            deployments: vec![Arc::new(Deployment {
                name: "default".into(),
                provider: "offline".into(),
                weight: 1,
                rpm: None,
                tpm: None,
                prefill: false,
                fingerprint: String::new(),
                key_id: String::new(),
                client,
            })],
            fallbacks: Default::default(),
        });
    }
    for model in &config.models {
        let mut deployments = Vec::new();
        for d in model.resolved_deployments()? {
            let key = d.api_key.clone();
            let upstream = d.upstream_model.clone();
            let base_url = d.base_url.as_str();
            let client: Arc<dyn ChatModel> = match d.kind {
                ProviderKind::Anthropic => {
                    Arc::new(AnthropicClient::new(http.clone(), base_url, key, upstream))
                }
                ProviderKind::Openai => Arc::new(
                    OpenAiClient::new(http.clone(), base_url, key, upstream)
                        .with_max_completion_tokens(),
                ),
                ProviderKind::Deepseek | ProviderKind::Gemini | ProviderKind::OpenaiCompatible => {
                    Arc::new(OpenAiClient::new(http.clone(), base_url, key, upstream))
                }
            };
            let key_id = crate::config::ResolvedDeployment {
                base_url: String::new(),
                upstream_model: String::new(),
                ..d.clone()
            }
            .fingerprint();
            deployments.push(Arc::new(Deployment {
                fingerprint: d.fingerprint(),
                key_id,
                name: d.name,
                provider: d.kind.as_str().to_string(),
                weight: d.weight,
                rpm: d.rpm,
                tpm: d.tpm,
                prefill: d.prefill,
                client,
            }));
        }
        let provider = deployments
            .first()
            .map(|d| d.provider.clone())
            .with_context(|| format!("model {:?} has no deployment", model.name))?;
        specs.push(ModelSpec {
            name: model.name.clone(),
            provider,
            max_tokens: model.max_tokens,
            context_tokens: model.context_tokens.unwrap_or(DEFAULT_CONTEXT_TOKENS),
            capabilities: model.capabilities(),
            deployments,
            fallbacks: [
                model.fallbacks.clone(),
                model.context_window_fallbacks.clone(),
                model.content_policy_fallbacks.clone(),
            ],
        });
    }
    Ok(specs)
}

impl ModelRegistry {
    /// `ids[i]` is the stored id of `specs[i]`. With a `router` context,
    /// models with several deployments or fallbacks route their answers
    /// (see [`super::router`]); without one (tests of the clients), each
    /// model answers from its first deployment.
    pub fn new(
        specs: Vec<ModelSpec>,
        ids: Vec<Uuid>,
        retry: RetryPolicy,
        router: Option<Arc<RouterContext>>,
    ) -> ModelRegistry {
        let mut entries: Vec<ModelEntry> = specs
            .into_iter()
            .zip(ids)
            .map(|(s, id)| {
                let routed = Arc::new(RoutedModel::new(
                    s.name.clone(),
                    s.deployments,
                    s.fallbacks,
                    &s.capabilities,
                    router.clone(),
                ));
                ModelEntry {
                    id,
                    name: s.name,
                    provider: s.provider,
                    max_tokens: s.max_tokens,
                    context_tokens: s.context_tokens,
                    capabilities: Arc::new(s.capabilities),
                    chat: routed.clone(),
                    routed,
                }
            })
            .collect();
        let by_name: HashMap<String, Arc<RoutedModel>> = entries
            .iter()
            .map(|e| (e.name.clone(), e.routed.clone()))
            .collect();
        for entry in &entries {
            entry.routed.link(&by_name);
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        ModelRegistry { entries, retry }
    }

    pub fn list(&self) -> &[ModelEntry] {
        &self.entries
    }

    pub fn get(&self, id: Uuid) -> Option<&ModelEntry> {
        self.entries.iter().find(|e| e.id == id)
    }
}

impl RetryPolicy {
    pub fn from_config(config: &Config) -> RetryPolicy {
        RetryPolicy {
            max_retries: config.providers.max_retries,
            backoff: Duration::from_millis(config.providers.retry_backoff_ms),
            idle_timeout: Duration::from_secs(config.providers.idle_timeout_secs),
            answer_timeout: Duration::from_secs(config.providers.answer_timeout_secs),
        }
    }
}
