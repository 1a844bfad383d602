//! Agents and their tools.

use super::Datastore;
use super::audit;
use crate::audit::Event;
use crate::authz::{Grant, OrgAccess, OrgScope, on, perm};
use crate::db::enums::AgentStatus;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

pub struct AgentRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub name: String,
    pub description: String,
    pub agent_type: String,
    pub model_id: Uuid,
    pub model_name: String,
    pub params: Value,
    pub is_public: bool,
    pub status: AgentStatus,
    pub deployments_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl AgentRow {
    pub(super) fn from_row(r: &tokio_postgres::Row) -> AgentRow {
        AgentRow {
            id: r.get("id"),
            org_id: r.get("organization_id"),
            name: r.get("name"),
            description: r.get("description"),
            agent_type: r.get("agent_type"),
            model_id: r.get("model_id"),
            model_name: r.get("model_name"),
            params: r.get("params"),
            is_public: r.get("is_public"),
            status: r.get("status"),
            deployments_count: r.get("deployments_count"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

/// A tool of an agent (only tools still visible to the agent's
/// organization).
pub struct AgentToolRow {
    pub tool_id: Uuid,
    pub name: String,
    pub category_id: Uuid,
    pub category_name: String,
    pub config: Value,
}

pub struct AgentDeploymentRow {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
}

/// The stored fields of an agent.
pub struct AgentFields {
    pub name: String,
    pub description: String,
    pub agent_type: String,
    pub model_id: Uuid,
    pub params: Value,
    pub is_public: bool,
    /// `(tool_id, config)` in order; `None` keeps the tools (update).
    pub tools: Option<Vec<(Uuid, Value)>>,
}

pub(super) const AGENT_SELECT: &str = "SELECT a.*, m.name AS model_name, \
        (SELECT count(*) FROM agent_deployments d WHERE d.agent_id = a.id) AS deployments_count \
     FROM agents a JOIN models m ON m.id = a.model_id";

/// One agent of an organization (params: organization, agent).
pub(super) static AGENT_GET_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("{AGENT_SELECT} WHERE a.organization_id = $1 AND a.id = $2")
});

/// An agent's tools that its organization can still see, in order, for
/// the agent `$agent` names (a row value of organization and agent).
macro_rules! agent_tools_sql {
    ($agent:expr) => {
        concat!(
            "SELECT t.id, t.name, c.id AS category_id, c.name AS category_name, at.config \
             FROM agent_tools at JOIN agents a ON a.id = at.agent_id \
             JOIN tools t ON t.id = at.tool_id \
             JOIN tool_categories c ON c.id = t.category_id \
             WHERE (a.organization_id, at.agent_id) = ",
            $agent,
            " AND (t.organization_id = a.organization_id OR t.is_public) \
             ORDER BY at.position"
        )
    };
}

pub(super) use agent_tools_sql;

/// An agent's tools (params: organization, agent).
pub(super) const AGENT_TOOLS_SQL: &str = agent_tools_sql!("($1, $2)");

/// A row of [`AGENT_TOOLS_SQL`].
pub(super) fn agent_tool_row(r: &tokio_postgres::Row) -> AgentToolRow {
    AgentToolRow {
        tool_id: r.get("id"),
        name: r.get("name"),
        category_id: r.get("category_id"),
        category_name: r.get("category_name"),
        config: r.get("config"),
    }
}

async fn replace_tools(
    tx: &super::Tx<'_>,
    org_id: Uuid,
    agent_id: Uuid,
    tools: &[(Uuid, Value)],
) -> Result<(), Error> {
    tx.execute("DELETE FROM agent_tools WHERE agent_id = $1", &[&agent_id])
        .await?;
    for (position, (tool_id, config)) in tools.iter().enumerate() {
        // The tool must be visible to the organization (its own or public);
        // locked so it cannot be deleted or made private under us.
        tx.query_opt(
            "SELECT 1 FROM tools WHERE id = $1 AND (organization_id = $2 OR is_public) FOR SHARE",
            &[tool_id, &org_id],
        )
        .await?
        .ok_or_else(|| {
            Error::invalid(
                "unknown_tool",
                format!("tool {tool_id} is not a tool of this organization nor a public one"),
            )
        })?;
        tx.execute(
            "INSERT INTO agent_tools (agent_id, tool_id, position, config) VALUES ($1, $2, $3, $4)",
            &[&agent_id, tool_id, &(position as i32), config],
        )
        .await?;
    }
    Ok(())
}

impl Datastore {
    pub async fn agent_create(
        &self,
        grant: &Grant<on::Org, perm::AgentWrite>,
        f: &AgentFields,
        status: AgentStatus,
    ) -> Result<AgentRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO agents (id, organization_id, name, description, agent_type, model_id, \
                params, is_public, status, created_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &id,
                &grant.org_id(),
                &f.name,
                &f.description,
                &f.agent_type,
                &f.model_id,
                &f.params,
                &f.is_public,
                &status,
                &grant.user_id(),
            ],
        )
        .await?;
        if let Some(tools) = &f.tools {
            replace_tools(&tx, grant.org_id(), id, tools).await?;
        }
        let row = tx
            .query_one(&format!("{AGENT_SELECT} WHERE a.id = $1"), &[&id])
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "agent.create").target("agent", id),
        )
        .await?;
        tx.commit().await?;
        Ok(AgentRow::from_row(&row))
    }

    pub async fn agent_list(
        &self,
        access: &OrgAccess,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<AgentRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "{AGENT_SELECT} WHERE a.organization_id = $1 \
                     ORDER BY a.created_at DESC, a.id LIMIT $2 OFFSET $3"
                ),
                &[&access.org_id(), &limit, &offset],
            )
            .await?;
        Ok(rows.iter().map(AgentRow::from_row).collect())
    }

    /// The agent, in the organization of a member or of a deployment key.
    pub async fn agent_get(&self, scope: &impl OrgScope, id: Uuid) -> Result<AgentRow, Error> {
        let org_id = scope.scope_org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_opt(AGENT_GET_SQL.as_str(), &[&org_id, &id])
            .await?
            .ok_or(Error::NotFound { what: "agent" })?;
        Ok(AgentRow::from_row(&row))
    }

    /// The agent's tools that its organization can still see, in order.
    /// The agent's tools, in the organization of a member or of a
    /// deployment key.
    pub async fn agent_tools(
        &self,
        scope: &impl OrgScope,
        agent_id: Uuid,
    ) -> Result<Vec<AgentToolRow>, Error> {
        let org_id = scope.scope_org_id();
        let conn = self.conn().await?;
        let rows = conn.query(AGENT_TOOLS_SQL, &[&org_id, &agent_id]).await?;
        Ok(rows.iter().map(agent_tool_row).collect())
    }

    pub async fn agent_deployments(
        &self,
        access: &OrgAccess,
        agent_id: Uuid,
    ) -> Result<Vec<AgentDeploymentRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT id, name, description, created_at FROM agent_deployments \
                 WHERE organization_id = $1 AND agent_id = $2 ORDER BY created_at, id",
                &[&access.org_id(), &agent_id],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| AgentDeploymentRow {
                id: r.get("id"),
                name: r.get("name"),
                description: r.get("description"),
                created_at: r.get("created_at"),
            })
            .collect())
    }

    /// Updates an agent: `merge` gets the locked current row and returns
    /// the new fields and status.
    pub async fn agent_update(
        &self,
        grant: &Grant<on::Agent, perm::AgentWrite>,
        merge: impl FnOnce(&AgentRow) -> Result<(AgentFields, AgentStatus), Error>,
    ) -> Result<AgentRow, Error> {
        let id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let current = tx
            .query_opt(
                &format!(
                    "{AGENT_SELECT} WHERE a.organization_id = $1 AND a.id = $2 FOR UPDATE OF a"
                ),
                &[&grant.org_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "agent" })?;
        let (f, status) = merge(&AgentRow::from_row(&current))?;
        tx.execute(
            "UPDATE agents SET name = $2, description = $3, agent_type = $4, model_id = $5, \
                params = $6, is_public = $7, status = $8, updated_at = now() WHERE id = $1",
            &[
                &id,
                &f.name,
                &f.description,
                &f.agent_type,
                &f.model_id,
                &f.params,
                &f.is_public,
                &status,
            ],
        )
        .await?;
        if let Some(tools) = &f.tools {
            replace_tools(&tx, grant.org_id(), id, tools).await?;
        }
        let row = tx
            .query_one(&format!("{AGENT_SELECT} WHERE a.id = $1"), &[&id])
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "agent.update").target("agent", id),
        )
        .await?;
        tx.commit().await?;
        Ok(AgentRow::from_row(&row))
    }

    /// Moves the agent to `to` when its status is one of `from`; returns
    /// the status after.
    pub(crate) async fn agent_transition(
        &self,
        grant: &Grant<on::Agent, perm::AgentExecute>,
        from: &[AgentStatus],
        to: AgentStatus,
    ) -> Result<AgentStatus, Error> {
        let id = grant.id();
        let conn = self.conn().await?;
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        let row = conn
            .query_opt(
                "UPDATE agents SET status = CASE WHEN status = ANY($3) THEN $4 ELSE status END \
                 WHERE organization_id = $1 AND id = $2 RETURNING status",
                &[&grant.org_id(), &id, &from, &to],
            )
            .await?
            .ok_or(Error::NotFound { what: "agent" })?;
        Ok(row.get("status"))
    }

    pub async fn agent_delete(
        &self,
        grant: &Grant<on::Agent, perm::AgentDelete>,
    ) -> Result<(), Error> {
        let id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM agents WHERE organization_id = $1 AND id = $2",
                &[&grant.org_id(), &id],
            )
            .await?;
        if n == 0 {
            return Err(Error::NotFound { what: "agent" });
        }
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "agent.delete").target("agent", id),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(())
    }
}
