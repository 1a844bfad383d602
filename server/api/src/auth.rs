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

/// A bearer access token.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct LoginResponse {
    /// A JWT (HS256) to send as `Authorization: Bearer <access_token>`.
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: TokenType,
    /// Lifetime of the token in seconds from issue (an addition to the
    /// spec's shape, as in OAuth 2.0 token responses).
    pub expires_in: u64,
}
