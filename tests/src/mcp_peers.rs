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
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `tests/peers/{path}`, which `cargo xtask test` installs.
pub(crate) fn peer_file(path: &str) -> std::path::PathBuf {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join(path);
    assert!(
        file.exists(),
        "{} is missing: `cargo xtask test` installs tests/peers/package.json with npm",
        file.display()
    );
    file
}

/// Starts `tests/peers/node_modules/.bin/{name}` with `args` and `env`
/// and waits (30 s at most) until it listens on `port`.
async fn spawn(
    name: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &str)],
    port: u16,
) -> std::process::Child {
    let mut command = std::process::Command::new(peer_file(&format!("node_modules/.bin/{name}")));
    command.args(args).envs(env.iter().copied());
    start_listening(name, command, &[port]).await
}

/// Starts `command` (output discarded) and waits (30 s at most) until it
/// listens on every one of `ports`.
pub(crate) async fn start_listening(
    name: &str,
    mut command: std::process::Command,
    ports: &[u16],
) -> std::process::Child {
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for &port in ports {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{name} did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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

/// panva's `oidc-provider` (OpenID-certified, strict) in front of an MCP
/// server built with the official TypeScript SDK (`tests/peers/oidc-mcp.mjs`),
/// killed on drop. The provider has dynamic registration, PKCE required,
/// resource indicators with JWT access tokens (30 s) whose audience is the
/// MCP URL, RFC 9207 `iss` in authorization responses, refresh tokens and
/// revocation; the MCP server verifies each token and has the tools
/// `whoami` (answers `subject:{login}`) and `add`.
pub struct OidcMcp {
    child: std::process::Child,
    /// The provider's issuer, `http://127.0.0.1:PORT`.
    pub issuer: String,
    /// The protected MCP endpoint.
    pub mcp_url: String,
    events_url: String,
}

impl OidcMcp {
    pub async fn start() -> OidcMcp {
        let oidc = free_port();
        let mcp = std::iter::repeat_with(free_port)
            .find(|&p| p != oidc)
            .expect("a second free port");
        let mut command = std::process::Command::new("node");
        command
            .arg(peer_file("oidc-mcp.mjs"))
            .env("OIDC_PORT", oidc.to_string())
            .env("MCP_PORT", mcp.to_string());
        let child = start_listening("oidc-mcp.mjs", command, &[oidc, mcp]).await;
        OidcMcp {
            child,
            issuer: format!("http://127.0.0.1:{oidc}"),
            mcp_url: format!("http://127.0.0.1:{mcp}/mcp"),
            events_url: format!("http://127.0.0.1:{mcp}/peer/events"),
        }
    }

    /// What happened so far, in order: `{"kind": "registered" | "issued" |
    /// "refreshed" | "revoked" | "call" | "mcp_refused" | "grant_error" |
    /// ..., ...}`.
    pub async fn events(&self) -> Vec<serde_json::Value> {
        reqwest::get(&self.events_url)
            .await
            .expect("the peer's events")
            .json()
            .await
            .expect("the peer's events as JSON")
    }

    /// How many events of `kind` happened so far.
    pub async fn count(&self, kind: &str) -> usize {
        self.events()
            .await
            .iter()
            .filter(|e| e["kind"] == kind)
            .count()
    }

    /// The browser's part of the flow, as a user would do it on the
    /// provider's own pages: follows the authorization URL, signs in as
    /// `login` on the login form, continues on the consent form, carrying
    /// the provider's cookies throughout, and returns where the provider
    /// finally sends the browser (the service's callback with `code`,
    /// `state` and `iss`).
    pub async fn sign_in(&self, authorization_url: &str, login: &str) -> String {
        provider_sign_in(&self.issuer, authorization_url, login).await
    }
}

/// The browser's part of an authorization code flow on `oidc-provider`'s
/// development pages at `provider` (see [`OidcMcp::sign_in`]).
pub(crate) async fn provider_sign_in(
    provider: &str,
    authorization_url: &str,
    login: &str,
) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let mut cookies: std::collections::BTreeMap<String, String> = Default::default();
    let mut url = reqwest::Url::parse(authorization_url).expect("an authorization URL");
    let mut form: Option<Vec<(&str, &str)>> = None;
    for _ in 0..20 {
        if !url.as_str().starts_with(provider) {
            return url.to_string();
        }
        let jar = cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let request = match form.take() {
            Some(fields) => {
                let mut encoder = reqwest::Url::parse("http://form.invalid/").expect("a URL");
                encoder.query_pairs_mut().extend_pairs(&fields);
                http.post(url.clone())
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(encoder.query().unwrap_or_default().to_string())
            }
            None => http.get(url.clone()),
        };
        let response = request
            .header(reqwest::header::COOKIE, jar)
            .send()
            .await
            .expect("the provider answers");
        for set in response.headers().get_all(reqwest::header::SET_COOKIE) {
            let pair = set
                .to_str()
                .unwrap_or_default()
                .split(';')
                .next()
                .unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                cookies.insert(name.trim().to_string(), value.to_string());
            }
        }
        let status = response.status();
        if status.is_redirection() {
            let location = response.headers()[reqwest::header::LOCATION]
                .to_str()
                .expect("a Location header");
            url = url.join(location).expect("a valid Location");
            continue;
        }
        let page = response.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "the provider answered {status}: {page}"
        );
        let action = page
            .split("<form")
            .nth(1)
            .and_then(|f| f.split("action=\"").nth(1))
            .and_then(|a| a.split('"').next())
            .unwrap_or_else(|| panic!("a page without a form: {page}"));
        url = url.join(action).expect("a valid form action");
        form = Some(if page.contains(r#"name="prompt" value="login""#) {
            vec![("prompt", "login"), ("login", login), ("password", "any")]
        } else {
            assert!(
                page.contains(r#"name="prompt" value="consent""#),
                "neither a login nor a consent page: {page}"
            );
            vec![("prompt", "consent")]
        });
    }
    panic!("the provider never sent the browser back");
}

impl Drop for OidcMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
