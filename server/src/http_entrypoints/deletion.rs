//! Organizations and accounts that end: deleting an organization, its
//! deletion's status, deleting one's own account, exporting its data.

use super::Ctx;
use crate::app;
use crate::authz::{Owner, on, perm};
use dropshot::{HttpError, HttpResponseAccepted, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{OrgDeleteRequest, OrgDeletion, OrgQuery};
use workspace_api::users::{AccountDeleteRequest, AccountDeletion};

/// Owners only: the owner role with `organization:admin`.
const OWNER: Owner<perm::OrganizationAdmin> = Owner(perm::ORGANIZATION_ADMIN);

pub async fn delete_org(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<OrgDeleteRequest>,
) -> Result<HttpResponseAccepted<OrgDeletion>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let access = cx.authorize(&rqctx, on::Org(org_id), OWNER).await?;
    let confirm = body.into_inner().confirm_name;
    Ok(HttpResponseAccepted(
        app::deletion::delete_org(cx, &access, &confirm).await?,
    ))
}

pub async fn org_status(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<OrgDeletion>, HttpError> {
    let cx = rqctx.context();
    // The organization admits nobody any more: the request is the
    // caller's own (checked by the statement).
    let actor = cx.authenticate(&rqctx).await?;
    let org_id = query.into_inner().org_id;
    Ok(HttpResponseOk(
        app::deletion::org_status(cx, &actor, org_id).await?,
    ))
}

pub async fn delete_me(
    rqctx: Ctx,
    body: JsonBody<AccountDeleteRequest>,
) -> Result<HttpResponseAccepted<AccountDeletion>, HttpError> {
    let cx = rqctx.context();
    // Only a login ends the account (a token is 403 token_not_allowed).
    let actor = cx.authenticate_login(&rqctx).await?;
    let password = body.into_inner().password;
    Ok(HttpResponseAccepted(
        app::deletion::delete_account(cx, &actor, password).await?,
    ))
}

pub async fn export(rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    // Everything the account holds: a login only.
    let actor = cx.authenticate_login(&rqctx).await?;
    Ok(app::deletion::export::export(cx, &actor).await?)
}
