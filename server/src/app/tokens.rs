//! Personal access tokens: their rules (names, scopes, lifetimes, the
//! per-user limit). Using a token is authorization's part
//! ([`crate::context::ServerContext::authorize`]).

use crate::authn::Actor;
use crate::context::ServerContext;
use crate::db::datastore::tokens::{NewToken, TOKENS_PER_USER_MAX, TokenRow};
use crate::error::Error;
use uuid::Uuid;
use workspace_api::orgs::MessageResponse;
use workspace_api::tokens::{
    TOKEN_LIFETIME_MAX_DAYS, TOKEN_SCOPES_MAX, TokenCreate, TokenCreated, TokenSummary,
};

/// Days a token lives when the request names none.
pub const TOKEN_LIFETIME_DEFAULT_DAYS: u32 = 90;

/// The characters of a token shown to recognise it (`wsp_` and 8 more).
const PREFIX_CHARS: usize = 12;

pub(crate) fn summary(row: TokenRow) -> TokenSummary {
    TokenSummary {
        id: row.id,
        name: row.name,
        prefix: row.prefix,
        scopes: row.scopes,
        created_at: row.created_at,
        expires_at: row.expires_at,
        last_used_at: row.last_used_at,
    }
}

/// The scopes, checked: each a permission name of the catalog or a
/// wildcard that covers at least one (`kb:*`, `*:read`, `*:*`), without
/// repeats.
pub(crate) async fn scopes(
    cx: &ServerContext,
    requested: Vec<String>,
) -> Result<Vec<String>, Error> {
    if requested.is_empty() || requested.len() > TOKEN_SCOPES_MAX {
        return Err(Error::invalid(
            "invalid_scope",
            format!("a token has 1 to {TOKEN_SCOPES_MAX} scopes"),
        ));
    }
    let catalog = cx.datastore.permission_names().await?;
    let mut out: Vec<String> = Vec::with_capacity(requested.len());
    for scope in requested {
        let scope = scope.trim().to_string();
        let known = scope.len() <= 100
            && catalog
                .iter()
                .any(|p| crate::authz::permission_matches(&scope, p));
        if !known {
            return Err(Error::invalid(
                "invalid_scope",
                format!(
                    "{:?} is not a permission name (resource:action) nor a wildcard \
                     covering one",
                    scope.chars().take(100).collect::<String>()
                ),
            ));
        }
        if !out.contains(&scope) {
            out.push(scope);
        }
    }
    Ok(out)
}

/// A token's name, checked: 1 to 100 characters without control
/// characters (`400 invalid_name`).
pub(crate) fn valid_name(name: &str) -> Result<&str, Error> {
    let name = name.trim();
    if name.is_empty()
        || name.chars().count() > 100
        || name.chars().any(crate::app::auth::is_forbidden_char)
    {
        return Err(Error::invalid(
            "invalid_name",
            "a name is 1 to 100 characters, without control characters",
        ));
    }
    Ok(name)
}

/// A token's lifetime in days, checked (default 90).
pub(crate) fn lifetime_days(requested: Option<u32>) -> Result<i32, Error> {
    let days = requested.unwrap_or(TOKEN_LIFETIME_DEFAULT_DAYS);
    if !(1..=TOKEN_LIFETIME_MAX_DAYS).contains(&days) {
        return Err(Error::invalid(
            workspace_api::extract::INVALID_REQUEST,
            format!("expires_in_days is 1 to {TOKEN_LIFETIME_MAX_DAYS}"),
        ));
    }
    Ok(days as i32)
}

/// A new token's secret, with what is stored of it.
pub(crate) struct Minted {
    pub secret: String,
    pub hash: Vec<u8>,
}

impl Minted {
    pub(crate) fn new() -> Minted {
        let secret = crate::authn::new_personal_token();
        let hash = crate::authn::hash_secret(&secret);
        Minted { secret, hash }
    }

    /// What is stored: the recognisable prefix and the hash, never the
    /// secret.
    pub(crate) fn stored<'a>(
        &'a self,
        name: &'a str,
        scopes: &'a [String],
        lifetime_days: i32,
    ) -> NewToken<'a> {
        NewToken {
            name,
            prefix: &self.secret[..PREFIX_CHARS],
            secret_hash: &self.hash,
            scopes,
            lifetime_days,
            session_id: None,
        }
    }

    /// The answer that shows the secret, once.
    pub(crate) fn created(self, row: TokenRow) -> TokenCreated {
        let TokenSummary {
            id,
            name,
            prefix,
            scopes,
            created_at,
            expires_at,
            last_used_at,
        } = summary(row);
        TokenCreated {
            id,
            name,
            prefix,
            scopes,
            created_at,
            expires_at,
            last_used_at,
            token: self.secret,
        }
    }
}

pub async fn create(
    cx: &ServerContext,
    actor: &Actor,
    origin: &crate::audit::Origin,
    body: TokenCreate,
) -> Result<TokenCreated, Error> {
    let name = valid_name(&body.name)?;
    let days = lifetime_days(body.expires_in_days)?;
    let scopes = scopes(cx, body.scopes).await?;
    let minted = Minted::new();
    let row = cx
        .datastore
        .token_create(
            actor.user_id,
            &NewToken {
                session_id: actor.session_id,
                ..minted.stored(name, &scopes, days)
            },
            origin,
        )
        .await?
        .ok_or_else(|| {
            Error::conflict(
                "too_many_tokens",
                format!(
                    "you hold {TOKENS_PER_USER_MAX} live tokens, the most there can be; \
                     revoke one first"
                ),
            )
        })?;
    Ok(minted.created(row))
}

pub async fn list(cx: &ServerContext, actor: &Actor) -> Result<Vec<TokenSummary>, Error> {
    Ok(cx
        .datastore
        .token_list(actor.user_id)
        .await?
        .into_iter()
        .map(summary)
        .collect())
}

pub async fn revoke(
    cx: &ServerContext,
    actor: &Actor,
    origin: &crate::audit::Origin,
    token_id: Uuid,
) -> Result<MessageResponse, Error> {
    if !cx
        .datastore
        .token_revoke(actor.user_id, token_id, origin)
        .await?
    {
        return Err(Error::NotFound { what: "token" });
    }
    Ok(MessageResponse {
        message: "token revoked".into(),
    })
}
