//! Authentication: issuing and verifying access tokens.
//!
//! Tokens are HS256 JWTs with the claims `sub` (user id), `iat`, `nbf`,
//! `exp`, `iss` (`workspace`), `aud` (`workspace-api`) and `jti`. Only
//! HS256 is accepted, so `alg: none` and algorithm-confusion tokens fail.

use crate::error::Error;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const ISSUER: &str = "workspace";
pub const AUDIENCE: &str = "workspace-api";

/// The claims inside an access token.
#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: Uuid,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    pub iss: String,
    pub aud: String,
    pub jti: Uuid,
}

/// The authenticated caller of a request.
#[derive(Clone, Debug)]
pub struct Actor {
    pub user_id: Uuid,
}

pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    lifetime_secs: u64,
}

impl TokenKeys {
    pub fn new(secret: &[u8], lifetime_secs: u64) -> TokenKeys {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = 5;
        TokenKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            lifetime_secs,
        }
    }

    pub fn lifetime_secs(&self) -> u64 {
        self.lifetime_secs
    }

    /// Issues a token for `user_id`, valid from now for the configured
    /// lifetime.
    pub fn issue(&self, user_id: Uuid) -> Result<String, Error> {
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            sub: user_id,
            iat: now,
            nbf: now,
            exp: now + self.lifetime_secs as i64,
            iss: ISSUER.to_string(),
            aud: AUDIENCE.to_string(),
            jti: Uuid::new_v4(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| Error::internal(format!("signing token: {e}")))
    }

    /// Verifies signature, algorithm, issuer, audience and time claims.
    pub fn verify(&self, token: &str) -> Result<Claims, Error> {
        use jsonwebtoken::errors::ErrorKind;
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => {
                    Error::unauthenticated("token_expired", "the access token has expired")
                }
                _ => Error::unauthenticated("invalid_token", "the access token is invalid"),
            })
    }

    /// Verifies the request's `Authorization: Bearer` token and returns
    /// its user id. Whether that user still exists is checked by the
    /// caller, in the same statement as its authorization.
    pub fn verify_request(&self, headers: &http::HeaderMap) -> Result<Uuid, Error> {
        let value = headers.get(http::header::AUTHORIZATION).ok_or_else(|| {
            Error::unauthenticated(
                "unauthenticated",
                "an Authorization: Bearer token is required",
            )
        })?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Error::unauthenticated(
                    "invalid_token",
                    "the Authorization header must be `Bearer <access_token>`",
                )
            })?;
        Ok(self.verify(token)?.sub)
    }
}

/// The `401` of a well-formed token whose user no longer exists.
pub fn invalid_token() -> Error {
    Error::unauthenticated("invalid_token", "the access token is invalid")
}
