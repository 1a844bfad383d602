//! Organization service accounts (`/api/org/service_accounts`).

use super::Ctx;
use crate::app;
use crate::authz::{Login, on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{MessageResponse, OrgQuery};
use workspace_api::service_accounts::{
    ServiceAccount, ServiceAccountCreate, ServiceAccountCreated, ServiceAccountQuery,
    ServiceAccountRotate,
};
use workspace_api::tokens::TokenCreated;

/// Making, rotating and deleting service accounts: `users:write`, with a
/// login (tokens do not make tokens).
const MANAGE: Login<perm::UsersWrite> = Login(perm::USERS_WRITE);

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ServiceAccountCreate>,
) -> Result<HttpResponseCreated<ServiceAccountCreated>, HttpError> {
    let cx = rqctx.context();
    let grant = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), MANAGE)
        .await?;
    Ok(HttpResponseCreated(
        app::service_accounts::create(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<Vec<ServiceAccount>>, HttpError> {
    let cx = rqctx.context();
    let grant = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), perm::USERS_READ)
        .await?;
    Ok(HttpResponseOk(
        app::service_accounts::list(cx, &grant).await?,
    ))
}

pub async fn rotate(
    rqctx: Ctx,
    query: QueryParams<ServiceAccountQuery>,
    body: JsonBody<ServiceAccountRotate>,
) -> Result<HttpResponseCreated<TokenCreated>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseCreated(
        app::service_accounts::rotate(cx, &grant, query.service_account_id, body.into_inner())
            .await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<ServiceAccountQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::service_accounts::delete(cx, &grant, query.service_account_id).await?,
    ))
}
