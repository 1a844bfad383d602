//! Forgotten passwords, resets and changes. One password policy
//! ([`super::auth::check_password_policy`]) for signup, reset and change.

use super::auth::{
    EMAIL_MAX_CHARS, Limited, PASSWORD_MAX_CHARS, check_password_policy, hash_password,
    normalize_email, rate_limit, verify_login,
};
use super::sessions::ClientInfo;
use crate::authn::Actor;
use crate::context::ServerContext;
use crate::db::datastore::password_resets::{ResetOutcome, ResetRecipient};
use crate::error::Error;
use crate::mailer::Email;
use workspace_api::auth::{
    ChangePasswordRequest, ForgotPasswordRequest, ForgotPasswordResponse, RESET_TOKEN_PREFIX,
    ResetPasswordRequest, SessionsRevoked,
};

/// The one answer of `forgot_password`, whether or not the address has an
/// account.
pub const FORGOT_PASSWORD_ANSWER: &str = "if an account has this e-mail address, a link to \
     reset its password is on its way; it works once and expires in an hour";

/// The pause before a reset e-mail is handed to the mailer, in ms: at
/// least the first, plus up to the second at random.
const MAIL_PAUSE_MS: (u64, u64) = (100, 200);

/// The window of the per-address limit of `forgot_password`.
const PER_EMAIL_WINDOW_SECS: u64 = 3600;

/// `POST /api/auth/forgot_password`: the same statements run whether or
/// not the address has an account (see `password_reset_create`), and the
/// e-mail is handed to the mailer on a task of its own, after the answer,
/// so neither the answer nor its timing says whether the account exists.
pub async fn forgot_password(
    cx: &ServerContext,
    request: ForgotPasswordRequest,
    client: &ClientInfo,
    log: &slog::Logger,
) -> Result<ForgotPasswordResponse, Error> {
    if request.email.chars().count() > EMAIL_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_email",
            format!("the e-mail address must be at most {EMAIL_MAX_CHARS} characters"),
        ));
    }
    let email = normalize_email(&request.email);
    rate_limit(cx, Limited::ForgotPassword, client.address).await?;
    per_email_limit(cx, &email).await?;
    let (token, hash) = crate::authn::new_secret(RESET_TOKEN_PREFIX);
    let lifetime = cx.config.auth.password_reset_lifetime_secs;
    let recipient = cx
        .datastore
        .password_reset_create(&email, &hash, lifetime)
        .await?;
    if let Some(recipient) = recipient {
        let email = reset_email(cx, &recipient, &token, lifetime);
        let mailer = cx.mailer.clone();
        let log = log.clone();
        crate::telemetry::spawn(async move {
            // Well after the answer: the mailer's work (a database write,
            // or an SMTP exchange) competes for this instance's CPU and
            // the database, and must not slow this answer, or the next
            // ones by a fixed amount, in a way that tells which addresses
            // have accounts.
            let pause = MAIL_PAUSE_MS.0 + rand::random::<u64>() % MAIL_PAUSE_MS.1;
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            if let Err(e) = mailer.send(&email).await {
                slog::error!(log, "password-reset e-mail not delivered"; "error" => e.to_string());
            }
        });
    }
    Ok(ForgotPasswordResponse {
        message: FORGOT_PASSWORD_ANSWER.to_string(),
    })
}

/// The per-e-mail-address limit of `forgot_password`, counted whether or
/// not the address has an account (the bucket is named by the address's
/// hash, so the counters hold no addresses).
async fn per_email_limit(cx: &ServerContext, email: &str) -> Result<(), Error> {
    let limit = cx.config.rate_limits.forgot_password_per_email;
    if limit == 0 {
        return Ok(());
    }
    let digest: String = crate::authn::hash_secret(email)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    super::auth::check_buckets(
        cx,
        vec![(format!("forgot:email:{digest}"), limit)],
        PER_EMAIL_WINDOW_SECS,
    )
    .await
}

/// The link of a reset e-mail: `{mail.public_url}/reset-password?token=…`
/// (by default this server's own page).
fn reset_link(cx: &ServerContext, token: &str) -> String {
    format!(
        "{}/reset-password?token={token}",
        cx.config.mail.link_base()
    )
}

/// The reset e-mail (plain text).
fn reset_email(
    cx: &ServerContext,
    recipient: &ResetRecipient,
    token: &str,
    lifetime_secs: u64,
) -> Email {
    let minutes = lifetime_secs.div_ceil(60);
    Email {
        to: recipient.email.clone(),
        subject: "Reset your Workspace password".to_string(),
        body_text: format!(
            "Hello {},\n\n\
             Someone (hopefully you) asked to reset the password of your Workspace \
             account. To choose a new password, open this link:\n\n{}\n\n\
             The link works once and expires in {minutes} minutes. Setting a new \
             password logs your account out everywhere.\n\n\
             If you did not ask for this, ignore this e-mail: your password stays \
             as it is.\n",
            recipient.first_name,
            reset_link(cx, token),
        ),
        kind: "password_reset",
    }
}

fn invalid_reset_token() -> Error {
    Error::invalid(
        "invalid_reset_token",
        "the password-reset token is not valid",
    )
}

fn used_reset_token() -> Error {
    Error::gone(
        "reset_token_used",
        "the password-reset link was already used; ask for a new one",
    )
}

fn expired_reset_token() -> Error {
    Error::gone(
        "reset_token_expired",
        "the password-reset link has expired; ask for a new one",
    )
}

fn password_too_long() -> Error {
    Error::unprocessable(
        "weak_password",
        format!("password too long: at most {PASSWORD_MAX_CHARS} characters are allowed"),
    )
}

/// `POST /api/auth/reset_password`.
pub async fn reset_password(
    cx: &ServerContext,
    request: ResetPasswordRequest,
    client: &ClientInfo,
) -> Result<SessionsRevoked, Error> {
    rate_limit(cx, Limited::ResetPassword, client.address).await?;
    let token = request.token.trim();
    if !crate::authn::is_secret_shaped(token, RESET_TOKEN_PREFIX) {
        return Err(invalid_reset_token());
    }
    let hash = crate::authn::hash_secret(token);
    // A first look, to report token problems before the (slow) hashing and
    // to check the password against the account's address; the decisive
    // check is repeated under the row's lock by `password_reset_apply`.
    let found = cx
        .datastore
        .password_reset_get(&hash)
        .await?
        .ok_or_else(invalid_reset_token)?;
    if found.used {
        return Err(used_reset_token());
    }
    if found.expired {
        return Err(expired_reset_token());
    }
    check_password_policy(&request.new_password, &found.email_normalized)?;
    let password_hash = hash_password(cx, request.new_password).await?;
    match cx
        .datastore
        .password_reset_apply(&hash, &password_hash)
        .await?
    {
        ResetOutcome::Done { sessions_revoked } => Ok(SessionsRevoked {
            message: "the password is set and every session is revoked: log in with the \
                      new password"
                .to_string(),
            revoked: sessions_revoked,
        }),
        ResetOutcome::Unknown => Err(invalid_reset_token()),
        ResetOutcome::Used => Err(used_reset_token()),
        ResetOutcome::Expired => Err(expired_reset_token()),
    }
}

/// `POST /api/auth/change_password`: the caller proves the current
/// password; every other session is revoked.
pub async fn change_password(
    cx: &ServerContext,
    actor: &Actor,
    request: ChangePasswordRequest,
) -> Result<SessionsRevoked, Error> {
    if request.new_password.chars().count() > PASSWORD_MAX_CHARS {
        return Err(password_too_long());
    }
    let user = cx.datastore.user_get(actor.user_id).await?;
    let email = normalize_email(&user.email);
    let proven = verify_login(cx, &email, request.current_password).await?;
    if proven != actor.user_id {
        return Err(crate::authn::invalid_token());
    }
    check_password_policy(&request.new_password, &email)?;
    let password_hash = hash_password(cx, request.new_password).await?;
    let revoked = cx
        .datastore
        .password_change(actor.user_id, &password_hash, actor.session_id)
        .await?
        .ok_or_else(crate::authn::invalid_token)?;
    Ok(SessionsRevoked {
        message: format!("the password is changed; {revoked} other session(s) revoked"),
        revoked,
    })
}
