//! Users.

use crate::authn::Actor;
use crate::context::ServerContext;
use crate::error::Error;
use workspace_api::users::{CurrentUser, Membership};

pub async fn me(cx: &ServerContext, actor: &Actor) -> Result<CurrentUser, Error> {
    let user = cx.datastore.user_get(actor.user_id).await?;
    let memberships = cx.datastore.user_active_memberships(actor.user_id).await?;
    Ok(CurrentUser {
        id: user.id,
        full_name: format!("{} {}", user.first_name, user.last_name),
        email: user.email,
        first_name: user.first_name,
        last_name: user.last_name,
        created_at: user.created_at,
        organizations: memberships
            .into_iter()
            .map(|m| Membership {
                id: m.organization_id,
                name: m.organization_name,
                slug: m.slug,
                role_id: m.role_id,
                role_name: m.role_name,
            })
            .collect(),
    })
}

/// Default and largest page size of the users list.
pub const USERS_LIST_DEFAULT_LIMIT: u32 = 10;
pub const USERS_LIST_MAX_LIMIT: u32 = 100;

/// One page of the users list; `access` must grant `users:read`.
pub async fn list(
    cx: &ServerContext,
    access: &crate::authz::OrgAccess,
    query: &workspace_api::users::UserListQuery,
) -> Result<workspace_api::users::UserListResponse, Error> {
    use workspace_api::users::{UserListItem, UserListResponse, UserListStatus};
    let limit = query.limit.unwrap_or(USERS_LIST_DEFAULT_LIMIT);
    if !(1..=USERS_LIST_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {USERS_LIST_MAX_LIMIT}"),
        ));
    }
    let page = i64::from(query.offset.unwrap_or(0));
    let skip = page * i64::from(limit);
    let (rows, total) = cx
        .datastore
        .users_list(access.org_id, i64::from(limit), skip)
        .await?;
    let users = rows
        .into_iter()
        .map(|r| {
            let status = match r.status.as_str() {
                "active" => UserListStatus::Active,
                "pending" => UserListStatus::Pending,
                "expired" => UserListStatus::Expired,
                other => return Err(Error::internal(format!("user list status {other:?}"))),
            };
            let full_name = format!("{} {}", r.first_name, r.last_name)
                .trim()
                .to_string();
            Ok(UserListItem {
                id: r.user_id,
                email: r.email,
                first_name: r.first_name,
                last_name: r.last_name,
                full_name,
                status,
                invite_id: r.invite_id,
                invited_at: r.invited_at,
                last_active_at: r.last_active_at,
                organizations: vec![Membership {
                    id: r.organization_id,
                    name: r.organization_name,
                    slug: r.slug,
                    role_id: r.role_id,
                    role_name: r.role_name,
                }],
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(UserListResponse {
        users,
        total: total.max(0) as u64,
    })
}
