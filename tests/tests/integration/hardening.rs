//! Hostile load, database outages and bad input (issue #12): bounded
//! password hashing, atomic failed-login counting, rate limits shared by
//! instances, input bounds, look-alike addresses, invalid UTF-8, slow
//! bodies, database outages (of this test's database only: it is closed to
//! new connections and its backends are terminated, so the shared cluster
//! keeps serving other tests), answers that must survive an outage,
//! bounded lists, error logs and `/metrics`.

use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;
use workspace_api::conversations::ConversationStreamEvent as Event;
use workspace_client::types::{
    ConversationCreate, ConversationSessionCreate, LoginRequest, StreamChatRequest,
};
use workspace_tests::sse::{EventReader, content};
use workspace_tests::{TEST_PASSWORD, TestContext, error_of, raw, too_many_requests};

fn login_body(email: &str, password: &str) -> serde_json::Value {
    serde_json::json!({ "email": email, "password": password })
}

/// A memory figure of this process (nextest runs each test in a process
/// of its own) from /proc/self/status, in MiB: `VmHWM` is the peak
/// resident size, `RssAnon` the resident heap and stacks (without the
/// mapped executable, which is large in a debug test binary).
fn status_mib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb / 1024)
        .unwrap_or(0)
}

#[tokio::test]
async fn four_hundred_concurrent_logins_stay_bounded() {
    let ctx = TestContext::with_config("hardening_concurrent_logins", |c| {
        c.auth.hash_concurrency = Some(2);
        c.auth.hash_queue = 32;
    })
    .await;
    let url = format!("{}/api/auth/login", ctx.base_url);
    let http = workspace_tests::http();
    let before = (
        status_mib("VmRSS:"),
        status_mib("RssAnon:"),
        status_mib("RssFile:"),
    );
    // Sample the anonymous (heap) memory while the logins run.
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(status_mib("RssAnon:"));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let http = http.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let response = http
                    .post(&url)
                    .json(&login_body(
                        &format!("nobody{i}@example.com"),
                        "wrong password 1",
                    ))
                    .timeout(Duration::from_secs(120))
                    .send()
                    .await
                    .expect("every request gets an answer");
                let status = response.status().as_u16();
                let retry_after = response.headers().contains_key("retry-after");
                let body: serde_json::Value = response.json().await.expect("a JSON body");
                (
                    status,
                    retry_after,
                    body["error_code"].as_str().unwrap_or("").to_string(),
                )
            })
        })
        .collect();
    let mut unauthorized = 0;
    let mut busy = 0;
    for task in tasks {
        let (status, retry_after, code) = task.await.unwrap();
        match status {
            401 => unauthorized += 1,
            503 => {
                assert_eq!(code, "server_busy");
                assert!(retry_after, "503 without Retry-After");
                busy += 1;
            }
            other => panic!("unexpected status {other} ({code})"),
        }
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let peak_anon = sampler.join().unwrap();
    assert_eq!(unauthorized + busy, 400);
    assert!(unauthorized >= 2, "only {unauthorized} were verified");
    let peak = status_mib("VmHWM:");
    eprintln!(
        "400 concurrent logins: {unauthorized} x 401, {busy} x 503; before: RSS {} MiB \
         (anon {}, file {}); peak RSS {peak} MiB, peak anon {peak_anon} MiB \
         (server and 400 clients in one process)",
        before.0, before.1, before.2
    );
    // Unbounded, 400 hashes of 19 MiB each would be 7.4 GiB.
    assert!(peak_anon < 200, "peak anonymous RSS {peak_anon} MiB");
    ctx.teardown().await;
}

#[tokio::test]
async fn parallel_wrong_passwords_verify_at_most_the_limit() {
    let ctx = TestContext::new("hardening_failed_login_race").await;
    let ada = ctx.user("ada").await;
    let url = format!("{}/api/auth/login", ctx.base_url);
    let http = workspace_tests::http();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (http, url, email) = (http.clone(), url.clone(), ada.email.clone());
            tokio::spawn(async move {
                http.post(&url)
                    .json(&login_body(&email, "wrong horse battery"))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    let checked = statuses.iter().filter(|s| **s == 401).count();
    let locked = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(checked, 5, "{statuses:?}");
    assert_eq!(locked, 45, "{statuses:?}");

    // Failures that left the window are purged.
    let db = ctx.db().await;
    db.execute(
        "UPDATE login_failures SET failed_at = now() - interval '1 day'",
        &[],
    )
    .await
    .unwrap();
    let datastore = &ctx.server.http.app_private().datastore;
    let deleted = datastore
        .expire_counters(900, 30 * 24 * 3600)
        .await
        .unwrap();
    assert!(deleted >= 5, "{deleted}");
    let left: i64 = db
        .query_one("SELECT count(*) FROM login_failures", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    // And the address can log in again.
    ctx.anon()
        .auth_login()
        .body(
            LoginRequest::builder()
                .email(ada.email.clone())
                .password(TEST_PASSWORD.to_string()),
        )
        .send()
        .await
        .unwrap();
    ctx.teardown().await;
}

#[tokio::test]
async fn login_rate_limit_per_address_holds_across_instances() {
    // The limit slides (see `login_rate_limit_slides_across_a_window_boundary`),
    // so four requests straddling a window boundary still count together.
    let ctx = TestContext::with_config("hardening_rate_limit", |c| {
        c.rate_limits.login_per_address = 3;
        c.rate_limits.window_secs = 1800;
    })
    .await;
    let second = ctx
        .second_instance(|c| {
            c.rate_limits.login_per_address = 3;
            c.rate_limits.window_secs = 1800;
        })
        .await;
    let second_url = format!("http://{}", second.local_addr());
    let body = || Some(login_body("nobody@example.com", "wrong password 1"));
    let post = reqwest::Method::POST;
    assert_eq!(
        raw(
            &ctx.base_url,
            None,
            post.clone(),
            "/api/auth/login",
            &[],
            body()
        )
        .await
        .0,
        401
    );
    assert_eq!(
        raw(
            &second_url,
            None,
            post.clone(),
            "/api/auth/login",
            &[],
            body()
        )
        .await
        .0,
        401
    );
    assert_eq!(
        raw(
            &ctx.base_url,
            None,
            post.clone(),
            "/api/auth/login",
            &[],
            body()
        )
        .await
        .0,
        401
    );
    let (retry, code) = too_many_requests(
        workspace_tests::http()
            .post(format!("{second_url}/api/auth/login"))
            .json(&body()),
    )
    .await;
    // The four requests still weigh in the next window: a fifth fits at
    // most two windows from now (`over_limit`).
    assert!((1..=2 * 1800).contains(&retry), "{retry}");
    assert_eq!(code, "rate_limited");
    second.shutdown().await.unwrap();
    ctx.teardown().await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_is_limited() {
    // Behind a load balancer every request comes from its address: the
    // per-address limit must count the client it forwards for, and only
    // when the peer is a configured proxy.
    let limits = |c: &mut workspace_server::config::Config| {
        c.rate_limits.login_per_address = 2;
        c.rate_limits.window_secs = 1800;
        c.auth.login_max_failures = 100;
    };
    let ctx = TestContext::with_config("hardening_trusted_proxy", |c| {
        limits(c);
        c.http.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    // Another instance, with no trusted proxy.
    let direct = ctx.second_instance(limits).await;
    let direct_url = format!("http://{}", direct.local_addr());
    let login = |base: &str, forwarded_for: &str| {
        workspace_tests::http()
            .post(format!("{base}/api/auth/login"))
            .header("X-Forwarded-For", forwarded_for)
            .json(&login_body("nobody@example.com", "wrong password"))
    };
    let status =
        |r: reqwest::RequestBuilder| async move { r.send().await.unwrap().status().as_u16() };
    assert_eq!(status(login(&ctx.base_url, "203.0.113.7")).await, 401);
    assert_eq!(status(login(&ctx.base_url, "203.0.113.7")).await, 401);
    let (_, code) = too_many_requests(login(&ctx.base_url, "203.0.113.7")).await;
    assert_eq!(code, "rate_limited");
    // Another client behind the same proxy has its own count.
    assert_eq!(status(login(&ctx.base_url, "203.0.113.8")).await, 401);
    // A client cannot escape its count by prepending an address: the
    // proxy appended the one it saw.
    let (_, code) = too_many_requests(login(&ctx.base_url, "198.51.100.1, 203.0.113.7")).await;
    assert_eq!(code, "rate_limited");
    // Without trusted proxies the header is not believed: the peer
    // (127.0.0.1, not counted so far) is limited whatever it claims.
    assert_eq!(status(login(&direct_url, "198.51.100.2")).await, 401);
    assert_eq!(status(login(&direct_url, "198.51.100.3")).await, 401);
    let (_, code) = too_many_requests(login(&direct_url, "198.51.100.4")).await;
    assert_eq!(code, "rate_limited");
    direct.shutdown().await.unwrap();
    ctx.teardown().await;
}

#[tokio::test]
async fn login_rate_limit_slides_across_a_window_boundary() {
    // Three logins late in one 10 s window and a fourth just after the
    // next window starts: a fixed window would count the fourth from zero
    // and let it through; the sliding window still counts the three.
    let ctx = TestContext::with_config("hardening_rate_slide", |c| {
        c.rate_limits.login_per_address = 3;
        c.rate_limits.window_secs = 10;
        c.auth.login_max_failures = 100;
    })
    .await;
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    // Six seconds into a window (the windows start at multiples of 10 s).
    let start = now();
    let window = (start / 10.0).floor();
    let at = if start - window * 10.0 <= 6.0 {
        window * 10.0 + 6.0
    } else {
        window * 10.0 + 16.0
    };
    tokio::time::sleep(Duration::from_secs_f64(at - start)).await;
    let first_window = (now() / 10.0).floor();
    let login = || {
        raw(
            &ctx.base_url,
            None,
            reqwest::Method::POST,
            "/api/auth/login",
            &[],
            Some(login_body("nobody@example.com", "wrong password")),
        )
    };
    for _ in 0..3 {
        assert_eq!(login().await.0, 401);
    }
    assert_eq!(
        (now() / 10.0).floor(),
        first_window,
        "the three logins took more than 4 s"
    );
    // 0.3 s into the next window: the three weigh 2.9, plus this one.
    let next = (first_window + 1.0) * 10.0 + 0.3;
    tokio::time::sleep(Duration::from_secs_f64((next - now()).max(0.0))).await;
    let (retry, code) = too_many_requests(
        workspace_tests::http()
            .post(format!("{}/api/auth/login", ctx.base_url))
            .json(&login_body("nobody@example.com", "wrong password")),
    )
    .await;
    // A fifth request fits once the three weigh at most 1: about 6.7 s
    // into the window.
    assert!((1..=10).contains(&retry), "{retry}");
    assert_eq!(code, "rate_limited");
    ctx.teardown().await;
}

#[tokio::test]
async fn oversized_inputs_are_refused_before_any_sql() {
    let ctx = TestContext::new("hardening_input_bounds").await;
    let ada = ctx.user("ada").await;
    let org = ada.personal_org().await;
    let post = reqwest::Method::POST;
    // An e-mail that overflowed the index of login_failures (was a 500).
    let long = format!("{}@example.com", "a".repeat(3000));
    let (status, code) = raw(
        &ctx.base_url,
        None,
        post.clone(),
        "/api/auth/login",
        &[],
        Some(login_body(&long, "whatever password")),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_email"));
    // A 900 KB role description (was accepted).
    let (status, _) = raw(
        &ctx.base_url,
        Some(&ada.token),
        post.clone(),
        "/api/roles/create",
        &[("org_id", org.to_string())],
        Some(serde_json::json!({
            "name": "big", "hierarchy_level": 10, "permission_ids": [],
            "description": "x".repeat(900_000),
        })),
    )
    .await;
    assert_eq!(status, 400);
    // The bounds are in the document.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("../openapi/workspace.json").unwrap())
            .unwrap();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["LoginRequest"]["properties"]["email"]["maxLength"],
        254
    );
    assert_eq!(
        schemas["SignupRequest"]["properties"]["email"]["format"],
        "email"
    );
    assert_eq!(
        schemas["CreateRoleRequest"]["properties"]["description"]["maxLength"],
        1000
    );
    let users_list = &doc["paths"]["/api/users/list"]["get"]["parameters"];
    let limit = users_list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!(limit["schema"]["minimum"], 1);
    assert_eq!(limit["schema"]["maximum"], 100);
    ctx.teardown().await;
}

#[tokio::test]
async fn look_alike_addresses_do_not_make_new_accounts() {
    let ctx = TestContext::new("hardening_look_alikes").await;
    let signup = |email: &str| {
        Some(serde_json::json!({
            "email": email, "first_name": "Ada", "last_name": "L",
            "password": "correct horse battery",
        }))
    };
    let post = reqwest::Method::POST;
    let path = "/api/auth/signup";
    assert_eq!(
        raw(
            &ctx.base_url,
            None,
            post.clone(),
            path,
            &[],
            signup("ren\u{e9}e@example.com")
        )
        .await
        .0,
        201
    );
    // The decomposed spelling is the same address.
    let (status, code) = raw(
        &ctx.base_url,
        None,
        post.clone(),
        path,
        &[],
        signup("rene\u{301}e@example.com"),
    )
    .await;
    assert_eq!((status, code.as_str()), (409, "email_taken"));
    for look_alike in [
        "ren\u{e9}e\u{200b}@example.com",
        "ren\u{ad}\u{e9}e@example.com",
        "\u{202e}ren\u{e9}e@example.com",
        "r\u{435}n\u{e9}e@example.com",
    ] {
        let (status, code) = raw(
            &ctx.base_url,
            None,
            post.clone(),
            path,
            &[],
            signup(look_alike),
        )
        .await;
        assert_eq!(
            (status, code.as_str()),
            (400, "invalid_email"),
            "{look_alike:?}"
        );
    }
    ctx.teardown().await;
}

#[tokio::test]
async fn invalid_utf8_in_a_query_is_refused() {
    let ctx = TestContext::new("hardening_query_utf8").await;
    let ada = ctx.user("ada").await;
    let response = workspace_tests::http()
        .post(format!("{}/api/org/create_org?name=%FF%FE", ctx.base_url))
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error_code"], "invalid_request");
    let orgs = ada.client.org_list().send().await.unwrap().into_inner();
    assert_eq!(orgs.len(), 1, "an organization was created");
    ctx.teardown().await;
}

#[tokio::test]
async fn a_body_that_never_arrives_times_out() {
    let ctx = TestContext::with_config("hardening_slow_body", |c| {
        c.http.body_read_timeout_secs = 1;
    })
    .await;
    let mut socket = tokio::net::TcpStream::connect(ctx.server.local_addr())
        .await
        .unwrap();
    socket
        .write_all(
            b"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"email\":",
        )
        .await
        .unwrap();
    let started = Instant::now();
    let mut response = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut response)).await;
    assert!(read.is_ok(), "the connection stayed open");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(5));
    ctx.teardown().await;
}

/// Reads until the peer closes; `None` if it is still open after `wait`.
async fn closed_within(socket: &mut tokio::net::TcpStream, wait: Duration) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    tokio::time::timeout(wait, socket.read_to_end(&mut seen))
        .await
        .ok()
        .map(|_| seen)
}

/// One keep-alive request on `socket`; returns the response head.
async fn keep_alive_request(socket: &mut tokio::net::TcpStream) -> String {
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buf))
        .await
        .expect("no response")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn a_silent_connection_is_closed() {
    let ctx = TestContext::with_config("hardening_silent_connection", |c| {
        c.http.first_byte_timeout_secs = 1;
    })
    .await;
    let started = Instant::now();
    let mut silent = tokio::net::TcpStream::connect(ctx.server.local_addr())
        .await
        .unwrap();
    let seen = closed_within(&mut silent, Duration::from_secs(10))
        .await
        .expect("a connection that never sent a byte stayed open");
    assert!(seen.is_empty(), "{seen:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    ctx.teardown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let ctx = TestContext::with_config("hardening_idle_keep_alive", |c| {
        c.http.header_read_timeout_secs = 1;
    })
    .await;
    let mut socket = tokio::net::TcpStream::connect(ctx.server.local_addr())
        .await
        .unwrap();
    let head = keep_alive_request(&mut socket).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    closed_within(&mut socket, Duration::from_secs(10))
        .await
        .expect("an idle keep-alive connection stayed open");
    ctx.teardown().await;
}

#[tokio::test]
async fn connections_are_capped() {
    let ctx = TestContext::with_config("hardening_connection_cap", |c| {
        c.http.max_connections = Some(3);
    })
    .await;
    let addr = ctx.server.local_addr();
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = keep_alive_request(&mut socket).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(socket);
    }
    // A fourth connection is not served while three are open...
    let mut fourth = tokio::net::TcpStream::connect(addr).await.unwrap();
    fourth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let early = tokio::time::timeout(Duration::from_millis(800), fourth.read(&mut buf)).await;
    assert!(early.is_err(), "served beyond the connection cap");
    // ...and is served as soon as one of them closes.
    drop(held.pop());
    let n = tokio::time::timeout(Duration::from_secs(5), fourth.read(&mut buf))
        .await
        .expect("not served after a slot freed")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    ctx.teardown().await;
}

/// The response to `request`, read until the server closes.
async fn raw_exchange(ctx: &TestContext, request: &[u8]) -> String {
    let mut socket = tokio::net::TcpStream::connect(ctx.server.local_addr())
        .await
        .unwrap();
    // The server may answer (and close) before it read everything.
    let _ = socket.write_all(request).await;
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut seen)).await;
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn requests_the_http_layer_refuses_get_json_error_bodies() {
    let ctx = TestContext::new("hardening_http_layer_errors").await;
    let long_uri = format!(
        "GET /healthz?{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    let mut many_headers = b"GET /healthz HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..200 {
        many_headers.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    many_headers.extend_from_slice(b"\r\n");
    for (request, status, code) in [
        (long_uri.into_bytes(), "414", "uri_too_long"),
        (many_headers, "431", "headers_too_large"),
        (b"NOT HTTP\r\n\r\n".to_vec(), "400", "invalid_request"),
    ] {
        let response = raw_exchange(&ctx, &request).await;
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status} ")),
            "{response}"
        );
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("content-type: application/json"), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error_code"], code, "{body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(body["request_id"].as_str().is_some());
    }
    ctx.teardown().await;
}

/// Closes this test's database to new connections and ends its sessions
/// (except `keep`), like a database server going away.
async fn database_down(ctx: &TestContext, keep: Option<i32>) {
    let admin = ctx.admin_db().await;
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {} ALLOW_CONNECTIONS false",
            ctx.database
        ))
        .await
        .unwrap();
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid() AND pid <> $2",
            &[&ctx.database, &keep.unwrap_or(0)],
        )
        .await
        .unwrap();
}

async fn database_up(ctx: &TestContext) {
    ctx.admin_db()
        .await
        .batch_execute(&format!(
            "ALTER DATABASE {} ALLOW_CONNECTIONS true",
            ctx.database
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_database_outage_is_503_fails_fast_and_recovers() {
    let ctx = TestContext::new("hardening_db_outage").await;
    let ada = ctx.user("ada").await;
    let org = ada.personal_org().await;
    // A query in flight when the database goes away: hold a lock it waits
    // for, then end the server's sessions.
    let mut locker = ctx.db().await;
    let locker_pid: i32 = locker
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = locker.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE conversations IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let client = ada.client.clone();
    let in_flight =
        tokio::spawn(async move { error_of(client.conversation_list().org_id(org).send().await) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    database_down(&ctx, Some(locker_pid)).await;
    assert_eq!(
        in_flight.await.unwrap(),
        (503, "database_unavailable".to_string())
    );

    // While it is down: 503 at once, every time.
    let started = Instant::now();
    for _ in 0..50 {
        assert_eq!(
            error_of(ada.client.conversation_list().org_id(org).send().await),
            (503, "database_unavailable".to_string())
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let health = ctx.server.http.app_private().datastore.health();
    let fast = health
        .fast_failures
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(fast > 0, "no request failed fast");

    tx.rollback().await.unwrap();
    database_up(&ctx).await;
    let started = Instant::now();
    loop {
        match ada.client.conversation_list().org_id(org).send().await {
            Ok(_) => break,
            Err(_) if started.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("no recovery: {e:?}"),
        }
    }
    eprintln!(
        "recovered {:?} after the database came back",
        started.elapsed()
    );

    // The 5xx were logged at error level with the cause and request id.
    let log = std::fs::read_to_string(&ctx.log_path).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("\"msg\":\"request failed\"") && l.contains("administrator command"))
        .unwrap_or_else(|| panic!("no error line with the cause in the log"));
    let record: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(record["level"], 50);
    assert!(record["req_id"].is_string());
    assert_eq!(record["error_code"], "database_unavailable");
    ctx.teardown().await;
}

/// The authorization lookups of concurrent requests share a few pipelined
/// connections: every request still gets its own caller's answer, and a
/// shared connection the database ends is replaced on its next use.
#[tokio::test]
async fn shared_connections_answer_each_request_and_are_replaced() {
    let ctx = TestContext::with_config("hardening_shared_connections", |c| {
        c.database.shared_connections = 2;
    })
    .await;
    let mut users = Vec::new();
    for name in ["ada", "grace", "edsger"] {
        users.push(ctx.user(name).await);
    }
    let mut calls = Vec::new();
    for round in 0..40 {
        let user = &users[round % users.len()];
        let (client, id, org) = (user.client.clone(), user.id, user.personal_org().await);
        calls.push(tokio::spawn(async move {
            let me = client.users_me().send().await.unwrap().into_inner();
            assert_eq!(me.id, id);
            // An org-scoped request: its lookup runs on a shared connection.
            client.conversation_list().org_id(org).send().await.unwrap();
        }));
    }
    for call in calls {
        call.await.unwrap();
    }

    // The database ends every session (as on a restart or a failover).
    database_down(&ctx, None).await;
    database_up(&ctx).await;
    let started = Instant::now();
    let mut failures = 0;
    loop {
        match users[0].client.users_me().send().await {
            Ok(me) => {
                assert_eq!(me.into_inner().id, users[0].id);
                break;
            }
            Err(e) if started.elapsed() < Duration::from_secs(10) => {
                assert_eq!(error_of::<()>(Err(e)).0, 503);
                failures += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no recovery: {e:?}"),
        }
    }
    // Both shared connections work again: consecutive requests use both.
    for user in &users {
        let me = user.client.users_me().send().await.unwrap().into_inner();
        assert_eq!(me.id, user.id);
    }
    eprintln!("recovered after {failures} failed requests");
    ctx.teardown().await;
}

#[tokio::test]
async fn a_delivered_answer_is_stored_after_an_outage() {
    let ctx = TestContext::with_config("hardening_answer_outage", |c| {
        c.providers.offline_chunk_delay_ms = 20;
    })
    .await;
    let ada = ctx.user("ada").await;
    let org = ada.personal_org().await;
    let model = ada
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()[0]
        .id;
    let conversation = ada
        .client
        .conversation_create()
        .org_id(org)
        .body(ConversationCreate::builder().title("outage".to_string()))
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let session = ada
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            ConversationSessionCreate::builder()
                .conversation_id(conversation)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let message = "word ".repeat(150);
    let response = ada
        .client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(session)
                .message(message),
        )
        .send()
        .await
        .unwrap();
    let mut reader = EventReader::new(response.into_inner());
    let mut events = Vec::new();
    let message_id = match reader.next().await {
        Some(Event::Start { message_id }) => message_id,
        other => panic!("{other:?}"),
    };
    // Part of the answer is saved while it streams.
    let db = ctx.db().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let partial: (String, String) = db
        .query_one(
            "SELECT status, content FROM conversation_messages WHERE id = $1::text::uuid",
            &[&message_id],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(partial.0, "streaming");
    assert!(!partial.1.is_empty(), "nothing saved after 1.5 s");
    drop(db);

    // The database goes away mid-answer and comes back 4 s later.
    database_down(&ctx, None).await;
    let restore = {
        let admin = ctx.admin_db().await;
        let name = ctx.database.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            admin
                .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
                .await
                .unwrap();
        })
    };
    while let Some(event) = reader.next().await {
        events.push(event);
    }
    restore.await.unwrap();
    assert_eq!(events.last(), Some(&Event::End), "{:?}", events.last());
    let streamed = content(&events);
    let db = ctx.db().await;
    let row = db
        .query_one(
            "SELECT status, content FROM conversation_messages WHERE id = $1::text::uuid",
            &[&message_id],
        )
        .await
        .unwrap();
    let stored: String = row.get(1);
    assert_eq!(row.get::<_, String>(0), "complete");
    assert!(
        stored.ends_with(&streamed),
        "stored text differs from the delivered one"
    );
    assert!(stored.contains("Earlier messages in this session"));
    ctx.teardown().await;
}

#[tokio::test]
async fn lists_are_bounded() {
    let ctx = TestContext::new("hardening_bounded_lists").await;
    let ada = ctx.user("ada").await;
    let org = ada.personal_org().await;
    let db = ctx.db().await;
    db.execute(
        "INSERT INTO conversations (id, organization_id, title) \
         SELECT gen_random_uuid(), $1, 'c' || n FROM generate_series(1, 120) n",
        &[&org],
    )
    .await
    .unwrap();
    let list = |limit: Option<u32>, offset: Option<u32>| {
        let mut b = ada.client.conversation_list().org_id(org);
        if let Some(l) = limit {
            b = b.limit(l);
        }
        if let Some(o) = offset {
            b = b.offset(o);
        }
        b.send()
    };
    // Pages reading at most 200 rows run on a shared connection, deeper
    // ones on a pooled connection: both paths answer alike.
    assert_eq!(list(None, None).await.unwrap().len(), 100);
    assert_eq!(list(Some(500), None).await.unwrap().len(), 120);
    assert_eq!(list(Some(50), Some(100)).await.unwrap().len(), 20);
    let (status, code) = raw(
        &ctx.base_url,
        Some(&ada.token),
        reqwest::Method::GET,
        "/api/conversation/list",
        &[("org_id", org.to_string()), ("limit", "501".to_string())],
        None,
    )
    .await;
    assert_eq!(status, 400, "{code}");
    ctx.teardown().await;
}

#[tokio::test]
async fn metrics_are_private_and_in_prometheus_format() {
    let ctx = TestContext::with_config("hardening_metrics", |c| {
        c.metrics.bind_address = Some("127.0.0.1:0".parse().unwrap());
        c.metrics.token = Some("metrics-token-0123456789".to_string());
        c.database.shared_connections = 2;
    })
    .await;
    let ada = ctx.user("ada").await;
    // Opens a shared connection (users/me runs on one).
    ada.client.users_me().send().await.unwrap();
    let addr = ctx.server.metrics_addr().expect("metrics served");
    assert_ne!(addr, ctx.server.local_addr());
    let url = format!("http://{addr}/metrics");
    let http = workspace_tests::http();
    assert_eq!(http.get(&url).send().await.unwrap().status().as_u16(), 401);
    let text = http
        .get(&url)
        .bearer_auth("metrics-token-0123456789")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("workspace_http_requests_total{operation=\"auth_login\",status=\"200\"} 1"),
        "{text}"
    );
    assert!(text.contains("workspace_http_request_duration_seconds_bucket{operation=\"auth_signup\",status=\"201\",le=\"+Inf\"} 1"));
    assert!(text.contains("workspace_db_pool_max_connections 8"));
    assert!(
        text.contains("workspace_db_shared_max_connections 2"),
        "{text}"
    );
    let shared_open: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("workspace_db_shared_connections "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no shared connections gauge: {text}"));
    assert!((1..=2).contains(&shared_open), "{shared_open}");
    assert!(text.contains("workspace_password_hash_queue_depth 0"));
    // Every background task is named and running.
    for task in [
        "chat_listener",
        "counter_janitor",
        "stream_janitor",
        "stream_heartbeat",
        "stream_sweeper",
        "kb_worker_0",
        "metrics_listener",
    ] {
        assert!(
            text.contains(&format!(
                "workspace_background_task_running{{task=\"{task}\"}} 1"
            )),
            "{task}: {text}"
        );
    }
    // Not on the API address.
    let api = http
        .get(format!("{}/metrics", ctx.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status().as_u16(), 404);
    ctx.teardown().await;
}

#[tokio::test]
async fn mangled_invitation_links_do_not_leak_tokens_to_the_log() {
    let ctx = TestContext::new("hardening_log_redaction").await;
    let secret = "SeCrEtInViTeToKeN0123456789";
    for query in [
        format!("a=1&amp;token={secret}"),
        format!("Token={secret}"),
        format!("token%3D{secret}"),
    ] {
        let _ = reqwest::get(format!("{}/api/invitations/validate?{query}", ctx.base_url))
            .await
            .unwrap();
    }
    let log = std::fs::read_to_string(&ctx.log_path).unwrap();
    assert!(log.contains("validate?"), "requests not logged");
    assert!(!log.contains(secret), "a token reached the log");
    let _ = Uuid::nil();
    ctx.teardown().await;
}

/// Every credential the API carries in a URI is used for real, then the
/// server's log is read: the request lines are there, the credentials are
/// not (a signed download link's `signature`, a WebSocket `ticket`, the
/// OAuth callback's `code` and `state`, an MCP gateway secret in the path).
#[tokio::test]
async fn credentials_in_uris_do_not_reach_the_log() {
    let ctx = TestContext::new("hardening_uri_credentials").await;
    let ada = ctx.user("uri-ada").await;
    let org = ada.personal_org().await;
    let mut secrets = Vec::new();

    // A signed download link of the local store, downloaded.
    let upload = ada
        .client
        .chat_upload_file(org, None, "a.md", b"# hello".to_vec())
        .await
        .unwrap()
        .into_inner();
    let response = reqwest::get(&upload.url).await.unwrap();
    assert_eq!(response.status(), 200);
    let signature = upload.url.split("signature=").nth(1).unwrap().to_string();
    assert!(signature.len() >= 32, "{signature}");
    secrets.push(signature);

    // A WebSocket ticket, used to open the chat socket.
    let ticket = workspace_tests::ws::ticket(&ctx.base_url, &ada.token, org).await;
    let mut socket = workspace_tests::ws::open(&ctx.base_url, org, &ticket).await;
    let ready = workspace_tests::ws::next(&mut socket, Duration::from_secs(10)).await;
    assert_eq!(ready.expect("ready")["type"], "ready");
    drop(socket);
    secrets.push(ticket);

    // An OAuth callback as a provider sends it.
    let code = "OAuthCodeNeverLogged0123456789";
    let state = "OAuthStateNeverLogged0123456789";
    let response = workspace_tests::browser()
        .get(format!("{}/api/mcp/callback", ctx.base_url))
        .query(&[("code", code), ("state", state)])
        .send()
        .await
        .unwrap();
    assert!(response.status().is_redirection(), "{}", response.status());
    secrets.extend([code.to_string(), state.to_string()]);

    // A gateway URL's secret (an unknown one: the path is logged all the
    // same; the MCP tests use real ones).
    let gateway_secret = "gwSecretNeverLogged0123456789";
    let response = workspace_tests::http()
        .post(format!("{}/api/mcp/gateway/{gateway_secret}", ctx.base_url))
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    secrets.push(gateway_secret.to_string());

    // The log is written asynchronously: wait for the last request's line.
    let routes = [
        "/api/files/download",
        "/api/chat/ws",
        "/api/mcp/callback",
        "/api/mcp/gateway/",
    ];
    let started = Instant::now();
    let log = loop {
        let log = std::fs::read_to_string(&ctx.log_path).unwrap();
        if routes.iter().all(|r| log.contains(r)) || started.elapsed() > Duration::from_secs(10) {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for route in routes {
        assert!(log.contains(route), "{route} was not logged");
    }
    for secret in &secrets {
        assert!(
            !log.contains(secret.as_str()),
            "a credential reached the log: {secret}"
        );
    }
    ctx.teardown().await;
}

/// Every pooled connection in use for the pool's whole wait, while the
/// database answers: `503 server_busy` with `Retry-After` (not
/// `database_unavailable`), counted in `/metrics`, and said once per
/// interval at WARN rather than once per request at ERROR.
#[tokio::test]
async fn an_exhausted_pool_is_server_busy_not_database_unavailable() {
    let ctx = TestContext::with_config("hardening_pool_busy", |c| {
        c.database.pool_size = 1;
        c.database.pool_wait_ms = 300;
        // Nothing else competes for the one connection (the webhook
        // workers would poll it, and count as refused too).
        c.kb.workers = 0;
        c.webhooks.workers = 0;
        c.metrics.bind_address = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    // The pool's only connection, held: whoever has it (a signup inside
    // its transaction, or a background sweep) waits on a lock of the users
    // table.
    let (admin, connection) = tokio_postgres::connect(&ctx.db_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    admin
        .batch_execute("BEGIN; LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let signup = |name: &str| {
        workspace_tests::http()
            .post(format!("{}/api/auth/signup", ctx.base_url))
            .json(&serde_json::json!({
                "email": format!("{name}@example.com"), "first_name": "Pool", "last_name": "Busy",
                "password": "correct horse battery"
            }))
            .send()
    };
    let held = tokio::spawn(signup("held"));
    let started = std::time::Instant::now();
    loop {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting >= 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for name in ["busy1", "busy2"] {
        let refused = signup(name).await.unwrap();
        assert_eq!(refused.status().as_u16(), 503);
        assert_eq!(refused.headers()["retry-after"], "1");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error_code"], "server_busy", "{body}");
    }
    admin.batch_execute("ROLLBACK").await.unwrap();
    // The held signup got through or was refused the same way; afterwards
    // the pool serves again.
    let held = held.await.unwrap().unwrap().status().as_u16();
    assert!(held == 201 || held == 503, "{held}");
    assert_eq!(signup("after").await.unwrap().status().as_u16(), 201);

    let addr = ctx.server.metrics_addr().expect("metrics served");
    let text = workspace_tests::http()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The two refused signups, and the held one if its wait ran out too.
    let exhausted: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("workspace_db_pool_exhausted_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((2..=3).contains(&exhausted), "{text}");
    let log = std::fs::read_to_string(&ctx.log_path).unwrap();
    assert_eq!(
        log.matches("refusing requests: the server is busy").count(),
        1,
        "one warning for the two refusals: {log}"
    );
    assert!(!log.contains("database unavailable"), "{log}");
    ctx.teardown().await;
}
