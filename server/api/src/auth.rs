//! Types of the Authentication area (`/api/auth`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Body of `POST /api/auth/signup`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SignupRequest {
    /// E-mail address; compared case-insensitively and stored normalised
    /// (trimmed, lower-cased).
    #[schemars(email, length(max = 254))]
    pub email: String,
    #[schemars(length(min = 1, max = 100))]
    pub first_name: String,
    #[schemars(length(min = 1, max = 100))]
    pub last_name: String,
    /// See the password policy in the operation's description.
    #[schemars(length(min = 10, max = 128))]
    pub password: String,
}

/// The account created by `POST /api/auth/signup`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SignupResponse {
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
}

/// Body of `POST /api/auth/login`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct LoginRequest {
    /// At most 254 characters (RFC 5321).
    #[schemars(length(max = 254))]
    pub email: String,
    /// At most 128 characters (the password policy's limit).
    #[schemars(length(max = 128))]
    pub password: String,
}

/// The kind of token issued; always `bearer`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TokenType {
    Bearer,
}

/// A bearer access token and the refresh token of its session (from
/// `POST /api/auth/login` and `POST /api/auth/refresh`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct LoginResponse {
    /// A JWT (HS256) to send as `Authorization: Bearer <access_token>`.
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: TokenType,
    /// Lifetime of the token in seconds from issue (an addition to the
    /// spec's shape, as in OAuth 2.0 token responses).
    pub expires_in: u64,
    /// An addition to the spec's shape: the token that gets a new access
    /// token from `POST /api/auth/refresh` (`wsr_` and 43 characters).
    /// Single-use: every refresh returns the next one. Keep it secret (it
    /// lasts much longer than the access token); never send it as a bearer
    /// token.
    pub refresh_token: String,
    /// Lifetime of the refresh token in seconds from issue.
    pub refresh_expires_in: u64,
    /// The session these tokens belong to (the access token's `sid` claim;
    /// see `GET /api/auth/sessions`).
    pub session_id: Uuid,
}

/// The prefix of every refresh token (so that secret scanners can match
/// them).
pub const REFRESH_TOKEN_PREFIX: &str = "wsr_";

/// The prefix of every password-reset token.
pub const RESET_TOKEN_PREFIX: &str = "wsreset_";

/// Body of `POST /api/auth/refresh`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct RefreshRequest {
    /// The refresh token of the last login or refresh.
    #[schemars(length(max = 256))]
    pub refresh_token: String,
}

/// One of the caller's live sessions (`GET /api/auth/sessions`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Session {
    pub id: Uuid,
    /// When the session began (the login).
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// The last login or refresh of the session (at most one access-token
    /// lifetime behind its last request).
    pub last_used_at: chrono::DateTime<chrono::Utc>,
    /// When the session ends unless refreshed before.
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// The client address of the last login or refresh (behind a trusted
    /// proxy, the address it forwarded).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub ip_address: Option<String>,
    /// The `User-Agent` of the last login or refresh (at most 512
    /// characters; `null` when the client sent none).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub user_agent: Option<String>,
    /// Whether this is the session of the access token of the request.
    pub current: bool,
}

/// Query of `DELETE /api/auth/revoke_session`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SessionQuery {
    /// The session to revoke (an `id` of `GET /api/auth/sessions`).
    pub session_id: Uuid,
}

/// How many sessions an operation revoked.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SessionsRevoked {
    pub message: String,
    /// Sessions revoked by this request (not counting ones already ended).
    pub revoked: u64,
}

/// Body of `POST /api/auth/forgot_password`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ForgotPasswordRequest {
    /// The account's e-mail address (at most 254 characters).
    #[schemars(length(max = 254))]
    pub email: String,
}

/// The answer of `POST /api/auth/forgot_password`: always the same.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ForgotPasswordResponse {
    pub message: String,
}

/// Body of `POST /api/auth/reset_password`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ResetPasswordRequest {
    /// The token of the reset e-mail's link.
    #[schemars(length(max = 256))]
    pub token: String,
    /// See the password policy of `POST /api/auth/signup`.
    #[schemars(length(max = 128))]
    pub new_password: String,
}

/// Body of `POST /api/auth/change_password`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChangePasswordRequest {
    /// The password in use now (checked like a login).
    #[schemars(length(max = 128))]
    pub current_password: String,
    /// See the password policy of `POST /api/auth/signup`.
    #[schemars(length(max = 128))]
    pub new_password: String,
}
