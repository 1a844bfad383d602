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
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// Active memberships only, oldest first.
    pub organizations: Vec<Membership>,
}

/// Query of `PUT /api/users/update`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UpdateUserQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The member whose role changes (a user id).
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
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub invite_id: Option<Uuid>,
    /// The user's last login; null if they never logged in.
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub last_active_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// The membership in the organization of the request, with the new role.
    pub organizations: Vec<Membership>,
}

/// Query of `GET /api/users/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// A 0-based page number (not a row count): the page starts at row
    /// `offset * limit`. Default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
    /// Rows per page, 1 to 100 (else `400 invalid_pagination`). Default 10.
    #[schemars(range(min = 1, max = "USERS_LIST_MAX_LIMIT"))]
    pub limit: Option<u32>,
    /// Also list suspended members (`status` `suspended`, after the active
    /// ones). Default false: the list of the released contract, which
    /// leaves suspended members out. An addition to the spec.
    #[serde(default)]
    pub include_suspended: Option<bool>,
}

/// The default of `limit` in `GET /api/users/list`.
pub const USERS_LIST_DEFAULT_LIMIT: u32 = 10;
/// The largest accepted `limit` in `GET /api/users/list`.
pub const USERS_LIST_MAX_LIMIT: u32 = 100;

/// The state of a row of the users list.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UserListStatus {
    /// An active member.
    Active,
    /// An invitation that can still be accepted.
    Pending,
    /// An invitation whose lifetime has passed.
    Expired,
    /// A suspended member (`POST /api/users/suspend`): no access to the
    /// organization until reactivated. An addition to the spec's values,
    /// answered by `users/list` only with `include_suspended=true` (and by
    /// `users/suspend` and `users/reactivate`).
    Suspended,
}

/// A row of the users list: a member (active or suspended) or an open
/// invitation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserListItem {
    /// The user's id; null for invitation rows.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub id: Option<Uuid>,
    pub email: String,
    /// Empty for an invitation made without names (`/api/invitations/create`).
    pub first_name: String,
    pub last_name: String,
    pub full_name: String,
    pub status: UserListStatus,
    /// The invitation's id for invitation rows; null for active users.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub invite_id: Option<Uuid>,
    /// When the invitation was created; null for active users.
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub invited_at: Option<DateTime<Utc>>,
    /// The last login of a member; null for invitation rows and for users
    /// who never logged in.
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub last_active_at: Option<DateTime<Utc>>,
    /// One element: this organization, with the member's role (or the
    /// invited role for invitation rows).
    pub organizations: Vec<Membership>,
}

/// A page of the users list.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserListResponse {
    pub users: Vec<UserListItem>,
    /// Members (active, and suspended ones when asked for) plus open
    /// (pending or expired) invitations, over all pages.
    pub total: u64,
}

/// Query of `POST /api/users/invite`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserInviteQuery {
    /// The organization.
    pub org_id: Uuid,
}

/// Body of `POST /api/users/invite`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserInviteRequest {
    #[schemars(email, length(max = 254))]
    pub email: String,
    #[schemars(length(min = 1, max = 100))]
    pub first_name: String,
    #[schemars(length(min = 1, max = 100))]
    pub last_name: String,
    /// The id of a role of the organization.
    pub role: Uuid,
}

/// The invited user, as returned by `POST /api/users/invite`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserInviteResponse {
    /// The invitation's id (not a user id).
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    pub full_name: String,
    /// The one organization the user is invited to, with the invited role.
    pub organizations: Membership,
}

/// Query of the member lifecycle operations (`POST /api/users/suspend`,
/// `POST /api/users/reactivate`, `DELETE /api/users/remove`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct MemberQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The member (a user id).
    pub user_id: Uuid,
}

// ---- Deleting and exporting one's own account (issue #34) ----

/// Body of `POST /api/users/me/delete`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AccountDeleteRequest {
    /// The account's current password, re-entered.
    #[schemars(length(max = 128))]
    pub password: String,
}

/// The answer to `POST /api/users/me/delete`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AccountDeletion {
    /// The account's deletion job.
    pub job_id: Uuid,
    pub state: crate::orgs::DeletionState,
    /// The organizations deleted with the account (the personal one, and
    /// those where the account was the only member), each with its job.
    pub organizations: Vec<crate::orgs::OrgDeletion>,
}

/// `GET /api/users/me/export`: everything the service holds about the
/// account, as one JSON document.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AccountExport {
    /// Always `workspace.account-export`.
    pub format: String,
    /// The version of this document's shape: 1.
    pub version: u32,
    #[serde(serialize_with = "crate::time::serialize")]
    pub exported_at: DateTime<Utc>,
    pub profile: ExportProfile,
    /// Every membership, in any state, oldest first.
    pub memberships: Vec<ExportMembership>,
    /// The account's chat sessions (private to it), with their messages.
    pub chats: Vec<ExportChat>,
    /// The conversations the account started, with all their messages.
    pub conversations: Vec<ExportConversation>,
    /// The account's uploads: what they are, not their bytes.
    pub uploads: Vec<ExportUpload>,
}

/// The account in an export.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportProfile {
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub last_active_at: Option<DateTime<Utc>>,
}

/// A membership in an export.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportMembership {
    pub organization_id: Uuid,
    pub organization_name: String,
    pub slug: String,
    /// The account's personal organization.
    pub is_personal: bool,
    pub role_name: String,
    /// `active`, `invited`, `suspended` or `deleted`.
    pub status: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub joined_at: DateTime<Utc>,
}

/// A chat session in an export. `messages` is its last field.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportChat {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub title: String,
    /// `ACTIVE`, `ARCHIVED` or `DELETED`.
    pub status: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// In order.
    pub messages: Vec<ExportChatMessage>,
}

/// A chat message in an export.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportChatMessage {
    pub id: Uuid,
    /// `USER` or `MODEL`.
    pub role: String,
    pub content: String,
    pub status: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// A conversation in an export. `messages` is its last field.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportConversation {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub title: String,
    pub is_archived: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// Every message, in order (the account's own and the answers).
    pub messages: Vec<ExportConversationMessage>,
}

/// A conversation message in an export.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportConversationMessage {
    pub id: Uuid,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub status: String,
    /// Whether the account wrote (or asked for) it.
    pub by_me: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// An upload in an export (its bytes are not included).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ExportUpload {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// The chat it was attached to, if any.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub chat_id: Option<Uuid>,
    pub filename: String,
    pub content_type: String,
    pub file_size: i64,
    /// SHA-256 of the bytes, hex.
    pub sha256: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}
