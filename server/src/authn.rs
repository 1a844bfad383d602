//! Authentication: issuing and verifying access tokens.
//!
//! Tokens are HS256 JWTs with the claims `sub` (user id), `sid` (the
//! session, see `app::sessions`), `iat`, `nbf`, `exp`, `iss`
//! (`workspace`), `aud` (`workspace-api`) and `jti`. Only HS256 is
//! accepted, so `alg: none` and algorithm-confusion tokens fail.
//!
//! A valid signature is not enough: whether the token's session is still
//! live (not revoked, not expired) is checked by the database statement
//! each request runs anyway (the authorization statement, `users/me`'s, or
//! [`crate::context::ServerContext::authenticate`]'s), never from process
//! memory, so a revocation holds on every instance at once. Tokens issued
//! before sessions existed have no `sid`: they stay valid until they expire
//! unless the user's password changed after they were issued.

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
    /// The session; absent in tokens issued before sessions existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<Uuid>,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    pub iss: String,
    pub aud: String,
    pub jti: Uuid,
}

/// The authenticated caller of a request: what its verified access token
/// says (whether the session is still live is the database's to say, see
/// the module's documentation), or the personal access token it presented
/// (then without a session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub user_id: Uuid,
    /// The session of the caller's access token (`None` for a token issued
    /// before sessions existed).
    pub session_id: Option<Uuid>,
    /// The token's `iat` claim (seconds since the epoch).
    pub issued_at: i64,
    /// The personal access token the request presented, if it did.
    pub token_id: Option<Uuid>,
    /// That token's scopes.
    pub scopes: Option<Vec<String>>,
}

impl Actor {
    /// `403 insufficient_scope` when the request's personal access token
    /// does not cover `permission` (an operation across the caller's
    /// organizations, whose roles the query itself checks).
    pub fn require_scope(&self, permission: &str) -> Result<(), Error> {
        match &self.scopes {
            Some(scopes) if !crate::authz::permits(scopes, permission) => {
                Err(crate::authz::insufficient_scope(permission))
            }
            _ => Ok(()),
        }
    }
}

/// The personal access token a request presents (`Authorization: Bearer
/// wsp_…`), when the bearer value has the tokens' prefix. Its shape and
/// checksum are not checked here: an unknown secret is found nowhere and
/// answered `401 invalid_token` like any other.
pub fn personal_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer")
        && token.starts_with(workspace_api::tokens::TOKEN_PREFIX)
        && token.len() <= PERSONAL_TOKEN_MAX_LEN)
        .then_some(token)
}

/// Longer than any personal access token (42 characters): a longer bearer
/// value with the prefix is hashed no further than this.
const PERSONAL_TOKEN_MAX_LEN: usize = 64;

/// The alphabet of personal access tokens.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new personal access token: `wsp_`, 32 random base-62 characters and
/// a 6-character checksum (CRC-32 of what precedes it, in base 62), so a
/// secret scanner can tell a real token from a look-alike offline.
pub fn new_personal_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let mut token = String::from(workspace_api::tokens::TOKEN_PREFIX);
    for _ in 0..32 {
        token.push(BASE62[rng.random_range(0..62)] as char);
    }
    let checksum = personal_token_checksum(&token);
    token.push_str(&checksum);
    token
}

/// The checksum part of a personal access token whose first 36
/// characters are `body`.
pub fn personal_token_checksum(body: &str) -> String {
    let mut n = crc32fast::hash(body.as_bytes()) as u64;
    let mut out = [b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// When this instance last recorded each personal access token's use:
/// bounded (emptied when full), so at worst a token's `last_used_at` is
/// written again early.
#[derive(Default)]
pub struct RecentTouches {
    at: std::sync::Mutex<std::collections::HashMap<Uuid, std::time::Instant>>,
}

impl RecentTouches {
    /// Whether a write of `token_id`'s use is due (none in the last
    /// minute); if so, it counts as done now.
    pub fn due(&self, token_id: Uuid) -> bool {
        let now = std::time::Instant::now();
        let mut at = self.at.lock().unwrap_or_else(|p| p.into_inner());
        if at
            .get(&token_id)
            .is_some_and(|t| now.duration_since(*t) < std::time::Duration::from_secs(60))
        {
            return false;
        }
        if at.len() >= 4096 {
            at.clear();
        }
        at.insert(token_id, now);
        true
    }
}

pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    lifetime_secs: u64,
    verified: VerifiedTokens,
}

/// Tokens this instance has already verified, by their exact text: a
/// client sends the same token with every request, and decoding it (two
/// JSON parses, base64, the HMAC) was a tenth of a short request's CPU.
/// Holds only tokens whose signature and claims checked out; a hit still
/// checks the time claims against the clock, so an expired token is
/// refused as before. Verification is a pure function of the token and
/// this instance's key, so nothing here needs sharing between instances.
/// Bounded: when full it is emptied.
struct VerifiedTokens {
    tokens: std::sync::Mutex<std::collections::HashMap<Box<str>, Verified>>,
}

#[derive(Clone, Copy)]
struct Verified {
    subject: Subject,
    nbf: i64,
    exp: i64,
}

/// What a verified access token says of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Subject {
    user_id: Uuid,
    session_id: Option<Uuid>,
    issued_at: i64,
}

impl Subject {
    fn actor(self) -> Actor {
        Actor {
            user_id: self.user_id,
            session_id: self.session_id,
            issued_at: self.issued_at,
            token_id: None,
            scopes: None,
        }
    }
}

/// The most tokens [`VerifiedTokens`] holds (about 1.5 MB).
const VERIFIED_TOKENS: usize = 4096;

impl VerifiedTokens {
    fn get(&self, token: &str) -> Option<Verified> {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .copied()
    }

    fn insert(&self, token: &str, verified: Verified) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if tokens.len() >= VERIFIED_TOKENS {
            tokens.clear();
        }
        tokens.insert(token.into(), verified);
    }
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
            verified: VerifiedTokens {
                tokens: std::sync::Mutex::new(std::collections::HashMap::new()),
            },
        }
    }

    pub fn lifetime_secs(&self) -> u64 {
        self.lifetime_secs
    }

    /// Issues a token for `user_id` in `session_id`, valid from now for
    /// the configured lifetime.
    pub fn issue(&self, user_id: Uuid, session_id: Uuid) -> Result<String, Error> {
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            sub: user_id,
            sid: Some(session_id),
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

    /// Verifies signature, algorithm, issuer, audience and time claims;
    /// returns the token's user and session.
    pub fn verify(&self, token: &str) -> Result<Actor, Error> {
        use jsonwebtoken::errors::ErrorKind;
        let expired = || Error::unauthenticated("token_expired", "the access token has expired");
        if let Some(seen) = self.verified.get(token) {
            // The same time checks as `jsonwebtoken::validation::validate`.
            let now = jsonwebtoken::get_current_timestamp() as i64;
            let leeway = self.validation.leeway as i64;
            if seen.exp < now - leeway {
                return Err(expired());
            }
            if seen.nbf > now + leeway {
                return Err(invalid_token());
            }
            return Ok(seen.subject.actor());
        }
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => expired(),
                _ => invalid_token(),
            })?;
        let subject = Subject {
            user_id: claims.sub,
            session_id: claims.sid,
            issued_at: claims.iat,
        };
        self.verified.insert(
            token,
            Verified {
                subject,
                nbf: claims.nbf,
                exp: claims.exp,
            },
        );
        Ok(subject.actor())
    }

    /// Verifies the request's `Authorization: Bearer` token and returns
    /// its user and session. Whether that user still exists and the
    /// session is live is checked by the caller, in the same statement as
    /// its authorization.
    pub fn verify_request(&self, headers: &http::HeaderMap) -> Result<Actor, Error> {
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
        self.verify(token)
    }
}

/// The `401` of a well-formed token whose user no longer exists.
pub fn invalid_token() -> Error {
    Error::unauthenticated("invalid_token", "the access token is invalid")
}

/// The `401` of a well-formed token whose session was revoked (logout,
/// a revocation, a password reset or change, refresh-token reuse) or has
/// ended.
pub fn session_revoked() -> Error {
    Error::unauthenticated(
        "session_revoked",
        "the session of this access token has ended; log in again",
    )
}

/// The deployment key a request presents (`Authorization: Bearer
/// wsk_live_…` or `X-API-Key`), when it has the keys' shape.
pub fn deployment_key(headers: &http::HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| k.starts_with(workspace_api::deployments::KEY_PREFIX) && k.len() <= 128)
}

/// A random credential as stored: its SHA-256. Deployment keys, MCP
/// gateway secrets and OAuth `state` values have 256 random bits, so a
/// fast hash is enough (passwords go through [`crate::hashing`]).
pub fn hash_secret(secret: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes()).to_vec()
}

/// A new secret credential: `prefix` and 256 random bits as URL-safe
/// base64 (43 characters), and its [`hash_secret`] (the only form stored).
/// For refresh and password-reset tokens.
pub fn new_secret(prefix: &str) -> (String, Vec<u8>) {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    let secret = format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = hash_secret(&secret);
    (secret, hash)
}

/// Whether `secret` has the shape [`new_secret`] gives with `prefix`
/// (checked before any lookup, so that garbage costs no statement).
pub fn is_secret_shaped(secret: &str, prefix: &str) -> bool {
    secret.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// A WebSocket ticket as stored: its SHA-256 in hex.
pub fn hash_ticket(ticket: &str) -> String {
    hash_secret(ticket)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The longest WebSocket ticket looked up (they are 43 characters).
pub const TICKET_MAX_LEN: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: Result<Actor, Error>) -> String {
        match result {
            Err(Error::Unauthenticated { code, .. }) => code.to_string(),
            other => panic!("expected a 401, got {other:?}"),
        }
    }

    #[test]
    fn a_verified_token_is_remembered_and_still_checked_against_the_clock() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", 60);
        let user = Uuid::new_v4();
        let session = Uuid::new_v4();
        let token = keys.issue(user, session).unwrap();
        let subject = keys.verify(&token).unwrap();
        assert_eq!((subject.user_id, subject.session_id), (user, Some(session)));
        assert!(keys.verified.get(&token).is_some());
        assert_eq!(keys.verify(&token).unwrap(), subject);

        // A remembered token whose time has passed is refused as expired,
        // one not yet valid as invalid.
        let now = jsonwebtoken::get_current_timestamp() as i64;
        let remembered = |nbf, exp| Verified {
            subject: Subject {
                user_id: subject.user_id,
                session_id: subject.session_id,
                issued_at: subject.issued_at,
            },
            nbf,
            exp,
        };
        keys.verified
            .insert(&token, remembered(now - 120, now - 60));
        assert_eq!(code(keys.verify(&token)), "token_expired");
        keys.verified
            .insert(&token, remembered(now + 60, now + 120));
        assert_eq!(code(keys.verify(&token)), "invalid_token");

        // Another signature over the same claims is not a hit.
        let other = TokenKeys::new(b"another secret, also 32 bytes long!", 60);
        let forged = other.issue(user, session).unwrap();
        assert_eq!(code(keys.verify(&forged)), "invalid_token");
        assert!(keys.verified.get(&forged).is_none());
    }

    #[test]
    fn the_remembered_tokens_are_bounded() {
        let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef", 60);
        for _ in 0..VERIFIED_TOKENS + 10 {
            keys.verify(&keys.issue(Uuid::new_v4(), Uuid::new_v4()).unwrap())
                .unwrap();
        }
        let held = keys.verified.tokens.lock().unwrap().len();
        assert!((1..=VERIFIED_TOKENS).contains(&held), "{held}");
    }

    #[test]
    fn secrets_have_their_prefix_and_shape() {
        let (secret, hash) = new_secret("wsr_");
        assert!(is_secret_shaped(&secret, "wsr_"), "{secret}");
        assert_eq!(hash, hash_secret(&secret));
        assert!(!is_secret_shaped(&secret, "wsreset_"));
        assert!(!is_secret_shaped(&format!("{secret}x"), "wsr_"));
        assert!(!is_secret_shaped("wsr_", "wsr_"));
        let (other, _) = new_secret("wsr_");
        assert_ne!(secret, other);
    }

    #[test]
    fn tokens_issued_before_sessions_still_verify_without_a_session() {
        // A token as the previous version issued it: no `sid` claim.
        let secret = b"0123456789abcdef0123456789abcdef";
        let keys = TokenKeys::new(secret, 60);
        let now = chrono::Utc::now().timestamp();
        let user = Uuid::new_v4();
        let legacy = serde_json::json!({
            "sub": user, "iat": now, "nbf": now, "exp": now + 60,
            "iss": ISSUER, "aud": AUDIENCE, "jti": Uuid::new_v4(),
        });
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &legacy,
            &EncodingKey::from_secret(secret),
        )
        .unwrap();
        let subject = keys.verify(&token).unwrap();
        assert_eq!(subject.user_id, user);
        assert_eq!(subject.session_id, None);
        assert_eq!(subject.issued_at, now);
    }
}
