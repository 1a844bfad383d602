//! Webhooks (issue #36): the organization's admins manage endpoints (a
//! role of the admin level with `webhooks:write`) and read them and their
//! delivery log (`webhooks:read`).

use super::{Ctx, message};
use crate::app;
use crate::authz::{Admin, on, perm};
use dropshot::{HttpError, HttpResponseAccepted, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::{MessageResponse, OrgQuery};
use workspace_api::webhooks::{
    WebhookDeliveriesQuery, WebhookDelivery, WebhookDeliveryPage, WebhookDeliveryQuery,
    WebhookEndpoint, WebhookEndpointCreate, WebhookEndpointCreated, WebhookEndpointQuery,
    WebhookEndpointUpdate, WebhookSecretRotated,
};

/// The organization's admins, with `webhooks:write`.
const MANAGE: Admin<perm::WebhooksWrite> = Admin(perm::WEBHOOKS_WRITE);
/// The organization's admins, with `webhooks:read`.
const READ: Admin<perm::WebhooksRead> = Admin(perm::WEBHOOKS_READ);

pub async fn create(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
    body: JsonBody<WebhookEndpointCreate>,
) -> Result<HttpResponseCreated<WebhookEndpointCreated>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), MANAGE).await?;
    Ok(HttpResponseCreated(
        app::webhooks::create(cx, &grant, body.into_inner()).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<OrgQuery>,
) -> Result<HttpResponseOk<Vec<WebhookEndpoint>>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let grant = cx.authorize(&rqctx, on::Org(org_id), READ).await?;
    Ok(HttpResponseOk(app::webhooks::list(cx, &grant).await?))
}

pub async fn get(
    rqctx: Ctx,
    query: QueryParams<WebhookEndpointQuery>,
) -> Result<HttpResponseOk<WebhookEndpoint>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), READ).await?;
    Ok(HttpResponseOk(
        app::webhooks::get(cx, &grant, query.endpoint_id).await?,
    ))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<WebhookEndpointQuery>,
    body: JsonBody<WebhookEndpointUpdate>,
) -> Result<HttpResponseOk<WebhookEndpoint>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::webhooks::update(cx, &grant, query.endpoint_id, body.into_inner()).await?,
    ))
}

pub async fn delete(
    rqctx: Ctx,
    query: QueryParams<WebhookEndpointQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    app::webhooks::delete(cx, &grant, query.endpoint_id).await?;
    Ok(message("webhook endpoint deleted".to_string()))
}

pub async fn rotate_secret(
    rqctx: Ctx,
    query: QueryParams<WebhookEndpointQuery>,
) -> Result<HttpResponseOk<WebhookSecretRotated>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::webhooks::rotate(cx, &grant, query.endpoint_id).await?,
    ))
}

pub async fn test(
    rqctx: Ctx,
    query: QueryParams<WebhookEndpointQuery>,
) -> Result<HttpResponseAccepted<WebhookDelivery>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseAccepted(
        app::webhooks::send_test(cx, &grant, query.endpoint_id).await?,
    ))
}

pub async fn deliveries(
    rqctx: Ctx,
    query: QueryParams<WebhookDeliveriesQuery>,
) -> Result<HttpResponseOk<WebhookDeliveryPage>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), READ).await?;
    Ok(HttpResponseOk(
        app::webhooks::deliveries(cx, &grant, query).await?,
    ))
}

pub async fn replay(
    rqctx: Ctx,
    query: QueryParams<WebhookDeliveryQuery>,
) -> Result<HttpResponseAccepted<WebhookDelivery>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let grant = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseAccepted(
        app::webhooks::replay(cx, &grant, query.delivery_id).await?,
    ))
}
