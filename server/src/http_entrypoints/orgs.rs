//! Organizations area.

use super::{Ctx, message};
use crate::app;
use crate::authz::{Member, Owner, on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{
    AddMemberRequest, CreateOrgQuery, MessageResponse, OrgFeatures, OrgFeaturesUpdate, OrgQuery,
    Organization, TransferOwnershipRequest, UpdateOrgRequest,
};

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<workspace_api::orgs::PageQuery>,
) -> Result<HttpResponseOk<Vec<Organization>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let actor = cx.authenticate(&rqctx).await?;
    let page = app::page(query.limit, query.offset)?;
    Ok(HttpResponseOk(app::orgs::list(cx, &actor, page).await?))
}

pub async fn create_org(
    rqctx: Ctx,
    query: QueryParams<CreateOrgQuery>,
) -> Result<HttpResponseCreated<Organization>, HttpError> {
    let cx = rqctx.context();
    let actor = cx
        .authenticate_scoped(&rqctx, perm::ORGANIZATION_WRITE)
        .await?;
    let origin = super::origin(&rqctx, &actor);
    Ok(HttpResponseCreated(
        app::orgs::create(cx, &actor, &origin, &query.into_inner().name).await?,
    ))
}

pub async fn add_member(
    rqctx: Ctx,
    body: JsonBody<AddMemberRequest>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let body = body.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(body.organization_id), perm::USERS_WRITE)
        .await?;
    Ok(message(app::orgs::add_member(cx, &access, body).await?))
}

pub async fn features(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<OrgFeatures>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), Member)
        .await?;
    Ok(HttpResponseOk(app::orgs::features(cx, &access).await?))
}

pub async fn update_features(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<OrgFeaturesUpdate>,
) -> Result<HttpResponseOk<OrgFeatures>, HttpError> {
    let cx = rqctx.context();
    let admin = cx.authorize_system_admin(&rqctx).await?;
    let org_id = query.into_inner().org_id;
    Ok(HttpResponseOk(
        app::orgs::update_features(cx, &admin, org_id, body.into_inner()).await?,
    ))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<UpdateOrgRequest>,
) -> Result<HttpResponseOk<Organization>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::ORGANIZATION_WRITE,
        )
        .await?;
    Ok(HttpResponseOk(
        app::orgs::rename(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn leave(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), Member)
        .await?;
    Ok(message(app::orgs::leave(cx, &access).await?))
}

pub async fn transfer_ownership(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<TransferOwnershipRequest>,
) -> Result<HttpResponseOk<Organization>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            Owner(perm::USERS_WRITE),
        )
        .await?;
    Ok(HttpResponseOk(
        app::orgs::transfer_ownership(cx, &access, body.into_inner()).await?,
    ))
}
