//! Invitations area. Creating and managing invitations needs the admin or
//! owner role (level 80 or more); an invitation addressed by its own id is
//! authorized through its organization.

use super::Ctx;
use crate::app;
use crate::authz::{AdminRole, on};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::invitations::{
    Invitation, InvitationBulkCreateRequest, InvitationBulkCreateResponse, InvitationCreateRequest,
    InvitationIdQuery, InvitationListItem, InvitationListQuery, InvitationOrgQuery,
    InvitationResendResponse, InvitationRevokeResponse, InvitationTokenQuery, InvitationValidation,
};

/// Invitations are managed by admins and owners (the spec).
const MANAGE: AdminRole = AdminRole;

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<InvitationOrgQuery>,
    body: JsonBody<InvitationCreateRequest>,
) -> Result<HttpResponseCreated<Invitation>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), MANAGE)
        .await?;
    Ok(HttpResponseCreated(
        app::invitations::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<InvitationListQuery>,
) -> Result<HttpResponseOk<Vec<InvitationListItem>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    let page = app::page(query.limit, query.offset)?;
    Ok(HttpResponseOk(
        app::invitations::list(cx, &access, query.status, page).await?,
    ))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<InvitationIdQuery>,
) -> Result<HttpResponseOk<Invitation>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().invitation_id;
    let access = cx.authorize(&rqctx, on::Invitation(id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::invitations::get(cx, &access, id).await?,
    ))
}

pub async fn validate(
    rqctx: Ctx,
    query: QueryParams<InvitationTokenQuery>,
) -> Result<HttpResponseOk<InvitationValidation>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseOk(
        app::invitations::validate(cx, &query.into_inner().token).await?,
    ))
}

pub async fn resend(
    rqctx: Ctx,
    query: QueryParams<InvitationIdQuery>,
) -> Result<HttpResponseOk<InvitationResendResponse>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().invitation_id;
    let access = cx.authorize(&rqctx, on::Invitation(id), MANAGE).await?;
    Ok(HttpResponseOk(app::invitations::resend(cx, &access).await?))
}

pub async fn revoke(
    rqctx: Ctx,
    query: QueryParams<InvitationIdQuery>,
) -> Result<HttpResponseOk<InvitationRevokeResponse>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().invitation_id;
    let access = cx.authorize(&rqctx, on::Invitation(id), MANAGE).await?;
    Ok(HttpResponseOk(app::invitations::revoke(cx, &access).await?))
}

pub async fn bulk_create(
    rqctx: Ctx,
    query: QueryParams<InvitationOrgQuery>,
    body: JsonBody<InvitationBulkCreateRequest>,
) -> Result<HttpResponseOk<InvitationBulkCreateResponse>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), MANAGE)
        .await?;
    Ok(HttpResponseOk(
        app::invitations::bulk_create(cx, &access, body.into_inner()).await?,
    ))
}
