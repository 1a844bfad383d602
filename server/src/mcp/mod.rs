//! MCP: the configured catalog of external MCP servers and the client that
//! talks to them over MCP streamable HTTP (the official `rmcp` SDK).

pub mod config;
pub mod oauth;

/// `502 mcp_server_unavailable`: an MCP server (or its authorization
/// server) failed or cannot be reached.
pub fn unavailable(message: impl Into<String>) -> crate::error::Error {
    crate::error::Error::BadGateway {
        code: "mcp_server_unavailable",
        message: message.into(),
    }
}

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A tool as listed by an MCP server.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
}

/// The result of a tool call.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ToolOutput {
    /// Whether the server reported the call as failed (`isError`).
    pub is_error: bool,
    /// The result as the server sent it (`content`, `structuredContent`).
    pub result: serde_json::Value,
}

/// Why talking to an MCP server failed. The texts name the kind of
/// failure only: they reach API clients and models, and the server's
/// answer (which can hold anything) is never part of them; the whole error
/// is logged where it happens.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server wants (other) credentials: HTTP 401/403.
    #[error("the MCP server rejected the credentials ({0})")]
    Unauthorized(String),
    /// Unreachable, a protocol error, or an error answer.
    #[error("the MCP server failed: {0}")]
    Failed(String),
    #[error("the MCP server did not answer within {0} seconds")]
    Timeout(u64),
}

/// Talks to MCP servers. One connection (initialize, request, close) per
/// call: the servers are external and calls are rare compared to their
/// latency, and a fresh session cannot be left dangling.
#[async_trait]
pub trait McpClient: Send + Sync {
    /// Every tool of the server (all pages).
    async fn list_tools(
        &self,
        url: &str,
        bearer: Option<&str>,
    ) -> Result<Vec<ListedTool>, McpError>;
    /// Calls one tool with a JSON object of arguments.
    async fn call_tool(
        &self,
        url: &str,
        bearer: Option<&str>,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> Result<ToolOutput, McpError>;
}

/// The `rmcp` implementation: MCP streamable HTTP over reqwest.
pub struct RmcpClient {
    /// Longest wait for a whole operation (connect, initialize, request).
    pub timeout: std::time::Duration,
    /// Where failures are logged with their detail.
    pub log: slog::Logger,
}

/// Largest JSON answer or SSE event read from an MCP server (rmcp reads
/// the body up to it, then fails).
pub const MAX_MCP_ANSWER_BYTES: usize = 4 << 20;

/// The client of every MCP connection: [`crate::fetch::operator_client`]
/// (the catalog is the operator's), built once.
fn mcp_http() -> reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            crate::fetch::operator_client()
                .connect_timeout(std::time::Duration::from_secs(10))
                .build()
                .unwrap_or_default()
        })
        .clone()
}

impl RmcpClient {
    /// The error of a call to `url`, logged whole, returned as its kind.
    fn failed(&self, url: &str, text: &str) -> McpError {
        slog::warn!(self.log, "an MCP request failed"; "url" => url, "error" => text);
        classify(text)
    }

    /// Connects to `url` (initialize), sending `span`'s `traceparent`
    /// with every request of the exchange.
    async fn connect(
        &self,
        url: &str,
        bearer: Option<&str>,
        span: Option<&crate::telemetry::ChildSpan>,
    ) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ()>, McpError> {
        use rmcp::ServiceExt;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        config.max_json_response_size = MAX_MCP_ANSWER_BYTES;
        config.max_sse_event_size = MAX_MCP_ANSWER_BYTES;
        if let Some(token) = bearer {
            config = config.auth_header(token.to_string());
        }
        if let Some(span) = span {
            for (name, value) in span.headers().iter() {
                config.custom_headers.insert(name.clone(), value.clone());
            }
        }
        let transport = StreamableHttpClientTransport::with_client(mcp_http(), config);
        ().serve(transport)
            .await
            .map_err(|e| self.failed(url, &e.to_string()))
    }

    async fn timed<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, McpError>>,
    ) -> Result<T, McpError> {
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(|_| McpError::Timeout(self.timeout.as_secs()))?
    }
}

/// An error's text, classified: 401/403 answers become
/// [`McpError::Unauthorized`]; the result names the kind of failure only
/// (see [`McpError`]).
fn classify(text: &str) -> McpError {
    let text = &without_type_names(text);
    let lower = text.to_lowercase();
    let status = http_status(&lower);
    if matches!(status, Some(401 | 403))
        || lower.contains("unauthorized")
        || lower.contains("auth required")
        || lower.contains("authorization required")
        || lower.contains("insufficient scope")
    {
        return McpError::Unauthorized(match status {
            Some(s) => format!("HTTP {s}"),
            None => "authorization required".to_string(),
        });
    }
    let kind = if lower.contains("exceeded the maximum size") || lower.contains("too large") {
        format!("its answer is larger than the limit of {MAX_MCP_ANSWER_BYTES} bytes")
    } else if let Some(s) = status {
        format!("it answered HTTP {s}")
    } else if lower.contains("deserialize")
        || lower.contains("parse")
        || lower.contains("expected")
        || lower.contains("invalid json")
        || lower.contains("unexpected server response")
    {
        "its answer is not valid JSON-RPC".to_string()
    } else if lower.contains("content type") {
        "its answer has an unexpected content type".to_string()
    } else if lower.contains("session expired") {
        "its session expired".to_string()
    } else if lower.contains("connect")
        || lower.contains("sending request")
        || lower.contains("client error")
        || lower.contains("dns")
        || lower.contains("io error")
    {
        "it cannot be reached".to_string()
    } else if lower.contains("mcp error") || lower.contains("service error") {
        "it answered a JSON-RPC error".to_string()
    } else if lower.contains("closed") || lower.contains("end of stream") {
        "it closed the connection".to_string()
    } else {
        "the MCP exchange failed".to_string()
    };
    McpError::Failed(kind)
}

/// The status of an `HTTP NNN` in an error's text.
fn http_status(lower: &str) -> Option<u16> {
    lower.match_indices("http ").find_map(|(at, m)| {
        let digits = lower.get(at + m.len()..at + m.len() + 3)?;
        let code: u16 = digits.parse().ok()?;
        (100..600).contains(&code).then_some(code)
    })
}

/// `text` without the bracketed Rust type names rmcp's errors carry
/// (`Transport [rmcp::transport::worker::WorkerTransport<...>] error: ...`):
/// these messages reach API clients, which must not see internals.
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let inner = &rest[open + 1..close];
        if !inner.contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[async_trait]
impl McpClient for RmcpClient {
    async fn list_tools(
        &self,
        url: &str,
        bearer: Option<&str>,
    ) -> Result<Vec<ListedTool>, McpError> {
        let mut span = crate::telemetry::mcp_call("tools/list", None, url);
        let result = self
            .timed(self.list_tools_in(url, bearer, span.as_ref()))
            .await;
        if let (Some(span), Err(e)) = (span.as_mut(), &result) {
            span.fail(e.to_string());
        }
        result
    }

    async fn call_tool(
        &self,
        url: &str,
        bearer: Option<&str>,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> Result<ToolOutput, McpError> {
        let mut span = crate::telemetry::mcp_call("tools/call", Some(name), url);
        let result = self
            .timed(self.call_tool_in(url, bearer, name, args, span.as_ref()))
            .await;
        match (span.as_mut(), &result) {
            (Some(span), Err(e)) => span.fail(e.to_string()),
            (Some(span), Ok(out)) if out.is_error => span.fail("the tool answered an error"),
            _ => {}
        }
        result
    }
}

impl RmcpClient {
    async fn list_tools_in(
        &self,
        url: &str,
        bearer: Option<&str>,
        span: Option<&crate::telemetry::ChildSpan>,
    ) -> Result<Vec<ListedTool>, McpError> {
        let client = self.connect(url, bearer, span).await?;
        let tools = client.list_all_tools().await;
        let _ = client.cancel().await;
        let tools = tools.map_err(|e| self.failed(url, &e.to_string()))?;
        Ok(tools
            .into_iter()
            .map(|t| ListedTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    async fn call_tool_in(
        &self,
        url: &str,
        bearer: Option<&str>,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
        span: Option<&crate::telemetry::ChildSpan>,
    ) -> Result<ToolOutput, McpError> {
        let client = self.connect(url, bearer, span).await?;
        let params = rmcp::model::CallToolRequestParams::new(name.to_string()).with_arguments(args);
        let result = client.call_tool(params).await;
        let _ = client.cancel().await;
        let result = result.map_err(|e| self.failed(url, &e.to_string()))?;
        let is_error = result.is_error.unwrap_or(false);
        let result = serde_json::to_value(&result)
            .map_err(|e| McpError::Failed(format!("encoding the result: {e}")))?;
        Ok(ToolOutput { is_error, result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_lose_rust_type_names() {
        let raw = "Send message error Transport [rmcp::transport::worker::WorkerTransport<\
                   rmcp::transport::streamable_http_client::StreamableHttpClientWorker<\
                   reqwest::async_impl::client::Client>>] error: Auth required, when send \
                   initialize request";
        assert_eq!(
            without_type_names(raw),
            "Send message error Transport error: Auth required, when send initialize request"
        );
        assert!(matches!(classify(raw), McpError::Unauthorized(_)));
        // Brackets that are not type names stay.
        assert_eq!(
            without_type_names("tool [echo] failed"),
            "tool [echo] failed"
        );
    }

    /// The texts name the kind of failure, never the server's answer.
    #[test]
    fn errors_name_the_kind_not_the_answer() {
        let body = "FORGED\n\u{1b}[2J line";
        for (raw, kind) in [
            (
                format!("Transport error: unexpected server response: HTTP 500: {body}"),
                "it answered HTTP 500",
            ),
            (
                format!("Deserialize error: expected value at line 1 column 1: {body}"),
                "its answer is not valid JSON-RPC",
            ),
            (
                "HTTP response body exceeded the maximum size of 4194304 bytes".to_string(),
                "its answer is larger than the limit of 4194304 bytes",
            ),
        ] {
            let McpError::Failed(text) = classify(&raw) else {
                panic!("{raw}");
            };
            assert_eq!(text, kind);
            assert!(!McpError::Failed(text).to_string().contains("FORGED"));
        }
        let e = classify(&format!("HTTP 401: {body}"));
        assert!(!e.to_string().contains("FORGED"), "{e}");
    }
}
