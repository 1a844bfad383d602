//! Roles and the permission catalog.

use crate::authz::{Grant, OrgAccess, SystemAdmin, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::roles::{PermissionRow, RoleRow, RoleValues};
use crate::error::Error;
use uuid::Uuid;
use workspace_api::roles::{
    CreatePermissionRequest, CreateRoleRequest, Permission, Role, RoleWithPermissions,
    UpdateRoleRequest,
};

const ROLE_NAME_MAX_CHARS: usize = 64;

fn permission_view(p: PermissionRow) -> Permission {
    Permission {
        id: p.id,
        name: p.name,
        description: p.description,
    }
}

pub fn role_view(r: RoleRow) -> Role {
    Role {
        id: r.id,
        organization_id: (!r.is_system_role).then_some(r.organization_id),
        name: r.name,
        description: r.description,
        hierarchy_level: r.hierarchy_level,
        is_system_role: r.is_system_role,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

/// A custom role with its permissions (create and update answer this).
fn role_with_permissions(r: RoleRow, permissions: Vec<PermissionRow>) -> RoleWithPermissions {
    RoleWithPermissions {
        id: r.id,
        organization_id: r.organization_id,
        name: r.name,
        description: r.description,
        hierarchy_level: r.hierarchy_level,
        is_system_role: r.is_system_role,
        created_at: r.created_at,
        updated_at: r.updated_at,
        permissions: permissions.into_iter().map(permission_view).collect(),
    }
}

fn check_name(name: &str) -> Result<String, Error> {
    let name = name.trim();
    if name.is_empty()
        || name.chars().count() > ROLE_NAME_MAX_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "invalid_name",
            format!(
                "the role name must be 1 to {ROLE_NAME_MAX_CHARS} characters, without control characters"
            ),
        ));
    }
    Ok(name.to_string())
}

fn check_level(access: &OrgAccess, level: i32) -> Result<(), Error> {
    if !(0..=100).contains(&level) {
        return Err(Error::invalid(
            "invalid_hierarchy_level",
            "hierarchy_level must be 0 to 100",
        ));
    }
    if level > access.level() {
        return Err(Error::Forbidden {
            code: "role_level_too_high",
            message: format!(
                "hierarchy_level may not exceed your own level ({})",
                access.level()
            ),
        });
    }
    Ok(())
}

/// Resolves permission ids: all must exist and each must be covered by the
/// caller's own permissions.
async fn check_permissions(
    cx: &ServerContext,
    access: &OrgAccess,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, Error> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids.dedup();
    let found = cx.datastore.permissions_by_ids(&ids).await?;
    if found.len() != ids.len() {
        return Err(Error::invalid(
            "unknown_permission",
            "one or more permission ids do not exist",
        ));
    }
    if let Some(p) = found.iter().find(|p| !access.grants(&p.name)) {
        return Err(Error::Forbidden {
            code: "permission_not_held",
            message: format!(
                "you cannot grant {} because your role does not hold it",
                p.name
            ),
        });
    }
    Ok(ids)
}

/// A role of the organization that the caller may modify.
async fn modifiable_role(
    cx: &ServerContext,
    access: &OrgAccess,
    role_id: Uuid,
) -> Result<RoleRow, Error> {
    let role = cx
        .datastore
        .role_get(access, role_id)
        .await?
        .ok_or(Error::NotFound { what: "role" })?;
    if role.is_system_role {
        return Err(Error::Forbidden {
            code: "system_role_immutable",
            message: "system roles cannot be changed or deleted".to_string(),
        });
    }
    if role.hierarchy_level > access.level() {
        return Err(Error::Forbidden {
            code: "role_level_too_high",
            message: "you cannot change a role above your own level".to_string(),
        });
    }
    Ok(role)
}

/// Longest role or permission description, in characters.
pub const DESCRIPTION_MAX_CHARS: usize = 1000;
/// Most permissions named in one role request.
pub const PERMISSION_IDS_MAX: usize = 500;

/// Trims a description and checks its length (before any SQL).
fn check_description(description: Option<String>) -> Result<Option<String>, Error> {
    let Some(d) = description else {
        return Ok(None);
    };
    let d = d.trim();
    if d.chars().count() > DESCRIPTION_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_description",
            format!("the description must be at most {DESCRIPTION_MAX_CHARS} characters"),
        ));
    }
    Ok(Some(d.to_string()))
}

fn check_permission_count(ids: &[Uuid]) -> Result<(), Error> {
    if ids.len() > PERMISSION_IDS_MAX {
        return Err(Error::invalid(
            "invalid_request",
            format!("at most {PERMISSION_IDS_MAX} permissions may be named"),
        ));
    }
    Ok(())
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::RolesWrite>,
    request: CreateRoleRequest,
) -> Result<RoleWithPermissions, Error> {
    let name = check_name(&request.name)?;
    let description = check_description(request.description)?.unwrap_or_default();
    check_permission_count(&request.permission_ids)?;
    check_level(grant, request.hierarchy_level)?;
    let ids = check_permissions(cx, grant, &request.permission_ids).await?;
    let role = cx
        .datastore
        .role_create(
            grant,
            &RoleValues {
                name: &name,
                description: &description,
                hierarchy_level: request.hierarchy_level,
            },
            &ids,
        )
        .await?;
    let permissions = cx.datastore.role_permissions(grant, role.id).await?;
    Ok(role_with_permissions(role, permissions))
}

pub async fn update(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::RolesWrite>,
    role_id: Uuid,
    request: UpdateRoleRequest,
) -> Result<RoleWithPermissions, Error> {
    let new_description = check_description(request.description)?;
    if let Some(ids) = &request.permission_ids {
        check_permission_count(ids)?;
    }
    let current = modifiable_role(cx, grant, role_id).await?;
    let name = match &request.name {
        Some(n) => check_name(n)?,
        None => current.name.clone(),
    };
    let level = request.hierarchy_level.unwrap_or(current.hierarchy_level);
    check_level(grant, level)?;
    let ids = match &request.permission_ids {
        Some(ids) => Some(check_permissions(cx, grant, ids).await?),
        None => None,
    };
    let description = new_description.unwrap_or(current.description);
    let role = cx
        .datastore
        .role_update(
            grant,
            role_id,
            &RoleValues {
                name: &name,
                description: &description,
                hierarchy_level: level,
            },
            ids.as_deref(),
        )
        .await?
        .ok_or(Error::NotFound { what: "role" })?;
    let permissions = cx.datastore.role_permissions(grant, role.id).await?;
    Ok(role_with_permissions(role, permissions))
}

pub async fn remove(
    cx: &ServerContext,
    grant: &Grant<on::Org, (perm::RolesDelete, perm::RolesWrite)>,
    role_id: Uuid,
) -> Result<String, Error> {
    let role = modifiable_role(cx, grant, role_id).await?;
    cx.datastore.role_delete(grant, role_id).await?;
    Ok(format!("role {} deleted", role.name))
}

pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    page: crate::db::datastore::Page,
) -> Result<Vec<Role>, Error> {
    Ok(cx
        .datastore
        .roles_list(access, page)
        .await?
        .into_iter()
        .map(role_view)
        .collect())
}

pub async fn list_permissions(
    cx: &ServerContext,
    page: crate::db::datastore::Page,
) -> Result<Vec<Permission>, Error> {
    Ok(cx
        .datastore
        .permissions_list(page)
        .await?
        .into_iter()
        .map(permission_view)
        .collect())
}

/// `resource:action`: lowercase ASCII letters and underscores, or `*`, on
/// each side; at most 64 characters.
pub fn valid_permission_name(name: &str) -> bool {
    let part = |p: &str| {
        p == "*" || (!p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    };
    name.len() <= 64
        && name
            .split_once(':')
            .is_some_and(|(r, a)| part(r) && part(a))
}

pub async fn create_permission(
    cx: &ServerContext,
    admin: &SystemAdmin,
    request: CreatePermissionRequest,
) -> Result<Permission, Error> {
    let name = request.name.trim();
    if !valid_permission_name(name) {
        return Err(Error::invalid(
            "invalid_permission_name",
            "a permission name is resource:action (lowercase letters and underscores, or *)",
        ));
    }
    let description = check_description(request.description)?.unwrap_or_default();
    Ok(permission_view(
        cx.datastore
            .permission_create(admin, name, &description)
            .await?,
    ))
}

pub async fn delete_permission(
    cx: &ServerContext,
    admin: &SystemAdmin,
    id: Uuid,
) -> Result<String, Error> {
    let permission = cx
        .datastore
        .permission_get(id)
        .await?
        .ok_or(Error::NotFound { what: "permission" })?;
    if permission.name == "*:*" {
        return Err(Error::conflict(
            "permission_protected",
            "the *:* permission cannot be deleted",
        ));
    }
    cx.datastore.permission_delete(admin, id).await?;
    Ok(format!("permission {} deleted", permission.name))
}

#[cfg(test)]
mod tests {
    use super::valid_permission_name;

    #[test]
    fn permission_names() {
        for ok in ["kb:read", "*:*", "kb:*", "*:read", "team_budget:approve"] {
            assert!(valid_permission_name(ok), "{ok}");
        }
        for bad in [
            "kb",
            "kb:",
            ":read",
            "KB:read",
            "kb:read:x",
            "k b:read",
            "kb:re-ad",
            "**:read",
        ] {
            assert!(!valid_permission_name(bad), "{bad}");
        }
    }
}
