//! The profile's session: `auth login|logout|refresh|status`, the tokens
//! of `auth signup-invite`, and renewing the access token by itself.
//!
//! A profile holds an access token (short-lived, 15 minutes by default) and
//! the session's refresh token. Before a command, an access token that has
//! expired (or expires within [`RENEW_MARGIN_SECS`]) is renewed with
//! `POST /api/auth/refresh`; a generated command whose token is refused
//! anyway (`401 token_expired` or `invalid_token`) is renewed once and run
//! again. Renewals take a lock file, so two CLI processes never present one
//! refresh token twice (the server would take that for a stolen token and
//! revoke the session). `WORKSPACE_TOKEN` is used as given, never renewed.

use crate::config;
use crate::generated_cli::CliConfig;
use crate::output;
use anyhow::{Context, Result};
use clap::ArgMatches;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use workspace_client::{Client, Error, ResponseValue};

/// Renew an access token that expires within this many seconds.
pub const RENEW_MARGIN_SECS: i64 = 30;

/// The credentials a command runs with.
pub struct Credentials {
    pub store: config::Store,
    pub profile: String,
    pub url: String,
    /// The access token in use: `WORKSPACE_TOKEN`'s, else the profile's.
    pub token: Option<String>,
    /// Whether `token` is the profile's (so it can be renewed and saved).
    pub from_profile: bool,
}

/// What a renewal did.
pub enum Renewal {
    Renewed,
    /// No refresh token (or not the profile's token): nothing to renew with.
    NotPossible,
    /// The server refused the refresh token: the session has ended. The
    /// profile's tokens are forgotten.
    Ended {
        status: u16,
        code: String,
        message: String,
    },
}

impl Credentials {
    /// The client of the token in use.
    pub fn client(&self) -> Result<Client> {
        Ok(match &self.token {
            Some(token) => Client::authenticated(&self.url, token)?,
            None => Client::anonymous(&self.url)?,
        })
    }

    fn refresh_token(&self) -> Option<String> {
        if !self.from_profile {
            return None;
        }
        self.store
            .profile(&self.profile)
            .and_then(|p| p.refresh_token.clone())
    }

    /// Before a command: renews the access token when it has expired or is
    /// about to. A session that has ended is reported (exit 1).
    pub async fn renew_if_expiring(&mut self) -> Result<()> {
        let Some(expiry) = self.token.as_deref().and_then(token_expiry) else {
            return Ok(());
        };
        if expiry > chrono::Utc::now().timestamp() + RENEW_MARGIN_SECS {
            return Ok(());
        }
        match self.renew().await? {
            Renewal::Renewed | Renewal::NotPossible => Ok(()),
            Renewal::Ended {
                status,
                code,
                message,
            } => {
                output::report_api_error(status, &code, &message);
                Err(anyhow::Error::new(output::Reported))
            }
        }
    }

    /// Renews the access token now, under the credentials lock. When
    /// another process renewed the profile's tokens meanwhile (the stored
    /// refresh token is no longer the one read), its tokens are taken
    /// instead of presenting the used refresh token again.
    pub async fn renew(&mut self) -> Result<Renewal> {
        let Some(mine) = self.refresh_token() else {
            return Ok(Renewal::NotPossible);
        };
        let _lock = config::Store::lock()?;
        self.store = config::Store::load()?;
        let stored = self
            .store
            .profile(&self.profile)
            .cloned()
            .unwrap_or_default();
        match stored.refresh_token {
            None => return Ok(Renewal::NotPossible),
            Some(current) if current != mine => {
                self.token = stored.token;
                return Ok(Renewal::Renewed);
            }
            Some(_) => {}
        }
        let response = Client::anonymous(&self.url)?
            .auth_refresh()
            .body(workspace_client::types::RefreshRequest::builder().refresh_token(mine))
            .send()
            .await;
        match response {
            Ok(tokens) => {
                let tokens = tokens.into_inner();
                self.store.set(
                    &self.profile,
                    &stored.url,
                    Some(tokens.access_token.clone()),
                    Some(tokens.refresh_token),
                );
                self.store.save()?;
                self.token = Some(tokens.access_token);
                Ok(Renewal::Renewed)
            }
            Err(Error::ErrorResponse(refused)) if refused.status().as_u16() == 401 => {
                self.store.set(&self.profile, &stored.url, None, None);
                self.store.save()?;
                self.token = None;
                Ok(Renewal::Ended {
                    status: 401,
                    code: refused.error_code.clone(),
                    message: refused.message.clone(),
                })
            }
            Err(e) => {
                output::report_error(&e);
                Err(anyhow::Error::new(output::Reported))
            }
        }
    }
}

/// The `exp` claim (seconds since the epoch) of a JWT, read without
/// verifying the signature (the server does that).
pub fn token_expiry(token: &str) -> Option<i64> {
    claims(token)?["exp"].as_i64()
}

/// The claims of a JWT, read without verifying it.
fn claims(token: &str) -> Option<serde_json::Value> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether a refused request is worth one renewal: the access token expired
/// or was not accepted (not a revoked session, which a refresh cannot
/// revive, nor a wrong password).
fn renewable(status: u16, code: &str) -> bool {
    status == 401 && matches!(code, "token_expired" | "invalid_token")
}

/// An API error kept for later: status, `error_code`, message.
type KeptError = (u16, String, String);

/// Wraps a command's output: a renewable refusal is kept, not printed, so
/// that the command can run again with a renewed token. Everything else
/// goes to the inner output.
pub struct Renewable<C> {
    inner: C,
    refused: Arc<Mutex<Option<KeptError>>>,
}

impl<C> Renewable<C> {
    pub fn new(inner: C) -> (Renewable<C>, Arc<Mutex<Option<KeptError>>>) {
        let refused = Arc::new(Mutex::new(None));
        (
            Renewable {
                inner,
                refused: refused.clone(),
            },
            refused,
        )
    }
}

impl<C: CliConfig> CliConfig for Renewable<C> {
    fn success_item<T>(&self, value: &ResponseValue<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        self.inner.success_item(value)
    }

    fn success_no_item(&self, value: &ResponseValue<()>) {
        self.inner.success_no_item(value)
    }

    fn error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        if let Error::ErrorResponse(response) = value {
            let status = response.status().as_u16();
            let body = serde_json::to_value(response.as_ref()).unwrap_or_default();
            let code = body["error_code"].as_str().unwrap_or_default().to_string();
            if renewable(status, &code)
                && let Ok(mut slot) = self.refused.lock()
            {
                let message = body["message"].as_str().unwrap_or_default().to_string();
                *slot = Some((status, code, message));
                return;
            }
        }
        self.inner.error(value)
    }

    fn list_start<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        self.inner.list_start::<T>()
    }

    fn list_item<T>(&self, value: &T)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        self.inner.list_item(value)
    }

    fn list_end_success<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        self.inner.list_end_success::<T>()
    }

    fn list_end_error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        self.inner.list_end_error(value)
    }
}

/// `auth login`: stores the access and refresh tokens in the profile.
pub async fn login(profile: &str, url: &str, m: &ArgMatches) -> Result<()> {
    let email = m
        .get_one::<String>("email")
        .cloned()
        .context("--email is required")?;
    let password = match m.get_one::<String>("password") {
        Some(p) => p.clone(),
        None if std::env::var("WORKSPACE_PASSWORD").is_ok_and(|p| !p.is_empty()) => {
            std::env::var("WORKSPACE_PASSWORD")?
        }
        None if std::io::stdin().is_terminal() => rpassword::prompt_password("Password: ")?,
        None => {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    if password.is_empty() {
        crate::usage_error(
            "empty password: give --password, WORKSPACE_PASSWORD, a terminal prompt or one line of stdin",
        );
    }
    let client = Client::anonymous(url)?;
    let response = client
        .auth_login()
        .body(
            workspace_client::types::LoginRequest::builder()
                .email(email)
                .password(password),
        )
        .send()
        .await;
    match response {
        Ok(token) => {
            let token = token.into_inner();
            let _lock = config::Store::lock()?;
            let mut store = config::Store::load()?;
            store.set(
                profile,
                url,
                Some(token.access_token),
                Some(token.refresh_token),
            );
            let path = store.save()?;
            eprintln!(
                "logged in; tokens saved to profile {profile:?} in {}",
                path.display()
            );
            println!(
                "{}",
                serde_json::json!({
                    "profile": profile,
                    "url": url,
                    "expires_in": token.expires_in,
                    "session_id": token.session_id,
                })
            );
            Ok(())
        }
        Err(e) => {
            output::report_error(&e);
            Err(anyhow::Error::new(output::Reported))
        }
    }
}

/// `auth logout`: revokes the profile's session on the server, then
/// forgets its tokens (also when the server cannot be reached: then says
/// so, since the session stays until it expires or is revoked elsewhere).
pub async fn logout(mut creds: Credentials) -> Result<()> {
    let profile = creds.profile.clone();
    let stored = creds.store.profile(&profile).cloned();
    let Some(stored) = stored.filter(|p| p.token.is_some() || p.refresh_token.is_some()) else {
        eprintln!("not logged in to profile {profile:?}");
        return Ok(());
    };
    creds.token = stored.token.clone();
    creds.from_profile = true;
    // An expired access token is renewed first, to prove the session.
    let mut revoked = false;
    if creds
        .token
        .as_deref()
        .and_then(token_expiry)
        .is_none_or(|exp| exp <= chrono::Utc::now().timestamp() + RENEW_MARGIN_SECS)
    {
        let _ = creds.renew().await;
    }
    if let Some(token) = creds.token.clone() {
        match Client::authenticated(&creds.url, &token)?
            .auth_logout()
            .send()
            .await
        {
            Ok(_) => revoked = true,
            // Already revoked or expired: nothing is left to revoke.
            Err(Error::ErrorResponse(r)) if r.status().as_u16() == 401 => revoked = true,
            Err(e) => {
                output::report_error(&e);
            }
        }
    }
    let _lock = config::Store::lock()?;
    let mut store = config::Store::load()?;
    store.set(&profile, &stored.url, None, None);
    store.save()?;
    if revoked {
        eprintln!("logged out of profile {profile:?}: the session is revoked on the server");
    } else {
        eprintln!(
            "forgot the tokens of profile {profile:?}, but the server could not revoke the \
             session: it stays valid until it expires (list and revoke sessions with \
             `workspace auth sessions` and `auth revoke-session` from another login)"
        );
    }
    Ok(())
}

/// `auth refresh`: renews the profile's access token now.
pub async fn refresh(mut creds: Credentials) -> Result<()> {
    creds.from_profile = true;
    match creds.renew().await? {
        Renewal::Renewed => {
            let token = creds.token.clone().unwrap_or_default();
            println!(
                "{}",
                serde_json::json!({
                    "profile": creds.profile,
                    "url": creds.url,
                    "expires_at": token_expiry(&token)
                        .and_then(|exp| chrono::DateTime::from_timestamp(exp, 0))
                        .map(|t| t.to_rfc3339()),
                    "session_id": claims(&token).map(|c| c["sid"].clone()),
                })
            );
            Ok(())
        }
        Renewal::NotPossible => {
            eprintln!("{}", output::LOG_IN_HINT);
            Err(anyhow::anyhow!(
                "profile {:?} has no refresh token",
                creds.profile
            ))
        }
        Renewal::Ended {
            status,
            code,
            message,
        } => {
            output::report_api_error(status, &code, &message);
            Err(anyhow::Error::new(output::Reported))
        }
    }
}

/// `auth status`: the profile, whether it is logged in, and when its
/// access token expires (renewable with the refresh token).
pub fn status(creds: &Credentials) -> Result<()> {
    let token = creds.token.as_deref();
    let expiry = token.and_then(token_expiry);
    let expired = expiry.is_some_and(|exp| exp <= chrono::Utc::now().timestamp());
    let renewable = creds.refresh_token().is_some();
    let mut shown = serde_json::json!({
        "profile": creds.profile,
        "url": creds.url,
        "logged_in": token.is_some() && (!expired || renewable),
        "renewable": renewable,
    });
    if let Some(exp) = expiry {
        shown["expires_at"] =
            serde_json::json!(chrono::DateTime::from_timestamp(exp, 0).map(|t| t.to_rfc3339()));
        shown["expired"] = serde_json::json!(expired);
    }
    if let Some(sid) = token
        .and_then(claims)
        .map(|c| c["sid"].clone())
        .filter(|s| !s.is_null())
    {
        shown["session_id"] = sid;
    }
    println!("{}", serde_json::to_string_pretty(&shown)?);
    if expired && !renewable {
        eprintln!("{}", output::TOKEN_EXPIRED_HINT);
    }
    Ok(())
}

/// `auth signup-invite`: stores the tokens of the answer in the profile,
/// as `login` does (and does not print them).
pub fn store_signup_tokens(
    profile: &str,
    url: &str,
    account: &mut serde_json::Value,
    done: &str,
) -> Result<()> {
    let Some(object) = account.as_object_mut() else {
        return Ok(());
    };
    let take = |o: &mut serde_json::Map<String, serde_json::Value>, key: &str| {
        o.remove(key).and_then(|t| t.as_str().map(str::to_string))
    };
    let access = take(object, "access_token");
    let refresh = take(object, "refresh_token");
    if access.is_some() {
        let _lock = config::Store::lock()?;
        let mut store = config::Store::load()?;
        store.set(profile, url, access, refresh);
        let file = store.save()?;
        eprintln!(
            "{done}; tokens saved to profile {profile:?} in {}",
            file.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn token_expiry_reads_the_payload() {
        // {"alg":"HS256"} . {"exp":1700000000,"sub":"x"} . signature
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjE3MDAwMDAwMDAsInN1YiI6IngifQ.c2ln";
        assert_eq!(super::token_expiry(token), Some(1_700_000_000));
        assert_eq!(super::token_expiry("not-a-jwt"), None);
    }

    #[test]
    fn only_expired_or_unaccepted_tokens_are_renewed() {
        assert!(super::renewable(401, "token_expired"));
        assert!(super::renewable(401, "invalid_token"));
        assert!(!super::renewable(401, "session_revoked"));
        assert!(!super::renewable(401, "invalid_credentials"));
        assert!(!super::renewable(403, "forbidden"));
    }
}
