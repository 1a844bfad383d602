//! Users area.

use super::{Ctx, message};
use crate::app;
use crate::authz::{Owner, on, perm};
use dropshot::{HttpError, HttpResponseCreated, HttpResponseOk};
use workspace_api::extract::{JsonBody, QueryParams};
use workspace_api::orgs::MessageResponse;
use workspace_api::users::{
    CurrentUser, MemberQuery, UpdateUserQuery, UpdateUserRoleRequest, UpdatedUser, UserInviteQuery,
    UserInviteRequest, UserInviteResponse, UserListItem, UserListQuery, UserListResponse,
};

/// Suspending, reactivating and removing members: `users:write` (the
/// ranking rules are the app layer's, checked under the organization's
/// lock).
const MANAGE: perm::UsersWrite = perm::USERS_WRITE;

pub async fn me(rqctx: Ctx) -> Result<HttpResponseOk<CurrentUser>, HttpError> {
    let cx = rqctx.context();
    // The user's existence (and a personal access token's) is checked by
    // `me`'s one statement.
    let caller = cx.caller(&rqctx)?;
    Ok(HttpResponseOk(app::users::me(cx, &caller).await?))
}

pub async fn update(
    rqctx: Ctx,
    query: QueryParams<UpdateUserQuery>,
    body: JsonBody<UpdateUserRoleRequest>,
) -> Result<HttpResponseOk<UpdatedUser>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), Owner(perm::USERS_WRITE))
        .await?;
    let role_id = body.into_inner().role_id;
    Ok(HttpResponseOk(
        app::users::update_role(cx, &access, query.user_id, role_id).await?,
    ))
}

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<UserListQuery>,
) -> Result<HttpResponseOk<UserListResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx
        .authorize(&rqctx, on::Org(query.org_id), perm::USERS_READ)
        .await?;
    Ok(HttpResponseOk(app::users::list(cx, &access, &query).await?))
}

pub async fn invite(
    rqctx: Ctx,
    query: QueryParams<UserInviteQuery>,
    body: JsonBody<UserInviteRequest>,
) -> Result<HttpResponseCreated<UserInviteResponse>, HttpError> {
    let cx = rqctx.context();
    let access = cx
        .authorize(
            &rqctx,
            on::Org(query.into_inner().org_id),
            perm::USERS_WRITE,
        )
        .await?;
    Ok(HttpResponseCreated(
        app::invitations::invite_user(cx, &access, body.into_inner()).await?,
    ))
}

pub async fn suspend(
    rqctx: Ctx,
    query: QueryParams<MemberQuery>,
) -> Result<HttpResponseOk<UserListItem>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::users::suspend(cx, &access, query.user_id).await?,
    ))
}

pub async fn reactivate(
    rqctx: Ctx,
    query: QueryParams<MemberQuery>,
) -> Result<HttpResponseOk<UserListItem>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(HttpResponseOk(
        app::users::reactivate(cx, &access, query.user_id).await?,
    ))
}

pub async fn remove(
    rqctx: Ctx,
    query: QueryParams<MemberQuery>,
) -> Result<HttpResponseOk<MessageResponse>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let access = cx.authorize(&rqctx, on::Org(query.org_id), MANAGE).await?;
    Ok(message(
        app::users::remove(cx, &access, query.user_id).await?,
    ))
}
