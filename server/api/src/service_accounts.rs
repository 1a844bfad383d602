//! Types of organization service accounts (`/api/org/service_accounts`):
//! principals for automation that belong to one organization, hold a role
//! there like a member and act through personal access tokens.

use crate::tokens::{TokenCreated, TokenSummary};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The most service accounts one organization holds.
pub const SERVICE_ACCOUNTS_PER_ORG_MAX: i64 = 100;

/// Body of `POST /api/org/service_accounts/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountCreate {
    /// What the account is for (`ci-deploy`); 1 to 100 characters.
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    /// The account's role in the organization: any role but the owner
    /// role, at most the caller's own level.
    pub role_id: Uuid,
    /// The scopes of its first token (as for personal access tokens): at
    /// every request intersected with what the account's role grants.
    #[schemars(length(min = 1, max = 64))]
    pub scopes: Vec<String>,
    /// Days until that token expires (1 to 366, default 90).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 366))]
    pub expires_in_days: Option<u32>,
}

/// Body of `POST /api/org/service_accounts/rotate`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountRotate {
    /// The new token's scopes; the newest live token's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub scopes: Option<Vec<String>>,
    /// Days until the new token expires (1 to 366, default 90).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 366))]
    pub expires_in_days: Option<u32>,
}

/// A service account, with its live tokens (never their secrets).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ServiceAccount {
    pub id: Uuid,
    pub org_id: Uuid,
    pub name: String,
    pub role_id: Uuid,
    pub role_name: String,
    /// `active`, or `suspended` (`POST /api/users/suspend` with the
    /// account's id: its tokens are refused until it is reactivated).
    pub status: String,
    /// Who created it; null once that account is gone.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub created_by: Option<Uuid>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// Its live tokens, newest first.
    pub tokens: Vec<TokenSummary>,
}

/// A service account just created, with its first token: the only time
/// the token's secret is shown.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ServiceAccountCreated {
    pub service_account: ServiceAccount,
    pub token: TokenCreated,
}

/// Query of the operations on one service account.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ServiceAccountQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The service account (its user id, as `users/list` shows it).
    pub service_account_id: Uuid,
}
