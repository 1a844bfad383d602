//! Types of the Tools area (`/api/tools`): tool categories and tools.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The default page size of the tools area's lists.
pub const TOOLS_DEFAULT_LIMIT: u32 = 100;
/// The largest accepted `limit` of the tools area's lists.
pub const TOOLS_MAX_LIMIT: u32 = 500;

/// Query of `GET /api/tools/list_categories` and `GET /api/tools/list_all`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolListQuery {
    /// Optional: only this organization's items (plus public tools in
    /// `list_all`). Without it: every organization where the caller may
    /// read tools, plus public tools.
    pub org_id: Option<Uuid>,
    /// Items per page: 1 to 500, default 100.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// Items to skip, default 0.
    #[schemars(range(max = 4294967295u32))]
    pub offset: Option<u32>,
}

/// Query naming one category of an organization.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CategoryQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The tool category.
    pub category_id: Uuid,
}

/// Query naming one tool, as seen from an organization.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The tool.
    pub tool_id: Uuid,
}

/// Body of `POST /api/tools/create_category`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct CategoryCreate {
    /// 1 to 100 characters after trimming, not blank, without NUL; unique
    /// in the organization. (The pattern's blanks are exactly those the
    /// server trims, Unicode's White_Space.)
    #[schemars(
        length(min = 1, max = 100),
        regex(
            pattern = r"^[^\x00]*[^\x00\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00]*$"
        )
    )]
    pub name: String,
    /// At most 2,000 characters, without NUL.
    #[schemars(length(max = 2000), regex(pattern = r"^[^\x00]*$"))]
    pub description: String,
}

/// Body of `PUT /api/tools/update_category`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct CategoryUpdate {
    /// As in `CategoryCreate`.
    #[schemars(
        length(min = 1, max = 100),
        regex(
            pattern = r"^[^\x00]*[^\x00\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00]*$"
        )
    )]
    pub name: Option<String>,
    /// As in `CategoryCreate`.
    #[schemars(length(max = 2000), regex(pattern = r"^[^\x00]*$"))]
    pub description: Option<String>,
}

/// A tool category (belongs to one organization).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolCategory {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// Addition: the organization that owns the category.
    pub org_id: Uuid,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// `{success, message}`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SuccessResponse {
    pub success: bool,
    pub message: String,
}

/// The type of a tool parameter.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    Str,
    Bool,
    Int,
    Float,
    List,
    Dict,
}

/// A parameter spec (an input or a configuration value of a tool).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ParamSpec {
    /// A Python identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 64 characters),
    /// unique among the tool's inputs (or configuration).
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    #[serde(rename = "type")]
    pub type_: ParamType,
    /// At most 2,000 characters.
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    /// The default as text; it must parse as `type` (`str`: any text,
    /// `bool`: `true`/`false`, `int`, `float`, `list`/`dict`: a JSON array /
    /// object). At most 10,000 characters.
    #[serde(default)]
    #[schemars(length(max = 10000))]
    pub default: Option<String>,
}

/// What a tool returns.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ToolOutputs {
    #[serde(rename = "type")]
    #[schemars(length(max = 64))]
    pub type_: String,
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub description: String,
}

/// The tool's code.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct FunctionInfo {
    /// The Python function to call (an identifier defined by `code`: an
    /// ASCII letter or `_`, then letters, digits or `_`; `400
    /// invalid_function` otherwise).
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$")
    )]
    pub name: String,
    /// Whether the function is `async def` (it is then run with `asyncio`).
    #[serde(default)]
    pub is_async: bool,
    #[serde(default)]
    #[schemars(length(max = 2000))]
    pub description: String,
    /// Python source defining the function; 1 to 100,000 characters.
    #[schemars(length(min = 1, max = 100000))]
    pub code: String,
}

/// How the tool is packaged (informational).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ToolDeployment {
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub framework: String,
    #[serde(default)]
    pub toolkit_class: bool,
    #[serde(default)]
    pub standalone_function: bool,
}

/// A tool's `settings`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct ToolSettings {
    pub function_info: FunctionInfo,
    /// Python package names (optionally with a version specifier, which is
    /// not checked); at most 50. Each must be importable in the sandbox.
    #[serde(default)]
    pub requirements: Vec<String>,
    #[serde(default)]
    pub deployment: ToolDeployment,
}

/// Body of `POST /api/tools`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolCreate {
    /// 1 to 100 characters after trimming; unique in the organization.
    #[schemars(length(min = 1, max = 100))]
    pub name: String,
    #[schemars(length(max = 2000))]
    pub description: String,
    /// A category of the same organization.
    pub category_id: Uuid,
    /// 1 to 32 characters.
    #[schemars(length(min = 1, max = 32))]
    pub version: String,
    /// At most 50 parameters.
    pub configuration: Vec<ParamSpec>,
    /// At most 50 parameters.
    pub inputs: Vec<ParamSpec>,
    pub outputs: ToolOutputs,
    pub settings: ToolSettings,
    /// Default true.
    #[serde(default)]
    pub is_active: Option<bool>,
    /// An `http` or `https` URL of at most 2,000 characters (`400
    /// invalid_logo_url`).
    #[schemars(length(max = 2000), regex(pattern = r"^https?://"))]
    #[serde(default)]
    pub logo_url: Option<String>,
    /// Default false.
    #[serde(default)]
    pub is_public: Option<bool>,
}

/// Body of `PUT /api/tools`: any field of [`ToolCreate`]; omitted fields
/// keep their value.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct ToolUpdate {
    #[schemars(length(min = 1, max = 100))]
    pub name: Option<String>,
    #[schemars(length(max = 2000))]
    pub description: Option<String>,
    pub category_id: Option<Uuid>,
    #[schemars(length(min = 1, max = 32))]
    pub version: Option<String>,
    pub configuration: Option<Vec<ParamSpec>>,
    pub inputs: Option<Vec<ParamSpec>>,
    pub outputs: Option<ToolOutputs>,
    pub settings: Option<ToolSettings>,
    pub is_active: Option<bool>,
    /// An `http` or `https` URL of at most 2,000 characters (`400
    /// invalid_logo_url`).
    #[schemars(length(max = 2000), regex(pattern = r"^https?://"))]
    pub logo_url: Option<String>,
    pub is_public: Option<bool>,
}

/// The response of `POST /api/tools`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolCreated {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub category_id: Uuid,
    pub is_active: bool,
    pub version: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub logo_url: Option<String>,
    pub is_public: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// The response of `PUT /api/tools` (the spec's four fields plus the rest
/// of the tool's summary).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolUpdated {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub is_active: bool,
    pub category_id: Uuid,
    pub version: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub logo_url: Option<String>,
    pub is_public: bool,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// `{id, name}` of a related object.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct NamedRef {
    pub id: Uuid,
    pub name: String,
}

/// A tool in a list: `category` instead of `category_id`, no `settings`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolListItem {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub category: NamedRef,
    pub is_active: bool,
    pub version: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub logo_url: Option<String>,
    pub is_public: bool,
    pub configuration: Vec<ParamSpec>,
    pub inputs: Vec<ParamSpec>,
    pub outputs: ToolOutputs,
    /// Addition: the organization that owns the tool.
    pub org_id: Uuid,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A whole tool, with `settings` (`GET /api/tools/get`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Tool {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub category_id: Uuid,
    pub category: NamedRef,
    pub is_active: bool,
    pub version: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub logo_url: Option<String>,
    pub is_public: bool,
    pub configuration: Vec<ParamSpec>,
    pub inputs: Vec<ParamSpec>,
    pub outputs: ToolOutputs,
    pub settings: ToolSettings,
    pub org_id: Uuid,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Body of `POST /api/tools/test`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct ToolTestRequest {
    /// Values of the tool's inputs by name (JSON values of the declared
    /// types); missing optional inputs take their `default`.
    #[serde(default)]
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// Values of the tool's configuration by name.
    #[serde(default)]
    pub configuration: Option<BTreeMap<String, serde_json::Value>>,
}

/// The result of `POST /api/tools/test`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ToolTestResult {
    /// Whether the function returned.
    pub success: bool,
    /// What the function returned (JSON), null on failure.
    // Any JSON value, null included: required, no `nullable` needed.
    #[schemars(with = "serde_json::Value", required)]
    pub output: Option<serde_json::Value>,
    /// Why it failed: `error_code: message` (codes: `tool_error` — the
    /// function raised, `tool_timeout`, `tool_cpu_limit`,
    /// `tool_memory_limit`, `tool_output_too_large`, `tool_bad_output`,
    /// `tool_requirement_missing`), null on success.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub error: Option<String>,
    /// Wall-clock time of the sandboxed run, milliseconds.
    pub duration_ms: u64,
}
