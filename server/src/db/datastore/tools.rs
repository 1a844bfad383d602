//! Tool categories and tools.
//!
//! A tool is visible to an organization when it belongs to it or is public;
//! it is writable only by its own organization.

use super::audit;
use super::{Datastore, is_unique_violation};
use crate::audit::Event;
use crate::authn::Actor;
use crate::authz::{Grant, OrgAccess, OrgScope, on, perm};
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// The permission names that grant `tool:read` (exact and wildcards).
pub const TOOL_READ_GRANTS: &[&str] = &["tool:read", "tool:*", "*:read", "*:*"];

pub struct CategoryRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub name: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl CategoryRow {
    fn from_row(r: &tokio_postgres::Row) -> CategoryRow {
        CategoryRow {
            id: r.get("id"),
            org_id: r.get("organization_id"),
            name: r.get("name"),
            description: r.get("description"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

/// A tool row; `settings` is `Value::Null` in list queries.
pub struct ToolRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub category_id: Uuid,
    pub category_name: String,
    pub name: String,
    pub description: String,
    pub is_active: bool,
    pub version: String,
    pub logo_url: Option<String>,
    pub is_public: bool,
    pub configuration: Value,
    pub inputs: Value,
    pub outputs: Value,
    pub settings: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ToolRow {
    fn from_row(r: &tokio_postgres::Row) -> ToolRow {
        ToolRow {
            id: r.get("id"),
            org_id: r.get("organization_id"),
            category_id: r.get("category_id"),
            category_name: r.get("category_name"),
            name: r.get("name"),
            description: r.get("description"),
            is_active: r.get("is_active"),
            version: r.get("version"),
            logo_url: r.get("logo_url"),
            is_public: r.get("is_public"),
            configuration: r.get("configuration"),
            inputs: r.get("inputs"),
            outputs: r.get("outputs"),
            settings: r.get("settings"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

/// The stored fields of a tool (create, or the merged result of an update).
pub struct ToolFields<'a> {
    pub category_id: Uuid,
    pub name: &'a str,
    pub description: &'a str,
    pub is_active: bool,
    pub version: &'a str,
    pub logo_url: Option<&'a str>,
    pub is_public: bool,
    pub configuration: Value,
    pub inputs: Value,
    pub outputs: Value,
    pub settings: Value,
}

const TOOL_COLUMNS: &str = "t.id, t.organization_id, t.category_id, c.name AS category_name, \
     t.name, t.description, t.is_active, t.version, t.logo_url, t.is_public, \
     t.configuration, t.inputs, t.outputs, t.created_at, t.updated_at";

/// Organizations where the user is an active member whose role grants
/// `tool:read` (a sub-select on `$1` user id, `$2` grant names).
const READABLE_ORGS: &str = "SELECT m.organization_id FROM memberships m \
     JOIN roles r ON r.id = m.role_id AND r.organization_id = m.organization_id \
     WHERE m.user_id = $1 AND m.status = 'active' AND EXISTS ( \
        SELECT 1 FROM role_permissions rp JOIN permissions p ON p.id = rp.permission_id \
        WHERE rp.role_id = r.id AND p.name = ANY($2))";

fn name_taken(e: &tokio_postgres::Error, constraint: &str, code: &'static str) -> Option<Error> {
    is_unique_violation(e, constraint)
        .then(|| Error::conflict(code, "the name is already used in this organization"))
}

impl Datastore {
    pub async fn category_list_org(
        &self,
        access: &OrgAccess,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<CategoryRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT * FROM tool_categories WHERE organization_id = $1 \
                 ORDER BY name, id LIMIT $2 OFFSET $3",
                &[&access.org_id(), &limit, &offset],
            )
            .await?;
        Ok(rows.iter().map(CategoryRow::from_row).collect())
    }

    /// Categories of every organization where `actor` may read tools.
    pub async fn category_list_user(
        &self,
        actor: &Actor,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<CategoryRow>, Error> {
        let conn = self.conn().await?;
        let grants: Vec<&str> = TOOL_READ_GRANTS.to_vec();
        let rows = conn
            .query(
                &format!(
                    "SELECT * FROM tool_categories WHERE organization_id IN ({READABLE_ORGS}) \
                     ORDER BY name, id LIMIT $3 OFFSET $4"
                ),
                &[&actor.user_id, &grants, &limit, &offset],
            )
            .await?;
        Ok(rows.iter().map(CategoryRow::from_row).collect())
    }

    pub async fn category_create(
        &self,
        grant: &Grant<on::Org, perm::ToolWrite>,
        name: &str,
        description: &str,
    ) -> Result<CategoryRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_one(
                "INSERT INTO tool_categories (id, organization_id, name, description) \
                 VALUES ($1, $2, $3, $4) RETURNING *",
                &[&Uuid::new_v4(), &grant.org_id(), &name, &description],
            )
            .await
            .map_err(|e| {
                name_taken(&e, "tool_categories_name_key", "category_name_taken")
                    .unwrap_or_else(|| e.into())
            })?;
        Ok(CategoryRow::from_row(&row))
    }

    pub async fn category_update(
        &self,
        grant: &Grant<on::Org, perm::ToolWrite>,
        id: Uuid,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<CategoryRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "UPDATE tool_categories SET name = coalesce($3, name), \
                    description = coalesce($4, description), updated_at = now() \
                 WHERE organization_id = $1 AND id = $2 RETURNING *",
                &[&grant.org_id(), &id, &name, &description],
            )
            .await
            .map_err(|e| {
                name_taken(&e, "tool_categories_name_key", "category_name_taken")
                    .unwrap_or_else(|| e.into())
            })?
            .ok_or(Error::NotFound { what: "category" })?;
        Ok(CategoryRow::from_row(&row))
    }

    /// Deletes a category that holds no tools.
    pub async fn category_delete(
        &self,
        grant: &Grant<on::Org, perm::ToolDelete>,
        id: Uuid,
    ) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.query_opt(
            "SELECT 1 FROM tool_categories WHERE organization_id = $1 AND id = $2 FOR UPDATE",
            &[&grant.org_id(), &id],
        )
        .await?
        .ok_or(Error::NotFound { what: "category" })?;
        let used = tx
            .query_opt("SELECT 1 FROM tools WHERE category_id = $1 LIMIT 1", &[&id])
            .await?;
        if used.is_some() {
            return Err(Error::conflict(
                "category_in_use",
                "the category still holds tools; move or delete them first",
            ));
        }
        tx.execute("DELETE FROM tool_categories WHERE id = $1", &[&id])
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "tool_category.delete").target("tool_category", id),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether `category_id` is a category of the organization.
    async fn category_owned(
        tx: &super::Tx<'_>,
        org_id: Uuid,
        category_id: Uuid,
    ) -> Result<(), Error> {
        // Locked so the category cannot be deleted under the new tool.
        tx.query_opt(
            "SELECT 1 FROM tool_categories WHERE organization_id = $1 AND id = $2 FOR SHARE",
            &[&org_id, &category_id],
        )
        .await?
        .map(|_| ())
        .ok_or_else(|| {
            Error::invalid(
                "unknown_category",
                "category_id is not a category of this organization",
            )
        })
    }

    pub async fn tool_create(
        &self,
        grant: &Grant<on::Org, perm::ToolWrite>,
        f: &ToolFields<'_>,
    ) -> Result<ToolRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        Self::category_owned(&tx, grant.org_id(), f.category_id).await?;
        let id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO tools (id, organization_id, category_id, name, description, is_active, \
                version, logo_url, is_public, configuration, inputs, outputs, settings, created_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            &[
                &id,
                &grant.org_id(),
                &f.category_id,
                &f.name,
                &f.description,
                &f.is_active,
                &f.version,
                &f.logo_url,
                &f.is_public,
                &f.configuration,
                &f.inputs,
                &f.outputs,
                &f.settings,
                &grant.user_id(),
            ],
        )
        .await
        .map_err(|e| name_taken(&e, "tools_name_key", "tool_name_taken").unwrap_or_else(|| e.into()))?;
        let row = Self::tool_in_tx(&tx, id).await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "tool.create").target("tool", id),
        )
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn tool_in_tx(tx: &super::Tx<'_>, id: Uuid) -> Result<ToolRow, Error> {
        let row = tx
            .query_one(
                &format!(
                    "SELECT {TOOL_COLUMNS}, t.settings FROM tools t \
                     JOIN tool_categories c ON c.id = t.category_id WHERE t.id = $1"
                ),
                &[&id],
            )
            .await?;
        Ok(ToolRow::from_row(&row))
    }

    /// Updates a tool of the organization: `merge` receives the current row
    /// (locked) and returns the new fields, all in one transaction.
    pub async fn tool_update(
        &self,
        grant: &Grant<on::Org, perm::ToolWrite>,
        id: Uuid,
        merge: impl FnOnce(&ToolRow) -> Result<ToolFieldsOwned, Error>,
    ) -> Result<ToolRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let current = tx
            .query_opt(
                &format!(
                    "SELECT {TOOL_COLUMNS}, t.settings FROM tools t \
                     JOIN tool_categories c ON c.id = t.category_id \
                     WHERE t.organization_id = $1 AND t.id = $2 FOR UPDATE OF t"
                ),
                &[&grant.org_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "tool" })?;
        let current = ToolRow::from_row(&current);
        let f = merge(&current)?;
        if f.category_id != current.category_id {
            Self::category_owned(&tx, grant.org_id(), f.category_id).await?;
        }
        tx.execute(
            "UPDATE tools SET category_id = $2, name = $3, description = $4, is_active = $5, \
                version = $6, logo_url = $7, is_public = $8, configuration = $9, inputs = $10, \
                outputs = $11, settings = $12, updated_at = now() WHERE id = $1",
            &[
                &id,
                &f.category_id,
                &f.name,
                &f.description,
                &f.is_active,
                &f.version,
                &f.logo_url,
                &f.is_public,
                &f.configuration,
                &f.inputs,
                &f.outputs,
                &f.settings,
            ],
        )
        .await
        .map_err(|e| {
            name_taken(&e, "tools_name_key", "tool_name_taken").unwrap_or_else(|| e.into())
        })?;
        let row = Self::tool_in_tx(&tx, id).await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "tool.update").target("tool", id),
        )
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// A tool visible to the authorized organization (its own or public),
    /// with settings: for a member, the agent runtime and deployments.
    pub async fn tool_get_visible(
        &self,
        scope: &impl OrgScope,
        id: Uuid,
    ) -> Result<ToolRow, Error> {
        let org_id = scope.scope_org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {TOOL_COLUMNS}, t.settings FROM tools t \
                     JOIN tool_categories c ON c.id = t.category_id \
                     WHERE t.id = $2 AND (t.organization_id = $1 OR t.is_public)"
                ),
                &[&org_id, &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "tool" })?;
        Ok(ToolRow::from_row(&row))
    }

    /// Tools of the organization plus public tools (no settings).
    pub async fn tool_list_org(
        &self,
        access: &OrgAccess,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<ToolRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {TOOL_COLUMNS}, 'null'::jsonb AS settings FROM tools t \
                     JOIN tool_categories c ON c.id = t.category_id \
                     WHERE t.organization_id = $1 OR t.is_public \
                     ORDER BY t.name, t.id LIMIT $2 OFFSET $3"
                ),
                &[&access.org_id(), &limit, &offset],
            )
            .await?;
        Ok(rows.iter().map(ToolRow::from_row).collect())
    }

    /// Tools of every organization where `actor` may read tools, plus
    /// public tools (no settings).
    pub async fn tool_list_user(
        &self,
        actor: &Actor,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<ToolRow>, Error> {
        let conn = self.conn().await?;
        let grants: Vec<&str> = TOOL_READ_GRANTS.to_vec();
        let rows = conn
            .query(
                &format!(
                    "SELECT {TOOL_COLUMNS}, 'null'::jsonb AS settings FROM tools t \
                     JOIN tool_categories c ON c.id = t.category_id \
                     WHERE t.is_public OR t.organization_id IN ({READABLE_ORGS}) \
                     ORDER BY t.name, t.id LIMIT $3 OFFSET $4"
                ),
                &[&actor.user_id, &grants, &limit, &offset],
            )
            .await?;
        Ok(rows.iter().map(ToolRow::from_row).collect())
    }

    /// Deletes a tool of the organization that no agent uses.
    pub async fn tool_delete(
        &self,
        grant: &Grant<on::Org, perm::ToolDelete>,
        id: Uuid,
    ) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.query_opt(
            "SELECT 1 FROM tools WHERE organization_id = $1 AND id = $2 FOR UPDATE",
            &[&grant.org_id(), &id],
        )
        .await?
        .ok_or(Error::NotFound { what: "tool" })?;
        let used = tx
            .query_opt(
                "SELECT 1 FROM agent_tools WHERE tool_id = $1 LIMIT 1",
                &[&id],
            )
            .await?;
        if used.is_some() {
            return Err(Error::conflict(
                "tool_in_use",
                "an agent uses this tool; remove it from the agents first",
            ));
        }
        tx.execute("DELETE FROM tools WHERE id = $1", &[&id])
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "tool.delete").target("tool", id),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// [`ToolFields`] with owned values (the result of merging an update).
pub struct ToolFieldsOwned {
    pub category_id: Uuid,
    pub name: String,
    pub description: String,
    pub is_active: bool,
    pub version: String,
    pub logo_url: Option<String>,
    pub is_public: bool,
    pub configuration: Value,
    pub inputs: Value,
    pub outputs: Value,
    pub settings: Value,
}
