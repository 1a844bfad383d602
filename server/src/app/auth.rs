//! Registration and login.

use crate::context::ServerContext;
use crate::db::datastore::login_failures::LoginAttempt;
use crate::db::datastore::users::NewUser;
use crate::error::Error;
use std::net::IpAddr;
use workspace_api::auth::{LoginRequest, LoginResponse, SignupRequest, SignupResponse};

pub const PASSWORD_MIN_CHARS: usize = 10;
pub const PASSWORD_MAX_CHARS: usize = 128;
pub const NAME_MAX_CHARS: usize = 100;
/// RFC 5321's limit on a forward path.
pub const EMAIL_MAX_CHARS: usize = 254;

/// Hashes a password in a slot of the bounded hashing pool.
pub async fn hash_password(cx: &ServerContext, password: String) -> Result<String, Error> {
    cx.hashing.permit().await?.hash(password).await
}

/// Trims, lower-cases and NFC-normalises an e-mail address, so that the
/// composed and decomposed spellings of `é` are one address.
pub fn normalize_email(email: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    // Bounded before any work: no valid address is longer.
    let email: String = email.trim().chars().take(EMAIL_MAX_CHARS * 2).collect();
    email.nfc().collect::<String>().to_lowercase()
}

/// Characters never accepted in an address or a name: controls, format
/// characters (zero-width space, soft hyphen, bidirectional overrides),
/// line and paragraph separators, private-use, surrogate and unassigned
/// code points.
pub fn is_forbidden_char(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
    )
}

/// The writing system of a letter, coarsely: Latin, Greek and Cyrillic
/// (the scripts whose letters look alike) by their blocks; every other
/// letter by its 256-code-point block. `None` for what is not a letter or
/// belongs to every script (digits, punctuation, combining marks).
fn script_of(c: char) -> Option<u32> {
    if !c.is_alphabetic() {
        return None;
    }
    use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};
    if c.general_category_group() == GeneralCategoryGroup::Mark {
        return None;
    }
    let cp = c as u32;
    Some(match cp {
        0x41..=0x5A
        | 0x61..=0x7A
        | 0xAA
        | 0xBA
        | 0xC0..=0x24F
        | 0x1E00..=0x1EFF
        | 0x2C60..=0x2C7F
        | 0xA720..=0xA7FF
        | 0xFF21..=0xFF3A
        | 0xFF41..=0xFF5A => 1,
        0x370..=0x3FF | 0x1F00..=0x1FFF => 2,
        0x400..=0x52F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => 3,
        _ => 0x100 + (cp >> 8),
    })
}

/// Whether every letter of `text` belongs to one script (see
/// [`script_of`]): `ada` and `ада` pass, `аda` (Cyrillic а, Latin d) not.
pub fn is_single_script(text: &str) -> bool {
    let mut scripts = text.chars().filter_map(script_of);
    match scripts.next() {
        None => true,
        Some(first) => scripts.all(|s| s == first),
    }
}

/// A deliberately simple syntax check on a normalised address: one `@`, a
/// non-empty local part, a dotted domain, at most 254 characters (RFC
/// 5321), no whitespace and no [forbidden](is_forbidden_char) characters,
/// and neither the local part nor any domain label mixing scripts.
/// Deliverability is proven by invitation e-mails, not here.
pub fn validate_email(email: &str) -> Result<(), Error> {
    let invalid = || Error::invalid("invalid_email", "the e-mail address is not valid");
    if email.chars().count() > EMAIL_MAX_CHARS
        || email
            .chars()
            .any(|c| c.is_whitespace() || is_forbidden_char(c))
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
        || !is_single_script(local)
        || !domain.split('.').all(is_single_script)
    {
        return Err(invalid());
    }
    Ok(())
}

pub fn validate_name(field: &str, value: &str) -> Result<String, Error> {
    let value = value.trim();
    if value.is_empty()
        || value.chars().count() > NAME_MAX_CHARS
        || value.chars().any(is_forbidden_char)
    {
        return Err(Error::invalid(
            "invalid_name",
            format!(
                "{field} must be 1 to {NAME_MAX_CHARS} characters, without control or \
                 format characters"
            ),
        ));
    }
    Ok(value.to_string())
}

/// The password policy (see the signup operation's description): the one
/// policy of signup, `signup_invite`, password reset and password change.
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

pub async fn signup(
    cx: &ServerContext,
    request: SignupRequest,
    client: IpAddr,
) -> Result<SignupResponse, Error> {
    let email = normalize_email(&request.email);
    validate_email(&email)?;
    let first_name = validate_name("first_name", &request.first_name)?;
    let last_name = validate_name("last_name", &request.last_name)?;
    check_password_policy(&request.password, &email)?;
    rate_limit(cx, Limited::Signup, client).await?;
    let password_hash = hash_password(cx, request.password).await?;
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
            cx.config.auth.first_account_admin.unwrap_or(false),
        )
        .await?;
    Ok(SignupResponse {
        id: user.id,
        email: user.email,
        first_name: user.first_name,
        last_name: user.last_name,
    })
}

/// What a rate limit applies to.
#[derive(Clone, Copy, Debug)]
pub enum Limited {
    /// `POST /api/auth/login`.
    Login,
    /// `POST /api/auth/signup` and `POST /api/auth/signup_invite`.
    Signup,
    /// `POST /api/auth/forgot_password` (per address; the per-e-mail limit
    /// is `app::passwords`').
    ForgotPassword,
    /// `POST /api/auth/reset_password`.
    ResetPassword,
    /// `GET /api/shared` (a chat's share link).
    SharedChat,
}

/// Counts the request against the per-address and global limits of
/// `what` (shared by every instance): `429 rate_limited` with
/// `Retry-After` beyond either. The limits hold over a sliding window (see
/// [`super::rate_limits::over_limit`]), so a burst split across a window boundary still counts
/// as one burst.
pub async fn rate_limit(cx: &ServerContext, what: Limited, client: IpAddr) -> Result<(), Error> {
    let limits = &cx.config.rate_limits;
    let (name, per_address, global) = match what {
        Limited::Login => ("login", limits.login_per_address, limits.login_global),
        Limited::Signup => ("signup", limits.signup_per_address, limits.signup_global),
        Limited::ForgotPassword => ("forgot", limits.forgot_password_per_address, 0),
        Limited::ResetPassword => ("reset", limits.reset_password_per_address, 0),
        Limited::SharedChat => ("shared", limits.shared_chat_per_address, 0),
    };
    let mut buckets = Vec::with_capacity(2);
    if per_address > 0 {
        buckets.push((format!("{name}:addr:{client}"), per_address));
    }
    if global > 0 {
        buckets.push((format!("{name}:all"), global));
    }
    check_buckets(cx, buckets, limits.window_secs).await
}

/// Counts the request in each `(bucket, limit)` over a sliding window of
/// `window_secs` (in the database, so shared by every instance): `429
/// rate_limited` with `Retry-After` beyond any limit.
pub async fn check_buckets(
    cx: &ServerContext,
    buckets: Vec<(String, u32)>,
    window_secs: u64,
) -> Result<(), Error> {
    if buckets.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = buckets.iter().map(|(b, _)| b.clone()).collect();
    let hits = cx.datastore.rate_limit_hit(&names, window_secs).await?;
    for hit in hits {
        let limit = buckets
            .iter()
            .find(|(b, _)| *b == hit.bucket)
            .map(|(_, l)| *l)
            .unwrap_or(u32::MAX);
        if let Some(retry_after_secs) =
            super::rate_limits::over_limit(&hit.count, window_secs, limit)
        {
            return Err(Error::TooManyRequests {
                code: "rate_limited",
                message: format!("too many requests; retry in {retry_after_secs} seconds"),
                retry_after_secs,
            });
        }
    }
    Ok(())
}

fn invalid_credentials() -> Error {
    Error::unauthenticated("invalid_credentials", "invalid e-mail address or password")
}

/// Checks e-mail and password with the failed-login limit: `429
/// too_many_login_attempts` while the address is locked out, `401
/// invalid_credentials` (counted) for any wrong credential. Returns the
/// user id; a success clears the count.
///
/// The attempt is counted before the password is verified, atomically
/// with the check (see `login_attempt_begin`), so that concurrent attempts
/// verify at most `login_max_failures` passwords per window.
pub async fn verify_login(
    cx: &ServerContext,
    email: &str,
    password: String,
) -> Result<uuid::Uuid, Error> {
    if email.chars().count() > EMAIL_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_email",
            format!("the e-mail address must be at most {EMAIL_MAX_CHARS} characters"),
        ));
    }
    if password.chars().count() > PASSWORD_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_request",
            format!("the password must be at most {PASSWORD_MAX_CHARS} characters"),
        ));
    }
    let email = normalize_email(email);
    let limits = &cx.config.auth;
    // A slot first, so that a busy server does not count the attempt.
    let permit = cx.hashing.permit().await?;
    let attempt = cx
        .datastore
        .login_attempt_begin(&email, limits.login_max_failures, limits.login_window_secs)
        .await?;
    if let LoginAttempt::Locked { oldest } = attempt {
        let elapsed = oldest
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
    let ok = permit.verify(password, hash).await?;
    let Some(user_id) = user_id.filter(|_| ok) else {
        // The attempt stays counted as a failure.
        return Err(invalid_credentials());
    };
    cx.datastore.login_failures_clear(&email).await?;
    Ok(user_id)
}

/// `POST /api/auth/login`: checks the credentials and starts a session
/// (which also marks the user active).
pub async fn login(
    cx: &ServerContext,
    request: LoginRequest,
    client: &super::sessions::ClientInfo,
) -> Result<LoginResponse, Error> {
    rate_limit(cx, Limited::Login, client.address).await?;
    let email = normalize_email(&request.email);
    let user_id = match verify_login(cx, &request.email, request.password).await {
        Ok(user_id) => user_id,
        Err(e) => {
            // A refused login, on the system chain (who tried is not known:
            // the e-mail address tried is a detail, never the password).
            if let Error::Unauthenticated { code, .. } | Error::TooManyRequests { code, .. } = &e {
                let event = crate::audit::Event::system("auth.login")
                    .outcome(crate::audit::Outcome::Failure)
                    .details(serde_json::json!({
                        "email": email.chars().take(EMAIL_MAX_CHARS).collect::<String>(),
                        "error_code": code,
                    }));
                let origin = client.origin(crate::audit::Actor::ANONYMOUS);
                cx.datastore.audit_record(&origin, &event).await?;
            }
            return Err(e);
        }
    };
    Ok(super::sessions::start(cx, user_id, client).await?.into())
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
    fn look_alike_addresses_are_refused_or_merged() {
        let check = |raw: &str| validate_email(&normalize_email(raw));
        // Format characters: zero-width space, soft hyphen, RTL override.
        for bad in [
            "ada\u{200b}@example.com",
            "a\u{ad}da@example.com",
            "\u{202e}ada@example.com",
            "ada@exa\u{200d}mple.com",
            "ada\u{0}@example.com",
            "ada\u{e000}@example.com",
        ] {
            assert!(check(bad).is_err(), "{bad:?} accepted");
        }
        // Mixed scripts in the local part (Cyrillic а, Greek ο) or a label.
        assert!(check("\u{430}da@example.com").is_err());
        assert!(check("b\u{3bf}b@example.com").is_err());
        assert!(check("ada@ex\u{430}mple.com").is_err());
        // One script is fine, whichever it is.
        assert!(check("\u{430}\u{434}\u{430}@example.com").is_ok());
        assert!(check("ren\u{e9}e@example.com").is_ok());
        assert!(check("j.doe+tag_1@example.co.uk").is_ok());
        // NFD and NFC spellings are one address.
        assert_eq!(
            normalize_email("Rene\u{301}e@Example.com"),
            normalize_email("ren\u{e9}e@example.com")
        );
        // Names: no format or control characters either.
        assert!(validate_name("first_name", "Ada\u{200b}").is_err());
        assert!(validate_name("first_name", "Ad\u{202e}a").is_err());
        assert!(validate_name("first_name", "Zo\u{eb}").is_ok());
    }

    #[test]
    fn over_long_addresses_are_invalid() {
        let local = "a".repeat(64);
        let long = format!("{local}@{}.com", "b".repeat(250));
        assert!(validate_email(&normalize_email(&long)).is_err());
        let huge = "x".repeat(3000) + "@example.com";
        assert!(normalize_email(&huge).chars().count() <= 2 * EMAIL_MAX_CHARS);
        assert!(validate_email(&normalize_email(&huge)).is_err());
    }
}
