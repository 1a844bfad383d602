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
