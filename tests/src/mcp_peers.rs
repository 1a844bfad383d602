//! MCP peers the tests start on 127.0.0.1 (installed by `.ci/run` into
//! `tests/peers/node_modules`): `@modelcontextprotocol/server-everything`
//! over streamable HTTP, and `@dwmkerr/mock-llm` with OAuth in front of
//! its MCP endpoint. Shared by the integration tests and the CLI tests.

use serde_json::json;
use std::time::Duration;

/// The first access token [`MockOauth`] issues.
pub const MOCK_ACCESS_TOKEN: &str = "mcp-access-001";
/// The first refresh token [`MockOauth`] issues.
pub const MOCK_REFRESH_TOKEN: &str = "mcp-refresh-001";

/// The browser's part of an OAuth authorization with a server that
/// approves at once: follows the authorization URL (a `302`) and returns
/// where the server sends the browser back (the service's callback with
/// `code` and `state`).
pub async fn browser_approves(authorization_url: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let approved = http
        .get(authorization_url)
        .send()
        .await
        .expect("the authorization endpoint");
    assert_eq!(
        approved.status().as_u16(),
        302,
        "the authorization server approves at once"
    );
    approved.headers()["location"]
        .to_str()
        .expect("a Location header")
        .to_string()
}

/// A free TCP port on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `tests/peers/node_modules/.bin/{name}` with `args` and `env`
/// and waits (30 s at most) until it listens on `port`.
async fn spawn(
    name: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &str)],
    port: u16,
) -> std::process::Child {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers/node_modules/.bin")
        .join(name);
    assert!(
        bin.exists(),
        "{} is missing: `cargo xtask test` installs tests/peers/package.json with npm",
        bin.display()
    );
    let child = std::process::Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} did not listen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child
}

/// A running `mcp-server-everything streamableHttp`, killed on drop.
pub struct Everything {
    child: std::process::Child,
    /// The streamable HTTP endpoint.
    pub url: String,
}

impl Everything {
    pub async fn start() -> Everything {
        let port = free_port();
        let child = spawn(
            "mcp-server-everything",
            &["streamableHttp".as_ref()],
            &[("PORT", &port.to_string())],
            port,
        )
        .await;
        Everything {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `mock-llm` with OAuth in front of its MCP endpoint (RFC 9728
/// and RFC 8414 discovery, RFC 7591 registration, PKCE S256), killed on
/// drop. Its first tokens are deterministic so tests can use them; a
/// pre-registered confidential client `preregistered` /
/// `preregistered-secret` redirects to `{api_public}/api/mcp/callback`.
pub struct MockOauth {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`; the MCP endpoint is `{base}/mcp`.
    pub base: String,
    _dir: tempfile::TempDir,
}

impl MockOauth {
    pub async fn start(api_public: &str) -> MockOauth {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = json!({
            "oauth": {
                "protectedPaths": ["/mcp"],
                "tokens": {
                    "expiresInSeconds": 3600,
                    "refreshable": true,
                    "deterministic": {
                        "nextAccessTokens": [MOCK_ACCESS_TOKEN],
                        "nextRefreshTokens": [MOCK_REFRESH_TOKEN],
                    }
                },
                "clients": [{
                    "clientId": "preregistered",
                    "clientSecret": "preregistered-secret",
                    "redirectUris": [format!("{api_public}/api/mcp/callback")],
                    "scope": "mcp:read mcp:tools",
                }],
                "metadata": {
                    "registrationEndpointEnabled": true,
                    "scopesSupported": ["mcp:read", "mcp:tools"],
                    "issuerOverride": format!("{base}/"),
                }
            }
        });
        // JSON is YAML.
        let path = dir.path().join("mock-llm.yaml");
        std::fs::write(&path, config.to_string()).expect("writing the mock-llm config");
        let child = spawn(
            "mock-llm",
            &["--config".as_ref(), path.as_os_str()],
            &[("PORT", &port.to_string()), ("HOST", "127.0.0.1")],
            port,
        )
        .await;
        MockOauth {
            child,
            base,
            _dir: dir,
        }
    }

    /// The protected MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// The browser's part of the flow: follows the authorization URL (the
    /// mock approves at once) and returns where the authorization server
    /// sends the browser back (the service's callback with `code` and
    /// `state`).
    pub async fn approve(&self, authorization_url: &str) -> String {
        browser_approves(authorization_url).await
    }
}

impl Drop for MockOauth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
