//! Roles area: roles of an organization and the global permission catalog.

use super::{Ctx, message};
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{MessageResponse, OrgQuery};
use workspace_api::roles::{
    CreatePermissionRequest, CreateRoleRequest, Permission, PermissionQuery, Role, RoleQuery,
    RoleWithPermissions, UpdateRoleRequest,
};

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<CreateRoleRequest>,
) -> Result<HttpResponseCreated<RoleWithPermissions>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::ROLES_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::roles::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<RoleQuery>,
    body: JsonBody<UpdateRoleRequest>,
) -> Result<HttpResponseOk<RoleWithPermissions>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::ROLES_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::roles::update(cx, &access, query.role_id, body.into_inner()).await?,
    ))
}

pub async fn remove(
    rqctx: Ctx,
    query: QueryParams<RoleQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.org_id),
            (perm::ROLES_DELETE, perm::ROLES_WRITE),
        )
        .await?;
    Ok(message(
        app::roles::remove(cx, &access, query.role_id).await?,
    ))
}

pub async fn list_roles(
    rqctx: Ctx,
    query: QueryParams<workspace_api::orgs::OrgPageQuery>,
) -> Result<HttpResponseOk<Vec<Role>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::ROLES_READ)
        .await?;
    let page = app::page(query.limit, query.offset)?;
    Ok(HttpResponseOk(app::roles::list(cx, &access, page).await?))
}

pub async fn list_permissions(
    rqctx: Ctx,
    query: QueryParams<workspace_api::orgs::PageQuery>,
) -> Result<HttpResponseOk<Vec<Permission>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    cx.authenticate(&rqctx).await?;
    let page = app::page(query.limit, query.offset)?;
    Ok(HttpResponseOk(
        app::roles::list_permissions(cx, page).await?,
    ))
}

pub async fn create_permission(
    rqctx: Ctx,
    body: JsonBody<CreatePermissionRequest>,
) -> Result<HttpResponseCreated<Permission>, HttpError> {
    let cx = rqctx.context();
    let admin = cx.authorize_system_admin(&rqctx).await?;
    Ok(HttpResponseCreated(
        app::roles::create_permission(cx, &admin, body.into_inner()).await?,
    ))
}

pub async fn delete_permission(
    rqctx: Ctx,
    query: QueryParams<PermissionQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let admin = cx.authorize_system_admin(&rqctx).await?;
    Ok(message(
        app::roles::delete_permission(cx, &admin, query.into_inner().permission_id).await?,
    ))
}
