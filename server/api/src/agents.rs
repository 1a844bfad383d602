//! Types of the Agents area (`/api/agents`).

use crate::tools::NamedRef;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Query naming one agent by its own id.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentQuery {
    /// The agent.
    pub agent_id: Uuid,
}

/// Query of `GET /api/agents/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// An agent's model parameters.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct AgentParams {
    /// At most 20,000 characters.
    #[serde(default)]
    #[schemars(length(max = 20000))]
    pub system_prompt: String,
    /// 0 to 1.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub temperature: Option<f64>,
    /// Greater than 0 (at most 1,000,000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000000))]
    pub max_tokens: Option<i64>,
    /// The reasoning effort of a model whose `reasoning` is `effort`
    /// (see `ChatSettings.reasoning_effort`); a message's settings
    /// override it.
    #[serde(default)]
    pub reasoning_effort: Option<crate::chat::ReasoningEffort>,
    /// The thinking budget of a model whose `reasoning` is `budget` (see
    /// `ChatSettings.reasoning_budget_tokens`); a message's settings
    /// override it.
    #[serde(default)]
    #[schemars(range(max = 1000000))]
    pub reasoning_budget_tokens: Option<u32>,
}

/// A `{name, value}` configuration value of a tool in an agent.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ConfigValue {
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    pub value: serde_json::Value,
}

/// A tool of an agent, as requested.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct AgentToolRef {
    /// A tool of the organization or a public tool.
    pub tool_id: Uuid,
    /// Names must be the tool's `configuration` names.
    #[serde(default)]
    pub config: Vec<ConfigValue>,
}

/// The lifecycle state of an agent (see `POST /api/agents`).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Created,
    Configured,
    Testing,
    Ready,
    Deployed,
    Active,
}

/// Body of `POST /api/agents`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentCreate {
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    #[schemars(length(max = 2000))]
    pub description: String,
    /// e.g. `chat`, `function`; 1 to 32 characters.
    #[schemars(length(min = 1, max = 32))]
    pub agent_type: String,
    /// A model of `GET /api/models/list`.
    pub model_id: Uuid,
    pub params: AgentParams,
    /// At most 20 tools, each once.
    #[serde(default)]
    pub tools: Option<Vec<AgentToolRef>>,
    #[serde(default)]
    pub is_public: Option<bool>,
}

/// Body of `PUT /api/agents/update`: every field of create, all optional.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct AgentUpdate {
    #[schemars(length(min = 1, max = 100))]
    pub name: Option<String>,
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    #[schemars(length(min = 1, max = 32))]
    pub agent_type: Option<String>,
    pub model_id: Option<Uuid>,
    pub params: Option<AgentParams>,
    /// Replaces the agent's tools when given.
    pub tools: Option<Vec<AgentToolRef>>,
    pub is_public: Option<bool>,
}

/// The response of create and update.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentSummary {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub agent_type: String,
    pub model_id: Uuid,
    pub params: AgentParams,
    pub is_public: bool,
    pub org_id: Uuid,
    pub status: AgentStatus,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// An agent in a list.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentListItem {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub agent_type: String,
    pub model: NamedRef,
    pub params: AgentParams,
    pub is_public: bool,
    pub org_id: Uuid,
    pub status: AgentStatus,
    pub deployments_count: i64,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A tool of an agent in the detail view.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentToolView {
    pub id: Uuid,
    pub name: String,
    pub category: NamedRef,
    pub config: Vec<ConfigValue>,
}

/// A deployment in an agent's detail view.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentDeploymentRef {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// An agent with its tools and deployments.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentDetail {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub agent_type: String,
    pub model: NamedRef,
    pub params: AgentParams,
    pub is_public: bool,
    pub org_id: Uuid,
    pub status: AgentStatus,
    pub tools: Vec<AgentToolView>,
    pub deployments: Vec<AgentDeploymentRef>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Body of `POST /api/agents/test`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentTestRequest {
    /// 1 to 100,000 characters.
    #[schemars(length(min = 1, max = 100000))]
    pub message: String,
}

/// A tool call the agent made.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
    // Any JSON value, null included: required, no `nullable` needed.
    #[schemars(with = "serde_json::Value", required)]
    pub output: Option<serde_json::Value>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
    pub successful: bool,
}

/// Token usage of a run (all model steps).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct RunUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

/// The result of `POST /api/agents/test`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AgentTestResult {
    pub success: bool,
    /// The agent's answer.
    pub output: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: RunUsage,
    /// `error_code: message` when the run failed.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
    /// The agent's state after the test.
    pub status: AgentStatus,
}
