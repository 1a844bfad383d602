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

/// What a request with a deployment key reads in the round trip that
/// authenticates it ([`Datastore::deployment_admit_by_key`]).
pub struct KeyAdmission {
    /// The key's deployment.
    pub deployment: DeploymentRow,
    /// The request's hit in the deployment's rate window; `None` when it
    /// was not counted (the request's origin is not one the deployment
    /// allows, or the key was revoked between the two statements).
    pub hit: Option<WindowCount>,
    /// The deployment's agent and its tools (a chat completion).
    pub agent: Option<(AgentRow, Vec<AgentToolRow>)>,
    /// The agent's status as read with the key (`deployed` until its
    /// first admitted request makes it `active`).
    pub agent_status: Option<AgentStatus>,
}

/// The active, unexpired deployment whose key hashes to `$1` (`$2`:
/// `active`): the condition of every statement keyed by a deployment key.
macro_rules! keyed {
    () => {
        "key_hash = $1 AND status = $2 AND (key_expires_at IS NULL OR key_expires_at > now())"
    };
}

/// The key's deployment, and its agent's status (`agent_status`).
static KEY_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        concat!(
            "SELECT {}, (SELECT a.status FROM agents a WHERE a.id = d.agent_id \
               AND a.organization_id = d.organization_id) AS agent_status \
             FROM agent_deployments d WHERE ",
            keyed!()
        ),
        COLUMNS
    )
});

/// Counts one request in the key's deployment's current one-minute window
/// (shared by every server instance) and returns the count with the
/// previous minute's; counted only when the request's origin (`$3`,
/// `NULL` without one) is one the deployment allows (as
/// `authenticate_key` checks it).
const RATE_HIT_BY_KEY_SQL: &str = concat!(
    "WITH d AS (SELECT id FROM agent_deployments WHERE ",
    keyed!(),
    " AND ($3::text IS NULL OR $3 = ANY(allowed_origins))), \
     hit AS ( \
        INSERT INTO deployment_rate_windows AS w (deployment_id, window_start, count) \
        SELECT id, date_trunc('minute', now()), 1 FROM d \
        ON CONFLICT (deployment_id, window_start) DO UPDATE SET count = w.count + 1 \
        RETURNING deployment_id, count, window_start) \
    SELECT hit.count, coalesce(p.count, 0) AS previous, \
           extract(epoch FROM now() - hit.window_start)::float8 AS elapsed_secs \
    FROM hit LEFT JOIN deployment_rate_windows p \
      ON p.deployment_id = hit.deployment_id \
     AND p.window_start = hit.window_start - interval '1 minute'"
);

/// The key's deployment's organization and agent, as a row value (for the
/// agent reads keyed by the key).
const KEY_AGENT: &str = concat!(
    "(SELECT organization_id, agent_id FROM agent_deployments WHERE ",
    keyed!(),
    ")"
);

/// The agent of the deployment whose key hashes to `$1` (`$2`: the
/// `active` status).
static AGENT_BY_KEY_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} WHERE (a.organization_id, a.id) = {KEY_AGENT}",
        super::agents::AGENT_SELECT
    )
});

/// The tools of [`AGENT_BY_KEY_SQL`]'s agent.
static AGENT_TOOLS_BY_KEY_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!(super::agents::agent_tools_sql!("{}"), KEY_AGENT));

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

/// A row of [`RATE_HIT_BY_KEY_SQL`].
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

    /// A request with a deployment key, in one round trip (issue #37):
    /// the active, unexpired deployment whose key hashes to `key_hash`,
    /// the request's hit in its rate window (counted only for such a key
    /// and an `origin` it allows) and, `with_agent`, its agent and the agent's tools.
    /// Every statement is keyed by the key's hash, so none reads or counts
    /// anything of another deployment; `None` for an unknown, revoked or
    /// expired key.
    pub async fn deployment_admit_by_key(
        &self,
        key_hash: &[u8],
        origin: Option<&str>,
        with_agent: bool,
    ) -> Result<Option<KeyAdmission>, Error> {
        let active = DeploymentStatus::Active;
        let conn = self.conn().await?;
        let (key, hit, agent) = if with_agent {
            let [key, hit, agent, tools] = conn
                .pipeline([
                    (KEY_SQL.as_str(), &[&key_hash, &active]),
                    (RATE_HIT_BY_KEY_SQL, &[&key_hash, &active, &origin]),
                    (AGENT_BY_KEY_SQL.as_str(), &[&key_hash, &active]),
                    (AGENT_TOOLS_BY_KEY_SQL.as_str(), &[&key_hash, &active]),
                ])
                .await?;
            let agent = agent.first().map(AgentRow::from_row);
            let tools = tools.iter().map(super::agents::agent_tool_row).collect();
            (key, hit, Some(agent.map(|a| (a, tools))))
        } else {
            let [key, hit] = conn
                .pipeline([
                    (KEY_SQL.as_str(), &[&key_hash, &active]),
                    (RATE_HIT_BY_KEY_SQL, &[&key_hash, &active, &origin]),
                ])
                .await?;
            (key, hit, None)
        };
        let Some(key) = key.first() else {
            return Ok(None);
        };
        let deployment = DeploymentRow::from_row(key);
        let agent_status = key.get("agent_status");
        let agent = match agent {
            // The agent of an active deployment is never deleted; read in
            // its own statement, it may be gone if the key was revoked
            // since (the hit tells).
            Some(None) => return Err(Error::NotFound { what: "agent" }),
            Some(Some(found)) => Some(found),
            None => None,
        };
        Ok(Some(KeyAdmission {
            deployment,
            hit: hit.first().map(window_count),
            agent,
            agent_status,
        }))
    }

    /// Makes a `deployed` agent `active` (the spec's "start receiving
    /// requests"), with its first admitted request (nothing if it is
    /// already). The request and its tokens are counted apart, by the
    /// usage writer ([`crate::usage::UsageRecorder::count_deployment_use`]).
    pub async fn deployment_activate(&self, access: &DeploymentAccess) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE agents SET status = $4, updated_at = now() \
             WHERE id = $1 AND organization_id = $2 AND status = $3",
            &[
                &access.agent_id(),
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
