//! Users.

use crate::authn::Actor;
use crate::authz::is_owner_role;
use crate::context::ServerContext;
use crate::db::enums as db;
use crate::error::Error;
use workspace_api::users::{
    CurrentUser, Membership, USERS_LIST_DEFAULT_LIMIT, USERS_LIST_MAX_LIMIT,
};

/// The caller and their active memberships. `actor` comes from the token
/// alone: a user that no longer exists is `401 invalid_token` here, from
/// the same statement that reads the user.
pub async fn me(cx: &ServerContext, actor: &Actor) -> Result<CurrentUser, Error> {
    let (user, memberships) = cx
        .datastore
        .user_me(actor)
        .await?
        .ok_or_else(crate::authn::invalid_token)?;
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

/// Changes a member's role (see `PUT /api/users/update` for the rules).
pub async fn update_role(
    cx: &ServerContext,
    access: &crate::authz::OrgAccess,
    user_id: uuid::Uuid,
    role_id: uuid::Uuid,
) -> Result<workspace_api::users::UpdatedUser, Error> {
    // Rule 1 (owners only) is the handler's `Require::OwnerWith`.
    let target = cx
        .datastore
        .membership_get(access, user_id)
        .await?
        .ok_or(Error::NotFound { what: "member" })?;
    // Rule 2 (and its mirror: an owner's role is not changed here).
    let role = crate::app::orgs::assignable_role(cx, access, role_id).await?;
    if is_owner_role(target.role_is_system, &target.role_name) {
        return Err(Error::Forbidden {
            code: "owner_role_not_assignable",
            message: "an owner's role cannot be changed".to_string(),
        });
    }
    // Rule 3.
    if target.status != db::MembershipStatus::Active {
        return Err(Error::invalid(
            "member_not_active",
            format!(
                "only active members can be changed; this member is {}",
                target.status
            ),
        ));
    }
    if target.role_id == role.id {
        return Err(Error::invalid(
            "role_already_assigned",
            "the member already has this role",
        ));
    }
    if !cx
        .datastore
        .membership_set_role(access, user_id, target.role_id, role.id)
        .await?
    {
        return Err(Error::conflict(
            "concurrent_update",
            "the membership changed meanwhile; retry",
        ));
    }
    let user = cx.datastore.user_get(user_id).await?;
    let org = cx
        .datastore
        .user_active_memberships(user_id)
        .await?
        .into_iter()
        .find(|m| m.organization_id == access.org_id())
        .ok_or(Error::NotFound { what: "member" })?;
    Ok(workspace_api::users::UpdatedUser {
        id: user.id,
        full_name: format!("{} {}", user.first_name, user.last_name),
        email: user.email,
        first_name: user.first_name,
        last_name: user.last_name,
        status: "active".to_string(),
        invite_id: None,
        last_active_at: user.last_active_at,
        created_at: user.created_at,
        organizations: vec![Membership {
            id: org.organization_id,
            name: org.organization_name,
            slug: org.slug,
            role_id: org.role_id,
            role_name: org.role_name,
        }],
    })
}

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
        .users_list(access, i64::from(limit), skip)
        .await?;
    let users = rows
        .into_iter()
        .map(|r| {
            let status = match r.status {
                db::UserListStatus::Active => UserListStatus::Active,
                db::UserListStatus::Pending => UserListStatus::Pending,
                db::UserListStatus::Expired => UserListStatus::Expired,
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
