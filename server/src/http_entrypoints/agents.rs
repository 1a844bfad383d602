//! Agents area.

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::agents::{
    AgentCreate, AgentDetail, AgentListItem, AgentListQuery, AgentQuery, AgentSummary,
    AgentTestRequest, AgentTestResult, AgentUpdate,
};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::OrgQuery;
use workspace_api::tools::SuccessResponse;

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<AgentCreate>,
) -> Result<HttpResponseCreated<AgentSummary>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::AGENT_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::agents::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<AgentListQuery>,
) -> Result<HttpResponseOk<Vec<AgentListItem>>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::AGENT_READ)
        .await?;
    Ok(HttpResponseOk(app::agents::list(cx, &access, query).await?))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<AgentQuery>,
) -> Result<HttpResponseOk<AgentDetail>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().agent_id;
    let access = cx
        .authorize(&rqctx, on::Agent(id), perm::AGENT_READ)
        .await?;
    Ok(HttpResponseOk(app::agents::get(cx, &access, id).await?))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<AgentQuery>,
    body: JsonBody<AgentUpdate>,
) -> Result<HttpResponseOk<AgentSummary>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().agent_id;
    let access = cx
        .authorize(&rqctx, on::Agent(id), perm::AGENT_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::agents::update(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<AgentQuery>,
) -> Result<HttpResponseOk<SuccessResponse>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().agent_id;
    let access = cx
        .authorize(&rqctx, on::Agent(id), perm::AGENT_DELETE)
        .await?;
    Ok(HttpResponseOk(app::agents::delete(cx, &access).await?))
}

pub async fn test(
    rqctx: Ctx,
    query: QueryParams<AgentQuery>,
    body: JsonBody<AgentTestRequest>,
) -> Result<HttpResponseOk<AgentTestResult>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().agent_id;
    let access = cx
        .authorize(&rqctx, on::Agent(id), perm::AGENT_EXECUTE)
        .await?;
    Ok(HttpResponseOk(
        app::agents::test(cx, &access, body.into_inner()).await?,
    ))
}
