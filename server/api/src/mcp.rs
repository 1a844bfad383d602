//! Types of the MCP area (`/api/mcp`): the catalog of MCP servers, the
//! caller's connections (sessions) and instances, gateway URLs.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An MCP server of the catalog.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpServer {
    pub id: Uuid,
    pub name: String,
    pub toolkit_name: String,
    /// URL-safe.
    pub toolkit_slug: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub toolkit_logo: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// The caller's instances of this server in the organization.
    pub server_instance_count: i64,
}

/// `{servers}` answer of `GET /api/mcp/list_servers`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpServerList {
    pub servers: Vec<McpServer>,
}

/// Query of `GET /api/mcp/server_with_tools`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ServerQuery {
    /// The organization (absent: the caller's personal organization).
    #[serde(default)]
    pub org_id: Option<Uuid>,
    /// The MCP server (an id of `GET /api/mcp/list_servers`).
    pub server_id: Uuid,
}

/// A tool of an MCP server.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct McpTool {
    /// The tool's name on the server.
    pub name: String,
    /// `{toolkit_slug}_{name}`, lowercase, URL-safe: unique across servers.
    pub slug: String,
    /// Empty when the server gives none.
    pub description: String,
    /// The server's `toolkit_slug`.
    pub toolkit: String,
}

/// An MCP server with its tools.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpServerWithTools {
    pub id: Uuid,
    pub name: String,
    pub toolkit_name: String,
    pub toolkit_slug: String,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub toolkit_logo: Option<String>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    pub server_instance_count: i64,
    pub tools: Vec<McpTool>,
}

/// Body of `POST /api/mcp/connect_account`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectAccount {
    pub server_id: Uuid,
    /// Where the flow started (e.g. `chat`, `settings`): 1 to 50 of
    /// `[A-Za-z0-9_-]`, handed back to the frontend.
    #[serde(default)]
    #[schemars(length(min = 1, max = 50), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub flow_type: Option<String>,
}

/// What the frontend needs to know about the connection's authentication.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConnectionData {
    /// `oauth2` or `none`.
    #[serde(rename = "authConfig")]
    pub auth_config: String,
    /// The query parameters the callback expects (`code`, `state` for
    /// OAuth; none otherwise).
    #[serde(rename = "expectedParams")]
    pub expected_params: Vec<String>,
}

/// Answer of `POST /api/mcp/connect_account`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ConnectionStart {
    /// The session (connected account) id.
    pub id: String,
    /// `pending` (OAuth: finish at `redirect_url`) or `active` (a server
    /// without authentication: the instance exists already).
    pub status: String,
    /// OAuth: the provider's authorization URL. Without authentication: the
    /// frontend's callback page.
    pub redirect_url: String,
    #[serde(rename = "connectionData")]
    pub connection_data: ConnectionData,
}

/// Query of `GET /api/mcp/callback`: what the OAuth provider sends, plus
/// the spec's optional `mcp_server_id`, `mcp_session_id` and `flow_type`
/// (ignored: the `state` names the session). Every field is optional so
/// that a broken callback still lands on the frontend with an `error`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct CallbackQuery {
    /// The authorization code the OAuth provider issued.
    #[serde(default)]
    pub code: Option<String>,
    /// The single-use `state` of the flow (its CSRF protection).
    #[serde(default)]
    pub state: Option<String>,
    /// The provider's OAuth error code (RFC 6749 section 4.1.2.1), instead of `code`.
    #[serde(default)]
    pub error: Option<String>,
    /// The provider's description of `error`.
    #[serde(default)]
    pub error_description: Option<String>,
    /// The authorization server's issuer identifier (RFC 9207), sent by
    /// providers that announce `authorization_response_iss_parameter_supported`:
    /// it must equal the issuer discovered for the flow (a mismatch, or a
    /// missing `iss` from a provider that announces it, ends at the
    /// frontend with `error=issuer_mismatch`: a mix-up attack).
    #[serde(default)]
    pub iss: Option<String>,
    /// Accepted (the spec lists it) and ignored: the `state` names the flow.
    #[serde(default)]
    pub mcp_server_id: Option<String>,
    /// Accepted (the spec lists it) and ignored: the `state` names the flow.
    #[serde(default)]
    pub mcp_session_id: Option<String>,
    /// Accepted (the spec lists it) and ignored: the `state` names the flow.
    #[serde(default)]
    pub flow_type: Option<String>,
}

/// An MCP instance: the caller's usable connection to a server.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpInstance {
    pub id: Uuid,
    /// The custom name (default: the server's `toolkit_name`).
    pub name: String,
    pub server_id: Uuid,
    pub session_id: Uuid,
    pub toolkit_name: String,
    pub toolkit_slug: String,
    /// The session's state: `active` or `needs_reauth`.
    pub status: String,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// `{instances}` answer of `GET /api/mcp/list_instances`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpInstanceList {
    pub instances: Vec<McpInstance>,
}

/// Query of `GET /api/mcp/list_instances`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InstanceListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// Only instances of this server.
    #[serde(default)]
    pub server_id: Option<Uuid>,
}

/// Query of `PUT` and `DELETE /api/mcp/instance`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct InstanceQuery {
    /// The organization (absent: the caller's personal organization).
    #[serde(default)]
    pub org_id: Option<Uuid>,
    /// The MCP instance (one of the caller's own).
    pub instance_id: Uuid,
}

/// Body of `PUT /api/mcp/instance`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceRename {
    /// 1 to 100 characters after trimming, not blank, without control
    /// characters (`400 invalid_name`).
    #[schemars(
        length(min = 1, max = 100),
        regex(pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub name: String,
}

/// `{success, message}` answer of `DELETE /api/mcp/instance`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpDeleted {
    pub success: bool,
    pub message: String,
}

/// Body of `POST /api/mcp/generate_url`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerateUrl {
    pub server_id: Uuid,
    pub session_id: Uuid,
}

/// Answer of `POST /api/mcp/generate_url`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct McpUrl {
    pub mcp_url: String,
    /// The session's state.
    pub status: String,
}

/// Path of the MCP gateway operations: the secret made by `generate_url`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct GatewayPath {
    /// The secret of the gateway URL, or an instance id with the user's
    /// bearer token.
    pub secret: String,
}

/// Body of `POST /api/mcp_playground/chat`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaygroundChat {
    /// The user's message: 1 to 32,000 characters, not blank (`400
    /// invalid_message`).
    #[schemars(length(min = 1, max = 32000), regex(pattern = r"\S"))]
    pub content: String,
    /// The caller's instances whose tools the model may call (Direct MCP
    /// mode). Absent or empty: Intelligent Discovery.
    #[serde(default)]
    pub mcp_instance_ids: Option<Vec<Uuid>>,
    /// A model this service offers whose name starts with `gpt-`, `o1`,
    /// `claude-`, `deepseek-` or `gemini-` (or the built-in
    /// `offline-dev-model`). Default: `mcp.playground_model`. Another name:
    /// `400 invalid_model`; a name of that shape the service does not
    /// offer: `400 model_unavailable`.
    #[serde(default)]
    pub model: Option<String>,
}

/// A tool call in a playground stream item.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct PlaygroundTool {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
    /// `null` while the call runs.
    #[schemars(with = "serde_json::Value", required)]
    pub output: Option<serde_json::Value>,
    /// On completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful: Option<bool>,
    /// On completion: the failure, or `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Option<String>>,
}

/// `{server_ids}` of a server recommendation.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct PlaygroundServers {
    pub server_ids: Vec<Uuid>,
}

/// One item of the playground stream (`data: <json>` lines).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct PlaygroundItem {
    /// A piece of the reply, `""` beside a tool or recommendation, `DONE`
    /// at the end. Absent on an error item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tool call (`null` beside text). Absent on an error item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Option<PlaygroundTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<PlaygroundServers>,
    /// The stream failed (the last item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
