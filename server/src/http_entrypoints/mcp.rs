//! MCP area. Every operation is authorized in the organization of its
//! `org_id` (`mcp:read` / `mcp:write`), except the public OAuth callback.

use super::Ctx;
use crate::app;
use crate::authz::{on, perm};
use dropshot::{HttpError, HttpResponseOk, HttpResponseSeeOther, http_response_see_other};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::mcp::{
    CallbackQuery, ConnectAccount, ConnectionStart, GenerateUrl, InstanceListQuery, InstanceQuery,
    InstanceRename, McpDeleted, McpInstance, McpInstanceList, McpServerList, McpServerWithTools,
    McpUrl, ServerQuery,
};
use workspace_api::orgs::PersonalOrgQuery;

pub async fn list_servers(
    rqctx: Ctx,
    query: QueryParams<PersonalOrgQuery>,
) -> Result<HttpResponseOk<McpServerList>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::OrgOrPersonal(query.into_inner().org_id),
            perm::MCP_READ,
        )
        .await?;
    Ok(HttpResponseOk(app::mcp::list_servers(cx, &access).await?))
}

pub async fn server_with_tools(
    rqctx: Ctx,
    query: QueryParams<ServerQuery>,
) -> Result<HttpResponseOk<McpServerWithTools>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::OrgOrPersonal(query.org_id), perm::MCP_READ)
        .await?;
    Ok(HttpResponseOk(
        app::mcp::server_with_tools(cx, &access, query.server_id).await?,
    ))
}

pub async fn connect_account(
    rqctx: Ctx,
    query: QueryParams<PersonalOrgQuery>,
    body: JsonBody<ConnectAccount>,
) -> Result<HttpResponseOk<ConnectionStart>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::OrgOrPersonal(query.into_inner().org_id),
            perm::MCP_WRITE,
        )
        .await?;
    Ok(HttpResponseOk(
        app::mcp::connect_account(cx, &access, body.into_inner()).await?,
    ))
}

/// Public: the `state` is the credential.
pub async fn callback(
    rqctx: Ctx,
    query: QueryParams<CallbackQuery>,
) -> Result<HttpResponseSeeOther, HttpError> {
    let cx = rqctx.context();
    // The browser's redirect carries no credential: the pending session
    // (its `state`) names the user, who becomes the event's actor.
    let origin = cx.origin(&rqctx, crate::audit::Actor::ANONYMOUS);
    let location = app::mcp::callback(cx, query.into_inner(), &origin).await;
    http_response_see_other(location)
}

pub async fn list_instances(
    rqctx: Ctx,
    query: QueryParams<InstanceListQuery>,
) -> Result<HttpResponseOk<McpInstanceList>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::MCP_READ)
        .await?;
    Ok(HttpResponseOk(
        app::mcp::list_instances(cx, &access, query.server_id).await?,
    ))
}

pub async fn update_instance(
    rqctx: Ctx,
    query: QueryParams<InstanceQuery>,
    body: JsonBody<InstanceRename>,
) -> Result<HttpResponseOk<McpInstance>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::OrgOrPersonal(query.org_id), perm::MCP_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::mcp::rename_instance(cx, &access, query.instance_id, &body.into_inner().name).await?,
    ))
}

pub async fn delete_instance(
    rqctx: Ctx,
    query: QueryParams<InstanceQuery>,
) -> Result<HttpResponseOk<McpDeleted>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::OrgOrPersonal(query.org_id), perm::MCP_WRITE)
        .await?;
    Ok(HttpResponseOk(
        app::mcp::delete_instance(cx, &access, query.instance_id).await?,
    ))
}

pub async fn generate_url(
    rqctx: Ctx,
    query: QueryParams<PersonalOrgQuery>,
    body: JsonBody<GenerateUrl>,
) -> Result<HttpResponseOk<McpUrl>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::OrgOrPersonal(query.into_inner().org_id),
            perm::MCP_WRITE,
        )
        .await?;
    Ok(HttpResponseOk(
        app::mcp::generate_url(cx, &access, body.into_inner()).await?,
    ))
}

/// The secret in the path is the credential; or the path holds an
/// instance id and the user's bearer token is the credential.
pub async fn gateway(
    rqctx: Ctx,
    path: dropshot::Path<workspace_api::mcp::GatewayPath>,
    method: reqwest::Method,
    body: bytes::Bytes,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let secret = path.into_inner().secret;
    let headers = rqctx.request.headers();
    if let (Ok(instance_id), true) = (
        secret.parse::<uuid::Uuid>(),
        headers.contains_key(http::header::AUTHORIZATION),
    ) {
        let access = cx
            .authorize(&rqctx, on::McpInstance(instance_id), perm::MCP_WRITE)
            .await?;
        return Ok(app::mcp_gateway::forward_instance(
            cx,
            &access,
            instance_id,
            method,
            headers,
            body,
        )
        .await?);
    }
    let grant = cx.authorize_gateway_secret(&secret).await?;
    Ok(app::mcp_gateway::forward(cx, grant, method, headers, body).await?)
}

pub async fn playground_chat(
    rqctx: Ctx,
    query: QueryParams<PersonalOrgQuery>,
    body: JsonBody<workspace_api::mcp::PlaygroundChat>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::OrgOrPersonal(query.into_inner().org_id),
            perm::MCP_WRITE,
        )
        .await?;
    let handle = std::sync::Arc::new(app::mcp_playground::Handle {
        state: rqctx.server.clone(),
        get: |s| &s.private,
    });
    let items = app::mcp_playground::chat(handle, &access, body.into_inner()).await?;
    crate::sse::response(items)
}
