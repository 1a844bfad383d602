//! Hostile upstreams (issue #33, items 2 and 3), each a crafted peer on
//! 127.0.0.1: an OAuth authorization server whose metadata names
//! link-local endpoints or whose answers never end, S3 buckets whose
//! listing never ends or whose keys need exact encoding, and an MCP server
//! that answers malformed JSON-RPC full of control characters.
//!
//! The tests run with `fetch.allow_private_networks` (the peers are on
//! loopback): link-local addresses must be refused anyway.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::types::{ConnectAccount, GenerateUrl};
use workspace_server::mcp::config::{McpAuth, McpServerConfig};
use workspace_tests::hostile_peers::{CraftedMcp, CraftedS3};
use workspace_tests::strict_oauth::{Hostile, StrictOauth};
use workspace_tests::{TestContext, TestUser, req};

const FRONTEND: &str = "http://frontend.test";
const API_PUBLIC: &str = "http://api.test";
/// Where clouds serve instance credentials; nothing may be sent there.
const METADATA: &str = "http://169.254.169.254:9";

fn server(name: &str, url: &str, auth: McpAuth) -> McpServerConfig {
    McpServerConfig {
        name: name.to_string(),
        toolkit_name: name.to_string(),
        toolkit_slug: name.to_lowercase(),
        toolkit_logo: None,
        url: url.to_string(),
        auth,
        client_id: None,
        client_secret: None,
        scopes: Vec::new(),
    }
}

async fn context(name: &str, servers: Vec<McpServerConfig>) -> TestContext {
    TestContext::with_config(name, |c| {
        c.mcp.frontend_url = FRONTEND.to_string();
        c.mcp.api_public_url = API_PUBLIC.to_string();
        c.mcp_servers = servers;
        c.features.mcp_sessions = 10;
        c.fetch.allow_private_networks = true;
        c.kb.poll_interval_ms = 100;
        c.kb.max_attempts = 1;
    })
    .await
}

/// The status, code and message of a failed call.
fn failure<T: std::fmt::Debug>(
    result: Result<T, workspace_client::Error<workspace_client::types::Error>>,
) -> (u16, String, String) {
    match result {
        Err(workspace_client::Error::ErrorResponse(r)) => {
            (r.status().as_u16(), r.error_code.clone(), r.message.clone())
        }
        other => panic!("expected an error response, got {other:?}"),
    }
}

fn log_of(cx: &TestContext) -> String {
    std::fs::read_to_string(&cx.log_path).unwrap_or_default()
}

/// The resident memory of this process (the server runs in it), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The only catalog server's id.
async fn server_id(user: &TestUser, org: Uuid) -> Uuid {
    user.client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id
}

/// Connects `user`'s account at `peer` (registration, approval, code
/// exchange): the session id.
async fn connect(cx: &TestContext, user: &TestUser, org: Uuid, peer: &StrictOauth) -> Uuid {
    let id = server_id(user, org).await;
    let start = user
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(id))
        .send()
        .await
        .unwrap()
        .into_inner();
    let back = peer.approve(&start.redirect_url).await;
    let landed = workspace_tests::browser()
        .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
        .send()
        .await
        .unwrap();
    let location = landed.headers()["location"].to_str().unwrap().to_string();
    assert!(!location.contains("error"), "{location}");
    start.id.parse().unwrap()
}

/// An authorization server's metadata naming a link-local registration,
/// token or revocation endpoint: nothing is sent there, and the refusal
/// says why; it comes at once (no connection attempt to time out).
#[tokio::test]
async fn mcp_oauth_endpoints_on_link_local_addresses_are_refused() {
    let peer = StrictOauth::start("none", 3600).await;
    let cx = context(
        "hostile_oauth_link_local",
        vec![server("Strict", &peer.mcp_url(), McpAuth::Oauth)],
    )
    .await;
    let owner = cx.user("hostile-ll").await;
    let org = owner.personal_org().await;
    let id = server_id(&owner, org).await;

    // Registration.
    peer.hostile(Hostile {
        endpoints: [("registration_endpoint", format!("{METADATA}/register"))].into(),
        ..Default::default()
    });
    let started = Instant::now();
    let (status, code, message) = failure(
        owner
            .client
            .mcp_connect_account()
            .org_id(org)
            .body(ConnectAccount::builder().server_id(id))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (502, "mcp_server_unavailable"));
    assert!(message.contains("registration endpoint"), "{message}");
    assert!(message.contains("link-local"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(peer.client().is_none(), "no client was registered");

    // Token endpoint: the code exchange is refused, the flow fails.
    peer.hostile(Hostile {
        endpoints: [("token_endpoint", format!("{METADATA}/token"))].into(),
        ..Default::default()
    });
    let start = owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(id))
        .send()
        .await
        .unwrap()
        .into_inner();
    let back = peer.approve(&start.redirect_url).await;
    let landed = workspace_tests::browser()
        .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
        .send()
        .await
        .unwrap();
    let location = landed.headers()["location"].to_str().unwrap().to_string();
    assert!(location.contains("error"), "{location}");
    assert_eq!(peer.seen().exchanges, 0);
    let log = log_of(&cx);
    assert!(
        log.contains("169.254.169.254 is a link-local or cloud-metadata address"),
        "the refusal is logged"
    );

    // Revocation: deleting the instance does not send the token there.
    peer.hostile(Hostile {
        endpoints: [("revocation_endpoint", format!("{METADATA}/revoke"))].into(),
        ..Default::default()
    });
    connect(&cx, &owner, org, &peer).await;
    let instance = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances
        .into_iter()
        .find(|i| i.status == "active")
        .expect("an active instance")
        .id;
    let started = Instant::now();
    owner
        .client
        .mcp_delete_instance()
        .org_id(org)
        .instance_id(instance)
        .send()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(peer.seen().revocations.is_empty());
    // The log is written by a drain thread: give it a moment under load.
    let logged = || {
        log_of(&cx).lines().any(|l| {
            l.contains("revoking MCP tokens failed")
                && l.contains("revocation endpoint")
                && l.contains("link-local")
        })
    };
    let mut waited = 0;
    while !logged() && waited < 40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(logged(), "the refused revocation is logged");
    cx.teardown().await;
}

/// A registration or refresh answer that never ends: the server stops
/// reading at its limit, says so, and its memory does not grow with the
/// answer.
#[tokio::test]
async fn mcp_oauth_endless_answers_are_cut_at_the_limit() {
    let peer = StrictOauth::start("none", 30).await;
    let cx = context(
        "hostile_oauth_endless",
        vec![server("Strict", &peer.mcp_url(), McpAuth::Oauth)],
    )
    .await;
    let owner = cx.user("hostile-endless").await;
    let org = owner.personal_org().await;
    let id = server_id(&owner, org).await;
    let before = rss();

    peer.hostile(Hostile {
        endless_registration: true,
        ..Default::default()
    });
    let started = Instant::now();
    let (status, _, message) = failure(
        owner
            .client
            .mcp_connect_account()
            .org_id(org)
            .body(ConnectAccount::builder().server_id(id))
            .send()
            .await,
    );
    assert_eq!(status, 502, "{message}");
    assert!(message.contains("larger than the limit"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // Refresh: the exchange's tokens expire in 30 s, so the first use
    // refreshes; the refresh answer never ends.
    peer.hostile(Hostile::default());
    let session = connect(&cx, &owner, org, &peer).await;
    peer.hostile(Hostile {
        endless_refresh: true,
        ..Default::default()
    });
    let url = owner
        .client
        .mcp_generate_url()
        .org_id(org)
        .body(GenerateUrl::builder().server_id(id).session_id(session))
        .send()
        .await
        .unwrap()
        .into_inner()
        .mcp_url;
    let path = reqwest::Url::parse(&url).unwrap().path().to_string();
    let started = Instant::now();
    let answer = workspace_tests::http()
        .post(format!("{}{path}", cx.base_url))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap();
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("larger than the limit"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let grown = rss().saturating_sub(before);
    assert!(grown < 200 << 20, "the process grew by {grown} bytes");
    cx.teardown().await;
}

/// Polls the knowledge base until it is `ready`.
async fn wait_ready(cx: &TestContext, user: &TestUser, kb: Uuid, limit: Duration) -> Value {
    let started = Instant::now();
    loop {
        let (status, progress) = req(
            &cx.base_url,
            &user.token,
            reqwest::Method::GET,
            "/api/kb/ingestion_status",
            &[("kb_id", kb.to_string())],
            None,
        )
        .await;
        assert_eq!(status, 200, "{progress}");
        if progress["status"] == "ready" {
            return progress;
        }
        assert!(
            started.elapsed() < limit,
            "not ready in {limit:?}: {progress}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn s3_kb(user: &TestUser, org: Uuid, endpoint: &str, prefix: &str) -> Uuid {
    use workspace_tests::s3::{ACCESS_KEY, SECRET_KEY};
    workspace_tests::resources::knowledge_base(
        &user.client,
        org,
        json!({
            "name": "Bucket", "description": "", "embedding_model": "all-minilm-l6-v2",
            "sources": [{"type": "object_store", "config": {
                "bucket_name": "kb-bucket", "prefix": prefix, "cloud_region": "us-east-1",
                "endpoint_url": endpoint,
                "cloud_access_key_id": ACCESS_KEY, "cloud_secret_access_key": SECRET_KEY}}]
        }),
    )
    .await
    .id
}

async fn documents(cx: &TestContext, user: &TestUser, kb: Uuid) -> Vec<Value> {
    let (_, page) = req(
        &cx.base_url,
        &user.token,
        reqwest::Method::GET,
        "/api/kb/list_documents",
        &[("kb_id", kb.to_string()), ("limit", "100".into())],
        None,
    )
    .await;
    page["documents"].as_array().cloned().unwrap_or_default()
}

/// A bucket whose listing says "more follows" forever (empty pages): the
/// listing stops at `kb.s3_max_list_pages` and the source fails with the
/// reason.
#[tokio::test]
async fn an_endless_s3_listing_stops_and_fails_the_source() {
    let bucket = CraftedS3::start(Vec::new(), true).await;
    let cx = TestContext::with_config("hostile_s3_endless", |c| {
        c.fetch.allow_private_networks = true;
        c.kb.poll_interval_ms = 100;
        c.kb.max_attempts = 1;
        c.kb.s3_max_list_pages = 20;
    })
    .await;
    let ada = cx.user("hostile-s3-endless").await;
    let org = ada.personal_org().await;
    let kb = s3_kb(&ada, org, &bucket.endpoint(), "docs/").await;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(60)).await;
    let source = &progress["sources"][0];
    assert_eq!(source["status"], "failed", "{progress}");
    let error = source["error"].as_str().unwrap_or_default();
    assert!(error.contains("kb.s3_max_list_pages"), "{error}");
    assert_eq!(
        bucket.lists.load(std::sync::atomic::Ordering::SeqCst),
        20,
        "one request per allowed page"
    );
    cx.teardown().await;
}

/// Keys that need exact encoding are each requested as themselves, once
/// encoded, against a signature-checking S3 server (s3s-fs); a crafted
/// bucket that checks the exact key lists keys no URL can name (`..`
/// segments, a leading `/`) and a folder marker among good keys: those
/// fail alone with the reason, the marker is skipped, the rest is
/// ingested.
#[tokio::test]
async fn s3_keys_are_encoded_once_and_bad_keys_fail_alone() {
    use workspace_tests::s3::LocalS3;
    workspace_tests::ensure_local_model().await;
    let odd = [
        "r\u{e9}sum\u{e9}.txt",
        "back\\slash.txt",
        "\u{202e}txt.exe.txt",
        "what?.txt",
        "hash#tag.txt",
        "%2e%2e",
        "with space.txt",
        "plus+sign.txt",
        "sub dir/deep.txt",
    ];
    let s3 = LocalS3::start().await;
    for (i, key) in odd.iter().enumerate() {
        s3.put(
            "kb-bucket",
            &format!("docs/{key}"),
            format!("Document number {i} about harbour cranes and tides.").as_bytes(),
        );
    }
    let crafted = CraftedS3::start(
        vec![
            (
                "docs/good.txt".into(),
                b"A good document about ropes.".to_vec(),
            ),
            ("docs/a/../escape.txt".into(), b"never fetched".to_vec()),
            ("docs/./dot.txt".into(), b"never fetched".to_vec()),
            ("docs/dir/".into(), Vec::new()),
            (
                "docs/r\u{e9}sum\u{e9} 2.txt".into(),
                b"Another good one about sails.".to_vec(),
            ),
            ("/docs/lead.txt".into(), b"never fetched".to_vec()),
        ],
        false,
    )
    .await;
    let cx = TestContext::with_config("hostile_s3_keys", |c| {
        c.fetch.allow_private_networks = true;
        c.kb.poll_interval_ms = 100;
        c.kb.max_attempts = 1;
    })
    .await;
    let ada = cx.user("hostile-s3-keys").await;
    let org = ada.personal_org().await;

    let kb = s3_kb(&ada, org, &s3.endpoint(), "docs/").await;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(180)).await;
    let docs = documents(&cx, &ada, kb).await;
    assert_eq!(docs.len(), odd.len(), "{progress} {docs:?}");
    for doc in &docs {
        assert_eq!(doc["status"], "completed", "{doc}");
    }

    let kb = s3_kb(&ada, org, &crafted.endpoint(), "docs").await;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(120)).await;
    assert_eq!(progress["sources"][0]["status"], "completed", "{progress}");
    let docs = documents(&cx, &ada, kb).await;
    let by_title = |t: &str| {
        docs.iter()
            .find(|d| d["title"] == t)
            .unwrap_or_else(|| panic!("no document {t}: {docs:?}"))
    };
    assert_eq!(by_title("good.txt")["status"], "completed");
    assert_eq!(by_title("r\u{e9}sum\u{e9} 2.txt")["status"], "completed");
    for bad in ["escape.txt", "dot.txt"] {
        let doc = by_title(bad);
        assert_eq!(doc["status"], "failed", "{doc}");
        assert!(
            doc["error"]
                .as_str()
                .unwrap_or_default()
                .contains(". or .. segment"),
            "{doc}"
        );
    }
    assert_eq!(
        docs.len(),
        4,
        "the folder marker and the key outside the prefix: {docs:?}"
    );
    let gets = crafted.gets.lock().unwrap().clone();
    assert!(
        gets.contains(&"docs/r\u{e9}sum\u{e9} 2.txt".to_string()),
        "{gets:?}"
    );
    assert!(
        gets.iter().all(|k| !k.contains("..") && !k.contains("/./")),
        "{gets:?}"
    );
    cx.teardown().await;
}

/// Whether `value` holds a control character anywhere (in any string).
fn has_control(value: &Value) -> bool {
    match value {
        Value::String(s) => s.chars().any(|c| c.is_control() || c == '\u{202e}'),
        Value::Array(a) => a.iter().any(has_control),
        Value::Object(o) => o
            .iter()
            .any(|(k, v)| k.chars().any(char::is_control) || has_control(v)),
        _ => false,
    }
}

/// An MCP server answering malformed JSON-RPC full of NUL, ESC, CR/LF and
/// a bidi override: the 502 names the server and the kind of failure, not
/// the answer, and every log line stays one line with the bytes escaped.
#[tokio::test]
async fn malformed_jsonrpc_is_not_echoed_and_is_escaped_in_the_log() {
    let forged =
        "{\"jsonrpc\": \"2.0\", FORGED\u{0}\u{1b}[2J\r\n{\"msg\":\"admin logged in\"}\u{202e}";
    let failing = CraftedMcp::start(500, "application/json", forged.as_bytes().to_vec()).await;
    let garbled = CraftedMcp::start(200, "application/json", forged.as_bytes().to_vec()).await;
    let cx = context(
        "hostile_mcp_malformed",
        vec![
            server("Failing", &failing.url(), McpAuth::None),
            server("Garbled", &garbled.url(), McpAuth::None),
        ],
    )
    .await;
    let owner = cx.user("hostile-mcp").await;
    let org = owner.personal_org().await;
    let servers = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    for s in &servers {
        let (status, code, message) = failure(
            owner
                .client
                .mcp_server_with_tools()
                .org_id(org)
                .server_id(s.id)
                .send()
                .await,
        );
        assert_eq!((status, code.as_str()), (502, "mcp_server_unavailable"));
        assert!(message.contains(&s.name), "{message}");
        assert!(!message.contains("FORGED"), "{message}");
        assert!(!message.contains("admin logged in"), "{message}");
        assert!(!message.chars().any(char::is_control), "{message:?}");
    }
    // Let the log writer catch up, then read every line as JSON.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = log_of(&cx);
    let mut forged_lines = 0;
    for line in log.lines() {
        let record: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not a record ({e}): {line:?}"));
        assert!(
            !has_control(&record),
            "raw control characters logged: {line}"
        );
        assert!(
            record.get("msg") != Some(&json!("admin logged in")),
            "{line}"
        );
        if line.contains("FORGED") {
            forged_lines += 1;
            assert!(line.contains("FORGED\\\\0\\\\e[2J\\\\r\\\\n"), "{line}");
        }
    }
    assert!(forged_lines > 0, "the failure is logged (escaped)");
    cx.teardown().await;
}
