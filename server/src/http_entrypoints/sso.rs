//! Single sign-on (issue #37): the organization's admins manage its
//! provider (a role of the admin level with `organization:admin`); signing
//! in is public (the single-use `state` is the credential).

use super::{Ctx, message};
use crate::app;
use crate::authz::{Admin, on, perm};
use dropshot::{HttpError, HttpResponseOk};
use workspace_api::auth::LoginResponse;
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{MessageResponse, OrgQuery};
use workspace_api::sso::{
    SsoCallbackRequest, SsoConfig, SsoConfigInput, SsoStart, SsoStartRequest,
};

/// The organization's admins, with `organization:admin`.
const MANAGE: Admin<perm::OrganizationAdmin> = Admin(perm::ORGANIZATION_ADMIN);

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<SsoConfig>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseOk(app::sso::get(cx, &grant).await?))
}

pub async fn put(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<SsoConfigInput>,
) -> Result<HttpResponseOk<SsoConfig>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::sso::put(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    app::sso::delete(cx, &grant).await?;
    Ok(message("single sign-on provider removed".to_string()))
}

pub async fn start(
    rqctx: Ctx,
    body: JsonBody<SsoStartRequest>,
) -> Result<HttpResponseOk<SsoStart>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseOk(
        app::sso::start(cx, body.into_inner(), &super::auth::client_info(&rqctx)).await?,
    ))
}

pub async fn callback(
    rqctx: Ctx,
    body: JsonBody<SsoCallbackRequest>,
) -> Result<HttpResponseOk<LoginResponse>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseOk(
        app::sso::callback(cx, body.into_inner(), &super::auth::client_info(&rqctx)).await?,
    ))
}
