//! Authentication area: signup, login and signup by invitation (public).

use super::Ctx;
use crate::app;
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::auth::{LoginRequest, LoginResponse, SignupRequest, SignupResponse};
use workspace_api::extract::JsonBody;
use workspace_api::invitations::{SignupInviteRequest, SignupInviteResponse};

pub async fn signup(
    rqctx: Ctx,
    body: JsonBody<SignupRequest>,
) -> Result<HttpResponseCreated<SignupResponse>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseCreated(
        app::auth::signup(cx, body.into_inner(), super::client_address(&rqctx)).await?,
    ))
}

pub async fn login(
    rqctx: Ctx,
    body: JsonBody<LoginRequest>,
) -> Result<HttpResponseOk<LoginResponse>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseOk(
        app::auth::login(cx, body.into_inner(), super::client_address(&rqctx)).await?,
    ))
}

pub async fn signup_invite(
    rqctx: Ctx,
    body: JsonBody<SignupInviteRequest>,
) -> Result<HttpResponseCreated<SignupInviteResponse>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseCreated(
        app::invitations::signup_invite(cx, body.into_inner(), super::client_address(&rqctx))
            .await?,
    ))
}
