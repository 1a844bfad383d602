//! Personal access tokens (`/api/auth/tokens`): managed by a login only.

use super::Ctx;
use crate::app;
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::MessageResponse;
use workspace_api::tokens::{TokenCreate, TokenCreated, TokenQuery, TokenSummary};

pub async fn create(
    rqctx: Ctx,
    body: JsonBody<TokenCreate>,
) -> Result<HttpResponseCreated<TokenCreated>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    let origin = super::origin(&rqctx, &actor);
    Ok(HttpResponseCreated(
        app::tokens::create(cx, &actor, &origin, body.into_inner()).await?,
    ))
}

pub async fn list(rqctx: Ctx) -> Result<HttpResponseOk<Vec<TokenSummary>>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    Ok(HttpResponseOk(app::tokens::list(cx, &actor).await?))
}

pub async fn revoke(
    rqctx: Ctx,
    query: QueryParams<TokenQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    let origin = super::origin(&rqctx, &actor);
    Ok(HttpResponseOk(
        app::tokens::revoke(cx, &actor, &origin, query.into_inner().token_id).await?,
    ))
}
