//! Types of the Organizations area (`/api/org`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The caller's role in an organization.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserRole {
    pub role_id: Uuid,
    pub role_name: String,
    /// The role's hierarchy level; higher means more permissions.
    pub level: i32,
}

/// An organization, with the caller's role in it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Organization {
    pub id: Uuid,
    pub name: String,
    /// URL slug, unique across the service (an addition to the spec's shape).
    pub slug: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    pub user_role: UserRole,
}

/// Query of `POST /api/org/create_org`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CreateOrgQuery {
    /// The organization's name: 1 to 100 characters after trimming, not
    /// blank, without control characters (`400 invalid_name`).
    #[schemars(
        length(min = 1, max = 100),
        regex(pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub name: String,
}

/// Body of `PUT /api/org/update`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UpdateOrgRequest {
    /// The organization's new name, with the rules of `create_org`: 1 to
    /// 100 characters after trimming, not blank, without control
    /// characters (`400 invalid_name`).
    #[schemars(
        length(min = 1, max = 100),
        regex(pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub name: String,
}

/// Body of `POST /api/org/transfer_ownership`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct TransferOwnershipRequest {
    /// The active member who becomes the owner (a user id).
    pub user_id: Uuid,
}

/// Body of `POST /api/org/add_member`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AddMemberRequest {
    pub organization_id: Uuid,
    pub user_id: Uuid,
    pub role_id: Uuid,
}

/// A human-readable confirmation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct MessageResponse {
    pub message: String,
}

/// The default number of items of a list operation (`limit`).
pub const LIST_DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` of a list operation.
pub const LIST_MAX_LIMIT: u32 = 500;

/// Paging of a list operation that is not scoped to an organization.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct PageQuery {
    /// Items to return: 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// An organization and the paging of a list operation in it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrgPageQuery {
    /// The organization.
    pub org_id: Uuid,
    /// Items to return: 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// The `org_id` query parameter of org-scoped operations.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrgQuery {
    /// The organization.
    pub org_id: Uuid,
}

/// `org_id` where the spec lists none: optional, the caller's personal
/// organization when absent.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct PersonalOrgQuery {
    /// The organization (absent: the caller's personal organization).
    #[serde(default)]
    pub org_id: Option<Uuid>,
}

/// Feature gates and quotas of an organization, with the server's
/// defaults filled in where the organization has no override.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct OrgFeatures {
    /// `add_member` is allowed.
    pub team_members: bool,
    /// Knowledge-base and chat file uploads are allowed.
    pub file_upload: bool,
    /// Attachments in chat messages are allowed.
    pub chat_uploads: bool,
    /// Maximum concurrent MCP connections (sessions).
    pub mcp_sessions: u32,
    /// Maximum chat messages per day.
    pub daily_chat_limit: u32,
}

/// A feature gate or quota name.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FeatureName {
    TeamMembers,
    FileUpload,
    ChatUploads,
    McpSessions,
    DailyChatLimit,
}

/// Body of `PUT /api/org/features`. Given fields become the organization's
/// overrides; omitted fields are unchanged; fields named in `reset` return
/// to the server default (naming a field in both is `400 invalid_request`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct OrgFeaturesUpdate {
    #[serde(default)]
    pub team_members: Option<bool>,
    #[serde(default)]
    pub file_upload: Option<bool>,
    #[serde(default)]
    pub chat_uploads: Option<bool>,
    #[serde(default)]
    #[schemars(range(max = 2147483647))]
    pub mcp_sessions: Option<u32>,
    #[serde(default)]
    #[schemars(range(max = 2147483647))]
    pub daily_chat_limit: Option<u32>,
    #[serde(default)]
    pub reset: Vec<FeatureName>,
}

// ---- Deleting an organization (issue #34) ----

/// Body of `DELETE /api/org/delete`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrgDeleteRequest {
    /// The organization's exact name (case and spaces included), as a
    /// confirmation (`400 confirmation_mismatch` otherwise).
    #[schemars(length(max = 200))]
    pub confirm_name: String,
}

/// Where a deletion job is.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeletionState {
    /// Waiting for a worker (of any instance).
    Queued,
    /// A worker is deleting (or will resume after a failed attempt).
    Running,
    /// Everything is deleted.
    Done,
    /// It gave up (`last_error` says why); the organization stays
    /// unusable. An operator can queue it again.
    Failed,
}

/// The deletion of an organization, as its job reports it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrgDeletion {
    /// The deletion job.
    pub job_id: Uuid,
    pub organization_id: Uuid,
    /// The organization's name when its deletion was requested
    /// (`personal organization` for one deleted with its account).
    pub organization_name: String,
    pub state: DeletionState,
    /// The step being worked on (`stop`, `grants`, `files`, one per
    /// kind of content, `organization`, `store`), `done` at the end.
    pub step: String,
    /// Rows deleted so far, over every table.
    pub rows_deleted: i64,
    /// Stored files deleted so far.
    pub files_deleted: i64,
    /// MCP grants revoked at their provider.
    pub grants_revoked: i32,
    /// MCP grants whose revocation still failed at the job's last attempt
    /// (their tokens were deleted all the same).
    pub grants_unrevoked: i32,
    /// Attempts so far (a crashed or failed attempt is resumed by another).
    pub attempts: i32,
    /// Why the last attempt failed, if it did.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub last_error: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub requested_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub finished_at: Option<DateTime<Utc>>,
}
