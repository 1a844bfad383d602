//! Tools area.

use super::Ctx;
use crate::app;
use crate::app::tools::ListScope;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::OrgQuery;
use workspace_api::tools::{
    CategoryCreate, CategoryQuery, CategoryUpdate, SuccessResponse, Tool, ToolCategory, ToolCreate,
    ToolCreated, ToolListItem, ToolListQuery, ToolQuery, ToolTestRequest, ToolTestResult,
    ToolUpdate, ToolUpdated,
};

/// The one authorization call of the lists: `tool:read` in `org_id` when
/// given, else authentication only (the query then covers the caller's
/// organizations where their role grants `tool:read`; a personal access
/// token needs the `tool:read` scope).
async fn list_scope(rqctx: &Ctx, org_id: Option<uuid::Uuid>) -> Result<ListScope, HttpError> {
    let cx = rqctx.context();
    Ok(match org_id {
        Some(org) => ListScope::Org(Box::new(
            cx.authorize(rqctx, on::Org(org), perm::TOOL_READ).await?,
        )),
        None => {
            let actor = cx.authenticate(rqctx).await?;
            actor.require_scope("tool:read")?;
            ListScope::User(actor)
        }
    })
}

pub async fn list_categories(
    rqctx: Ctx,
    query: QueryParams<ToolListQuery>,
) -> Result<HttpResponseOk<Vec<ToolCategory>>, HttpError> {
    let query = query.into_inner();
    let scope = list_scope(&rqctx, query.org_id).await?;
    Ok(HttpResponseOk(
        app::tools::list_categories(rqctx.context(), scope, query).await?,
    ))
}

pub async fn create_category(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<CategoryCreate>,
) -> Result<HttpResponseCreated<ToolCategory>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), perm::TOOL_WRITE)
        .await?;
    Ok(HttpResponseCreated(
        app::tools::create_category(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn update_category(
    rqctx: Ctx,
    query: QueryParams<CategoryQuery>,
    body: JsonBody<CategoryUpdate>,
) -> Result<HttpResponseOk<ToolCategory>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::TOOL_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::tools::update_category(cx, &access, query.category_id, body.into_inner()).await?,
    ))
}

pub async fn delete_category(
    rqctx: Ctx,
    query: QueryParams<CategoryQuery>,
) -> Result<HttpResponseOk<SuccessResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::TOOL_DELETE)
        .await?;
    Ok(HttpResponseOk(
        app::tools::delete_category(cx, &access, query.category_id).await?,
    ))
}

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<ToolCreate>,
) -> Result<HttpResponseCreated<ToolCreated>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(&rqctx, on::Org(query.into_inner().org_id), perm::TOOL_WRITE)
        .await?;
    Ok(HttpResponseCreated(
        app::tools::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn list_all(
    rqctx: Ctx,
    query: QueryParams<ToolListQuery>,
) -> Result<HttpResponseOk<Vec<ToolListItem>>, HttpError> {
    let query = query.into_inner();
    let scope = list_scope(&rqctx, query.org_id).await?;
    Ok(HttpResponseOk(
        app::tools::list_all(rqctx.context(), scope, query).await?,
    ))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<ToolQuery>,
    body: JsonBody<ToolUpdate>,
) -> Result<HttpResponseOk<ToolUpdated>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::TOOL_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::tools::update(cx, &access, query.tool_id, body.into_inner()).await?,
    ))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<ToolQuery>,
) -> Result<HttpResponseOk<Tool>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::TOOL_READ)
        .await?;
    Ok(HttpResponseOk(
        app::tools::get(cx, &access, query.tool_id).await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<ToolQuery>,
) -> Result<HttpResponseOk<SuccessResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::TOOL_DELETE)
        .await?;
    Ok(HttpResponseOk(
        app::tools::delete(cx, &access, query.tool_id).await?,
    ))
}

pub async fn test(
    rqctx: Ctx,
    query: QueryParams<ToolQuery>,
    body: JsonBody<ToolTestRequest>,
) -> Result<HttpResponseOk<ToolTestResult>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::TOOL_EXECUTE)
        .await?;
    Ok(HttpResponseOk(
        app::tools::test(cx, &access, query.tool_id, body.into_inner()).await?,
    ))
}
