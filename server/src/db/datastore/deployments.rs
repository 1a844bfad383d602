//! Agent deployments: their keys (stored as SHA-256 only), the per-minute
//! rate windows shared by every server instance, and usage.

use super::Datastore;
use super::agents::{AgentRow, AgentToolRow};
use super::audit;
use super::rate_limits::WindowCount;
use crate::audit::Event;
use crate::authz::{DeploymentAccess, Grant, OrgAccess, on, perm};
use crate::db::enums::{AgentStatus, DeploymentChannel, DeploymentStatus};
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct DeploymentRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub agent_id: Uuid,
    pub name: String,
    pub description: String,
    pub channel: DeploymentChannel,
    pub status: DeploymentStatus,
    pub allowed_origins: Vec<String>,
    pub rate_limit_per_minute: i32,
    pub key_prefix: String,
    pub key_expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub request_count: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl DeploymentRow {
    fn from_row(r: &tokio_postgres::Row) -> DeploymentRow {
        DeploymentRow {
            id: r.get("id"),
            org_id: r.get("organization_id"),
            agent_id: r.get("agent_id"),
            name: r.get("name"),
            description: r.get("description"),
            channel: r.get("channel"),
            status: r.get("status"),
            allowed_origins: r.get("allowed_origins"),
            rate_limit_per_minute: r.get("rate_limit_per_minute"),
            key_prefix: r.get("key_prefix"),
            key_expires_at: r.get("key_expires_at"),
            last_used_at: r.get("last_used_at"),
            request_count: r.get("request_count"),
            input_tokens: r.get("input_tokens"),
            output_tokens: r.get("output_tokens"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

const COLUMNS: &str = "id, organization_id, agent_id, name, description, channel, status, \
     allowed_origins, rate_limit_per_minute, key_prefix, key_expires_at, last_used_at, \
     request_count, input_tokens, output_tokens, created_at, updated_at";

/// A new deployment's fields.
pub struct NewDeployment {
    pub name: String,
    pub description: String,
    pub channel: DeploymentChannel,
    pub allowed_origins: Vec<String>,
    pub rate_limit_per_minute: i32,
    pub key_hash: Vec<u8>,
    pub key_prefix: String,
    pub key_expires_at: Option<DateTime<Utc>>,
}

/// Changes of `update` (already validated).
#[derive(Default)]
pub struct DeploymentChanges {
    pub name: Option<String>,
    pub description: Option<String>,
    pub allowed_origins: Option<Vec<String>>,
    pub rate_limit_per_minute: Option<i32>,
    pub status: Option<DeploymentStatus>,
    /// `Some(None)`: never expires.
    pub key_expires_at: Option<Option<DateTime<Utc>>>,
}

/// What a deployment key authenticates: the deployment and its agent.
pub struct KeyAccess {
    pub deployment: DeploymentRow,
}

/// The agent's state once its deployments changed: `deployed`/`active`
/// while it has an active deployment (an `active` agent stays active),
/// `ready` when none is left, else unchanged.
const SETTLE_AGENT: &str = "UPDATE agents a SET status = CASE \
       WHEN EXISTS (SELECT 1 FROM agent_deployments d WHERE d.agent_id = a.id \
                    AND d.status = $2) \
         THEN CASE WHEN a.status = $3 THEN $3 ELSE $4 END \
       WHEN EXISTS (SELECT 1 FROM agent_deployments d WHERE d.agent_id = a.id) \
         THEN $4 \
       ELSE $5 END, updated_at = now() \
     WHERE a.id = $1 AND a.status IN ($5, $4, $3)";

/// Runs [`SETTLE_AGENT`] for `agent_id`.
async fn settle_agent(tx: &super::Tx<'_>, agent_id: &Uuid) -> Result<(), Error> {
    tx.execute(
        SETTLE_AGENT,
        &[
            agent_id,
            &DeploymentStatus::Active,
            &AgentStatus::Active,
            &AgentStatus::Deployed,
            &AgentStatus::Ready,
        ],
    )
    .await?;
    Ok(())
}

/// Counts one request in a deployment's current one-minute window and
/// returns the count with the previous minute's (params: deployment).
const RATE_HIT_SQL: &str = "\
    WITH hit AS ( \
        INSERT INTO deployment_rate_windows AS w (deployment_id, window_start, count) \
        VALUES ($1, date_trunc('minute', now()), 1) \
        ON CONFLICT (deployment_id, window_start) DO UPDATE SET count = w.count + 1 \
        RETURNING count, window_start) \
    SELECT hit.count, coalesce(p.count, 0) AS previous, \
           extract(epoch FROM now() - hit.window_start)::float8 AS elapsed_secs \
    FROM hit LEFT JOIN deployment_rate_windows p \
      ON p.deployment_id = $1 AND p.window_start = hit.window_start - interval '1 minute'";

/// A row of [`RATE_HIT_SQL`].
fn window_count(row: &tokio_postgres::Row) -> WindowCount {
    WindowCount {
        hits: row.get("count"),
        previous: row.get("previous"),
        elapsed_secs: row.get("elapsed_secs"),
    }
}

impl Datastore {
    /// Inserts a deployment of an agent in `ready`, `deployed` or `active`
    /// state and moves a `ready` agent to `deployed`, in one transaction.
    pub async fn deployment_create(
        &self,
        grant: &Grant<on::Agent, perm::AgentWrite>,
        new: NewDeployment,
    ) -> Result<DeploymentRow, Error> {
        let agent_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let agent = tx
            .query_opt(
                "SELECT status FROM agents WHERE organization_id = $1 AND id = $2 FOR UPDATE",
                &[&grant.org_id(), &agent_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "agent" })?;
        let status: AgentStatus = agent.get("status");
        if !matches!(
            status,
            AgentStatus::Ready | AgentStatus::Deployed | AgentStatus::Active
        ) {
            return Err(Error::conflict(
                "agent_not_ready",
                "the agent must pass a test before it is deployed (POST /api/agents/test)",
            ));
        }
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO agent_deployments (id, organization_id, agent_id, name, \
                     description, channel, allowed_origins, rate_limit_per_minute, key_hash, \
                     key_prefix, key_expires_at, created_by) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                     RETURNING {COLUMNS}"
                ),
                &[
                    &Uuid::new_v4(),
                    &grant.org_id(),
                    &agent_id,
                    &new.name,
                    &new.description,
                    &new.channel,
                    &new.allowed_origins,
                    &new.rate_limit_per_minute,
                    &new.key_hash,
                    &new.key_prefix,
                    &new.key_expires_at,
                    &grant.user_id(),
                ],
            )
            .await?;
        settle_agent(&tx, &agent_id).await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "deployment.create")
                .target("deployment", row.get::<_, Uuid>("id"))
                .details(serde_json::json!({"agent_id": agent_id, "name": new.name})),
        )
        .await?;
        tx.commit().await?;
        Ok(DeploymentRow::from_row(&row))
    }

    /// An agent's deployments, oldest first (`404` for an agent of another
    /// organization).
    pub async fn deployment_list(
        &self,
        access: &OrgAccess,
        agent_id: Uuid,
    ) -> Result<Vec<DeploymentRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM agent_deployments \
                     WHERE organization_id = $1 AND agent_id = $2 ORDER BY created_at, id"
                ),
                &[&access.org_id(), &agent_id],
            )
            .await?;
        Ok(rows.iter().map(DeploymentRow::from_row).collect())
    }

    pub async fn deployment_get(
        &self,
        access: &OrgAccess,
        id: Uuid,
    ) -> Result<DeploymentRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM agent_deployments \
                     WHERE organization_id = $1 AND id = $2"
                ),
                &[&access.org_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "deployment" })?;
        Ok(DeploymentRow::from_row(&row))
    }

    /// Applies `changes` and settles the agent's state, in one transaction.
    pub async fn deployment_update(
        &self,
        grant: &Grant<on::Deployment, perm::AgentWrite>,
        changes: DeploymentChanges,
    ) -> Result<DeploymentRow, Error> {
        let id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let clear_expiry = matches!(changes.key_expires_at, Some(None));
        let new_expiry = changes.key_expires_at.flatten();
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE agent_deployments SET \
                     name = COALESCE($3, name), \
                     description = COALESCE($4, description), \
                     allowed_origins = COALESCE($5, allowed_origins), \
                     rate_limit_per_minute = COALESCE($6, rate_limit_per_minute), \
                     status = COALESCE($7, status), \
                     key_expires_at = CASE WHEN $8 THEN NULL \
                                           ELSE COALESCE($9, key_expires_at) END, \
                     updated_at = now() \
                     WHERE organization_id = $1 AND id = $2 RETURNING {COLUMNS}"
                ),
                &[
                    &grant.org_id(),
                    &id,
                    &changes.name,
                    &changes.description,
                    &changes.allowed_origins,
                    &changes.rate_limit_per_minute,
                    &changes.status,
                    &clear_expiry,
                    &new_expiry,
                ],
            )
            .await?
            .ok_or(Error::NotFound { what: "deployment" })?;
        let row = DeploymentRow::from_row(&row);
        if changes.status.is_some() {
            // The spec's "pause or stop": an active agent with no active
            // deployment left goes back to deployed.
            settle_agent(&tx, &row.agent_id).await?;
        }
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "deployment.update")
                .target("deployment", id)
                .details(serde_json::json!({"name": row.name})),
        )
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Deletes a deployment (its key dies with it) and settles the agent.
    pub async fn deployment_delete(
        &self,
        grant: &Grant<on::Deployment, perm::AgentDelete>,
    ) -> Result<(), Error> {
        let id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                "DELETE FROM agent_deployments WHERE organization_id = $1 AND id = $2 \
                 RETURNING agent_id",
                &[&grant.org_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "deployment" })?;
        let agent_id: Uuid = row.get("agent_id");
        settle_agent(&tx, &agent_id).await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(grant.org_id(), "deployment.delete")
                .target("deployment", id)
                .details(serde_json::json!({"agent_id": agent_id})),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces the key (the old hash no longer matches anything). An
    /// expired key's expiry is cleared.
    pub async fn deployment_rekey(
        &self,
        grant: &Grant<on::Deployment, perm::AgentWrite>,
        key_hash: &[u8],
        key_prefix: &str,
    ) -> Result<DeploymentRow, Error> {
        let id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE agent_deployments SET key_hash = $3, key_prefix = $4, \
                     key_created_at = now(), updated_at = now(), \
                     key_expires_at = CASE WHEN key_expires_at <= now() THEN NULL \
                                           ELSE key_expires_at END \
                     WHERE organization_id = $1 AND id = $2 RETURNING {COLUMNS}"
                ),
                &[&grant.org_id(), &id, &key_hash, &key_prefix],
            )
            .await?
            .ok_or(Error::NotFound { what: "deployment" })?;
        let event =
            Event::org(grant.org_id(), "deployment.key_regenerate").target("deployment", id);
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(DeploymentRow::from_row(&row))
    }

    /// The active, unexpired deployment whose key hashes to `key_hash`.
    pub async fn deployment_by_key(&self, key_hash: &[u8]) -> Result<Option<KeyAccess>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM agent_deployments WHERE key_hash = $1 \
                     AND status = $2 \
                     AND (key_expires_at IS NULL OR key_expires_at > now())"
                ),
                &[&key_hash, &DeploymentStatus::Active],
            )
            .await?;
        Ok(row.map(|r| KeyAccess {
            deployment: DeploymentRow::from_row(&r),
        }))
    }

    /// Records an accepted request (`last_used_at`, request count) and
    /// makes a `deployed` agent `active` (the spec's "start receiving
    /// requests"), in one statement: [`Datastore::deployment_finish`]
    /// without tokens.
    pub async fn deployment_record_use(&self, access: &DeploymentAccess) -> Result<(), Error> {
        self.deployment_finish(access, 0, 0).await
    }

    /// Counts one request in the deployment's current one-minute window
    /// (shared by every server instance) and returns the count with the
    /// previous minute's, in one statement.
    pub async fn deployment_rate_hit(
        &self,
        access: &DeploymentAccess,
    ) -> Result<WindowCount, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_one(RATE_HIT_SQL, &[&access.deployment_id()])
            .await?;
        Ok(window_count(&row))
    }

    /// A chat completion through the key: its hit in the rate window
    /// (see [`Datastore::deployment_rate_hit`]), the key's agent and the
    /// agent's tools, three statements sent together (one round trip
    /// instead of three; the hit is counted whatever the reads find, as
    /// when they followed it).
    pub async fn deployment_admit(
        &self,
        access: &DeploymentAccess,
    ) -> Result<(WindowCount, AgentRow, Vec<AgentToolRow>), Error> {
        let (org_id, agent_id) = (access.org_id(), access.agent_id());
        let conn = self.conn().await?;
        let [hit, agent, tools] = conn
            .pipeline([
                (RATE_HIT_SQL, &[&access.deployment_id()]),
                (super::agents::AGENT_GET_SQL.as_str(), &[&org_id, &agent_id]),
                (super::agents::AGENT_TOOLS_SQL, &[&org_id, &agent_id]),
            ])
            .await?;
        let hit = hit
            .first()
            .map(window_count)
            .ok_or_else(|| Error::internal("the rate window returned no row"))?;
        let agent = agent
            .first()
            .map(AgentRow::from_row)
            .ok_or(Error::NotFound { what: "agent" })?;
        let tools = tools.iter().map(super::agents::agent_tool_row).collect();
        Ok((hit, agent, tools))
    }

    /// Adds a request's tokens to the deployment's usage.
    pub async fn deployment_add_usage(
        &self,
        access: &DeploymentAccess,
        input_tokens: i64,
        output_tokens: i64,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE agent_deployments SET input_tokens = input_tokens + $2, \
             output_tokens = output_tokens + $3 WHERE id = $1 AND organization_id = $4",
            &[
                &access.deployment_id(),
                &input_tokens,
                &output_tokens,
                &access.org_id(),
            ],
        )
        .await?;
        Ok(())
    }

    /// Records an answered request and the tokens it used (what
    /// [`Datastore::deployment_record_use`] and
    /// [`Datastore::deployment_add_usage`] do, in one statement: a chat
    /// completion not streamed).
    pub async fn deployment_finish(
        &self,
        access: &DeploymentAccess,
        input_tokens: i64,
        output_tokens: i64,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "WITH used AS (UPDATE agent_deployments SET last_used_at = now(), \
               request_count = request_count + 1, input_tokens = input_tokens + $2, \
               output_tokens = output_tokens + $3 \
               WHERE id = $1 AND organization_id = $4 RETURNING agent_id) \
             UPDATE agents SET status = $6, updated_at = now() \
             WHERE id = (SELECT agent_id FROM used) AND status = $5",
            &[
                &access.deployment_id(),
                &input_tokens,
                &output_tokens,
                &access.org_id(),
                &AgentStatus::Deployed,
                &AgentStatus::Active,
            ],
        )
        .await?;
        Ok(())
    }

    /// Drops rate windows older than ten minutes.
    pub async fn deployment_rate_windows_expire(&self) -> Result<u64, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .execute(
                "DELETE FROM deployment_rate_windows \
                 WHERE window_start < now() - interval '10 minutes'",
                &[],
            )
            .await?)
    }
}
