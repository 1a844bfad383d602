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

/// Query of `PUT /api/users/update`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UpdateUserQuery {
    pub org_id: Uuid,
    pub user_id: Uuid,
}

/// Body of `PUT /api/users/update`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UpdateUserRoleRequest {
    pub role_id: Uuid,
}

/// A member after a role change.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UpdatedUser {
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub full_name: String,
    /// Always `active` (only active members can be changed).
    pub status: String,
    /// Always `null`: the user is a member, not an invitation.
    pub invite_id: Option<Uuid>,
    pub last_active_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The membership in the organization of the request, with the new role.
    pub organizations: Vec<Membership>,
}
