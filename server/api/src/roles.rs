//! Types of the Roles area (`/api/roles`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A permission of the global catalog (`resource:action`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Permission {
    pub id: Uuid,
    pub name: String,
    pub description: String,
}

/// A role, as listed (without its permissions).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Role {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// 0 to 100, higher means more privileges.
    pub hierarchy_level: i32,
    /// The role's organization; `null` for system roles (every organization
    /// has its own copy of the four system roles).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub organization_id: Option<Uuid>,
    pub is_system_role: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A custom role with its permissions, as `POST /api/roles/create` and
/// `PUT /api/roles/update` answer it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct RoleWithPermissions {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// 0 to 100, higher means more privileges.
    pub hierarchy_level: i32,
    /// The role's organization (never null here: system roles are neither
    /// created nor updated).
    pub organization_id: Uuid,
    /// Always false.
    pub is_system_role: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// The role's permissions, sorted by name.
    pub permissions: Vec<Permission>,
}

/// Body of `POST /api/roles/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CreateRoleRequest {
    /// Unique within the organization (case-insensitive), 1 to 64 characters.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// At most 1000 characters.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub description: Option<String>,
    /// 0 to 100, at most the caller's own level.
    #[schemars(range(min = 0, max = 100))]
    pub hierarchy_level: i32,
    /// At most 500 permissions.
    #[schemars(length(max = 500))]
    pub permission_ids: Vec<Uuid>,
}

/// Body of `PUT /api/roles/update`; omitted fields are unchanged.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct UpdateRoleRequest {
    /// 1 to 64 characters.
    #[serde(default)]
    #[schemars(length(min = 1, max = 64))]
    pub name: Option<String>,
    /// At most 1000 characters.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub description: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub hierarchy_level: Option<i32>,
    /// A given list replaces the role's permissions (at most 500).
    #[serde(default)]
    #[schemars(length(max = 500))]
    pub permission_ids: Option<Vec<Uuid>>,
}

/// Query of role operations on one role.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct RoleQuery {
    /// The organization.
    pub org_id: Uuid,
    /// A role of the organization.
    pub role_id: Uuid,
}

/// Body of `POST /api/roles/permission`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CreatePermissionRequest {
    /// `resource:action`, lowercase letters and underscores, `*` allowed as
    /// either half.
    #[schemars(length(min = 3, max = 64))]
    pub name: String,
    /// Optional; defaults to the empty string. At most 1000 characters.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub description: Option<String>,
}

/// Query of `DELETE /api/roles/permission`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct PermissionQuery {
    /// The permission's id.
    pub permission_id: Uuid,
}
