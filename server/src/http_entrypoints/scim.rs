//! SCIM provisioning (issue #37): the organization's admins manage it
//! (a role of the admin level with `organization:admin`); the SCIM service
//! (`/scim/v2`) is authenticated by the organization's SCIM token, and
//! answers every error as a SCIM error body.

use super::{Ctx, message};
use crate::app;
use crate::authz::{Admin, ScimGrant, on, perm};
use crate::context::ServerContext;
use crate::error::ScimFailure;
use dropshot::{Body, HttpError, HttpResponseOk, Path, UntypedBody};
use http::Response;
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{MessageResponse, OrgQuery};
use workspace_api::scim::{
    ScimConfig, ScimConfigInput, ScimIdPath, ScimListQuery, ScimResourceQuery, ScimTokenIssued,
};
use workspace_scim::Kind;

/// The organization's admins, with `organization:admin`.
const MANAGE: Admin<perm::OrganizationAdmin> = Admin(perm::ORGANIZATION_ADMIN);

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<ScimConfig>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseOk(app::scim::get(cx, &grant).await?))
}

pub async fn put(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ScimConfigInput>,
) -> Result<HttpResponseOk<ScimConfig>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::scim::put(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn token(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<ScimTokenIssued>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseOk(app::scim::issue_token(cx, &grant).await?))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    app::scim::delete(cx, &grant).await?;
    Ok(message("SCIM provisioning turned off".to_string()))
}

/// Answers a SCIM operation: its response, or its failure as a SCIM
/// error body (never dropshot's error shape).
fn scim_answer(
    cx: &ServerContext,
    result: Result<Response<Body>, ScimFailure>,
) -> Result<Response<Body>, HttpError> {
    Ok(result.unwrap_or_else(|failure| app::scim::failure_answer(cx, failure)))
}

/// The SCIM grant of the request's token (the one authorization call of
/// every SCIM operation that reads or writes resources).
async fn scim_grant(rqctx: &Ctx) -> Result<ScimGrant, ScimFailure> {
    rqctx
        .context()
        .authorize_scim(rqctx)
        .await?
        .ok_or_else(app::scim::unauthenticated)
}

pub async fn service_provider_config(rqctx: Ctx) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        scim_grant(&rqctx).await?;
        app::scim::service_provider_config(cx)
    }
    .await;
    scim_answer(cx, result)
}

pub async fn resource_types(rqctx: Ctx) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        scim_grant(&rqctx).await?;
        app::scim::resource_types(cx)
    }
    .await;
    scim_answer(cx, result)
}

pub async fn resource_type(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        scim_grant(&rqctx).await?;
        app::scim::resource_type(cx, &path.into_inner().id)
    }
    .await;
    scim_answer(cx, result)
}

pub async fn schemas(rqctx: Ctx) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        scim_grant(&rqctx).await?;
        app::scim::schemas(cx)
    }
    .await;
    scim_answer(cx, result)
}

pub async fn schema(rqctx: Ctx, path: Path<ScimIdPath>) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        scim_grant(&rqctx).await?;
        app::scim::schema(cx, &path.into_inner().id)
    }
    .await;
    scim_answer(cx, result)
}

pub async fn search(rqctx: Ctx, _body: UntypedBody) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        scim_grant(&rqctx).await?;
        app::scim::search()
    }
    .await;
    scim_answer(cx, result)
}

async fn list(
    rqctx: Ctx,
    kind: Kind,
    query: QueryParams<ScimListQuery>,
) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        let grant = scim_grant(&rqctx).await?;
        app::scim::list(cx, &grant, kind, query.into_inner()).await
    }
    .await;
    scim_answer(cx, result)
}

async fn create(rqctx: Ctx, kind: Kind, body: UntypedBody) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        let grant = scim_grant(&rqctx).await?;
        app::scim::create(cx, &grant, kind, body.as_bytes()).await
    }
    .await;
    scim_answer(cx, result)
}

async fn read(
    rqctx: Ctx,
    kind: Kind,
    path: Path<ScimIdPath>,
    query: QueryParams<ScimResourceQuery>,
) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        let grant = scim_grant(&rqctx).await?;
        let headers = rqctx.request.headers();
        app::scim::read(
            cx,
            &grant,
            kind,
            &path.into_inner().id,
            headers,
            query.into_inner(),
        )
        .await
    }
    .await;
    scim_answer(cx, result)
}

async fn replace(
    rqctx: Ctx,
    kind: Kind,
    path: Path<ScimIdPath>,
    body: UntypedBody,
) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        let grant = scim_grant(&rqctx).await?;
        let headers = rqctx.request.headers();
        let id = path.into_inner().id;
        app::scim::replace(cx, &grant, kind, &id, headers, body.as_bytes()).await
    }
    .await;
    scim_answer(cx, result)
}

async fn patch(
    rqctx: Ctx,
    kind: Kind,
    path: Path<ScimIdPath>,
    body: UntypedBody,
) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        let grant = scim_grant(&rqctx).await?;
        let headers = rqctx.request.headers();
        let id = path.into_inner().id;
        app::scim::patch(cx, &grant, kind, &id, headers, body.as_bytes()).await
    }
    .await;
    scim_answer(cx, result)
}

async fn remove(
    rqctx: Ctx,
    kind: Kind,
    path: Path<ScimIdPath>,
) -> Result<Response<Body>, HttpError> {
    let cx = rqctx.context();
    let result = async {
        let grant = scim_grant(&rqctx).await?;
        let headers = rqctx.request.headers();
        app::scim::delete_resource(cx, &grant, kind, &path.into_inner().id, headers).await
    }
    .await;
    scim_answer(cx, result)
}

pub async fn users_list(
    rqctx: Ctx,
    query: QueryParams<ScimListQuery>,
) -> Result<Response<Body>, HttpError> {
    list(rqctx, Kind::User, query).await
}

pub async fn groups_list(
    rqctx: Ctx,
    query: QueryParams<ScimListQuery>,
) -> Result<Response<Body>, HttpError> {
    list(rqctx, Kind::Group, query).await
}

pub async fn users_create(rqctx: Ctx, body: UntypedBody) -> Result<Response<Body>, HttpError> {
    create(rqctx, Kind::User, body).await
}

pub async fn groups_create(rqctx: Ctx, body: UntypedBody) -> Result<Response<Body>, HttpError> {
    create(rqctx, Kind::Group, body).await
}

pub async fn users_get(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
    query: QueryParams<ScimResourceQuery>,
) -> Result<Response<Body>, HttpError> {
    read(rqctx, Kind::User, path, query).await
}

pub async fn groups_get(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
    query: QueryParams<ScimResourceQuery>,
) -> Result<Response<Body>, HttpError> {
    read(rqctx, Kind::Group, path, query).await
}

pub async fn users_replace(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
    body: UntypedBody,
) -> Result<Response<Body>, HttpError> {
    replace(rqctx, Kind::User, path, body).await
}

pub async fn groups_replace(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
    body: UntypedBody,
) -> Result<Response<Body>, HttpError> {
    replace(rqctx, Kind::Group, path, body).await
}

pub async fn users_patch(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
    body: UntypedBody,
) -> Result<Response<Body>, HttpError> {
    patch(rqctx, Kind::User, path, body).await
}

pub async fn groups_patch(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
    body: UntypedBody,
) -> Result<Response<Body>, HttpError> {
    patch(rqctx, Kind::Group, path, body).await
}

pub async fn users_delete(rqctx: Ctx, path: Path<ScimIdPath>) -> Result<Response<Body>, HttpError> {
    remove(rqctx, Kind::User, path).await
}

pub async fn groups_delete(
    rqctx: Ctx,
    path: Path<ScimIdPath>,
) -> Result<Response<Body>, HttpError> {
    remove(rqctx, Kind::Group, path).await
}
