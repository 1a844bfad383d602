//! Types of usage, cost and budgets (issue #36): the organization's usage
//! report and CSV export (`/api/org/usage/...`) and its budgets
//! (`/api/org/budgets/...`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What the usage report groups by.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UsageGroupBy {
    /// The UTC day (`YYYY-MM-DD`).
    Day,
    /// The member (a deployment key's calls have no user).
    User,
    /// The model's name.
    Model,
    /// The deployment whose key made the call.
    Deployment,
    /// The personal access token the call was made with.
    Token,
    /// The kind of call (`chat`, `prompt`, `conversation`, `agent_test`,
    /// `deployment`, `playground`, `transcription`, `embedding`).
    Kind,
}

/// Query of `GET /api/org/usage/report` and `/export`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UsageReportQuery {
    /// The organization (its admins: level 80 and `usage:read`).
    pub org_id: Uuid,
    /// What each row of the report sums over.
    pub group_by: UsageGroupBy,
    /// Inclusive, RFC 3339; default 30 days before `to`.
    #[serde(default)]
    pub from: Option<DateTime<Utc>>,
    /// Exclusive, RFC 3339; default now.
    #[serde(default)]
    pub to: Option<DateTime<Utc>>,
}

/// Sums of a set of model calls.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct UsageTotals {
    /// Model calls.
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    /// Cost in micro-dollars (millionths of a US dollar), from the server's
    /// price table when the call was recorded.
    pub cost_micros: i64,
    /// Calls whose tokens were estimated (the provider reported none).
    pub estimated_calls: i64,
    /// Calls that did not complete (failed or cancelled).
    pub unfinished_calls: i64,
}

/// One group of the report.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct UsageGroup {
    /// The group's key: a day, a user, deployment or token id, a model
    /// name or a kind; `null` for calls without one (e.g. the calls of no
    /// personal access token when grouping by token).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub key: Option<String>,
    /// A readable name for the key when there is one: the user's e-mail,
    /// the deployment's or token's name.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub label: Option<String>,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// The organization's usage report.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct UsageReport {
    pub group_by: UsageGroupBy,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Ordered by key (`null` last).
    pub groups: Vec<UsageGroup>,
    pub totals: UsageTotals,
}

/// Who a budget applies to.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// Every call of the organization.
    Organization,
    /// The calls of one member (`subject_id`: the user).
    User,
    /// The calls made with one personal access token (`subject_id`).
    Token,
    /// The calls made with one deployment's key (`subject_id`).
    Deployment,
}

/// What a budget limits.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BudgetMetric {
    /// Input plus output tokens.
    Tokens,
    /// Cost in micro-dollars.
    Cost,
}

/// The period a budget's limit holds over (UTC).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    /// A UTC day.
    Day,
    /// A UTC calendar month.
    Month,
}

/// Body of `POST /api/org/budgets/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetCreate {
    /// Who the budget applies to.
    pub scope: BudgetScope,
    /// The user, token or deployment; absent for `organization`.
    #[serde(default)]
    pub subject_id: Option<Uuid>,
    /// What the budget limits: tokens or cost.
    pub metric: BudgetMetric,
    /// The period the limit holds over (UTC days or months).
    pub period: BudgetPeriod,
    /// Tokens, or micro-dollars; at least 1.
    #[schemars(range(min = 1))]
    pub limit: i64,
    /// Notify the organization's admins once per period when this
    /// percentage of the limit is spent (1 to 100); absent: never.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub threshold_percent: Option<i32>,
}

/// Body of `PUT /api/org/budgets/update`: the new limit and threshold.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetUpdate {
    /// The new limit: tokens, or micro-dollars; at least 1.
    #[schemars(range(min = 1))]
    pub limit: i64,
    /// The new threshold (1 to 100 % of the limit); absent: none.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub threshold_percent: Option<i32>,
}

/// Query of the operations on one budget.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct BudgetQuery {
    /// The organization (its admins: level 80 and `usage:write`).
    pub org_id: Uuid,
    /// The budget.
    pub budget_id: Uuid,
}

/// A budget and where its current period stands.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct Budget {
    pub id: Uuid,
    pub org_id: Uuid,
    /// Who the budget applies to.
    pub scope: BudgetScope,
    /// The user, token or deployment; `null` for `organization`.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub subject_id: Option<Uuid>,
    /// What the budget limits.
    pub metric: BudgetMetric,
    /// The period the limit holds over.
    pub period: BudgetPeriod,
    /// Tokens, or micro-dollars.
    pub limit: i64,
    /// The percentage of the limit that notifies; `null`: none.
    #[schemars(with = "crate::schema::Nullable<i32>")]
    pub threshold_percent: Option<i32>,
    /// The current period's start (UTC).
    pub period_start: DateTime<Utc>,
    /// When the current period ends and the budget resets.
    pub reset_at: DateTime<Utc>,
    /// What the current period's finished calls used.
    pub spent: i64,
    /// What the calls running now hold reserved.
    pub reserved: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The organization's budgets.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct BudgetList {
    pub items: Vec<Budget>,
}

/// Answer of `DELETE /api/org/budgets/delete`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct BudgetDeleted {
    /// The budget.
    pub id: Uuid,
    /// Whether it existed and was deleted.
    pub deleted: bool,
}

/// Declares the CSV response of `GET /api/org/usage/export`.
pub(crate) fn patch_document(doc: &mut openapiv3::OpenAPI) {
    use openapiv3::{MediaType, ReferenceOr, Response, Schema, SchemaKind, StatusCode, Type};
    let Some(ReferenceOr::Item(item)) = doc.paths.paths.get_mut("/api/org/usage/export") else {
        return;
    };
    let Some(op) = item.get.as_mut() else {
        return;
    };
    let mut response = Response {
        description: "The usage report as CSV".to_string(),
        ..Default::default()
    };
    response.content.insert(
        "text/csv".to_string(),
        MediaType {
            schema: Some(ReferenceOr::Item(Schema {
                schema_data: Default::default(),
                schema_kind: SchemaKind::Type(Type::String(Default::default())),
            })),
            ..Default::default()
        },
    );
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(200), ReferenceOr::Item(response));
}
