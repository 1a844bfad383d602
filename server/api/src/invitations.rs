//! Types of the Invitations area (`/api/invitations`) and of
//! `POST /api/auth/signup_invite`.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The state of an invitation. `expired` is derived from time: a `pending`
/// invitation whose `expires_at` has passed is reported as `expired`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InvitationStatus {
    Pending,
    Accepted,
    Expired,
    Revoked,
}

impl InvitationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InvitationStatus::Pending => "pending",
            InvitationStatus::Accepted => "accepted",
            InvitationStatus::Expired => "expired",
            InvitationStatus::Revoked => "revoked",
        }
    }
}

/// An object referenced by id, with its display name.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct NamedRef {
    pub id: Uuid,
    pub name: String,
}

/// Query of the operations scoped to one organization.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationOrgQuery {
    /// The organization.
    pub org_id: Uuid,
}

/// Query of `GET /api/invitations/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// Only invitations in this state (default: all).
    pub status: Option<InvitationStatus>,
    /// Items to return: 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// Query of the operations addressed by invitation id.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationIdQuery {
    /// The invitation's id.
    pub invitation_id: Uuid,
}

/// Query of `GET /api/invitations/validate`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationTokenQuery {
    /// The token from the invitation e-mail's link (any other string,
    /// however long, is answered `valid: false` without a lookup).
    pub token: String,
}

/// Body of `POST /api/invitations/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationCreateRequest {
    /// The invitee's e-mail address (stored normalised: trimmed, lower-cased).
    #[schemars(email, length(max = 254))]
    pub email: String,
    /// A role of the organization.
    pub role_id: Uuid,
    /// An optional personal message, included in the e-mail (at most 2000
    /// characters).
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub message: Option<String>,
}

/// An invitation, as returned by `create` and `get`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Invitation {
    pub id: Uuid,
    pub email: String,
    pub status: InvitationStatus,
    pub role: NamedRef,
    pub organization: NamedRef,
    /// The inviting user (`name` is their full name); null when that
    /// account no longer exists.
    #[schemars(with = "crate::schema::Nullable<NamedRef>")]
    pub invited_by: Option<NamedRef>,
    /// The acceptance token (single use), issued at creation and kept
    /// through `resend`. Null only for invitations created before tokens
    /// were kept.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub token: Option<String>,
    /// The personal message; null when there is none.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub message: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: DateTime<Utc>,
}

/// An invitation in a listing (no token, no organization).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationListItem {
    pub id: Uuid,
    pub email: String,
    pub status: InvitationStatus,
    pub role: NamedRef,
    /// The inviting user (`name` is their full name); null when that
    /// account no longer exists.
    #[schemars(with = "crate::schema::Nullable<NamedRef>")]
    pub invited_by: Option<NamedRef>,
    /// The personal message; null when there is none.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub message: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: DateTime<Utc>,
}

/// What a valid token reveals, to show on an acceptance page.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationPublic {
    pub id: Uuid,
    pub email: String,
    pub organization: NamedRef,
    pub role: NamedRef,
    /// The inviting user (`name` is their full name); null when that
    /// account no longer exists.
    #[schemars(with = "crate::schema::Nullable<NamedRef>")]
    pub invited_by: Option<NamedRef>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: DateTime<Utc>,
}

/// Result of `GET /api/invitations/validate`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationValidation {
    /// Whether the token belongs to a `pending` invitation.
    pub valid: bool,
    /// The invitation when `valid`, else null.
    #[schemars(with = "crate::schema::Nullable<InvitationPublic>")]
    pub invitation: Option<InvitationPublic>,
    /// An addition to the spec: whether the invited address already has an
    /// account with a password (always `false` when not `valid`).
    /// Accepting then joins that account to the organization:
    /// `POST /api/auth/signup_invite` takes the account's current password
    /// and ignores the names, so a page asks for the password only. Only
    /// the holder of the invitation's token learns it.
    pub existing_account: bool,
}

/// The invitation part of the resend response.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationResent {
    pub id: Uuid,
    pub email: String,
    pub status: InvitationStatus,
    #[serde(serialize_with = "crate::time::serialize")]
    pub expires_at: DateTime<Utc>,
}

/// Result of `POST /api/invitations/resend`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationResendResponse {
    pub success: bool,
    pub message: String,
    pub invitation: InvitationResent,
}

/// Result of `DELETE /api/invitations/revoke`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationRevokeResponse {
    pub success: bool,
    pub message: String,
}

/// One invitee of a bulk creation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationBulkItem {
    #[schemars(email, length(max = 254))]
    pub email: String,
    pub role_id: Uuid,
}

/// Body of `POST /api/invitations/bulk_create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationBulkCreateRequest {
    /// 1 to 100 invitees.
    #[schemars(length(min = 1, max = 100))]
    pub invitations: Vec<InvitationBulkItem>,
    /// An optional personal message for every invitee (at most 2000
    /// characters).
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub message: Option<String>,
}

/// Outcome of one item of a bulk creation.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InvitationBulkItemStatus {
    /// Created (the invitation's state).
    Pending,
    /// Not created; see `error_code` and `error`.
    Failed,
}

/// Result of one item of a bulk creation, in request order.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationBulkResult {
    /// The new invitation's id; null when the item failed.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub id: Option<Uuid>,
    pub email: String,
    pub status: InvitationBulkItemStatus,
    /// For a failed item: the `error_code` that `create` would have
    /// returned; null for a created one.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error_code: Option<String>,
    /// For a failed item: the reason, for people; null for a created one.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
}

/// Result of `POST /api/invitations/bulk_create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InvitationBulkCreateResponse {
    /// True when every item was created.
    pub success: bool,
    pub created: u32,
    pub failed: u32,
    pub invitations: Vec<InvitationBulkResult>,
}

/// Body of `POST /api/auth/signup_invite`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SignupInviteRequest {
    #[schemars(length(min = 1, max = 100))]
    pub first_name: String,
    #[schemars(length(min = 1, max = 100))]
    pub last_name: String,
    /// See the password policy of `POST /api/auth/signup`.
    #[schemars(length(max = 128))]
    pub password: String,
    /// The token from the invitation e-mail's link.
    #[schemars(length(max = 512))]
    pub invite_token: String,
}

/// The account created (or completed) by `POST /api/auth/signup_invite`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SignupInviteResponse {
    pub id: Uuid,
    /// The invitation's e-mail address.
    pub email: String,
    pub first_name: String,
    pub last_name: String,
    /// A JWT access token, as returned by `POST /api/auth/login`.
    pub access_token: String,
    /// An addition to the spec's shape: the access token's lifetime in
    /// seconds, as from `login`.
    pub expires_in: u64,
    /// An addition to the spec's shape: the session's refresh token, as
    /// from `login` (see `POST /api/auth/refresh`).
    pub refresh_token: String,
    /// Lifetime of the refresh token in seconds from issue.
    pub refresh_expires_in: u64,
    /// The session these tokens belong to.
    pub session_id: Uuid,
}
