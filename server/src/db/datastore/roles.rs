//! Roles and the permission catalog.

use super::audit;
use super::{Datastore, is_unique_violation};
use crate::audit::Event;
use crate::authz::{Grant, OrgAccess, SystemAdmin, on, perm};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

db_row! {
    pub struct RoleRow {
        pub id: Uuid = "id",
        pub organization_id: Uuid = "organization_id",
        pub name: String = "name",
        pub description: String = "description",
        pub hierarchy_level: i32 = "hierarchy_level",
        pub is_system_role: bool = "is_system_role",
        pub created_at: DateTime<Utc> = "created_at",
        pub updated_at: DateTime<Utc> = "updated_at",
    }
}

const ROLE_COLUMNS: &str = RoleRow::COLUMNS;

#[derive(Clone)]
pub struct PermissionRow {
    pub id: Uuid,
    pub name: String,
    pub description: String,
}

impl PermissionRow {
    fn from_row(row: &tokio_postgres::Row) -> PermissionRow {
        PermissionRow {
            id: row.get("id"),
            name: row.get("name"),
            description: row.get("description"),
        }
    }
}

/// New values of a role (creation or update after merging).
pub struct RoleValues<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub hierarchy_level: i32,
}

fn map_role_name_conflict(e: tokio_postgres::Error) -> Error {
    if is_unique_violation(&e, "roles_org_lower_name_key")
        || is_unique_violation(&e, "roles_org_name_key")
    {
        Error::conflict(
            "role_name_taken",
            "a role with this name already exists in the organization",
        )
    } else {
        e.into()
    }
}

impl Datastore {
    /// A role of organization `org_id` (never of another organization).
    pub async fn role_get(
        &self,
        access: &OrgAccess,
        role_id: Uuid,
    ) -> Result<Option<RoleRow>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!("SELECT {ROLE_COLUMNS} FROM roles WHERE organization_id = $1 AND id = $2"),
                &[&org_id, &role_id],
            )
            .await?;
        Ok(row.as_ref().map(RoleRow::from_row))
    }

    /// The organization's roles, highest level first, then by name.
    pub async fn roles_list(
        &self,
        access: &OrgAccess,
        page: super::Page,
    ) -> Result<Vec<RoleRow>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {ROLE_COLUMNS} FROM roles WHERE organization_id = $1 \
                     ORDER BY hierarchy_level DESC, lower(name), id LIMIT $2 OFFSET $3"
                ),
                &[&org_id, &page.limit, &page.offset],
            )
            .await?;
        Ok(rows.iter().map(RoleRow::from_row).collect())
    }

    /// The permissions of a role of organization `org_id`, by name.
    pub async fn role_permissions(
        &self,
        access: &OrgAccess,
        role_id: Uuid,
    ) -> Result<Vec<PermissionRow>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT p.id, p.name, p.description FROM role_permissions rp \
                 JOIN roles r ON r.id = rp.role_id \
                 JOIN permissions p ON p.id = rp.permission_id \
                 WHERE r.organization_id = $1 AND rp.role_id = $2 ORDER BY p.name",
                &[&org_id, &role_id],
            )
            .await?;
        Ok(rows.iter().map(PermissionRow::from_row).collect())
    }

    /// The catalog entries among `ids` (unknown ids are simply absent).
    pub async fn permissions_by_ids(&self, ids: &[Uuid]) -> Result<Vec<PermissionRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT id, name, description FROM permissions WHERE id = ANY($1) ORDER BY name",
                &[&ids],
            )
            .await?;
        Ok(rows.iter().map(PermissionRow::from_row).collect())
    }

    pub async fn role_create(
        &self,
        grant: &Grant<on::Org, perm::RolesWrite>,
        values: &RoleValues<'_>,
        permission_ids: &[Uuid],
    ) -> Result<RoleRow, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO roles (id, organization_id, name, description, hierarchy_level, \
                                        is_system_role) \
                     VALUES ($1, $2, $3, $4, $5, false) RETURNING {ROLE_COLUMNS}"
                ),
                &[
                    &Uuid::new_v4(),
                    &org_id,
                    &values.name,
                    &values.description,
                    &values.hierarchy_level,
                ],
            )
            .await
            .map_err(map_role_name_conflict)?;
        let role = RoleRow::from_row(&row);
        tx.execute(
            "INSERT INTO role_permissions (role_id, permission_id) \
             SELECT $1, id FROM permissions WHERE id = ANY($2)",
            &[&role.id, &permission_ids],
        )
        .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(org_id, "role.create").target("role", role.id).details(serde_json::json!({"name": values.name, "hierarchy_level": values.hierarchy_level, "permission_ids": permission_ids})),
        )
        .await?;
        tx.commit().await?;
        Ok(role)
    }

    /// Updates a custom role of `org_id`; `permission_ids` (when given)
    /// replaces its permissions. Returns `None` when no such custom role.
    pub async fn role_update(
        &self,
        grant: &Grant<on::Org, perm::RolesWrite>,
        role_id: Uuid,
        values: &RoleValues<'_>,
        permission_ids: Option<&[Uuid]>,
    ) -> Result<Option<RoleRow>, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE roles SET name = $3, description = $4, hierarchy_level = $5, \
                                      updated_at = now() \
                     WHERE organization_id = $1 AND id = $2 AND NOT is_system_role \
                     RETURNING {ROLE_COLUMNS}"
                ),
                &[
                    &org_id,
                    &role_id,
                    &values.name,
                    &values.description,
                    &values.hierarchy_level,
                ],
            )
            .await
            .map_err(map_role_name_conflict)?;
        let Some(row) = row else { return Ok(None) };
        if let Some(ids) = permission_ids {
            tx.execute(
                "DELETE FROM role_permissions WHERE role_id = $1",
                &[&role_id],
            )
            .await?;
            tx.execute(
                "INSERT INTO role_permissions (role_id, permission_id) \
                 SELECT $1, id FROM permissions WHERE id = ANY($2)",
                &[&role_id, &ids],
            )
            .await?;
        }
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(org_id, "role.update").target("role", role_id).details(serde_json::json!({"name": values.name, "hierarchy_level": values.hierarchy_level, "permission_ids": permission_ids})),
        )
        .await?;
        tx.commit().await?;
        Ok(Some(RoleRow::from_row(&row)))
    }

    /// Deletes a custom role of `org_id` unless a membership that is not
    /// `deleted` holds it; the kept rows of removed members that held it
    /// go with it. The check and the delete are atomic: the role row is
    /// locked first, so a concurrent assignment waits and then fails on the
    /// foreign key.
    pub async fn role_delete(
        &self,
        grant: &Grant<on::Org, (perm::RolesDelete, perm::RolesWrite)>,
        role_id: Uuid,
    ) -> Result<(), Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let locked = tx
            .query_opt(
                "SELECT 1 FROM roles WHERE organization_id = $1 AND id = $2 AND NOT is_system_role \
                 FOR UPDATE",
                &[&org_id, &role_id],
            )
            .await?;
        if locked.is_none() {
            return Err(Error::NotFound { what: "role" });
        }
        // Removed members' rows first (they grant nothing); what is left
        // holds the role.
        tx.execute(
            "DELETE FROM memberships WHERE role_id = $1 AND status = $2",
            &[&role_id, &crate::db::enums::MembershipStatus::Deleted],
        )
        .await?;
        let in_use = tx
            .query_opt(
                "SELECT 1 FROM memberships WHERE role_id = $1 LIMIT 1",
                &[&role_id],
            )
            .await?;
        if in_use.is_some() {
            return Err(Error::conflict(
                "role_in_use",
                "the role is assigned to members; assign them another role first",
            ));
        }
        tx.execute(
            "DELETE FROM roles WHERE organization_id = $1 AND id = $2",
            &[&org_id, &role_id],
        )
        .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(org_id, "role.delete").target("role", role_id),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every permission name of the catalog.
    pub async fn permission_names(&self) -> Result<Vec<String>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT name FROM permissions ORDER BY name LIMIT 10000",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    pub async fn permissions_list(&self, page: super::Page) -> Result<Vec<PermissionRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT id, name, description FROM permissions ORDER BY name LIMIT $1 OFFSET $2",
                &[&page.limit, &page.offset],
            )
            .await?;
        Ok(rows.iter().map(PermissionRow::from_row).collect())
    }

    pub async fn permission_create(
        &self,
        admin: &SystemAdmin,
        name: &str,
        description: &str,
    ) -> Result<PermissionRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_one(
                "INSERT INTO permissions (id, name, description) VALUES ($1, $2, $3) \
                 RETURNING id, name, description",
                &[&Uuid::new_v4(), &name, &description],
            )
            .await
            .map_err(|e| {
                if is_unique_violation(&e, "permissions_name_key") {
                    Error::conflict(
                        "permission_exists",
                        "a permission with this name already exists",
                    )
                } else {
                    e.into()
                }
            })?;
        let row = PermissionRow::from_row(&row);
        let event = Event::system("permission.create")
            .target("permission", row.id)
            .details(serde_json::json!({ "name": name }));
        audit::record(&tx, admin.origin(), &event).await?;
        tx.commit().await?;
        Ok(row)
    }

    pub async fn permission_get(&self, id: Uuid) -> Result<Option<PermissionRow>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT id, name, description FROM permissions WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(PermissionRow::from_row))
    }

    /// Deletes a permission; role grants go with it (foreign key cascade).
    pub async fn permission_delete(&self, admin: &SystemAdmin, id: Uuid) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let name = tx
            .query_opt(
                "DELETE FROM permissions WHERE id = $1 RETURNING name",
                &[&id],
            )
            .await?
            .map(|r| r.get::<_, String>(0));
        let Some(name) = name else {
            return Ok(false);
        };
        let event = Event::system("permission.delete")
            .target("permission", id)
            .details(serde_json::json!({ "name": name }));
        audit::record(&tx, admin.origin(), &event).await?;
        tx.commit().await?;
        Ok(true)
    }
}
