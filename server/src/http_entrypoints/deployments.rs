//! Agent deployments area, and its OpenAI-compatible surface
//! (authenticated by a deployment key instead of a user token).

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::agents::AgentQuery;
use workspace_api::deployments::{
    ChatCompletionRequest, Deployment, DeploymentCreate, DeploymentQuery, DeploymentUpdate,
    DeploymentWithKey, OpenAiHttpError,
};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::tools::SuccessResponse;

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<AgentQuery>,
    body: JsonBody<DeploymentCreate>,
) -> Result<HttpResponseCreated<DeploymentWithKey>, HttpError> {
    let cx = rqctx.context();
    let agent_id = query.into_inner().agent_id;
    let access = cx
        .authorize(&rqctx, on::Agent(agent_id), perm::AGENT_WRITE)
        .await?;
    Ok(HttpResponseCreated(
        app::deployments::create(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<AgentQuery>,
) -> Result<HttpResponseOk<Vec<Deployment>>, HttpError> {
    let cx = rqctx.context();
    let agent_id = query.into_inner().agent_id;
    let access = cx
        .authorize(&rqctx, on::Agent(agent_id), perm::AGENT_READ)
        .await?;
    Ok(HttpResponseOk(
        app::deployments::list(cx, &access, agent_id).await?,
    ))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<DeploymentQuery>,
) -> Result<HttpResponseOk<Deployment>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().deployment_id;
    let access = cx
        .authorize(&rqctx, on::Deployment(id), perm::AGENT_READ)
        .await?;
    Ok(HttpResponseOk(
        app::deployments::get(cx, &access, id).await?,
    ))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<DeploymentQuery>,
    body: JsonBody<DeploymentUpdate>,
) -> Result<HttpResponseOk<Deployment>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().deployment_id;
    let access = cx
        .authorize(&rqctx, on::Deployment(id), perm::AGENT_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::deployments::update(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<DeploymentQuery>,
) -> Result<HttpResponseOk<SuccessResponse>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().deployment_id;
    let access = cx
        .authorize(&rqctx, on::Deployment(id), perm::AGENT_DELETE)
        .await?;
    Ok(HttpResponseOk(app::deployments::delete(cx, &access).await?))
}

pub async fn regenerate_key(
    rqctx: Ctx,
    query: QueryParams<DeploymentQuery>,
) -> Result<HttpResponseOk<DeploymentWithKey>, HttpError> {
    let cx = rqctx.context();
    let id = query.into_inner().deployment_id;
    let access = cx
        .authorize(&rqctx, on::Deployment(id), perm::AGENT_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::deployments::regenerate_key(cx, &access).await?,
    ))
}

/// A `429` (with `Retry-After`) or `401` (with `WWW-Authenticate`) is a
/// full response: a handler's error type cannot carry headers. Every other
/// error stays an error.
fn with_headers(
    result: Result<http::Response<dropshot::Body>, OpenAiHttpError>,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let e = match result {
        Err(e) if e.retry_after.is_some() || e.status.as_u16() == 401 => e,
        other => return other,
    };
    let body = serde_json::to_vec(&serde_json::json!({"error": e.error})).unwrap_or_default();
    let mut builder = http::Response::builder()
        .status(e.status.as_u16())
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(secs) = e.retry_after {
        builder = builder.header(http::header::RETRY_AFTER, secs.to_string());
    }
    if e.status.as_u16() == 401 {
        builder = builder.header(
            http::header::WWW_AUTHENTICATE,
            "Bearer realm=\"agent deployment\", error=\"invalid_token\"",
        );
    }
    builder
        .body(dropshot::Body::from(body))
        .map_err(|_| OpenAiHttpError::new(500, "internal_error", "internal error"))
}

pub async fn chat_completions(
    rqctx: Ctx,
    body: JsonBody<ChatCompletionRequest>,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let cx = rqctx.context();
    let result = async {
        let caller = app::deployments::authenticate_key(
            cx,
            rqctx.request.headers(),
            app::deployments::KeyUse::Completion,
        )
        .await?;
        app::deployments::chat_completions(cx, caller, body.into_inner(), &rqctx.log).await
    }
    .await;
    with_headers(result)
}

pub async fn models(rqctx: Ctx) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let cx = rqctx.context();
    let result = async {
        let caller = app::deployments::authenticate_key(
            cx,
            rqctx.request.headers(),
            app::deployments::KeyUse::Models,
        )
        .await?;
        app::deployments::models(cx, caller).await
    }
    .await;
    with_headers(result)
}

pub async fn preflight(rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    app::deployments::preflight(rqctx.request.headers())
}
