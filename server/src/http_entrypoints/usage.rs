//! Usage, cost and budgets (issue #36): the organization's usage report
//! and CSV export (`usage:read`) and its budgets (`usage:write` to change
//! them), for its admins (a role of the admin level with the permission).

use super::Ctx;
use crate::app;
use crate::authz::{Admin, on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::OrgQuery;
use workspace_api::usage::{
    Budget, BudgetCreate, BudgetDeleted, BudgetList, BudgetQuery, BudgetUpdate, UsageReport,
    UsageReportQuery,
};

/// The organization's admins, with `usage:read`.
const READ: Admin<perm::UsageRead> = Admin(perm::USAGE_READ);
/// The organization's admins, with `usage:write`.
const MANAGE: Admin<perm::UsageWrite> = Admin(perm::USAGE_WRITE);

pub async fn report(
    rqctx: Ctx,
    query: QueryParams<UsageReportQuery>,
) -> Result<HttpResponseOk<UsageReport>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), READ).await?;
    Ok(HttpResponseOk(
        app::usage::report(cx, &grant, &query).await?,
    ))
}

pub async fn export(
    rqctx: Ctx,
    query: QueryParams<UsageReportQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), READ).await?;
    let report = app::usage::report(cx, &grant, &query).await?;
    let csv = app::usage::report_csv(&report)?;
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/csv; charset=utf-8")
        .header(
            http::header::CONTENT_DISPOSITION,
            "attachment; filename=\"usage.csv\"",
        )
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(dropshot::Body::from(csv))
        .map_err(|e| HttpError::for_internal_error(format!("usage export: {e}")))
}

pub async fn budgets_list(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<BudgetList>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), READ).await?;
    Ok(HttpResponseOk(app::usage::budgets_list(cx, &grant).await?))
}

pub async fn budgets_create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<BudgetCreate>,
) -> Result<HttpResponseCreated<Budget>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseCreated(
        app::usage::budget_create(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn budgets_update(
    rqctx: Ctx,
    query: QueryParams<BudgetQuery>,
    body: JsonBody<BudgetUpdate>,
) -> Result<HttpResponseOk<Budget>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::usage::budget_update(cx, &grant, query.budget_id, body.into_inner()).await?,
    ))
}

pub async fn budgets_delete(
    rqctx: Ctx,
    query: QueryParams<BudgetQuery>,
) -> Result<HttpResponseOk<BudgetDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::usage::budget_delete(cx, &grant, query.budget_id).await?,
    ))
}
