//! Types of personal access tokens (`/api/auth/tokens`): bearer tokens for
//! automation (CI, scripts, the CLI's `WORKSPACE_TOKEN`) that act for their
//! user within the scopes they were given.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The prefix every personal access token starts with, so that secret
/// scanners can recognise one: `wsp_`, 32 random characters of
/// `[0-9A-Za-z]`, then a 6-character checksum (CRC-32 of the rest, in the
/// same alphabet), 42 characters in all.
pub const TOKEN_PREFIX: &str = "wsp_";

/// The most scopes one token carries.
pub const TOKEN_SCOPES_MAX: usize = 64;

/// The longest lifetime a token may be given (days).
pub const TOKEN_LIFETIME_MAX_DAYS: u32 = 366;

/// Body of `POST /api/auth/tokens/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCreate {
    /// What the token is for (`ci-deploy`); 1 to 100 characters.
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    /// Permission names (`resource:action`, wildcards allowed: `kb:*`,
    /// `*:read`) the token may use; at every request they are intersected
    /// with what its user's role grants in the organization addressed, so
    /// a token never does more than its user. At least one, at most 64.
    #[schemars(length(min = 1, max = 64))]
    pub scopes: Vec<String>,
    /// Days until the token expires (1 to 366, default 90).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 366))]
    pub expires_in_days: Option<u32>,
}

/// A personal access token as listed: never its secret.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct TokenSummary {
    pub id: Uuid,
    pub name: String,
    /// The token's first 12 characters (`wsp_` and 8 more), to recognise
    /// it.
    pub prefix: String,
    pub scopes: Vec<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// When a request last used it (to the minute); null if never.
    #[schemars(with = "crate::schema::Nullable<chrono::DateTime<chrono::Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A token just created: the only time its secret is shown.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct TokenCreated {
    pub id: Uuid,
    pub name: String,
    /// The token's first 12 characters (`wsp_` and 8 more), to recognise
    /// it.
    pub prefix: String,
    pub scopes: Vec<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// Always null: the token has not been used yet.
    #[schemars(with = "crate::schema::Nullable<chrono::DateTime<chrono::Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The secret: send it as `Authorization: Bearer <token>`. Stored
    /// only as a hash; it cannot be shown again.
    pub token: String,
}

/// Query of `DELETE /api/auth/tokens/revoke`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct TokenQuery {
    /// The token to revoke (its `id` as listed).
    pub token_id: Uuid,
}
