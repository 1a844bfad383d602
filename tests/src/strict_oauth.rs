//! A strict OAuth 2.1 authorization server with a protected MCP-ish
//! resource, on 127.0.0.1, for the MCP token tests: it accepts exactly one
//! token-endpoint client authentication method (`client_secret_basic`,
//! `client_secret_post` or `none`) and rejects the others with
//! `401 invalid_client`, rotates refresh tokens (a refresh token works
//! once), and records what it saw (refresh grants, RFC 7009 revocations,
//! rejected authentications, bearer tokens at the resource).
//!
//! Endpoints: RFC 9728 `/.well-known/oauth-protected-resource[/mcp]`,
//! RFC 8414 `/.well-known/oauth-authorization-server`, RFC 7591
//! `/register`, `/authorize` (approves at once, PKCE S256 required),
//! `/token` (authorization code with PKCE, refresh token), RFC 7009
//! `/revoke`, and `/mcp`, which answers any authorized request with a
//! JSON-RPC `initialize` result and anything else with `401` and a
//! `WWW-Authenticate` challenge. With [`StrictOauth::identify_issuer`] it
//! also announces `authorization_response_iss_parameter_supported` and
//! sends RFC 9207's `iss` in its authorization responses (the right
//! issuer, a wrong one, or none), as certified providers do.

use base64::Engine;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the server saw.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// Successful `refresh_token` grants.
    pub refreshes: usize,
    /// Successful code exchanges.
    pub exchanges: usize,
    /// RFC 7009 requests: (`token`, `token_type_hint`).
    pub revocations: Vec<(String, Option<String>)>,
    /// Token or revocation requests whose client authentication was not the
    /// declared method (why).
    pub rejected: Vec<String>,
    /// Bearer tokens accepted at `/mcp`.
    pub bearers: Vec<String>,
}

/// What the authorization response says of its issuer (RFC 9207).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iss {
    /// No `iss`, and none announced (an older provider).
    Off,
    /// Announced, and `iss` is this server's issuer.
    Right,
    /// Announced, and `iss` names another server (a mix-up attack).
    Wrong,
    /// Announced, but no `iss` sent.
    Missing,
}

/// Hostile behaviours of the server (see [`StrictOauth::hostile`]).
#[derive(Clone, Debug, Default)]
pub struct Hostile {
    /// Authorization-server metadata fields replaced (an endpoint named
    /// on a link-local address, say).
    pub endpoints: HashMap<&'static str, String>,
    /// `/register` answers an endless body.
    pub endless_registration: bool,
    /// Refresh grants at `/token` are answered with an endless body.
    pub endless_refresh: bool,
}

/// Bytes an endless answer sends at most (the client must stop long
/// before).
pub const ENDLESS_BYTES: u64 = 2 << 30;

/// Answers `200` with a JSON-looking body that never ends (close-delimited,
/// no `Content-Length`), until the client hangs up or [`ENDLESS_BYTES`].
pub(crate) async fn endless(socket: &mut tokio::net::TcpStream) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"client_id\": \"";
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0u64;
    while sent < ENDLESS_BYTES {
        if socket.write_all(&chunk).await.is_err() {
            return;
        }
        sent += chunk.len() as u64;
    }
    let _ = socket.shutdown().await;
}

struct State {
    hostile: Hostile,
    base: String,
    iss: Iss,
    method: &'static str,
    client: Option<(String, Option<String>)>,
    /// code -> (challenge, redirect_uri)
    codes: HashMap<String, (String, String)>,
    access: HashSet<String>,
    refresh: HashSet<String>,
    counter: u32,
    /// `expires_in` of the tokens of the code exchange (refreshed ones get
    /// an hour).
    first_expires_in: i64,
    seen: Seen,
}

pub struct StrictOauth {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

/// An HTTP/1.1 request as read by [`read_request`].
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

pub(crate) fn json(status: u16, value: serde_json::Value) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: value.to_string().into_bytes(),
    }
}

fn pairs(encoded: &str) -> HashMap<String, String> {
    reqwest::Url::parse(&format!("http://x/?{encoded}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn s256(verifier: &str) -> String {
    let digest = <sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

impl StrictOauth {
    /// Starts the server accepting only `method` at its token and
    /// revocation endpoints; the code exchange's tokens expire after
    /// `first_expires_in` seconds.
    pub async fn start(method: &'static str, first_expires_in: i64) -> StrictOauth {
        assert!(["client_secret_basic", "client_secret_post", "none"].contains(&method));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the OAuth server");
        let addr = listener.local_addr().expect("address");
        let base = format!("http://{addr}");
        let state = Arc::new(Mutex::new(State {
            hostile: Hostile::default(),
            base: base.clone(),
            iss: Iss::Off,
            method,
            client: None,
            codes: HashMap::new(),
            access: HashSet::new(),
            refresh: HashSet::new(),
            counter: 0,
            first_expires_in,
            seen: Seen::default(),
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(serve(socket, state));
            }
        });
        StrictOauth {
            addr,
            base,
            state,
            task,
        }
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Behaves as `hostile` says from now on.
    pub fn hostile(&self, hostile: Hostile) {
        self.state.lock().expect("state").hostile = hostile;
    }

    /// How the authorization responses identify their issuer from now on.
    pub fn identify_issuer(&self, iss: Iss) {
        self.state.lock().expect("state").iss = iss;
    }

    pub fn seen(&self) -> Seen {
        self.state.lock().expect("state").seen.clone()
    }

    /// The registered (or pre-set) client: (`client_id`, `client_secret`).
    pub fn client(&self) -> Option<(String, Option<String>)> {
        self.state.lock().expect("state").client.clone()
    }

    /// Pre-registers a client (for a configured `client_id`).
    pub fn preregister(&self, client_id: &str, client_secret: Option<&str>) {
        self.state.lock().expect("state").client =
            Some((client_id.to_string(), client_secret.map(str::to_string)));
    }

    /// The browser's part: follows the authorization URL and returns where
    /// the server sends the browser back.
    pub async fn approve(&self, authorization_url: &str) -> String {
        crate::mcp_peers::browser_approves(authorization_url).await
    }
}

impl Drop for StrictOauth {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut socket: tokio::net::TcpStream, state: Arc<Mutex<State>>) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    // Refreshes take a moment, as real ones do: concurrent refreshes
    // overlap.
    if request.path == "/token" && String::from_utf8_lossy(&request.body).contains("refresh_token")
    {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let hostile = state.lock().expect("state").hostile.clone();
    let refresh = request.path == "/token"
        && String::from_utf8_lossy(&request.body).contains("grant_type=refresh_token");
    if (request.path == "/register" && hostile.endless_registration)
        || (refresh && hostile.endless_refresh)
    {
        endless(&mut socket).await;
        return;
    }
    let reply = handle(&state, request);
    write_reply(&mut socket, reply).await;
}

/// Reads one request (`Content-Length` bodies only).
pub(crate) async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let target = first.next().unwrap_or("/").to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    Some(Request {
        method,
        path,
        query,
        headers,
        body,
    })
}

/// Writes a reply and closes the connection.
pub(crate) async fn write_reply(socket: &mut tokio::net::TcpStream, reply: Reply) {
    let mut out = format!(
        "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&reply.body);
    let _ = socket.write_all(&bytes).await;
    let _ = socket.shutdown().await;
}

/// Checks the client authentication of a token or revocation request
/// against the declared method.
fn authenticate(
    s: &State,
    headers: &HashMap<String, String>,
    form: &HashMap<String, String>,
) -> Result<(), String> {
    let Some((id, secret)) = &s.client else {
        return Err("no client registered".into());
    };
    let basic = headers
        .get("authorization")
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    match s.method {
        "client_secret_basic" => {
            if form.contains_key("client_secret") {
                return Err("client_secret in the body".into());
            }
            let Some(basic) = basic else {
                return Err("no Basic authorization".into());
            };
            let (u, p) = basic.split_once(':').unwrap_or((&basic, ""));
            let u = pairs(&format!("v={u}")).remove("v").unwrap_or_default();
            let p = pairs(&format!("v={p}")).remove("v").unwrap_or_default();
            if &u != id || Some(&p) != secret.as_ref() {
                return Err("wrong Basic credentials".into());
            }
        }
        "client_secret_post" => {
            if headers.contains_key("authorization") {
                return Err("an Authorization header".into());
            }
            if form.get("client_id") != Some(id) || form.get("client_secret") != secret.as_ref() {
                return Err("wrong client_id/client_secret in the body".into());
            }
        }
        _ => {
            if headers.contains_key("authorization") || form.contains_key("client_secret") {
                return Err("a secret for a public client".into());
            }
            if form.get("client_id") != Some(id) {
                return Err("wrong client_id".into());
            }
        }
    }
    Ok(())
}

fn issue(s: &mut State, expires_in: i64) -> serde_json::Value {
    s.counter += 1;
    let access = format!("at-{}", s.counter);
    let refresh = format!("rt-{}", s.counter);
    s.access.insert(access.clone());
    s.refresh.insert(refresh.clone());
    serde_json::json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": expires_in,
        "refresh_token": refresh,
    })
}

fn handle(state: &Mutex<State>, r: Request) -> Reply {
    let mut s = state.lock().expect("state");
    let base = s.base.clone();
    let form = pairs(&String::from_utf8_lossy(&r.body));
    match (r.method.as_str(), r.path.as_str()) {
        (
            "GET",
            "/.well-known/oauth-protected-resource" | "/.well-known/oauth-protected-resource/mcp",
        ) => json(
            200,
            serde_json::json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [base],
            }),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => {
            let mut metadata = serde_json::json!({
                "authorization_response_iss_parameter_supported": s.iss != Iss::Off,
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "revocation_endpoint": format!("{base}/revoke"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [s.method],
                "revocation_endpoint_auth_methods_supported": [s.method],
            });
            for (field, url) in &s.hostile.endpoints {
                metadata[*field] = url.clone().into();
            }
            json(200, metadata)
        }
        ("POST", "/register") => {
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
            let id = format!("client-{}", uuid::Uuid::new_v4().simple());
            let secret = (s.method != "none").then(|| format!("secret-{}", uuid::Uuid::new_v4()));
            s.client = Some((id.clone(), secret.clone()));
            let mut answer = serde_json::json!({
                "client_id": id,
                "token_endpoint_auth_method": s.method,
                "redirect_uris": body["redirect_uris"],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            });
            if let Some(secret) = secret {
                answer["client_secret"] = secret.into();
            }
            json(201, answer)
        }
        ("GET", "/authorize") => {
            let q = pairs(&r.query);
            let known = s.client.as_ref().map(|c| &c.0) == q.get("client_id");
            if !known
                || q.get("response_type").map(String::as_str) != Some("code")
                || q.get("code_challenge_method").map(String::as_str) != Some("S256")
            {
                return json(400, serde_json::json!({"error": "invalid_request"}));
            }
            s.counter += 1;
            let code = format!("code-{}", s.counter);
            let redirect = q.get("redirect_uri").cloned().unwrap_or_default();
            s.codes.insert(
                code.clone(),
                (
                    q.get("code_challenge").cloned().unwrap_or_default(),
                    redirect.clone(),
                ),
            );
            let mut to = reqwest::Url::parse(&redirect).expect("a redirect URI");
            to.query_pairs_mut().append_pair("code", &code);
            if let Some(state) = q.get("state") {
                to.query_pairs_mut().append_pair("state", state);
            }
            match s.iss {
                Iss::Right => {
                    to.query_pairs_mut().append_pair("iss", &s.base);
                }
                Iss::Wrong => {
                    to.query_pairs_mut()
                        .append_pair("iss", "http://mix-up.example");
                }
                Iss::Off | Iss::Missing => {}
            }
            Reply {
                status: 302,
                headers: vec![("Location".into(), to.to_string())],
                body: Vec::new(),
            }
        }
        ("POST", "/token") => {
            if let Err(why) = authenticate(&s, &r.headers, &form) {
                s.seen.rejected.push(format!("token: {why}"));
                return json(401, serde_json::json!({"error": "invalid_client"}));
            }
            match form.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    let code = form.get("code").cloned().unwrap_or_default();
                    let Some((challenge, redirect)) = s.codes.remove(&code) else {
                        return json(400, serde_json::json!({"error": "invalid_grant"}));
                    };
                    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                    if s256(&verifier) != challenge || form.get("redirect_uri") != Some(&redirect) {
                        return json(400, serde_json::json!({"error": "invalid_grant"}));
                    }
                    s.seen.exchanges += 1;
                    let expires = s.first_expires_in;
                    json(200, issue(&mut s, expires))
                }
                Some("refresh_token") => {
                    let token = form.get("refresh_token").cloned().unwrap_or_default();
                    // Rotation: a refresh token works once.
                    if !s.refresh.remove(&token) {
                        return json(400, serde_json::json!({"error": "invalid_grant"}));
                    }
                    s.seen.refreshes += 1;
                    json(200, issue(&mut s, 3600))
                }
                _ => json(400, serde_json::json!({"error": "unsupported_grant_type"})),
            }
        }
        ("POST", "/revoke") => {
            if let Err(why) = authenticate(&s, &r.headers, &form) {
                s.seen.rejected.push(format!("revoke: {why}"));
                return json(401, serde_json::json!({"error": "invalid_client"}));
            }
            let token = form.get("token").cloned().unwrap_or_default();
            s.refresh.remove(&token);
            s.access.remove(&token);
            s.seen
                .revocations
                .push((token, form.get("token_type_hint").cloned()));
            Reply {
                status: 200,
                headers: Vec::new(),
                body: Vec::new(),
            }
        }
        (_, "/mcp") => {
            let bearer = r
                .headers
                .get("authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_string);
            match bearer {
                Some(token) if s.access.contains(&token) => {
                    s.seen.bearers.push(token);
                    json(
                        200,
                        serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {
                            "protocolVersion": "2025-06-18", "capabilities": {},
                            "serverInfo": {"name": "strict", "version": "1"}}}),
                    )
                }
                _ => Reply {
                    status: 401,
                    headers: vec![(
                        "WWW-Authenticate".into(),
                        format!(
                            "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
                        ),
                    )],
                    body: Vec::new(),
                },
            }
        }
        _ => json(404, serde_json::json!({"error": "not_found"})),
    }
}
