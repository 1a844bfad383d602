//! Users.

use crate::app::lifecycle::{locked_actor, locked_target, may_act_on, may_act_on_other};
use crate::authz::{Grant, OrgAccess, Owner, is_owner_role, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::organizations::{Caller, LifecycleChange};
use crate::db::enums as db;
use crate::error::Error;
use uuid::Uuid;
use workspace_api::users::{
    CurrentUser, Membership, USERS_LIST_DEFAULT_LIMIT, USERS_LIST_MAX_LIMIT, UserListItem,
    UserListStatus,
};

/// The caller and their active memberships. `caller` comes from the
/// request alone: a user that no longer exists, or a personal access token
/// that is unknown, revoked or expired, is `401 invalid_token` here, from
/// the same statement that reads the user.
pub async fn me(cx: &ServerContext, caller: &Caller) -> Result<CurrentUser, Error> {
    let (user, memberships, token_id) = cx
        .datastore
        .user_me(caller)
        .await?
        .ok_or_else(crate::authn::invalid_token)?;
    if let Some(token_id) = token_id {
        cx.token_used(token_id);
    }
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
    grant: &Grant<on::Org, Owner<perm::UsersWrite>>,
    user_id: uuid::Uuid,
    role_id: uuid::Uuid,
) -> Result<workspace_api::users::UpdatedUser, Error> {
    // Rule 1 (owners only) is the grant's `Owner`.
    let target = cx
        .datastore
        .membership_get(grant, user_id)
        .await?
        .ok_or(Error::NotFound { what: "member" })?;
    // Rule 2 (and its mirror: an owner's role is not changed here).
    let role = crate::app::orgs::assignable_role(cx, grant, role_id).await?;
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
        .membership_set_role(grant, user_id, target.role_id, role.id)
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
        .find(|m| m.organization_id == grant.org_id())
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
    use workspace_api::users::UserListResponse;
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
        .users_list(
            access,
            i64::from(limit),
            skip,
            query.include_suspended.unwrap_or(false),
        )
        .await?;
    let users = rows.into_iter().map(list_item).collect();
    Ok(UserListResponse {
        users,
        total: total.max(0) as u64,
    })
}

/// A row of the users list as the API shows it.
fn list_item(r: crate::db::datastore::users::UserListRow) -> UserListItem {
    let status = match r.status {
        db::UserListStatus::Active => UserListStatus::Active,
        db::UserListStatus::Pending => UserListStatus::Pending,
        db::UserListStatus::Expired => UserListStatus::Expired,
        db::UserListStatus::Suspended => UserListStatus::Suspended,
    };
    let full_name = format!("{} {}", r.first_name, r.last_name)
        .trim()
        .to_string();
    UserListItem {
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
    }
}

/// The member's row of the users list after a change.
async fn member_row(
    cx: &ServerContext,
    access: &OrgAccess,
    user_id: Uuid,
) -> Result<UserListItem, Error> {
    cx.datastore
        .users_list_member(access, user_id)
        .await?
        .map(list_item)
        .ok_or(Error::NotFound { what: "member" })
}

/// Suspends an active member (see `POST /api/users/suspend`).
pub async fn suspend(
    cx: &ServerContext,
    access: &Grant<on::Org, perm::UsersWrite>,
    user_id: Uuid,
) -> Result<UserListItem, Error> {
    cx.datastore
        .membership_lifecycle(
            access,
            user_id,
            LifecycleChange::Status(db::MembershipStatus::Suspended),
            |seen| {
                let actor = locked_actor(seen)?;
                let target = locked_target(seen)?;
                may_act_on_other(access, seen, actor, target, "suspend")?;
                if target.status != db::MembershipStatus::Active {
                    return Err(Error::invalid(
                        "member_not_active",
                        format!(
                            "only active members can be suspended; this member is {}",
                            target.status
                        ),
                    ));
                }
                Ok(())
            },
        )
        .await?;
    slog::info!(access.log(), "member suspended"; "member_id" => user_id.to_string());
    member_row(cx, access, user_id).await
}

/// Reactivates a suspended member (see `POST /api/users/reactivate`).
pub async fn reactivate(
    cx: &ServerContext,
    access: &Grant<on::Org, perm::UsersWrite>,
    user_id: Uuid,
) -> Result<UserListItem, Error> {
    cx.datastore
        .membership_lifecycle(
            access,
            user_id,
            LifecycleChange::Status(db::MembershipStatus::Active),
            |seen| {
                let actor = locked_actor(seen)?;
                let target = locked_target(seen)?;
                may_act_on(actor, target)?;
                if target.status != db::MembershipStatus::Suspended {
                    return Err(Error::invalid(
                        "member_not_suspended",
                        format!(
                            "only suspended members can be reactivated; this member is {}",
                            target.status
                        ),
                    ));
                }
                Ok(())
            },
        )
        .await?;
    slog::info!(access.log(), "member reactivated"; "member_id" => user_id.to_string());
    member_row(cx, access, user_id).await
}

/// Removes an active or suspended member: the membership becomes
/// `deleted` (see `DELETE /api/users/remove`).
pub async fn remove(
    cx: &ServerContext,
    access: &Grant<on::Org, perm::UsersWrite>,
    user_id: Uuid,
) -> Result<String, Error> {
    cx.datastore
        .membership_lifecycle(
            access,
            user_id,
            LifecycleChange::Status(db::MembershipStatus::Deleted),
            |seen| {
                let actor = locked_actor(seen)?;
                let target = locked_target(seen)?;
                may_act_on_other(access, seen, actor, target, "remove")?;
                if target.status == db::MembershipStatus::Invited {
                    return Err(Error::invalid(
                        "member_invited",
                        "this membership is an invitation: revoke the invitation instead \
                         (DELETE /api/invitations/revoke)",
                    ));
                }
                Ok(())
            },
        )
        .await?;
    slog::info!(access.log(), "member removed"; "member_id" => user_id.to_string());
    Ok("the member was removed from the organization".to_string())
}
