//! Organization service accounts (`/api/org/service_accounts`).

use crate::app::tokens::{Minted, lifetime_days, scopes, summary, valid_name};
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::service_accounts::ServiceAccountRow;
use crate::db::datastore::tokens::TokenRow;
use crate::error::Error;
use uuid::Uuid;
use workspace_api::orgs::MessageResponse;
use workspace_api::service_accounts::{
    SERVICE_ACCOUNTS_PER_ORG_MAX, ServiceAccount, ServiceAccountCreate, ServiceAccountCreated,
    ServiceAccountRotate,
};
use workspace_api::tokens::TokenCreated;

fn view(account: ServiceAccountRow, tokens: Vec<TokenRow>) -> ServiceAccount {
    ServiceAccount {
        id: account.id,
        org_id: account.org_id,
        name: account.name,
        role_id: account.role_id,
        role_name: account.role_name,
        status: account.status.to_string(),
        created_by: account.created_by,
        created_at: account.created_at,
        tokens: tokens.into_iter().map(summary).collect(),
    }
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::UsersWrite>,
    body: ServiceAccountCreate,
) -> Result<ServiceAccountCreated, Error> {
    let name = valid_name(&body.name)?;
    let days = lifetime_days(body.expires_in_days)?;
    let role = crate::app::orgs::assignable_role(cx, grant, body.role_id).await?;
    let scopes = scopes(cx, body.scopes).await?;
    let minted = Minted::new();
    let (account, token) = cx
        .datastore
        .service_account_create(grant, name, role.id, &minted.stored(name, &scopes, days))
        .await?
        .ok_or_else(|| {
            Error::conflict(
                "too_many_service_accounts",
                format!(
                    "the organization holds {SERVICE_ACCOUNTS_PER_ORG_MAX} service accounts, \
                     the most there can be; delete one first"
                ),
            )
        })?;
    slog::info!(grant.log(), "service account created";
        "service_account" => account.id.to_string(), "role" => &account.role_name);
    Ok(ServiceAccountCreated {
        service_account: view(account, Vec::new()),
        token: minted.created(token),
    })
}

pub async fn list(cx: &ServerContext, access: &OrgAccess) -> Result<Vec<ServiceAccount>, Error> {
    Ok(cx
        .datastore
        .service_account_list(access)
        .await?
        .into_iter()
        .map(|(account, tokens)| view(account, tokens))
        .collect())
}

/// The organization's service account, if the caller ranks at least as
/// high as its role (else its token would be theirs to hold or end).
async fn within_reach(
    cx: &ServerContext,
    access: &OrgAccess,
    account_id: Uuid,
) -> Result<ServiceAccountRow, Error> {
    let account = cx
        .datastore
        .service_account_get(access, account_id)
        .await?
        .ok_or(Error::NotFound {
            what: "service account",
        })?;
    if account.role_level > access.level() {
        return Err(Error::Forbidden {
            code: "role_level_too_high",
            message: "this service account's role ranks above your own".to_string(),
        });
    }
    Ok(account)
}

pub async fn rotate(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::UsersWrite>,
    account_id: Uuid,
    body: ServiceAccountRotate,
) -> Result<TokenCreated, Error> {
    let account = within_reach(cx, grant, account_id).await?;
    let days = lifetime_days(body.expires_in_days)?;
    let requested = match body.scopes {
        Some(scopes) => scopes,
        None => cx
            .datastore
            .service_account_scopes(account.id)
            .await?
            .ok_or_else(|| {
                Error::invalid(
                    "invalid_scope",
                    "the account holds no live token to take the scopes from: name them",
                )
            })?,
    };
    let scopes = scopes(cx, requested).await?;
    let minted = Minted::new();
    let token = cx
        .datastore
        .service_account_rotate(
            grant,
            account.id,
            &minted.stored(&account.name, &scopes, days),
        )
        .await?
        .ok_or(Error::NotFound {
            what: "service account",
        })?;
    slog::info!(grant.log(), "service account token rotated";
        "service_account" => account.id.to_string());
    Ok(minted.created(token))
}

pub async fn delete(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::UsersWrite>,
    account_id: Uuid,
) -> Result<MessageResponse, Error> {
    let account = within_reach(cx, grant, account_id).await?;
    if !cx
        .datastore
        .service_account_delete(grant, account.id)
        .await?
    {
        return Err(Error::NotFound {
            what: "service account",
        });
    }
    slog::info!(grant.log(), "service account deleted";
        "service_account" => account.id.to_string());
    Ok(MessageResponse {
        message: "the service account and its tokens were deleted".into(),
    })
}
