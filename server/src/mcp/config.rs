//! The `[mcp]` section and the `[[mcp_servers]]` catalog.

use anyhow::{Result, bail};
use serde::Deserialize;

/// How the service reaches MCP servers and where OAuth flows land.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// The browser lands on `{frontend_url}/mcp/callback` after a
    /// connection (`WORKSPACE_FRONTEND_URL`).
    pub frontend_url: String,
    /// This service's public base URL: the OAuth redirect URI is
    /// `{api_public_url}/api/mcp/callback` and gateway URLs start with it
    /// (`WORKSPACE_API_PUBLIC_URL`).
    pub api_public_url: String,
    /// How long a server's tool list is reused before it is listed again.
    pub tools_cache_ttl_secs: u64,
    /// Longest wait for one MCP operation (connect, initialize, request).
    pub timeout_secs: u64,
    /// How long a pending connection's OAuth `state` is accepted.
    pub state_ttl_secs: u64,
    /// The playground's model when a request names none (default: the
    /// first configured model, else the built-in development model).
    pub playground_model: Option<String>,
}

impl McpConfig {
    /// The OAuth redirect URI this server registers:
    /// `{api_public_url}/api/mcp/callback`.
    pub fn redirect_uri(&self) -> String {
        format!(
            "{}/api/mcp/callback",
            self.api_public_url.trim_end_matches('/')
        )
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            frontend_url: "http://localhost:3000".to_string(),
            api_public_url: "http://localhost:8080".to_string(),
            tools_cache_ttl_secs: 300,
            timeout_secs: 30,
            state_ttl_secs: 600,
            playground_model: None,
        }
    }
}

/// How users authenticate to an MCP server.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum McpAuth {
    /// OAuth 2.1 with PKCE: RFC 9728 then RFC 8414 discovery, RFC 7591
    /// registration when no `client_id` is configured.
    Oauth,
    /// No credentials.
    None,
}

impl McpAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            McpAuth::Oauth => "oauth",
            McpAuth::None => "none",
        }
    }
}

/// One `[[mcp_servers]]` entry.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Unique; the key that keeps the server's id stable across restarts.
    pub name: String,
    pub toolkit_name: String,
    /// URL-safe (`[a-z0-9_-]`).
    pub toolkit_slug: String,
    #[serde(default)]
    pub toolkit_logo: Option<String>,
    /// The streamable HTTP endpoint.
    pub url: String,
    pub auth: McpAuth,
    /// A pre-registered OAuth client (else dynamic registration).
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
    /// OAuth scopes requested (default: those the server declares).
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the client secret.
        f.debug_struct("McpServerConfig")
            .field("name", &self.name)
            .field("toolkit_slug", &self.toolkit_slug)
            .field("url", &self.url)
            .field("auth", &self.auth)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .finish()
    }
}

fn http_url(what: &str, url: &str) -> Result<()> {
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        _ => bail!("{what} {url:?} must be an http or https URL"),
    }
}

/// Checks the section and the catalog.
pub fn validate(mcp: &McpConfig, servers: &[McpServerConfig]) -> Result<()> {
    http_url("mcp.frontend_url", &mcp.frontend_url)?;
    http_url("mcp.api_public_url", &mcp.api_public_url)?;
    if mcp.timeout_secs == 0 || mcp.state_ttl_secs == 0 {
        bail!("mcp.timeout_secs and mcp.state_ttl_secs must be positive");
    }
    let mut names = std::collections::HashSet::new();
    for s in servers {
        let name = &s.name;
        if name.trim().is_empty() || name.trim() != name || name.len() > 200 {
            bail!("mcp_servers: {name:?} is not a valid name");
        }
        if !names.insert(name.as_str()) {
            bail!("mcp_servers: {name:?} is configured twice");
        }
        if s.toolkit_name.trim().is_empty() {
            bail!("mcp_servers: {name:?}: toolkit_name is empty");
        }
        if s.toolkit_slug.is_empty()
            || !s
                .toolkit_slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            bail!("mcp_servers: {name:?}: toolkit_slug must be [a-z0-9_-]+");
        }
        http_url(&format!("mcp_servers: {name:?}: url"), &s.url)?;
        if s.client_secret.is_some() && s.client_id.is_none() {
            bail!("mcp_servers: {name:?}: client_secret needs client_id");
        }
        if s.auth == McpAuth::None && s.client_id.is_some() {
            bail!("mcp_servers: {name:?}: client_id is for auth = \"oauth\"");
        }
    }
    Ok(())
}

/// `WORKSPACE_FRONTEND_URL`, `WORKSPACE_API_PUBLIC_URL`.
pub fn apply_env(mcp: &mut McpConfig, get: &impl Fn(&str) -> Option<String>) {
    if let Some(url) = get("WORKSPACE_FRONTEND_URL").filter(|v| !v.is_empty()) {
        mcp.frontend_url = url;
    }
    if let Some(url) = get("WORKSPACE_API_PUBLIC_URL").filter(|v| !v.is_empty()) {
        mcp.api_public_url = url;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, slug: &str, url: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.into(),
            toolkit_name: name.into(),
            toolkit_slug: slug.into(),
            toolkit_logo: None,
            url: url.into(),
            auth: McpAuth::None,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
        }
    }

    #[test]
    fn catalog_entries_are_validated() {
        let mcp = McpConfig::default();
        let good = entry("A", "a-1", "http://127.0.0.1:1/mcp");
        assert!(validate(&mcp, std::slice::from_ref(&good)).is_ok());
        assert!(validate(&mcp, &[good.clone(), good.clone()]).is_err());
        assert!(validate(&mcp, &[entry("B", "Bad Slug", "http://x/mcp")]).is_err());
        assert!(validate(&mcp, &[entry("C", "c", "ftp://x/mcp")]).is_err());
        let mut secret_only = entry("D", "d", "http://x/mcp");
        secret_only.auth = McpAuth::Oauth;
        secret_only.client_secret = Some("s".into());
        assert!(validate(&mcp, &[secret_only]).is_err());
    }

    #[test]
    fn urls_come_from_the_environment() {
        let mut mcp = McpConfig::default();
        apply_env(&mut mcp, &|k| match k {
            "WORKSPACE_FRONTEND_URL" => Some("https://app.example".into()),
            "WORKSPACE_API_PUBLIC_URL" => Some("https://api.example".into()),
            _ => None,
        });
        assert_eq!(mcp.frontend_url, "https://app.example");
        assert_eq!(mcp.api_public_url, "https://api.example");
    }
}
