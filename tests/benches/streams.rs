//! `cargo xtask bench streams`: many concurrent streamed answers on one
//! instance of the real `workspace-server` executable (a separate process,
//! so that its memory is its own: peak RSS is `VmHWM` of
//! `/proc/<pid>/status`).
//!
//! Signs up `STREAMS_USERS` users (default 20), gives each a conversation
//! and `STREAMS_N / STREAMS_USERS` chat sessions, then starts `STREAMS_N`
//! (default 10,000; or the first argument) conversation `stream_chat`
//! answers evenly over `STREAMS_RAMP_SECS` (default 10), one per session,
//! with the offline model pausing `STREAMS_CHUNK_MS` (default 300) between
//! its ~30 chunks, and reads every stream to its end. Prints how many ended
//! normally, were refused (`503 server_busy` and other statuses), ended
//! with an `error` event, were disconnected (the body ended without `end`,
//! or the connection failed) or stalled (no event for `STREAMS_STALL_SECS`,
//! default 30); the server's peak RSS; the shared event writer's events/s
//! and statements/s (its `/metrics` counters before and after); time to
//! first event and to first `content` event, p50/p95.
//!
//! This process opens one socket per stream: its open-file limit must
//! exceed `STREAMS_N` (`ulimit -n`); the server raises its own soft limit to
//! the hard one at start.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_tests::TEST_JWT_SECRET;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A `/proc/<pid>/status` figure in MB (`VmRSS:`, `VmHWM:`).
fn status_mb(pid: u32, field: &str) -> f64 {
    workspace_tests::proc_status_kb(pid, field) / 1024.0
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("port")
        .port()
}

async fn post(http: &reqwest::Client, url: &str, token: Option<&str>, body: Value) -> Value {
    let mut req = http.post(url).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("request");
    let status = r.status();
    let v: Value = r.json().await.expect("json");
    assert!(status.is_success(), "{url}: {status} {v}");
    v
}

struct User {
    token: String,
    org: Uuid,
    sessions: Vec<Uuid>,
}

async fn setup_user(http: &reqwest::Client, base: &str, i: usize, sessions: usize) -> User {
    let email = format!("streams{i}@example.com");
    let password = "correct horse battery staple";
    post(
        http,
        &format!("{base}/api/auth/signup"),
        None,
        json!({"email": email, "first_name": "Stream", "last_name": format!("User{i}"),
            "password": password}),
    )
    .await;
    let login = post(
        http,
        &format!("{base}/api/auth/login"),
        None,
        json!({"email": email, "password": password}),
    )
    .await;
    let token = login["access_token"].as_str().expect("token").to_string();
    let get = |path: String| {
        let (http, token) = (http.clone(), token.clone());
        async move {
            http.get(path)
                .bearer_auth(token)
                .send()
                .await
                .expect("get")
                .json::<Value>()
                .await
                .expect("json")
        }
    };
    let me = get(format!("{base}/api/users/me")).await;
    let org: Uuid = me["organizations"][0]["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("org id");
    let models = get(format!("{base}/api/models/list?org_id={org}")).await;
    let model = models[0]["id"].as_str().expect("a model").to_string();
    let conversation = post(
        http,
        &format!("{base}/api/conversation/create?org_id={org}"),
        Some(&token),
        json!({"title": "bench streams"}),
    )
    .await;
    let mut ids = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let session = post(
            http,
            &format!("{base}/api/conversation/create_session?org_id={org}"),
            Some(&token),
            json!({"conversation_id": conversation["id"], "model_id": model}),
        )
        .await;
        ids.push(
            session["id"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("session id"),
        );
    }
    User {
        token,
        org,
        sessions: ids,
    }
}

/// How one stream ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    Normal,
    Busy,
    Refused(u16),
    ErrorEvent(String),
    Disconnected,
    Stalled,
}

#[derive(Default)]
struct Tally {
    endings: BTreeMap<Ending, u64>,
    first_event_ms: Vec<f64>,
    first_content_ms: Vec<f64>,
}

async fn stream_one(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    org: Uuid,
    session: Uuid,
    stall: Duration,
    tally: &Mutex<Tally>,
) -> Ending {
    let sent = Instant::now();
    let response = http
        .post(format!("{base}/api/conversation/stream_chat?org_id={org}"))
        .bearer_auth(token)
        .json(&json!({"chat_session_id": session, "message": "tell me about streams"}))
        .send();
    let r = match tokio::time::timeout(stall, response).await {
        Err(_) => return Ending::Stalled,
        Ok(Err(_)) => return Ending::Disconnected,
        Ok(Ok(r)) => r,
    };
    if !r.status().is_success() {
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or_default();
        return if status == 503 && body["error_code"] == "server_busy" {
            Ending::Busy
        } else {
            Ending::Refused(status)
        };
    }
    let mut events = workspace_client::sse::SseReader::from_response(r);
    let mut first = true;
    let mut first_content = true;
    loop {
        let event = match tokio::time::timeout(stall, events.next()).await {
            Err(_) => return Ending::Stalled,
            Ok(None) | Ok(Some(Err(_))) => return Ending::Disconnected,
            Ok(Some(Ok(event))) => event,
        };
        let Ok(v) = event.json::<Value>() else {
            continue;
        };
        let ms = sent.elapsed().as_secs_f64() * 1000.0;
        if first {
            first = false;
            tally.lock().unwrap().first_event_ms.push(ms);
        }
        match v["type"].as_str() {
            Some("content") if first_content => {
                first_content = false;
                tally.lock().unwrap().first_content_ms.push(ms);
            }
            Some("end") => return Ending::Normal,
            Some("error") => {
                return Ending::ErrorEvent(v["error_code"].as_str().unwrap_or("?").to_string());
            }
            _ => {}
        }
    }
}

/// The writer's counters from `/metrics`: (events stored, statements).
async fn writer_counters(http: &reqwest::Client, metrics: &str) -> (f64, f64) {
    let text = http
        .get(metrics)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let counter = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (
        counter("workspace_stream_events_stored_total"),
        counter("workspace_stream_event_statements_total"),
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<u64>().ok())
        .unwrap_or_else(|| env_u64("STREAMS_N", 10_000)) as usize;
    let users_n = (env_u64("STREAMS_USERS", 20) as usize).clamp(1, n.max(1));
    let ramp = Duration::from_secs_f64(env_u64("STREAMS_RAMP_SECS", 10) as f64);
    let chunk_ms = env_u64("STREAMS_CHUNK_MS", 300);
    let stall = Duration::from_secs(env_u64("STREAMS_STALL_SECS", 30));
    let bin = std::env::var("WORKSPACE_SERVER_BIN")
        .expect("WORKSPACE_SERVER_BIN: the workspace-server binary (cargo xtask bench streams)");

    // An empty database, migrated by the server under test (so that the
    // bench can measure an older binary too).
    let admin_url = std::env::var("WORKSPACE_TEST_DATABASE_URL")
        .expect("WORKSPACE_TEST_DATABASE_URL: a PostgreSQL superuser URL (cargo xtask bench)");
    let database = format!("bench_streams_{}", Uuid::new_v4().simple());
    let (admin, connection) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
        .await
        .expect("connecting to PostgreSQL");
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .expect("creating the bench database");
    let db_url = workspace_tests::url_for(&admin_url, &database).expect("a PostgreSQL URL");
    let dir = tempfile::tempdir().expect("tempdir");
    let metrics_port = free_port();
    let http_port = free_port();
    let config = dir.path().join("streams.toml");
    std::fs::write(
        &config,
        format!(
            "[features]\ndaily_chat_limit = 100000000\n\n\
             [providers]\noffline_chunk_delay_ms = {chunk_ms}\n\n\
             [rate_limits]\nlogin_per_address = 0\nlogin_global = 0\n\
             signup_per_address = 0\nsignup_global = 0\n\n\
             [metrics]\nbind_address = \"127.0.0.1:{metrics_port}\"\n"
        ),
    )
    .expect("config");
    let log_level = std::env::var("BENCH_LOG_LEVEL").unwrap_or_else(|_| "warn".to_string());
    let server_log = std::fs::File::create(dir.path().join("server.log")).expect("log");
    let server = workspace_tests::ChildGuard(
        Command::new(&bin)
            .args(["--bind", &format!("127.0.0.1:{http_port}")])
            .arg("--config")
            .arg(&config)
            .env("DATABASE_URL", &db_url)
            .env("WORKSPACE_JWT_SECRET", TEST_JWT_SECRET)
            .env("WORKSPACE_SECRET_KEYS", workspace_tests::TEST_SECRET_KEY)
            .env("WORKSPACE_LOG_LEVEL", &log_level)
            .stdout(Stdio::null())
            .stderr(server_log)
            .spawn()
            .expect("starting workspace-server"),
    );
    let pid = server.0.id();
    let base = format!("http://127.0.0.1:{http_port}");
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    // Streams need no total timeout: a connect timeout only.
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let mut up = false;
    for _ in 0..400 {
        if http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !up {
        let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        panic!("workspace-server did not become ready; its log:\n{log}");
    }

    // Users and sessions, a few users at a time.
    let setup = Instant::now();
    let per_user = n.div_ceil(users_n);
    let mut users = Vec::new();
    for chunk in (0..users_n).collect::<Vec<_>>().chunks(8) {
        let made =
            futures::future::join_all(chunk.iter().map(|&i| setup_user(&http, &base, i, per_user)))
                .await;
        users.extend(made);
    }
    let users = Arc::new(users);
    let idle_rss = status_mb(pid, "VmRSS:");
    println!(
        "\nbench streams: {n} conversation stream_chat answers started over {:.0} s, offline \
         model {chunk_ms} ms between chunks; {users_n} users ({:.1} s to set up); server idle \
         RSS {idle_rss:.0} MB",
        ramp.as_secs_f64(),
        setup.elapsed().as_secs_f64()
    );

    let (events_before, statements_before) = writer_counters(&http, &metrics_url).await;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    let sampler = {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let handle = tokio::spawn(async move {
            let mut peak_rss: f64 = 0.0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak_rss = peak_rss.max(status_mb(pid, "VmRSS:"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peak_rss
        });
        (done, handle)
    };
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let at = start + ramp.mul_f64(i as f64 / n as f64);
        let (http, base, users, tally) = (http.clone(), base.clone(), users.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let user = &users[i % users.len()];
            let session = user.sessions[i / users.len()];
            let ending =
                stream_one(&http, &base, &user.token, user.org, session, stall, &tally).await;
            *tally.lock().unwrap().endings.entry(ending).or_default() += 1;
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    sampler.0.store(true, std::sync::atomic::Ordering::Relaxed);
    let sampled_peak = sampler.1.await.unwrap_or(f64::NAN);
    let hwm = status_mb(pid, "VmHWM:");
    let (events_after, statements_after) = writer_counters(&http, &metrics_url).await;

    let mut tally = Arc::try_unwrap(tally)
        .ok()
        .expect("no task left")
        .into_inner()
        .unwrap();
    let count = |e: &Ending| tally.endings.get(e).copied().unwrap_or(0);
    let errors: Vec<String> = tally
        .endings
        .iter()
        .filter_map(|(e, c)| match e {
            Ending::ErrorEvent(code) => Some(format!("{code} x {c}")),
            Ending::Refused(status) => Some(format!("HTTP {status} x {c}")),
            _ => None,
        })
        .collect();
    println!(
        "ended normally {} / {n}; 503 server_busy {}; disconnected {}; stalled {}; other: {}",
        count(&Ending::Normal),
        count(&Ending::Busy),
        count(&Ending::Disconnected),
        count(&Ending::Stalled),
        if errors.is_empty() {
            "none".to_string()
        } else {
            errors.join(", ")
        }
    );
    println!(
        "server peak RSS {hwm:.0} MB (VmHWM; sampled VmRSS peak {sampled_peak:.0} MB), \
         {:.1} KB a stream above idle",
        (hwm - idle_rss) * 1024.0 / n as f64
    );
    let (events, statements) = (
        events_after - events_before,
        statements_after - statements_before,
    );
    println!(
        "event writer: {events:.0} events in {statements:.0} statements over {elapsed:.1} s: \
         {:.0} events/s, {:.0} statements/s, {:.1} events a statement",
        events / elapsed,
        statements / elapsed,
        events / statements
    );
    for list in [&mut tally.first_event_ms, &mut tally.first_content_ms] {
        list.sort_by(f64::total_cmp);
    }
    println!(
        "time to first event p50 {:.1} ms, p95 {:.1} ms; to first content p50 {:.1} ms, \
         p95 {:.1} ms",
        percentile(&tally.first_event_ms, 0.5),
        percentile(&tally.first_event_ms, 0.95),
        percentile(&tally.first_content_ms, 0.5),
        percentile(&tally.first_content_ms, 0.95)
    );
    drop(server);
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        .await;
}
