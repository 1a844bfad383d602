//! Registration and login.

use crate::context::ServerContext;
use crate::db::datastore::users::NewUser;
use crate::error::Error;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};
use workspace_api::auth::{LoginRequest, LoginResponse, SignupRequest, SignupResponse, TokenType};

pub const PASSWORD_MIN_CHARS: usize = 10;
pub const PASSWORD_MAX_CHARS: usize = 128;
const NAME_MAX_CHARS: usize = 100;
const EMAIL_MAX_CHARS: usize = 254;

/// argon2id with OWASP's first recommended configuration: m = 19 MiB,
/// t = 2, p = 1.
fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("valid argon2 parameters");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes on the blocking pool: argon2 takes tens of milliseconds of CPU.
pub async fn hash_password(password: String) -> Result<String, Error> {
    tokio::task::spawn_blocking(move || {
        argon2()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| Error::internal(format!("hashing password: {e}")))
    })
    .await
    .map_err(|e| Error::internal(format!("hashing task: {e}")))?
}

/// Verifies on the blocking pool. With no stored hash (unknown user) it
/// verifies against a fixed dummy hash so that timing does not reveal
/// whether the account exists.
pub async fn verify_password(password: String, hash: Option<String>) -> Result<bool, Error> {
    tokio::task::spawn_blocking(move || {
        let known = hash.is_some();
        let hash = hash.unwrap_or_else(|| DUMMY_HASH.to_string());
        let ok = argon2()
            .verify_password(password.as_bytes(), hash.as_str())
            .is_ok();
        Ok(ok && known)
    })
    .await
    .map_err(|e| Error::internal(format!("verifying task: {e}")))?
}

/// argon2id hash of a random string, same parameters as real hashes.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Gu7mEyeGOY3KYcFe7cmwrKsIgcaQpyTaOsFfoSHKj/A";

/// Trims and lower-cases an e-mail address.
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

/// A deliberately simple syntax check: one `@`, a non-empty local part, a
/// dotted domain, no whitespace or control characters, at most 254
/// characters. Deliverability is proven by invitation e-mails, not here.
pub fn validate_email(email: &str) -> Result<(), Error> {
    let invalid = || Error::invalid("invalid_email", "the e-mail address is not valid");
    if email.chars().count() > EMAIL_MAX_CHARS
        || email.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(invalid());
    }
    let (local, domain) = email.split_once('@').ok_or_else(invalid)?;
    if local.is_empty()
        || domain.contains('@')
        || !domain.contains('.')
        || domain.starts_with('.')
        || domain.ends_with('.')
        || domain.contains("..")
    {
        return Err(invalid());
    }
    Ok(())
}

pub fn validate_name(field: &str, value: &str) -> Result<String, Error> {
    let value = value.trim();
    if value.is_empty()
        || value.chars().count() > NAME_MAX_CHARS
        || value.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "invalid_name",
            format!("{field} must be 1 to {NAME_MAX_CHARS} characters, without control characters"),
        ));
    }
    Ok(value.to_string())
}

/// The password policy (see the signup operation's description).
pub fn check_password_policy(password: &str, email_normalized: &str) -> Result<(), Error> {
    let weak = |m: &str| Error::unprocessable("weak_password", m);
    let chars = password.chars().count();
    if chars < PASSWORD_MIN_CHARS {
        return Err(weak(&format!(
            "password too short: at least {PASSWORD_MIN_CHARS} characters are required"
        )));
    }
    if chars > PASSWORD_MAX_CHARS {
        return Err(weak(&format!(
            "password too long: at most {PASSWORD_MAX_CHARS} characters are allowed"
        )));
    }
    let mut it = password.chars();
    let first = it.next();
    if it.all(|c| Some(c) == first) {
        return Err(weak("password must not be a single repeated character"));
    }
    let lowered = password.to_lowercase();
    let local = email_normalized.split('@').next().unwrap_or_default();
    if lowered == email_normalized || (!local.is_empty() && lowered == local) {
        return Err(weak(
            "password must not be the e-mail address or its local part",
        ));
    }
    Ok(())
}

pub async fn signup(cx: &ServerContext, request: SignupRequest) -> Result<SignupResponse, Error> {
    let email = normalize_email(&request.email);
    validate_email(&email)?;
    let first_name = validate_name("first_name", &request.first_name)?;
    let last_name = validate_name("last_name", &request.last_name)?;
    check_password_policy(&request.password, &email)?;
    let password_hash = hash_password(request.password).await?;
    let org_name = format!("{first_name} {last_name}'s organization");
    let slug_base = email.split('@').next().unwrap_or("org").to_string();
    let user = cx
        .datastore
        .user_create_with_personal_org(
            &NewUser {
                email: &email,
                first_name: &first_name,
                last_name: &last_name,
                password_hash: &password_hash,
            },
            &org_name,
            &slug_base,
        )
        .await?;
    Ok(SignupResponse {
        id: user.id,
        email: user.email,
        first_name: user.first_name,
        last_name: user.last_name,
    })
}

/// Checks e-mail and password with the failed-login rate limit: `429
/// too_many_login_attempts` while the address is locked out, `401
/// invalid_credentials` (counted) for any wrong credential. Returns the
/// user id; a success clears the count.
pub async fn verify_login(
    cx: &ServerContext,
    email: &str,
    password: String,
) -> Result<uuid::Uuid, Error> {
    let email = normalize_email(email);
    let limits = &cx.config.auth;
    let recent = cx
        .datastore
        .login_failures_recent(&email, limits.login_window_secs)
        .await?;
    if recent.count >= i64::from(limits.login_max_failures) {
        let elapsed = recent
            .oldest
            .map(|t| (chrono::Utc::now() - t).num_seconds().max(0) as u64)
            .unwrap_or(0);
        let retry_after_secs = limits.login_window_secs.saturating_sub(elapsed).max(1);
        return Err(Error::TooManyRequests {
            code: "too_many_login_attempts",
            message: format!("too many failed login attempts; retry in {retry_after_secs} seconds"),
            retry_after_secs,
        });
    }
    let credentials = cx.datastore.user_credentials(&email).await?;
    let (user_id, hash) = match credentials {
        Some(c) => (Some(c.id), c.password_hash),
        None => (None, None),
    };
    let ok = verify_password(password, hash).await?;
    let Some(user_id) = user_id.filter(|_| ok) else {
        cx.datastore
            .login_failure_record(&email, limits.login_window_secs)
            .await?;
        return Err(Error::unauthenticated(
            "invalid_credentials",
            "invalid e-mail address or password",
        ));
    };
    cx.datastore.login_failures_clear(&email).await?;
    Ok(user_id)
}

pub async fn login(cx: &ServerContext, request: LoginRequest) -> Result<LoginResponse, Error> {
    let user_id = verify_login(cx, &request.email, request.password).await?;
    cx.datastore.user_touch(user_id).await?;
    Ok(LoginResponse {
        access_token: cx.tokens.issue(user_id)?,
        token_type: TokenType::Bearer,
        expires_in: cx.tokens.lifetime_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: Error) -> &'static str {
        match e {
            Error::InvalidRequest { code, .. } | Error::Unprocessable { code, .. } => code,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn password_policy_rules() {
        let email = "ada@example.com";
        assert!(check_password_policy("correct horse", email).is_ok());
        assert_eq!(
            code(check_password_policy("short", email).unwrap_err()),
            "weak_password"
        );
        assert_eq!(
            code(check_password_policy(&"x".repeat(129), email).unwrap_err()),
            "weak_password"
        );
        assert!(check_password_policy(&"xy".repeat(64), email).is_ok());
        assert_eq!(
            code(check_password_policy("aaaaaaaaaaaa", email).unwrap_err()),
            "weak_password"
        );
        assert_eq!(
            code(check_password_policy("ADA@example.com", email).unwrap_err()),
            "weak_password"
        );
        assert!(check_password_policy("adaadaadaada", email).is_ok());
        assert_eq!(
            code(check_password_policy("ada", "adalovelace@x.io").unwrap_err()),
            "weak_password"
        );
        let local = "adalovelace";
        assert!(check_password_policy(local, "adalovelace@x.io").is_err());
        // Counted in characters, not bytes.
        assert!(check_password_policy("ééééééééé", email).is_err());
        assert!(check_password_policy("éèéèéèéèéè", email).is_ok());
    }

    #[test]
    fn email_syntax() {
        assert!(validate_email("a@b.co").is_ok());
        for bad in [
            "", "a", "@b.co", "a@", "a@b", "a@@b.co", "a b@c.de", "a@.b.co", "a@b..co", "a@b.co.",
        ] {
            assert!(validate_email(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(normalize_email("  Ada@Example.COM "), "ada@example.com");
    }

    #[test]
    fn dummy_hash_parses_with_real_parameters() {
        let parsed = argon2::PasswordHash::new(DUMMY_HASH).expect("dummy hash parses");
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert!(argon2().verify_password(b"anything", DUMMY_HASH).is_err());
    }

    #[tokio::test]
    async fn hash_then_verify() {
        let hash = hash_password("correct horse battery".into()).await.unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(
            verify_password("correct horse battery".into(), Some(hash.clone()))
                .await
                .unwrap()
        );
        assert!(
            !verify_password("wrong horse battery".into(), Some(hash))
                .await
                .unwrap()
        );
        assert!(!verify_password("anything".into(), None).await.unwrap());
    }
}
