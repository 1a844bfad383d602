//! Types of the Users area (`/api/users`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A user's membership in one organization.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Membership {
    /// The organization's id.
    pub id: Uuid,
    /// The organization's name.
    pub name: String,
    /// The organization's URL slug (unique across the service).
    pub slug: String,
    pub role_id: Uuid,
    pub role_name: String,
}

/// The authenticated user, with their active memberships.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CurrentUser {
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub full_name: String,
    pub created_at: DateTime<Utc>,
    /// Active memberships only, oldest first.
    pub organizations: Vec<Membership>,
}
