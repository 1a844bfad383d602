//! Usage, cost and budgets (issue #36): admitting a model call against the
//! budgets that apply to it, the organization's reports, budget
//! management, and the notice of a crossed threshold.
//!
//! **Admission** ([`admit`]): before a model call starts, every budget of
//! the organization that applies to the caller (the organization's, the
//! member's, the personal access token's, the deployment key's) is checked
//! and reserved in one statement (`budget_admit` in V39): admitted while
//! `spent + reserved < limit` on each, and then each holds the call's
//! estimate (input characters / 4 plus `max_tokens` or
//! `usage.reserve_output_tokens`; priced for a cost budget). At the call's
//! end the usage recorder replaces the reservation by what it used, in the
//! batch that writes its record. So across instances a budget is exceeded
//! by no more than what the calls running when it was reached used beyond
//! their estimates. An organization without budgets costs no round trip:
//! [`crate::usage::BudgetCache`] remembers that for
//! `usage.budget_cache_ms`.
//!
//! A refused call is `429 budget_exceeded` with `Retry-After` (until the
//! period resets, UTC) and the reset time in the message.
//!
//! **Threshold**: the recorder reports a budget whose threshold a batch
//! crossed, once per period (a conditional update of its counter);
//! [`budget_threshold_reached`] e-mails the organization's admins. The
//! `budget.threshold_reached` webhook event is queued by the write itself
//! (`Datastore::usage_write`), in the transaction that marks the counter.

use crate::authz::{Admin, Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::Datastore;
use crate::db::datastore::usage::{Admission, BudgetRow, NewBudget, Refusal, UsageSum};
use crate::error::Error;
use crate::providers::ModelEntry;
use crate::usage::{Caller, Metered, ThresholdReached, estimate_tokens};
use chrono::{DateTime, Duration as Days, Utc};
use std::time::Duration;
use uuid::Uuid;
use workspace_api::usage as api;

/// The caller of a member's request.
pub fn member(access: &OrgAccess) -> Caller {
    Caller {
        org_id: access.org_id(),
        user_id: Some(access.user_id()),
        token_id: access.token_id(),
        deployment_id: None,
    }
}

/// The caller of a deployment key's request.
pub fn deployment(access: &crate::authz::DeploymentAccess) -> Caller {
    Caller {
        org_id: access.org_id(),
        user_id: None,
        token_id: None,
        deployment_id: Some(access.deployment_id()),
    }
}

/// Admits a model call of `kind` by `caller` to `model` with about
/// `input_chars` characters of input and at most `max_tokens` out (see the
/// module's doc), and returns its metering for the run (`RunSpec::usage`).
pub async fn admit(
    cx: &ServerContext,
    caller: Caller,
    kind: &'static str,
    model: &ModelEntry,
    input_chars: usize,
    max_tokens: Option<u32>,
) -> Result<Metered, Error> {
    let config = cx.usage.config();
    let ttl = Duration::from_millis(config.budget_cache_ms);
    let has_budgets = config.enabled
        && match cx.budget_cache.get(caller.org_id, ttl) {
            Some(has) => has,
            None => {
                let has = cx.datastore.budgets_exist(caller.org_id).await?;
                cx.budget_cache.set(caller.org_id, has);
                has
            }
        };
    let mut reservations = Vec::new();
    if has_budgets {
        let input = estimate_tokens(input_chars);
        let output = u64::from(
            max_tokens
                .or(model.max_tokens)
                .unwrap_or(config.reserve_output_tokens),
        );
        let tokens = (input + output).min(i64::MAX as u64) as i64;
        let cost = config.cost_micros(&model.name, input, output);
        match cx.datastore.budget_admit(&caller, tokens, cost).await? {
            Admission::Admitted(r) => reservations = r,
            Admission::Refused(refusal) => return Err(budget_exceeded(&refusal)),
        }
    }
    Ok(Metered::new(
        cx.usage.clone(),
        caller,
        kind,
        model,
        reservations,
    ))
}

/// The characters of a run's input: its system prompt and history.
pub fn input_chars(spec: &crate::runtime::RunSpec) -> usize {
    spec.system_prompt.len() + spec.history.iter().map(|m| m.content.len()).sum::<usize>()
}

/// Admits the run `spec` (see [`admit`]) and attaches its metering.
pub async fn meter(
    cx: &ServerContext,
    caller: Caller,
    kind: &'static str,
    spec: &mut crate::runtime::RunSpec,
) -> Result<(), Error> {
    let metered = admit(
        cx,
        caller,
        kind,
        &spec.model,
        input_chars(spec),
        spec.max_tokens,
    )
    .await?;
    spec.usage = Some(Box::new(metered));
    Ok(())
}

/// `429 budget_exceeded`, with the seconds until the period resets.
pub fn budget_exceeded(refusal: &Refusal) -> Error {
    let retry_after_secs = (refusal.reset_at - Utc::now()).num_seconds().max(1) as u64;
    let what = if refusal.metric == "cost" {
        format!("{} micro-dollars", refusal.limit)
    } else {
        format!("{} tokens", refusal.limit)
    };
    Error::TooManyRequests {
        code: "budget_exceeded",
        message: format!(
            "the {} budget of {what} is spent; it resets at {}",
            refusal.scope,
            refusal
                .reset_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        retry_after_secs,
    }
}

/// A budget refusal as `403 budget_exceeded`, for the operations released
/// without a `429` answer (`agents/test`, `chat/prompt`,
/// `mcp_playground/chat`): a new status on a released operation breaks
/// strict clients, a new `error_code` of a declared status does not. Any
/// other error passes unchanged.
pub fn refused_as_forbidden(e: Error) -> Error {
    match e {
        Error::TooManyRequests {
            code: "budget_exceeded",
            message,
            ..
        } => Error::Forbidden {
            code: "budget_exceeded",
            message,
        },
        other => other,
    }
}

/// E-mails the organization's admins that a budget's threshold was
/// crossed (called once per budget and period by the usage recorder).
/// Webhook deliveries of the event are connected here too.
pub async fn budget_threshold_reached(
    datastore: &Datastore,
    mailer: &dyn crate::mailer::Mailer,
    event: &ThresholdReached,
    log: &slog::Logger,
) {
    let admins = match datastore.org_admin_emails(event.org_id).await {
        Ok(a) => a,
        Err(e) => {
            slog::warn!(log, "budget threshold: reading the admins failed"; "error" => %e);
            return;
        }
    };
    let subject = format!(
        "Budget threshold reached: {}% of a {} {} budget",
        event.threshold_percent, event.period, event.metric
    );
    let subject_line = match event.subject_id {
        Some(s) => format!("{} {s}", event.scope),
        None => "the organization".to_string(),
    };
    let body = format!(
        "A budget of your organization ({org}) reached its threshold.\n\n\
         Budget: {id}\nApplies to: {subject_line}\nMetric: {metric}\nPeriod: {period} \
         (from {start})\nLimit: {limit}\nSpent: {spent}\nThreshold: {pct}%\n\
         Resets at: {reset}\n",
        org = event.org_id,
        id = event.budget_id,
        metric = event.metric,
        period = event.period,
        start = event.period_start.to_rfc3339(),
        limit = event.limit,
        spent = event.spent,
        pct = event.threshold_percent,
        reset = event.reset_at.to_rfc3339(),
    );
    for to in admins {
        let email = crate::mailer::Email {
            to,
            subject: subject.clone(),
            body_text: body.clone(),
            kind: "budget_threshold",
        };
        if let Err(e) = mailer.send(&email).await {
            slog::warn!(log, "budget threshold: sending the notice failed"; "error" => %e);
        }
    }
    slog::info!(log, "budget threshold reached"; "org_id" => %event.org_id,
        "budget_id" => %event.budget_id, "spent" => event.spent, "limit" => event.limit);
}

// ---- reports ----

fn range(query: &api::UsageReportQuery) -> Result<(DateTime<Utc>, DateTime<Utc>), Error> {
    let to = query.to.unwrap_or_else(Utc::now);
    let from = query.from.unwrap_or(to - Days::days(30));
    if from > to {
        return Err(Error::invalid("invalid_range", "from must not be after to"));
    }
    Ok((from, to))
}

fn group_key(g: api::UsageGroupBy) -> &'static str {
    match g {
        api::UsageGroupBy::Day => "day",
        api::UsageGroupBy::User => "user",
        api::UsageGroupBy::Model => "model",
        api::UsageGroupBy::Deployment => "deployment",
        api::UsageGroupBy::Token => "token",
        api::UsageGroupBy::Kind => "kind",
    }
}

fn totals(s: &UsageSum) -> api::UsageTotals {
    api::UsageTotals {
        calls: s.calls,
        input_tokens: s.input_tokens,
        output_tokens: s.output_tokens,
        total_tokens: s.input_tokens.saturating_add(s.output_tokens),
        cost_micros: s.cost_micros,
        estimated_calls: s.estimated_calls,
        unfinished_calls: s.unfinished_calls,
    }
}

/// The organization's usage report.
pub async fn report(
    cx: &ServerContext,
    grant: &Grant<on::Org, Admin<perm::UsageRead>>,
    query: &api::UsageReportQuery,
) -> Result<api::UsageReport, Error> {
    let (from, to) = range(query)?;
    let sums = cx
        .datastore
        .usage_report(grant, group_key(query.group_by), from, to)
        .await?;
    let mut all = api::UsageTotals::default();
    let groups = sums
        .iter()
        .map(|s| {
            let t = totals(s);
            all.calls += t.calls;
            all.input_tokens += t.input_tokens;
            all.output_tokens += t.output_tokens;
            all.total_tokens += t.total_tokens;
            all.cost_micros += t.cost_micros;
            all.estimated_calls += t.estimated_calls;
            all.unfinished_calls += t.unfinished_calls;
            api::UsageGroup {
                key: s.key.clone(),
                label: s.label.clone(),
                totals: t,
            }
        })
        .collect();
    Ok(api::UsageReport {
        group_by: query.group_by,
        from,
        to,
        groups,
        totals: all,
    })
}

/// The report as CSV (RFC 4180, CRLF, cells neutralised against formula
/// injection), with a last `total` row.
pub fn report_csv(report: &api::UsageReport) -> Result<Vec<u8>, Error> {
    use crate::app::feedback::neutralise;
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    let header = [
        "key",
        "label",
        "calls",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cost_micros",
        "cost_usd",
        "estimated_calls",
        "unfinished_calls",
    ];
    writer.write_record(header).map_err(Error::internal)?;
    let row = |key: &str, label: &str, t: &api::UsageTotals| -> Vec<String> {
        vec![
            neutralise(key).into_owned(),
            neutralise(label).into_owned(),
            t.calls.to_string(),
            t.input_tokens.to_string(),
            t.output_tokens.to_string(),
            t.total_tokens.to_string(),
            t.cost_micros.to_string(),
            format!("{:.6}", t.cost_micros as f64 / 1_000_000.0),
            t.estimated_calls.to_string(),
            t.unfinished_calls.to_string(),
        ]
    };
    for g in &report.groups {
        writer
            .write_record(row(
                g.key.as_deref().unwrap_or(""),
                g.label.as_deref().unwrap_or(""),
                &g.totals,
            ))
            .map_err(Error::internal)?;
    }
    writer
        .write_record(row("total", "", &report.totals))
        .map_err(Error::internal)?;
    writer.into_inner().map_err(Error::internal)
}

// ---- budgets ----

fn budget(row: BudgetRow) -> api::Budget {
    api::Budget {
        id: row.id,
        org_id: row.org_id,
        scope: match row.scope.as_str() {
            "user" => api::BudgetScope::User,
            "token" => api::BudgetScope::Token,
            "deployment" => api::BudgetScope::Deployment,
            _ => api::BudgetScope::Organization,
        },
        subject_id: row.subject_id,
        metric: if row.metric == "cost" {
            api::BudgetMetric::Cost
        } else {
            api::BudgetMetric::Tokens
        },
        period: if row.period == "day" {
            api::BudgetPeriod::Day
        } else {
            api::BudgetPeriod::Month
        },
        limit: row.limit,
        threshold_percent: row.threshold_percent,
        period_start: row.period_start,
        reset_at: row.reset_at,
        spent: row.spent,
        reserved: row.reserved,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn check_limits(limit: i64, threshold: Option<i32>) -> Result<(), Error> {
    if limit < 1 {
        return Err(Error::invalid("invalid_budget", "limit must be at least 1"));
    }
    if threshold.is_some_and(|t| !(1..=100).contains(&t)) {
        return Err(Error::invalid(
            "invalid_budget",
            "threshold_percent must be between 1 and 100",
        ));
    }
    Ok(())
}

pub async fn budgets_list(
    cx: &ServerContext,
    grant: &Grant<on::Org, Admin<perm::UsageRead>>,
) -> Result<api::BudgetList, Error> {
    let rows = cx.datastore.budgets_list(grant).await?;
    Ok(api::BudgetList {
        items: rows.into_iter().map(budget).collect(),
    })
}

pub async fn budget_create(
    cx: &ServerContext,
    grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
    body: api::BudgetCreate,
) -> Result<api::Budget, Error> {
    check_limits(body.limit, body.threshold_percent)?;
    let scope = match body.scope {
        api::BudgetScope::Organization => "organization",
        api::BudgetScope::User => "user",
        api::BudgetScope::Token => "token",
        api::BudgetScope::Deployment => "deployment",
    };
    match (scope, body.subject_id) {
        ("organization", None) => {}
        ("organization", Some(_)) => {
            return Err(Error::invalid(
                "invalid_budget",
                "an organization budget takes no subject_id",
            ));
        }
        (_, None) => {
            return Err(Error::invalid(
                "invalid_budget",
                format!("a {scope} budget needs a subject_id"),
            ));
        }
        (_, Some(subject)) => {
            if !cx
                .datastore
                .budget_subject_exists(grant, scope, subject)
                .await?
            {
                return Err(Error::NotFound { what: scope });
            }
        }
    }
    let row = cx
        .datastore
        .budget_create(
            grant,
            &NewBudget {
                scope,
                subject_id: body.subject_id,
                metric: match body.metric {
                    api::BudgetMetric::Tokens => "tokens",
                    api::BudgetMetric::Cost => "cost",
                },
                period: match body.period {
                    api::BudgetPeriod::Day => "day",
                    api::BudgetPeriod::Month => "month",
                },
                limit: body.limit,
                threshold_percent: body.threshold_percent,
            },
        )
        .await?;
    cx.budget_cache.forget(grant.org_id());
    Ok(budget(row))
}

pub async fn budget_update(
    cx: &ServerContext,
    grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
    id: Uuid,
    body: api::BudgetUpdate,
) -> Result<api::Budget, Error> {
    check_limits(body.limit, body.threshold_percent)?;
    let row = cx
        .datastore
        .budget_update(grant, id, body.limit, body.threshold_percent)
        .await?;
    Ok(budget(row))
}

pub async fn budget_delete(
    cx: &ServerContext,
    grant: &Grant<on::Org, Admin<perm::UsageWrite>>,
    id: Uuid,
) -> Result<api::BudgetDeleted, Error> {
    if !cx.datastore.budget_delete(grant, id).await? {
        return Err(Error::NotFound { what: "budget" });
    }
    cx.budget_cache.forget(grant.org_id());
    Ok(api::BudgetDeleted { id, deleted: true })
}
