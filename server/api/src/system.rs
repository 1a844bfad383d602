//! Types of the service's own endpoints (health, readiness, the outbox).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Result of a health or readiness probe.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct HealthStatus {
    /// `ok` when the probe passes.
    pub status: String,
}

/// Query of `GET /api/system/outbox`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OutboxQuery {
    /// How many e-mails, newest first: 1 to 100, default 20.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// Default `limit` of `GET /api/system/outbox`.
pub const OUTBOX_DEFAULT_LIMIT: u32 = 20;

/// One e-mail kept by the default mailer.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OutboxEmail {
    pub id: uuid::Uuid,
    pub to_address: String,
    pub subject: String,
    /// The plain-text body (invitation e-mails carry their link).
    pub body_text: String,
    /// What it is about, e.g. `invitation`.
    pub kind: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Response of `GET /api/system/outbox`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OutboxPage {
    pub emails: Vec<OutboxEmail>,
}

/// Response of `GET /api/system/model-deployments`: every model offered,
/// with its deployments' health as every instance sees it (0.10.0).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ModelDeploymentsList {
    /// Sorted by model name.
    pub models: Vec<ModelDeployments>,
}

/// One model and where it is served.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ModelDeployments {
    pub model_id: uuid::Uuid,
    pub model: String,
    /// Whether answers are routed (several deployments or some fallback):
    /// a model with one deployment and no fallback is never cooled down.
    pub routed: bool,
    /// Models tried in order when every deployment failed.
    pub fallbacks: Vec<String>,
    /// Models tried when a request does not fit the context window.
    pub context_window_fallbacks: Vec<String>,
    /// Models tried when the provider refuses the content.
    pub content_policy_fallbacks: Vec<String>,
    /// In the configuration's order.
    pub deployments: Vec<ModelDeploymentStatus>,
}

/// What a deployment is now.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentState {
    /// Requests go to it.
    Healthy,
    /// It failed repeatedly (or answered `429`/`529`, or refused
    /// connections) and is left alone until `cooldown_remaining_secs`
    /// pass; then one request probes it.
    CoolingDown,
    /// Its provider refused its key (`401`/`403`): nothing is sent to it
    /// until its configuration (key, URL or upstream model) changes.
    Disabled,
}

/// One deployment of a model: its configuration (never its key or URL)
/// and its shared health.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ModelDeploymentStatus {
    pub name: String,
    /// `openai`, `anthropic`, `deepseek`, `gemini`, `openai_compatible` or
    /// `offline`.
    pub provider: String,
    pub weight: u32,
    /// Requests a minute it may be sent (`null`: no limit).
    #[schemars(with = "crate::schema::Nullable<u32>")]
    pub rpm: Option<u32>,
    /// Tokens a minute it may be sent (`null`: no limit).
    #[schemars(with = "crate::schema::Nullable<u32>")]
    pub tpm: Option<u32>,
    /// Whether a broken answer continues here from its partial text.
    pub prefill: bool,
    pub state: DeploymentState,
    /// Seconds until its cooldown ends (`null` unless cooling down).
    #[schemars(with = "crate::schema::Nullable<f64>")]
    pub cooldown_remaining_secs: Option<f64>,
    /// Failures in the current window (`providers.fail_window_secs`).
    pub recent_failures: i32,
    /// Cooldowns since the database was created.
    pub cooldowns: i64,
    /// The class of its last failure (`rate_limited`, `overloaded`,
    /// `server`, `connect`, `timeout`, `interrupted`, `auth`, …; `null`
    /// when it never failed).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub last_error_class: Option<String>,
    /// Seconds since its last failure (`null` when it never failed).
    #[schemars(with = "crate::schema::Nullable<f64>")]
    pub last_error_secs_ago: Option<f64>,
    /// The status that disabled it (`401` or `403`; `null` unless
    /// disabled).
    #[schemars(with = "crate::schema::Nullable<u16>")]
    pub disabled_status: Option<u16>,
    /// Requests and tokens counted in the current minute, every instance
    /// together (for `rpm`/`tpm`).
    pub minute_requests: i32,
    pub minute_tokens: i64,
}
