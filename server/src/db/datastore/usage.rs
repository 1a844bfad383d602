//! Usage records, budgets and their counters (issue #36; see `crate::usage`
//! for what is recorded and `app::usage` for the rules).

use super::{Datastore, audit};
use crate::audit::Event;
use crate::authz::{Admin, Grant, on, perm};
use crate::error::Error;
use crate::usage::{Batch, Caller, Metric, Reservation, ThresholdReached};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use uuid::Uuid;

/// A budget as stored, with its current period's counter.
#[derive(Clone, Debug)]
pub struct BudgetRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub scope: String,
    pub subject_id: Option<Uuid>,
    pub metric: String,
    pub period: String,
    pub limit: i64,
    pub threshold_percent: Option<i32>,
    pub period_start: DateTime<Utc>,
    pub reset_at: DateTime<Utc>,
    pub spent: i64,
    pub reserved: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The columns of [`BudgetRow`], from `budgets b` and the current
/// period's `budget_counters k` (left joined).
const BUDGET_COLUMNS: &str = "b.id, b.organization_id, b.scope, b.subject_id, b.metric, b.period, \
     b.limit_value, b.threshold_percent, budget_period_start(b.period) AS period_start, \
     budget_period_start(b.period) + CASE b.period WHEN 'day' THEN interval '1 day' \
         ELSE interval '1 month' END AS reset_at, \
     coalesce(k.spent, 0) AS spent, coalesce(k.reserved, 0) AS reserved, \
     b.created_at, b.updated_at";

const BUDGET_FROM: &str = "FROM budgets b LEFT JOIN budget_counters k \
     ON k.budget_id = b.id AND k.period_start = budget_period_start(b.period)";

impl BudgetRow {
    fn from_row(row: &tokio_postgres::Row) -> BudgetRow {
        BudgetRow {
            id: row.get("id"),
            org_id: row.get("organization_id"),
            scope: row.get("scope"),
            subject_id: row.get("subject_id"),
            metric: row.get("metric"),
            period: row.get("period"),
            limit: row.get("limit_value"),
            threshold_percent: row.get("threshold_percent"),
            period_start: row.get("period_start"),
            reset_at: row.get("reset_at"),
            spent: row.get("spent"),
            reserved: row.get("reserved"),
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
        }
    }
}

/// A new budget.
pub struct NewBudget {
    pub scope: &'static str,
    pub subject_id: Option<Uuid>,
    pub metric: &'static str,
    pub period: &'static str,
    pub limit: i64,
    pub threshold_percent: Option<i32>,
}

/// Why a call was refused: the budget that is spent.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub budget_id: Uuid,
    pub scope: String,
    pub metric: String,
    pub limit: i64,
    pub reset_at: DateTime<Utc>,
}

/// What the admission of a call decided.
pub enum Admission {
    Admitted(Vec<Reservation>),
    Refused(Refusal),
}

/// One group of a usage report, as summed.
#[derive(Clone, Debug)]
pub struct UsageSum {
    pub key: Option<String>,
    pub label: Option<String>,
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micros: i64,
    pub estimated_calls: i64,
    pub unfinished_calls: i64,
}

/// The key and label expressions of each grouping (fixed text, never
/// input), and the join that names the label.
fn grouping(group_by: &str) -> (&'static str, &'static str, &'static str) {
    match group_by {
        "day" => (
            "to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
            "NULL::text",
            "",
        ),
        "user" => (
            "u.user_id::text",
            "max(x.email)",
            "LEFT JOIN users x ON x.id = u.user_id",
        ),
        "model" => ("u.model_name", "NULL::text", ""),
        "deployment" => (
            "u.deployment_id::text",
            "max(x.name)",
            "LEFT JOIN agent_deployments x ON x.id = u.deployment_id",
        ),
        "token" => (
            "u.token_id::text",
            "max(x.name)",
            "LEFT JOIN personal_access_tokens x ON x.id = u.token_id",
        ),
        _ => ("u.kind", "NULL::text", ""),
    }
}

impl Datastore {
    /// Writes a batch of usage records in one transaction: the rows, each
    /// budget counter's reservations replaced by what the calls used
    /// (counters locked in key order), and what the batch's requests add
    /// to their deployments' counters (rows locked in key order); returns
    /// the budgets whose threshold the batch crossed (each once per
    /// period: a conditional update).
    pub async fn usage_write(&self, batch: &Batch) -> Result<Vec<ThresholdReached>, Error> {
        let records = &batch.records;
        let mut orgs = Vec::with_capacity(records.len());
        let mut users = Vec::with_capacity(records.len());
        let mut tokens = Vec::with_capacity(records.len());
        let mut deployments = Vec::with_capacity(records.len());
        let mut kinds = Vec::with_capacity(records.len());
        let mut model_ids = Vec::with_capacity(records.len());
        let mut model_names = Vec::with_capacity(records.len());
        let mut providers = Vec::with_capacity(records.len());
        let mut inputs = Vec::with_capacity(records.len());
        let mut outputs = Vec::with_capacity(records.len());
        let mut sources = Vec::with_capacity(records.len());
        let mut costs = Vec::with_capacity(records.len());
        let mut latencies = Vec::with_capacity(records.len());
        let mut outcomes = Vec::with_capacity(records.len());
        let mut ats = Vec::with_capacity(records.len());
        // Per counter: (used, released, calls).
        let mut settle: BTreeMap<(Uuid, DateTime<Utc>), (i64, i64, i32)> = BTreeMap::new();
        for r in records {
            for res in &r.reservations {
                let e = settle
                    .entry((res.budget_id, res.period_start))
                    .or_insert((0, 0, 0));
                e.0 = e.0.saturating_add(r.used(res.metric));
                e.1 = e.1.saturating_add(res.amount);
                // A charge without a reservation (`Metered::charges`) was
                // never counted as running.
                e.2 += i32::from(res.amount > 0);
            }
            if !r.called {
                continue;
            }
            let Caller {
                org_id,
                user_id,
                token_id,
                deployment_id,
            } = r.caller;
            orgs.push(org_id);
            users.push(user_id);
            tokens.push(token_id);
            deployments.push(deployment_id);
            kinds.push(r.kind);
            model_ids.push(r.model_id);
            model_names.push(r.model_name.as_str());
            providers.push(r.provider.as_str());
            inputs.push(r.input_tokens.min(i64::MAX as u64) as i64);
            outputs.push(r.output_tokens.min(i64::MAX as u64) as i64);
            sources.push(if r.reported { "reported" } else { "estimated" });
            costs.push(r.cost_micros);
            latencies.push(r.latency_ms);
            outcomes.push(r.outcome.as_str());
            ats.push(r.at);
        }
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !batch.deployments.is_empty() {
            let ids: Vec<Uuid> = batch.deployments.keys().copied().collect();
            let orgs: Vec<Uuid> = batch.deployments.values().map(|d| d.org_id).collect();
            let requests: Vec<i64> = batch.deployments.values().map(|d| d.requests).collect();
            let inputs: Vec<i64> = batch.deployments.values().map(|d| d.input_tokens).collect();
            let outputs: Vec<i64> = batch
                .deployments
                .values()
                .map(|d| d.output_tokens)
                .collect();
            let ats: Vec<DateTime<Utc>> = batch.deployments.values().map(|d| d.at).collect();
            // Locked in key order (two instances' batches never wait on
            // each other in a cycle), then added to; a deployment deleted
            // since is skipped.
            tx.execute(
                "WITH v AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int8[], \
                     $4::int8[], $5::int8[], $6::timestamptz[]) \
                     AS v(id, org, requests, input, output, at)), \
                 locked AS (SELECT d.id FROM agent_deployments d \
                     JOIN v ON v.id = d.id AND v.org = d.organization_id \
                     ORDER BY d.id FOR UPDATE OF d) \
                 UPDATE agent_deployments d SET \
                     request_count = d.request_count + v.requests, \
                     input_tokens = d.input_tokens + v.input, \
                     output_tokens = d.output_tokens + v.output, \
                     last_used_at = CASE WHEN v.requests > 0 \
                         THEN greatest(d.last_used_at, v.at) ELSE d.last_used_at END \
                 FROM v JOIN locked l ON l.id = v.id \
                 WHERE d.id = v.id",
                &[&ids, &orgs, &requests, &inputs, &outputs, &ats],
            )
            .await?;
        }
        if !orgs.is_empty() {
            tx.execute(
                "INSERT INTO usage_records (organization_id, user_id, token_id, deployment_id, kind, \
                     model_id, model_name, provider, input_tokens, output_tokens, token_source, \
                     cost_micros, latency_ms, outcome, created_at) \
                 SELECT v.org, x.id, v.token, v.deployment, v.kind, v.model_id, v.model_name, \
                     v.provider, v.input, v.output, v.source, v.cost, v.latency, v.outcome, v.at \
                 FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], \
                     $6::uuid[], $7::text[], $8::text[], $9::int8[], $10::int8[], $11::text[], \
                     $12::int8[], $13::int4[], $14::text[], $15::timestamptz[]) \
                     AS v(org, user_id, token, deployment, kind, model_id, model_name, provider, \
                          input, output, source, cost, latency, outcome, at) \
                 JOIN organizations o ON o.id = v.org \
                 LEFT JOIN users x ON x.id = v.user_id",
                &[
                    &orgs,
                    &users,
                    &tokens,
                    &deployments,
                    &kinds,
                    &model_ids,
                    &model_names,
                    &providers,
                    &inputs,
                    &outputs,
                    &sources,
                    &costs,
                    &latencies,
                    &outcomes,
                    &ats,
                ],
            )
            .await?;
        }
        let mut crossed = Vec::new();
        if !settle.is_empty() {
            let ids: Vec<Uuid> = settle.keys().map(|k| k.0).collect();
            let starts: Vec<DateTime<Utc>> = settle.keys().map(|k| k.1).collect();
            let used: Vec<i64> = settle.values().map(|v| v.0).collect();
            let released: Vec<i64> = settle.values().map(|v| v.1).collect();
            let calls: Vec<i32> = settle.values().map(|v| v.2).collect();
            // Locked in key order (as admissions lock them), then updated.
            tx.execute(
                "WITH v AS (SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::int8[], \
                     $4::int8[], $5::int4[]) AS v(budget_id, period_start, used, released, calls)), \
                 locked AS (SELECT k.budget_id, k.period_start FROM budget_counters k \
                     JOIN v ON v.budget_id = k.budget_id AND v.period_start = k.period_start \
                     ORDER BY k.budget_id, k.period_start FOR UPDATE OF k) \
                 UPDATE budget_counters k SET spent = k.spent + v.used, \
                     reserved = greatest(k.reserved - v.released, 0), \
                     running = greatest(k.running - v.calls, 0) \
                 FROM v JOIN locked l ON l.budget_id = v.budget_id \
                     AND l.period_start = v.period_start \
                 WHERE k.budget_id = v.budget_id AND k.period_start = v.period_start",
                &[&ids, &starts, &used, &released, &calls],
            )
            .await?;
            let rows = tx
                .query(
                    "UPDATE budget_counters k SET notified_at = now() FROM budgets b \
                     WHERE b.id = k.budget_id \
                       AND (k.budget_id, k.period_start) IN \
                           (SELECT * FROM unnest($1::uuid[], $2::timestamptz[])) \
                       AND k.notified_at IS NULL AND b.threshold_percent IS NOT NULL \
                       AND k.spent::numeric * 100 >= b.limit_value::numeric * b.threshold_percent \
                     RETURNING b.organization_id, b.id, b.scope, b.subject_id, b.metric, \
                       b.period, b.limit_value, b.threshold_percent, k.spent, k.period_start, \
                       k.period_start + CASE b.period WHEN 'day' THEN interval '1 day' \
                           ELSE interval '1 month' END AS reset_at",
                    &[&ids, &starts],
                )
                .await?;
            crossed = rows
                .iter()
                .map(|r| ThresholdReached {
                    org_id: r.get(0),
                    budget_id: r.get(1),
                    scope: r.get(2),
                    subject_id: r.get(3),
                    metric: r.get(4),
                    period: r.get(5),
                    limit: r.get(6),
                    threshold_percent: r.get(7),
                    spent: r.get(8),
                    period_start: r.get(9),
                    reset_at: r.get(10),
                })
                .collect::<Vec<ThresholdReached>>();
            // Webhooks subscribed to `budget.threshold_reached` hear of it
            // in the same transaction (once per budget and period, as the
            // conditional update above).
            for t in &crossed {
                let data = serde_json::json!({
                    "budget_id": t.budget_id,
                    "scope": t.scope,
                    "subject_id": t.subject_id,
                    "metric": t.metric,
                    "period": t.period,
                    "period_start": t.period_start,
                    "reset_at": t.reset_at,
                    "limit": t.limit,
                    "spent": t.spent,
                    "threshold_percent": t.threshold_percent,
                });
                let key = format!(
                    "budget:{}:{}:{}",
                    t.budget_id,
                    t.period_start.timestamp(),
                    t.threshold_percent
                );
                super::webhook_outbox::enqueue(
                    &tx,
                    t.org_id,
                    "budget.threshold_reached",
                    &data,
                    Some(&key),
                )
                .await?;
            }
        }
        tx.commit().await?;
        Ok(crossed)
    }

    /// Whether the organization has any budget (on the shared pipelined
    /// connections: a short statement of the answer path).
    pub async fn budgets_exist(&self, org_id: Uuid) -> Result<bool, Error> {
        let conn = self.quick().await?;
        let row = conn
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM budgets WHERE organization_id = $1)",
                &[&org_id],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Admits a call against every budget that applies to `caller`, or
    /// refuses it (one statement: `budget_admit`).
    pub async fn budget_admit(
        &self,
        caller: &Caller,
        tokens: i64,
        cost_micros: i64,
    ) -> Result<Admission, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT * FROM budget_admit($1, $2, $3, $4, $5, $6)",
                &[
                    &caller.org_id,
                    &caller.user_id,
                    &caller.token_id,
                    &caller.deployment_id,
                    &tokens,
                    &cost_micros,
                ],
            )
            .await?;
        if let Some(r) = rows.iter().find(|r| r.get::<_, bool>("refused")) {
            return Ok(Admission::Refused(Refusal {
                budget_id: r.get("budget_id"),
                scope: r.get("scope"),
                metric: r.get("metric"),
                limit: r.get("limit_value"),
                reset_at: r.get("reset_at"),
            }));
        }
        Ok(Admission::Admitted(
            rows.iter()
                .map(|r| Reservation {
                    budget_id: r.get("budget_id"),
                    period_start: r.get("period_start"),
                    metric: Metric::parse(r.get::<_, &str>("metric")),
                    amount: r.get("amount"),
                })
                .collect(),
        ))
    }

    /// The organization's usage between `from` and `to`, grouped.
    pub async fn usage_report(
        &self,
        grant: &Grant<on::Org, Admin<perm::UsageRead>>,
        group_by: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<UsageSum>, Error> {
        let (key, label, join) = grouping(group_by);
        let sql = format!(
            "SELECT {key} AS key, {label} AS label, count(*) AS calls, \
                 coalesce(sum(u.input_tokens), 0)::int8 AS input_tokens, \
                 coalesce(sum(u.output_tokens), 0)::int8 AS output_tokens, \
                 coalesce(sum(u.cost_micros), 0)::int8 AS cost_micros, \
                 count(*) FILTER (WHERE u.token_source = 'estimated') AS estimated_calls, \
                 count(*) FILTER (WHERE u.outcome <> 'complete') AS unfinished_calls \
             FROM usage_records u {join} \
             WHERE u.organization_id = $1 AND u.created_at >= $2 AND u.created_at < $3 \
             GROUP BY 1 ORDER BY 1 NULLS LAST"
        );
        let conn = self.conn().await?;
        let rows = conn.query(&sql, &[&grant.org_id(), &from, &to]).await?;
        Ok(rows
            .iter()
            .map(|r| UsageSum {
                key: r.get("key"),
                label: r.get("label"),
                calls: r.get("calls"),
                input_tokens: r.get("input_tokens"),
                output_tokens: r.get("output_tokens"),
                cost_micros: r.get("cost_micros"),
                estimated_calls: r.get("estimated_calls"),
                unfinished_calls: r.get("unfinished_calls"),
            })
            .collect())
    }

    /// The organization's budgets with their current periods.
    pub async fn budgets_list(
        &self,
        grant: &Grant<on::Org, Admin<perm::UsageRead>>,
    ) -> Result<Vec<BudgetRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {BUDGET_COLUMNS} {BUDGET_FROM} WHERE b.organization_id = $1 \
                     ORDER BY b.created_at, b.id"
                ),
                &[&grant.org_id()],
            )
            .await?;
        Ok(rows.iter().map(BudgetRow::from_row).collect())
    }

    async fn budget_get(&self, org_id: Uuid, id: Uuid) -> Result<BudgetRow, Error> {
        let conn = self.conn().await?;
        conn.query_opt(
            &format!(
                "SELECT {BUDGET_COLUMNS} {BUDGET_FROM} WHERE b.organization_id = $1 AND b.id = $2"
            ),
            &[&org_id, &id],
        )
        .await?
        .map(|r| BudgetRow::from_row(&r))
        .ok_or(Error::NotFound { what: "budget" })
    }

    /// Whether `subject` exists for a budget of `scope` in the
    /// organization: a member, a member's token, a deployment.
    pub async fn budget_subject_exists(
        &self,
        grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
        scope: &str,
        subject: Uuid,
    ) -> Result<bool, Error> {
        let sql = match scope {
            "user" => {
                "SELECT EXISTS (SELECT 1 FROM memberships \
                 WHERE organization_id = $1 AND user_id = $2 AND status <> 'deleted')"
            }
            "token" => {
                "SELECT EXISTS (SELECT 1 FROM personal_access_tokens t JOIN memberships m \
                 ON m.user_id = t.user_id AND m.organization_id = $1 WHERE t.id = $2)"
            }
            "deployment" => {
                "SELECT EXISTS (SELECT 1 FROM agent_deployments \
                 WHERE organization_id = $1 AND id = $2)"
            }
            _ => return Ok(false),
        };
        let conn = self.conn().await?;
        let row = conn.query_one(sql, &[&grant.org_id(), &subject]).await?;
        Ok(row.get(0))
    }

    pub async fn budget_create(
        &self,
        grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
        new: &NewBudget,
    ) -> Result<BudgetRow, Error> {
        let id = Uuid::new_v4();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let inserted = tx
            .execute(
                "INSERT INTO budgets (id, organization_id, scope, subject_id, metric, period, \
                     limit_value, threshold_percent) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &id,
                    &grant.org_id(),
                    &new.scope,
                    &new.subject_id,
                    &new.metric,
                    &new.period,
                    &new.limit,
                    &new.threshold_percent,
                ],
            )
            .await;
        match inserted {
            Ok(_) => {}
            Err(e) if super::is_unique_violation(&e, "budgets_unique") => {
                return Err(Error::conflict(
                    "budget_exists",
                    "a budget with this scope, subject, metric and period exists",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        let event = Event::org(grant.org_id(), "budget.create")
            .target("budget", id)
            .details(serde_json::json!({
                "scope": new.scope,
                "subject_id": new.subject_id,
                "metric": new.metric,
                "period": new.period,
                "limit": new.limit,
                "threshold_percent": new.threshold_percent,
            }));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        drop(conn);
        self.budget_get(grant.org_id(), id).await
    }

    pub async fn budget_update(
        &self,
        grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
        id: Uuid,
        limit: i64,
        threshold_percent: Option<i32>,
    ) -> Result<BudgetRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "UPDATE budgets SET limit_value = $3, threshold_percent = $4, updated_at = now() \
                 WHERE organization_id = $1 AND id = $2",
                &[&grant.org_id(), &id, &limit, &threshold_percent],
            )
            .await?;
        if n == 0 {
            return Err(Error::NotFound { what: "budget" });
        }
        let event = Event::org(grant.org_id(), "budget.update")
            .target("budget", id)
            .details(serde_json::json!({"limit": limit, "threshold_percent": threshold_percent}));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        drop(conn);
        self.budget_get(grant.org_id(), id).await
    }

    pub async fn budget_delete(
        &self,
        grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
        id: Uuid,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM budgets WHERE organization_id = $1 AND id = $2",
                &[&grant.org_id(), &id],
            )
            .await?;
        if n > 0 {
            let event = Event::org(grant.org_id(), "budget.delete").target("budget", id);
            audit::record(&tx, grant.origin(), &event).await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    /// The e-mail addresses of the organization's active admins and owners
    /// (roles of the admin level), for budget notices.
    pub async fn org_admin_emails(&self, org_id: Uuid) -> Result<Vec<String>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT u.email FROM memberships m JOIN roles r ON r.id = m.role_id \
                 JOIN users u ON u.id = m.user_id \
                 WHERE m.organization_id = $1 AND m.status = 'active' \
                   AND r.hierarchy_level >= $2 ORDER BY u.email",
                &[&org_id, &crate::authz::ADMIN_LEVEL],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
