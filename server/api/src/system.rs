//! Types of the service's own endpoints (health and readiness).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Result of a health or readiness probe.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct HealthStatus {
    /// `ok` when the probe passes.
    pub status: String,
}
