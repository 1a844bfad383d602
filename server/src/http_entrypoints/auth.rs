//! Authentication area: signup, login and signup by invitation (public),
//! sessions (refresh, logout, list, revoke) and passwords (forgotten,
//! reset, changed).

use super::Ctx;
use crate::app;
use crate::app::sessions::ClientInfo;
use dropshot::{HttpError, HttpResponseAccepted, HttpResponseCreated, HttpResponseOk};
use workspace_api::auth::{
    ChangePasswordRequest, ForgotPasswordRequest, ForgotPasswordResponse, LoginRequest,
    LoginResponse, RefreshRequest, ResetPasswordRequest, Session, SessionQuery, SessionsRevoked,
    SignupRequest, SignupResponse,
};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::invitations::{SignupInviteRequest, SignupInviteResponse};
use workspace_api::orgs::MessageResponse;

/// The request's client address and `User-Agent`, as a session records
/// them.
pub(super) fn client_info(rqctx: &Ctx) -> ClientInfo {
    let user_agent = rqctx
        .request
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let mut info = ClientInfo::new(super::client_address(rqctx), user_agent);
    info.request_id = Some(rqctx.request_id.clone());
    info
}

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
        app::auth::login(cx, body.into_inner(), &client_info(&rqctx)).await?,
    ))
}

pub async fn signup_invite(
    rqctx: Ctx,
    body: JsonBody<SignupInviteRequest>,
) -> Result<HttpResponseCreated<SignupInviteResponse>, HttpError> {
    let cx = rqctx.context();
    Ok(HttpResponseCreated(
        app::invitations::signup_invite(cx, body.into_inner(), &client_info(&rqctx)).await?,
    ))
}

pub async fn refresh(
    rqctx: Ctx,
    body: JsonBody<RefreshRequest>,
) -> Result<HttpResponseOk<LoginResponse>, HttpError> {
    let cx = rqctx.context();
    let client = client_info(&rqctx);
    Ok(HttpResponseOk(
        app::sessions::refresh(cx, body.into_inner(), &client, &rqctx.log).await?,
    ))
}

pub async fn logout(rqctx: Ctx) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    Ok(super::message(app::sessions::logout(cx, &actor).await?))
}

pub async fn sessions(rqctx: Ctx) -> Result<HttpResponseOk<Vec<Session>>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    Ok(HttpResponseOk(app::sessions::list(cx, &actor).await?))
}

pub async fn revoke_session(
    rqctx: Ctx,
    query: QueryParams<SessionQuery>,
) -> Result<HttpResponseOk<SessionsRevoked>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    let session_id = query.into_inner().session_id;
    Ok(HttpResponseOk(
        app::sessions::revoke(cx, &actor, session_id).await?,
    ))
}

pub async fn revoke_other_sessions(
    rqctx: Ctx,
) -> Result<HttpResponseOk<SessionsRevoked>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    Ok(HttpResponseOk(
        app::sessions::revoke_others(cx, &actor).await?,
    ))
}

pub async fn forgot_password(
    rqctx: Ctx,
    body: JsonBody<ForgotPasswordRequest>,
) -> Result<HttpResponseAccepted<ForgotPasswordResponse>, HttpError> {
    let cx = rqctx.context();
    let client = client_info(&rqctx);
    Ok(HttpResponseAccepted(
        app::passwords::forgot_password(cx, body.into_inner(), &client, &rqctx.log).await?,
    ))
}

pub async fn reset_password(
    rqctx: Ctx,
    body: JsonBody<ResetPasswordRequest>,
) -> Result<HttpResponseOk<SessionsRevoked>, HttpError> {
    let cx = rqctx.context();
    let client = client_info(&rqctx);
    Ok(HttpResponseOk(
        app::passwords::reset_password(cx, body.into_inner(), &client).await?,
    ))
}

pub async fn change_password(
    rqctx: Ctx,
    body: JsonBody<ChangePasswordRequest>,
) -> Result<HttpResponseOk<SessionsRevoked>, HttpError> {
    let cx = rqctx.context();
    let actor = cx.authenticate_login(&rqctx).await?;
    Ok(HttpResponseOk(
        app::passwords::change_password(cx, &actor, body.into_inner()).await?,
    ))
}

/// The password-reset page (`examples/web/reset/`), served as the
/// invitation page is (see `system::token_page_asset`).
const RESET_PAGE: &str = include_str!("../../../examples/web/reset/reset-password.html");
const RESET_SCRIPT: &str = include_str!("../../../examples/web/reset/reset-password.js");

pub async fn reset_password_page(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    super::system::token_page_asset("text/html; charset=utf-8", RESET_PAGE)
}

pub async fn reset_password_script(
    _rqctx: Ctx,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    super::system::token_page_asset("text/javascript; charset=utf-8", RESET_SCRIPT)
}
