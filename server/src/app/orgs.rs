//! Organizations, membership and feature gates.

use crate::app::lifecycle::{locked_actor, not_last_owner};
use crate::authn::Actor;
use crate::authz::{Grant, Member, OrgAccess, Owner, SystemAdmin, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::organizations::{FeatureOverrides, LifecycleChange, OrgRow};
use crate::db::enums::MembershipStatus;
use crate::error::Error;
use uuid::Uuid;
use workspace_api::orgs::{
    AddMemberRequest, OrgFeatures, OrgFeaturesUpdate, Organization, TransferOwnershipRequest,
    UpdateOrgRequest, UserRole,
};

const ORG_NAME_MAX_CHARS: usize = 100;

fn view(row: OrgRow) -> Organization {
    Organization {
        id: row.id,
        name: row.name,
        slug: row.slug,
        created_at: row.created_at,
        updated_at: row.updated_at,
        user_role: UserRole {
            role_id: row.role_id,
            role_name: row.role_name,
            level: row.role_level,
        },
    }
}

pub async fn list(
    cx: &ServerContext,
    actor: &Actor,
    page: crate::db::datastore::Page,
) -> Result<Vec<Organization>, Error> {
    Ok(cx
        .datastore
        .org_list_for_user(actor.user_id, page)
        .await?
        .into_iter()
        .map(view)
        .collect())
}

/// An organization's name, trimmed: 1 to [`ORG_NAME_MAX_CHARS`]
/// characters, no control characters (`400 invalid_name`).
fn valid_name(name: &str) -> Result<&str, Error> {
    let name = name.trim();
    if name.is_empty()
        || name.chars().count() > ORG_NAME_MAX_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "invalid_name",
            format!(
                "the organization name must be 1 to {ORG_NAME_MAX_CHARS} characters, without control characters"
            ),
        ));
    }
    Ok(name)
}

pub async fn create(
    cx: &ServerContext,
    actor: &Actor,
    origin: &crate::audit::Origin,
    name: &str,
) -> Result<Organization, Error> {
    let name = valid_name(name)?;
    Ok(view(
        cx.datastore
            .org_create(actor.user_id, name, name, origin)
            .await?,
    ))
}

/// Renames the caller's organization (see `PUT /api/org/update`).
pub async fn rename(
    cx: &ServerContext,
    access: &Grant<on::Org, perm::OrganizationWrite>,
    update: UpdateOrgRequest,
) -> Result<Organization, Error> {
    let name = valid_name(&update.name)?;
    let row = cx.datastore.org_rename(access, name).await?;
    slog::info!(access.log(), "organization renamed");
    Ok(view(row))
}

/// The caller leaves the organization: their membership becomes
/// `deleted` (see `POST /api/org/leave`).
pub async fn leave(cx: &ServerContext, access: &Grant<on::Org, Member>) -> Result<String, Error> {
    // Leaving ends every access the user has here: a login only.
    if access.via_token() {
        return Err(crate::authz::token_not_allowed());
    }
    let me = access.user_id();
    cx.datastore
        .membership_lifecycle(
            access,
            me,
            LifecycleChange::Status(MembershipStatus::Deleted),
            |seen| {
                let actor = locked_actor(seen)?;
                if seen.is_personal && seen.created_by == Some(me) {
                    return Err(Error::conflict(
                        "personal_organization",
                        "you cannot leave your personal organization",
                    ));
                }
                not_last_owner(seen, actor)
            },
        )
        .await?;
    slog::info!(access.log(), "member left the organization");
    Ok("you left the organization".to_string())
}

/// Hands the owner role to another active member; the caller becomes an
/// admin (see `POST /api/org/transfer_ownership`).
pub async fn transfer_ownership(
    cx: &ServerContext,
    access: &Grant<on::Org, Owner<perm::UsersWrite>>,
    request: TransferOwnershipRequest,
) -> Result<Organization, Error> {
    let to = request.user_id;
    cx.datastore
        .membership_lifecycle(access, to, LifecycleChange::TransferOwnership, |seen| {
            let actor = locked_actor(seen)?;
            if !actor.is_owner() {
                return Err(Error::forbidden(
                    "only the organization's owners can do this",
                ));
            }
            if seen.is_personal {
                return Err(Error::conflict(
                    "personal_organization",
                    "a personal organization belongs to its account; its ownership cannot be \
                     transferred",
                ));
            }
            if to == access.user_id() {
                return Err(Error::invalid(
                    "cannot_target_self",
                    "you already own this organization",
                ));
            }
            let target = seen
                .target
                .as_ref()
                .filter(|t| t.status != MembershipStatus::Deleted)
                .ok_or(Error::NotFound { what: "member" })?;
            if target.status != MembershipStatus::Active {
                return Err(Error::invalid(
                    "member_not_active",
                    format!(
                        "ownership goes to an active member; this member is {}",
                        target.status
                    ),
                ));
            }
            if target.is_owner() {
                return Err(Error::invalid(
                    "role_already_assigned",
                    "the member is already an owner",
                ));
            }
            Ok(())
        })
        .await?;
    slog::info!(access.log(), "ownership transferred"; "new_owner_id" => to.to_string());
    Ok(view(cx.datastore.org_get(access).await?))
}

/// The caller's organization's gates with the configured defaults filled
/// in.
pub async fn features(cx: &ServerContext, access: &OrgAccess) -> Result<OrgFeatures, Error> {
    Ok(with_defaults(cx, cx.datastore.org_features(access).await?))
}

fn with_defaults(cx: &ServerContext, o: FeatureOverrides) -> OrgFeatures {
    let d = &cx.config.features;
    let count = |v: Option<i32>, default: u32| v.map(|v| v.max(0) as u32).unwrap_or(default);
    OrgFeatures {
        team_members: o.team_members.unwrap_or(d.team_members),
        file_upload: o.file_upload.unwrap_or(d.file_upload),
        chat_uploads: o.chat_uploads.unwrap_or(d.chat_uploads),
        mcp_sessions: count(o.mcp_sessions, d.mcp_sessions),
        daily_chat_limit: count(o.daily_chat_limit, d.daily_chat_limit),
    }
}

/// Sets or resets any organization's gates (system administrators).
pub async fn update_features(
    cx: &ServerContext,
    admin: &SystemAdmin,
    org_id: Uuid,
    update: OrgFeaturesUpdate,
) -> Result<OrgFeatures, Error> {
    if !cx.datastore.org_exists(admin, org_id).await? {
        return Err(Error::NotFound {
            what: "organization",
        });
    }
    use workspace_api::orgs::FeatureName as F;
    let current = cx.datastore.org_features_admin(admin, org_id).await?;
    let reset = |name: F| update.reset.contains(&name);
    let pick = |name: F, given: bool| -> Result<bool, Error> {
        if given && reset(name) {
            return Err(Error::invalid(
                "invalid_request",
                format!("{name:?} is both set and reset"),
            ));
        }
        Ok(reset(name))
    };
    let flag = |name: F, v: Option<bool>, cur: Option<bool>| -> Result<Option<bool>, Error> {
        Ok(if pick(name, v.is_some())? {
            None
        } else {
            v.or(cur)
        })
    };
    let quota = |name: F, v: Option<u32>, cur: Option<i32>| -> Result<Option<i32>, Error> {
        if pick(name, v.is_some())? {
            return Ok(None);
        }
        match v {
            None => Ok(cur),
            Some(n) => i32::try_from(n)
                .map(Some)
                .map_err(|_| Error::invalid("invalid_quota", "quota too large")),
        }
    };
    let merged = FeatureOverrides {
        team_members: flag(F::TeamMembers, update.team_members, current.team_members)?,
        file_upload: flag(F::FileUpload, update.file_upload, current.file_upload)?,
        chat_uploads: flag(F::ChatUploads, update.chat_uploads, current.chat_uploads)?,
        mcp_sessions: quota(F::McpSessions, update.mcp_sessions, current.mcp_sessions)?,
        daily_chat_limit: quota(
            F::DailyChatLimit,
            update.daily_chat_limit,
            current.daily_chat_limit,
        )?,
    };
    cx.datastore
        .org_features_set(admin, org_id, &merged)
        .await?;
    slog::info!(admin.log(), "feature gates changed"; "org_id" => org_id.to_string());
    Ok(with_defaults(cx, merged))
}

/// Checks that a role may be given by the caller (add_member, role change,
/// invitations): it belongs to the organization (`400 invalid_role`), is
/// not the owner role (`403 owner_role_not_assignable`) and is not above the
/// caller's level (`403 role_level_too_high`).
pub async fn assignable_role(
    cx: &ServerContext,
    access: &OrgAccess,
    role_id: Uuid,
) -> Result<crate::db::datastore::roles::RoleRow, Error> {
    let role = cx
        .datastore
        .role_get(access, role_id)
        .await?
        .ok_or_else(|| {
            Error::invalid(
                "invalid_role",
                "the role does not exist in this organization",
            )
        })?;
    if crate::authz::is_owner_role(role.is_system_role, &role.name) {
        return Err(Error::Forbidden {
            code: "owner_role_not_assignable",
            message: "the owner role cannot be assigned".to_string(),
        });
    }
    if role.hierarchy_level > access.level() {
        return Err(Error::Forbidden {
            code: "role_level_too_high",
            message: "you cannot assign a role above your own level".to_string(),
        });
    }
    Ok(role)
}

pub async fn add_member(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::UsersWrite>,
    request: AddMemberRequest,
) -> Result<String, Error> {
    if !features(cx, grant).await?.team_members {
        return Err(Error::Forbidden {
            code: "feature_disabled",
            message: "the organization's plan does not include the team_members feature"
                .to_string(),
        });
    }
    let role = assignable_role(cx, grant, request.role_id).await?;
    // Only accounts that can log in: invited placeholders join through their
    // invitation.
    if !cx.datastore.user_exists(request.user_id).await? {
        return Err(Error::NotFound { what: "user" });
    }
    cx.datastore
        .membership_add(grant, request.user_id, role.id)
        .await?;
    Ok(format!(
        "user added to the organization with the {} role",
        role.name
    ))
}
