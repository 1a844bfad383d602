//! Benchmark (not a test): the server's request throughput and latency
//! beside PostgreSQL's own for the same SQL.
//!
//! For `GET /api/conversation/list` (an organization with 20
//! conversations) and `GET /api/users/me` (with a login's access token and
//! with a personal access token), at 8 and 32 concurrent
//! connections, in one run and interleaved:
//! - the release `workspace-server` binary (a separate process, default
//!   configuration but the database URL, logging at `info`), driven by
//!   keep-alive HTTP clients in this process;
//! - `pgbench -M prepared` running exactly the statements the server runs
//!   for that request (the same SQL constants, same parameters), against
//!   the same database.
//!
//! pgbench runs each endpoint's statements twice: one after the other (as
//! a client waiting for each answer) and pipelined (`\startpipeline` …
//! `\endpipeline`: the whole transaction's statements sent in one round
//! trip, the most a client can get from PostgreSQL for that SQL).
//!
//! Printed: requests (transactions) per second, p50 and p99 latency, the
//! server's share of pgbench's throughput (plain and pipelined), and the server's resident memory
//! idle and after the load. `BENCH_SECS` sets each measurement's length
//! (default 10 s), `BENCH_ROUNDS` how many interleaved rounds run (default
//! 3; the median share of each row is printed at the end).
//!
//! `BENCH_TRACING=1` adds `GET /api/conversation/list` on a second server
//! process with OpenTelemetry traces on (`WORKSPACE_OTLP_ENDPOINT` at a
//! collector in this process that reads and discards every export), in the
//! same rounds, and prints traced over untraced throughput;
//! `BENCH_TRACE_RATIO` sets that server's `telemetry.sample_ratio`
//! (default 1: every trace recorded).
//!
//! Then (unless `BENCH_DEPLOY=0`) the OpenAI-compatible deployment
//! endpoint: an agent on a mock provider (HTTP/1.1 keep-alive, as a real
//! provider), `POST
//! /api/agent_deploy/v1/chat/completions` at 8 connections, completions
//! per second and the server process's CPU time per completion (from
//! `/proc`), beside the mock's own rate.
//!
//! `BENCH_BASELINE=<binary>` adds `conversation/list` and `users/me` on
//! another build of the server (say, the commit before tracing existed),
//! on a database of its own seeded the same way, in the same rounds, and
//! prints this build's throughput (tracing off) over the baseline's; and
//! the deployment endpoint on it too (another database, the same mock),
//! printing this build's CPU per completion over the baseline's.
//!
//! `BENCH_ONLY=deploy` measures the deployment endpoint alone.
//!
//! Unless `BENCH_FLOOR=0`, `conversation/list` also runs on the bare stack
//! (this benchmark's binary again, as a separate process: hyper's HTTP/1
//! server and the vendored tokio-postgres on one connection, on a tokio
//! runtime of two workers as the server's), in the same rounds: every
//! request sends the same two statements with the same parameters as one
//! batch (one `Sync`), checks the membership row and answers the same
//! JSON, with nothing else (no routing, token, authorization rules, log
//! line, metrics). Its share of pgbench pipelined is the most this stack
//! gets on this machine; this build over it is printed per round.
//!
//! `BENCH_PERF=1` then samples the server with `perf record` during one
//! more run of `conversation/list` at 8 connections and of the deployment
//! endpoint, and prints where its CPU time went.
//!
//! Run with `cargo xtask bench api` (builds the release binary first).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use workspace_client::types::ConversationCreate;
use workspace_server::db::datastore::{conversations, organizations, users};
use workspace_tests::fake_provider::{FakeProvider, Reply};
use workspace_tests::{TEST_JWT_SECRET, TestContext};

const CONNECTIONS: [usize; 2] = [8, 32];
const CONVERSATIONS: usize = 20;

struct Figures {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: usize,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

fn figures(mut latencies_us: Vec<u32>, elapsed: Duration, errors: usize) -> Figures {
    latencies_us.sort_unstable();
    Figures {
        rate: latencies_us.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(&latencies_us, 0.50),
        p99_ms: percentile(&latencies_us, 0.99),
        errors,
    }
}

/// Drives the server with `wrk` (a C load generator, far lighter than
/// this process's HTTP clients, so less of the 2 cores goes to the client
/// side, as with pgbench). Used when installed (`apt-get install wrk`)
/// unless `BENCH_DRIVER=reqwest`.
fn wrk(url: &str, token: &str, connections: usize, secs: Duration) -> Option<Figures> {
    wrk_with(url, token, None, connections, secs)
}

/// [`wrk`], posting `body` (JSON) when given.
fn wrk_with(
    url: &str,
    token: &str,
    body: Option<&str>,
    connections: usize,
    secs: Duration,
) -> Option<Figures> {
    let dir = tempfile::tempdir().ok()?;
    let mut command = Command::new("wrk");
    command
        .args(["-t", "2", "-c", &connections.to_string()])
        .args(["-d", &format!("{}s", secs.as_secs()), "--latency"])
        .args(["-H", &format!("Authorization: Bearer {token}")]);
    if let Some(body) = body {
        let script = dir.path().join("post.lua");
        std::fs::write(
            &script,
            format!(
                "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
                 wrk.body = {body:?}\n"
            ),
        )
        .ok()?;
        command.arg("-s").arg(&script);
    }
    let output = command.arg(url).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let ms = |v: &str| -> f64 {
        let (n, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len()));
        let n: f64 = n.parse().unwrap_or(f64::NAN);
        match unit {
            "us" => n / 1000.0,
            "ms" => n,
            "s" => n * 1000.0,
            _ => f64::NAN,
        }
    };
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_string())
    };
    Some(Figures {
        rate: field("Requests/sec:")?.parse().ok()?,
        p50_ms: ms(&field("50%")?),
        p99_ms: ms(&field("99%")?),
        errors: field("Non-2xx or 3xx responses:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

/// `connections` keep-alive clients, each sending `url` in a loop.
async fn drive(url: &str, token: &str, connections: usize, secs: Duration) -> Figures {
    drive_with(url, token, None, connections, secs).await
}

/// [`drive`], posting `body` (JSON) when given.
async fn drive_with(
    url: &str,
    token: &str,
    body: Option<&str>,
    connections: usize,
    secs: Duration,
) -> Figures {
    let request = |client: &reqwest::Client, url: &str, token: &str| match body {
        Some(body) => client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .bearer_auth(token),
        None => client.get(url).bearer_auth(token),
    };
    // Warm-up: open the connections and fill the statement caches.
    let clients: Vec<reqwest::Client> = (0..connections)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .expect("client")
        })
        .collect();
    for c in &clients {
        let _ = request(c, url, token).send().await;
    }
    let start = Instant::now();
    let deadline = start + secs;
    let mut tasks = Vec::new();
    for client in clients {
        let url = url.to_string();
        let token = token.to_string();
        let body = body.map(str::to_string);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(100_000);
            let mut errors = 0;
            while Instant::now() < deadline {
                let sent = Instant::now();
                let request = match &body {
                    Some(body) => client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.clone()),
                    None => client.get(&url),
                };
                match request.bearer_auth(&token).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        latencies.push(sent.elapsed().as_micros() as u32);
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.expect("driver");
        all.extend(l);
        errors += e;
    }
    figures(all, start.elapsed(), errors)
}

struct PgTarget {
    host: String,
    port: u16,
    user: String,
    dbname: String,
    password: Option<String>,
}

fn pg_target(db_url: &str) -> PgTarget {
    let config: tokio_postgres::Config = db_url.parse().expect("database URL");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    PgTarget {
        host,
        port: config.get_ports().first().copied().unwrap_or(5432),
        user: config.get_user().unwrap_or("postgres").to_string(),
        dbname: config.get_dbname().expect("dbname").to_string(),
        password: config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
    }
}

/// The server's SQL as a pgbench script: `$n` become pgbench variables.
fn script(statements: &[(&str, &[&str])]) -> String {
    let mut out = String::new();
    for (sql, vars) in statements {
        let mut sql = sql.to_string();
        for (i, var) in vars.iter().enumerate().rev() {
            sql = sql.replace(&format!("${}", i + 1), &format!(":{var}"));
        }
        out.push_str(&sql);
        out.push_str(";\n");
    }
    out
}

/// `script` pipelined: every statement sent before any answer is read
/// (pgbench's `\startpipeline`, PostgreSQL 14 and later, with `-M
/// prepared`).
fn pipelined(script: &str) -> String {
    format!("\\startpipeline\n{script}\\endpipeline\n")
}

fn pgbench(
    bin: &PathBuf,
    target: &PgTarget,
    script: &str,
    vars: &[(&str, String)],
    connections: usize,
    secs: Duration,
) -> Figures {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("script.sql");
    std::fs::write(&file, script).expect("script");
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir.path())
        .args([
            "-n",
            "-M",
            "prepared",
            "-j",
            "2",
            "--log",
            "--log-prefix=pgb",
        ])
        .args(["-c", &connections.to_string()])
        .args(["-T", &secs.as_secs().to_string()])
        .args(["-h", &target.host, "-p", &target.port.to_string()])
        .args(["-U", &target.user])
        .arg("-f")
        .arg(&file);
    for (k, v) in vars {
        cmd.args(["-D", &format!("{k}={v}")]);
    }
    if let Some(p) = &target.password {
        cmd.env("PGPASSWORD", p);
    }
    cmd.arg(&target.dbname);
    let output = cmd.output().expect("running pgbench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pgbench failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tps: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("pgbench tps");
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(dir.path()).expect("logs") {
        let path = entry.expect("entry").path();
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("pgb"))
        {
            continue;
        }
        for line in std::fs::read_to_string(&path).expect("log").lines() {
            if let Some(us) = line.split_whitespace().nth(2).and_then(|v| v.parse().ok()) {
                latencies.push(us);
            }
        }
    }
    let mut f = figures(latencies, secs, 0);
    f.rate = tps;
    f
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// `BENCH_PERF=1`: samples the server process with `perf record` (call
/// graphs) for `secs` while `load` runs, then prints where its CPU time
/// went: the top functions by their own samples, and the top by samples
/// including what they call. Nothing when `perf` is missing.
async fn profiled<F: std::future::Future>(
    what: &str,
    pid: u32,
    secs: Duration,
    load: F,
) -> F::Output {
    if !std::env::var("BENCH_PERF").is_ok_and(|v| v == "1") {
        return load.await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("perf.data");
    let recorder = Command::new("perf")
        .args(["record", "-F", "1999", "-g", "-p", &pid.to_string(), "-o"])
        .arg(&data)
        .args([
            "--",
            "sleep",
            &secs.as_secs().saturating_sub(1).max(1).to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let output = load.await;
    let Ok(mut recorder) = recorder else {
        println!("(perf is not installed: no profile)");
        return output;
    };
    let _ = recorder.wait();
    for (title, args) in [
        ("own samples", &["--no-children"][..]),
        ("with callees", &["--children"][..]),
    ] {
        let report = Command::new("perf")
            .args(["report", "--stdio", "-g", "none", "--percent-limit", "1.5"])
            .args(args)
            .args(["--sort", "symbol", "-i"])
            .arg(&data)
            .output();
        if let Ok(report) = report {
            println!("\nprofile of {what} ({title}):");
            for line in String::from_utf8_lossy(&report.stdout)
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .take(30)
            {
                println!("  {}", line.trim_end());
            }
        }
    }
    output
}

/// CPU time (user and system) a process used so far, in milliseconds
/// (`/proc/PID/stat`, clock ticks of 10 ms: Linux's USER_HZ is 100).
fn cpu_ms(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let fields: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            let utime: f64 = fields.get(11)?.parse().ok()?;
            let stime: f64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) * 10.0)
        })
        .unwrap_or(f64::NAN)
}

/// The OpenAI-compatible deployment endpoint (`POST
/// /api/agent_deploy/v1/chat/completions`, not streamed) of an agent on a
/// mock OpenAI-compatible provider, at 8 connections: completions per
/// second and the server's CPU time per completion, beside the mock's own
/// rate driven the same way. A fresh deployment per measurement (a key's
/// limit is at most 100,000 a minute). With `BENCH_BASELINE`, the same on
/// that binary (its own database) in the same rounds, and this build's CPU
/// per completion over the baseline's.
async fn deployment_figures(
    cx: &TestContext,
    fake: &FakeProvider,
    secs: Duration,
    rounds: usize,
    use_wrk: bool,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("bench.toml");
    std::fs::write(
        &config,
        format!(
            "[[models]]\nname = \"fake\"\nprovider = \"openai_compatible\"\n\
             upstream_model = \"fake-upstream\"\nbase_url = \"{}/v1\"\napi_key = \"sk-test\"\n",
            fake.base_url()
        ),
    )
    .expect("config");
    let (server, base) = start_binary_configured(&cx.db_url, None, Some(&config)).await;
    // A user of its own: the first one's access token may have expired
    // during the endpoints' rounds.
    let user = cx.user("bench-deploy").await;
    let org = user.personal_org().await;
    let mut targets = vec![
        DeployTarget::new(
            "this build",
            &server,
            base,
            user.client.clone(),
            &user.token,
            org,
        )
        .await,
    ];
    let baseline_server = match std::env::var("BENCH_BASELINE") {
        Ok(bin) if !bin.is_empty() => {
            let (process, base, token, org) =
                baseline(cx, &bin, "bench_api_baseline_deploy", Some(&config)).await;
            let client = workspace_client::Client::authenticated(&base, &token).expect("client");
            targets.push(DeployTarget::new("baseline", &process, base, client, &token, org).await);
            Some(process)
        }
        _ => None,
    };
    let connections = 8;
    let mock_body = serde_json::json!({
        "model": "fake-upstream", "stream": true,
        "messages": [{"role": "user", "content": "Hello"}],
    })
    .to_string();
    println!(
        "\nOpenAI-compatible deployment endpoint, POST /api/agent_deploy/v1/chat/completions \
         (not streamed), {connections} connections, a mock provider on 127.0.0.1"
    );
    println!(
        "{:>5} {:>10} | {:>13} {:>7} {:>7} {:>6} | {:>13} | {:>12}",
        "round",
        "server",
        "completions/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "CPU ms/compl.",
        "mock req/s"
    );
    let mut cpu = vec![Vec::new(); targets.len()];
    for round in 1..=rounds {
        for (target, cpu) in targets.iter().zip(&mut cpu) {
            let (key, body) = deployed(
                &target.client,
                target.agent,
                &target.base,
                &format!("bench {round}"),
            )
            .await;
            let url = format!("{}/api/agent_deploy/v1/chat/completions", target.base);
            let before = cpu_ms(target.pid);
            let served = if use_wrk {
                wrk_with(&url, &key, Some(&body), connections, secs).expect("wrk's report")
            } else {
                drive_with(&url, &key, Some(&body), connections, secs).await
            };
            let per_request = (cpu_ms(target.pid) - before) / (served.rate * secs.as_secs_f64());
            let mock_url = format!("{}/v1/chat/completions", fake.base_url());
            let mock = if use_wrk {
                wrk_with(&mock_url, "sk-test", Some(&mock_body), connections, secs)
                    .expect("wrk's report")
            } else {
                drive_with(&mock_url, "sk-test", Some(&mock_body), connections, secs).await
            };
            println!(
                "{round:>5} {:>10} | {:>13.0} {:>7.2} {:>7.2} {:>6} | {:>13.3} | {:>12.0}",
                target.label,
                served.rate,
                served.p50_ms,
                served.p99_ms,
                served.errors,
                per_request,
                mock.rate
            );
            cpu.push(per_request);
        }
    }
    for (target, cpu) in targets.iter().zip(&cpu) {
        let mut sorted = cpu.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "server CPU per completion ({}), median of {rounds}: {:.3} ms",
            target.label,
            sorted[sorted.len() / 2]
        );
    }
    if let [this, before] = &cpu[..] {
        println!(
            "CPU per completion, this build over the baseline: {}",
            ratios(this, before)
        );
    }
    if std::env::var("BENCH_PERF").is_ok_and(|v| v == "1") {
        let target = &targets[0];
        let (key, body) =
            deployed(&target.client, target.agent, &target.base, "bench profiled").await;
        let url = format!("{}/api/agent_deploy/v1/chat/completions", target.base);
        profiled("the deployment endpoint", target.pid, secs, async {
            if use_wrk {
                wrk_with(&url, &key, Some(&body), connections, secs);
            } else {
                drive_with(&url, &key, Some(&body), connections, secs).await;
            }
        })
        .await;
    }
    drop(baseline_server);
    drop(server);
}

/// A server the deployment benchmark drives: an agent on the mock's model,
/// tested (deployable).
struct DeployTarget {
    label: &'static str,
    pid: u32,
    base: String,
    client: workspace_client::Client,
    agent: uuid::Uuid,
}

impl DeployTarget {
    async fn new(
        label: &'static str,
        server: &ServerProcess,
        base: String,
        client: workspace_client::Client,
        token: &str,
        org: uuid::Uuid,
    ) -> DeployTarget {
        let model = workspace_tests::resources::model_id(&client, org, "fake").await;
        let agent = workspace_tests::resources::agent(
            &client,
            org,
            serde_json::json!({
                "name": "bench", "description": "benchmark", "agent_type": "chat",
                "model_id": model, "params": {"system_prompt": "Be brief", "max_tokens": 64},
                "tools": [],
            }),
        )
        .await;
        let (status, tested) = workspace_tests::req(
            &base,
            token,
            reqwest::Method::POST,
            "/api/agents/test",
            &[("agent_id", agent.to_string())],
            Some(serde_json::json!({"message": "hello"})),
        )
        .await;
        assert_eq!(status, 200, "{tested}");
        DeployTarget {
            label,
            pid: server.0.id(),
            base,
            client,
            agent,
        }
    }
}

/// A new deployment of `agent` named `name` (the largest rate limit): its
/// key and a chat completion's body for it.
async fn deployed(
    client: &workspace_client::Client,
    agent: uuid::Uuid,
    base: &str,
    name: &str,
) -> (String, String) {
    let deployment = workspace_tests::resources::deployment(
        client,
        agent,
        serde_json::json!({"name": name, "channel": "sdk", "rate_limit_per_minute": 100_000}),
    )
    .await;
    let key = deployment.api_key.clone();
    let listed: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/api/agent_deploy/v1/models"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("models")
        .json()
        .await
        .expect("models as JSON");
    let body = serde_json::json!({
        "model": listed["data"][0]["id"],
        "messages": [{"role": "user", "content": "Hello"}],
    })
    .to_string();
    (key, body)
}

struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The bare stack's row (see the module's documentation).
const FLOOR: &str = "list, bare stack";

/// Starts the bare stack's server: this binary again with
/// `BENCH_FLOOR_SERVE` (see [`floor_serve`]), on a free port, for the
/// user, organization and session in `vars`.
async fn start_floor(db_url: &str, vars: &[(&str, String)]) -> (ServerProcess, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("port")
        .port();
    let mut command = Command::new(std::env::current_exe().expect("this benchmark's binary"));
    command
        .env("BENCH_FLOOR_SERVE", "1")
        .env("BENCH_FLOOR_BIND", format!("127.0.0.1:{port}"))
        .env("DATABASE_URL", db_url);
    for (name, value) in vars {
        command.env(format!("BENCH_FLOOR_{}", name.to_uppercase()), value);
    }
    let child = ServerProcess(
        command
            .stdout(Stdio::null())
            .spawn()
            .expect("starting the bare stack"),
    );
    started(child, port, "/", "the bare stack").await
}

/// `child` once it answers `path` on `port` with a success (10 s at most).
async fn started(
    child: ServerProcess,
    port: u16,
    path: &str,
    what: &str,
) -> (ServerProcess, String) {
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for _ in 0..200 {
        if http
            .get(format!("{base}{path}"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return (child, base);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not start");
}

/// The bare stack (`BENCH_FLOOR_SERVE`): every request, whatever its path,
/// sends the authorization statement and the conversation list with the
/// benchmark's parameters as one batch on one connection, refuses `403`
/// without an active membership, and answers the list as the server does.
async fn floor_serve() {
    use std::sync::Arc;
    let var = |name: &str| {
        std::env::var(format!("BENCH_FLOOR_{name}")).unwrap_or_else(|_| panic!("{name}"))
    };
    let id = |name: &str| uuid::Uuid::parse_str(&var(name)).expect("a uuid");
    let db_url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let (client, connection) = tokio_postgres::connect(&db_url, tokio_postgres::NoTls)
        .await
        .expect("the database");
    tokio::spawn(connection);
    let floor = Arc::new(Floor {
        access: client
            .prepare(organizations::ACCESS_BY_ORG)
            .await
            .expect("the authorization statement"),
        list: client
            .prepare(conversations::CONVERSATION_LIST)
            .await
            .expect("the list statement"),
        client,
        user: id("USER_ID"),
        org: id("ORG_ID"),
        session: Some(id("SESSION_ID")),
        issued_at: var("ISSUED_AT").parse().expect("the issue time"),
    });
    let listener = tokio::net::TcpListener::bind(var("BIND"))
        .await
        .expect("the bare stack's port");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let floor = floor.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_request| {
                let floor = floor.clone();
                async move { Ok::<_, std::convert::Infallible>(floor.answer().await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

struct Floor {
    client: tokio_postgres::Client,
    access: tokio_postgres::Statement,
    list: tokio_postgres::Statement,
    user: uuid::Uuid,
    org: uuid::Uuid,
    session: Option<uuid::Uuid>,
    issued_at: i64,
}

impl Floor {
    async fn answer(&self) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
        use tokio_postgres::types::ToSql;
        let (limit, offset) = (100i64, 0i64);
        let access: [&(dyn ToSql + Sync); 4] =
            [&self.user, &self.org, &self.session, &self.issued_at];
        let list: [&(dyn ToSql + Sync); 3] = [&self.org, &limit, &offset];
        let mut batch = tokio_postgres::Batch::new();
        let sent = match batch
            .push(&self.access, access.iter().map(|p| *p as &dyn ToSql))
            .and_then(|()| batch.push(&self.list, list.iter().map(|p| *p as &dyn ToSql)))
        {
            Ok(()) => self.client.query_batch(batch).await.ok(),
            Err(_) => None,
        };
        let (status, body) = match sent.as_deref() {
            Some([access, rows])
                if access
                    .first()
                    .is_some_and(|a| a.get::<_, Option<uuid::Uuid>>("role_id").is_some()) =>
            {
                let list: Vec<workspace_api::conversations::Conversation> = rows
                    .iter()
                    .map(|row| workspace_api::conversations::Conversation {
                        id: row.get("id"),
                        title: row.get("title"),
                        is_archived: row.get("is_archived"),
                        created_at: row.get("created_at"),
                        updated_at: row.get("updated_at"),
                    })
                    .collect();
                (200, serde_json::to_vec(&list).expect("JSON"))
            }
            Some(_) => (403, b"{}".to_vec()),
            None => (503, b"{}".to_vec()),
        };
        hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .expect("a response")
    }
}

/// An OTLP/HTTP collector that answers every export `200` and keeps
/// nothing (for the traced server's spans).
async fn discarding_collector() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a collector port");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                loop {
                    let mut chunk = [0u8; 65536];
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    // Answer each complete request (head and body).
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if buffer.len() < end + 4 + length {
                            break;
                        }
                        buffer.drain(..end + 4 + length);
                        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if conn.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    url
}

async fn start_binary(db_url: &str) -> (ServerProcess, String) {
    start_binary_with(db_url, None).await
}

async fn start_binary_with(db_url: &str, otlp: Option<&str>) -> (ServerProcess, String) {
    start_binary_configured(db_url, otlp, None).await
}

/// The binary, with `config` (a TOML file) when given.
async fn start_binary_configured(
    db_url: &str,
    otlp: Option<&str>,
    config: Option<&std::path::Path>,
) -> (ServerProcess, String) {
    let bin = std::env::var("WORKSPACE_SERVER_BIN")
        .expect("WORKSPACE_SERVER_BIN: the workspace-server binary (cargo xtask bench api)");
    start_binary_at(&bin, db_url, otlp, config).await
}

/// The binary at `bin` (see [`start_binary_configured`]).
async fn start_binary_at(
    bin: &str,
    db_url: &str,
    otlp: Option<&str>,
    config: Option<&std::path::Path>,
) -> (ServerProcess, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("port")
        .port();
    // Killed and waited for by `ServerProcess`'s drop, also on a panic.
    let mut command = Command::new(bin);
    if let Some(endpoint) = otlp {
        command.env("WORKSPACE_OTLP_ENDPOINT", endpoint);
        if let Ok(ratio) = std::env::var("BENCH_TRACE_RATIO") {
            command.env("WORKSPACE_TRACE_SAMPLE_RATIO", ratio);
        }
    }
    if let Some(config) = config {
        command.env("WORKSPACE_CONFIG", config);
    }
    let child = ServerProcess(
        command
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .env("DATABASE_URL", db_url)
            .env("WORKSPACE_JWT_SECRET", TEST_JWT_SECRET)
            .env("WORKSPACE_SECRET_KEYS", workspace_tests::TEST_SECRET_KEY)
            .env(
                "WORKSPACE_LOG_LEVEL",
                std::env::var("BENCH_LOG_LEVEL").unwrap_or_else(|_| "info".to_string()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting workspace-server"),
    );
    started(child, port, "/healthz", "workspace-server").await
}

/// `BENCH_BASELINE`: that binary (an earlier build) on a database of its
/// own (`dbname`), which it migrates, seeded like the main one through its
/// API (one user, [`CONVERSATIONS`] conversations), with `config` when
/// given: the server, its base URL, the user's access token and
/// organization.
async fn baseline(
    cx: &TestContext,
    bin: &str,
    dbname: &str,
    config: Option<&std::path::Path>,
) -> (ServerProcess, String, String, uuid::Uuid) {
    let admin_db = cx.admin_db().await;
    for statement in [
        format!("DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"),
        format!("CREATE DATABASE {dbname}"),
    ] {
        admin_db
            .batch_execute(&statement)
            .await
            .expect("the baseline's database");
    }
    let admin = workspace_tests::admin_url().expect("the admin URL");
    let url = workspace_tests::url_for(&admin, dbname).expect("the baseline's URL");
    let (process, base) = start_binary_at(bin, &url, None, config).await;
    let anon = workspace_client::Client::anonymous(&base).expect("client");
    let email = "baseline@example.com".to_string();
    let password = "a long baseline password 42".to_string();
    anon.auth_signup()
        .body(
            workspace_client::types::SignupRequest::builder()
                .email(email.clone())
                .first_name("Base".to_string())
                .last_name("Line".to_string())
                .password(password.clone()),
        )
        .send()
        .await
        .expect("signup on the baseline");
    let token = anon
        .auth_login()
        .body(
            workspace_client::types::LoginRequest::builder()
                .email(email)
                .password(password),
        )
        .send()
        .await
        .expect("login on the baseline")
        .into_inner()
        .access_token;
    let client = workspace_client::Client::authenticated(&base, &token).expect("client");
    let org = client
        .users_me()
        .send()
        .await
        .expect("users/me")
        .organizations[0]
        .id;
    for i in 0..CONVERSATIONS {
        client
            .conversation_create()
            .org_id(org)
            .body(ConversationCreate::builder().title(format!("Conversation {i}")))
            .send()
            .await
            .expect("conversation on the baseline");
    }
    (process, base, token, org)
}

/// Each round's `a` over its `b`: the median, then every round's, sorted.
fn ratios(a: &[f64], b: &[f64]) -> String {
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    ratios.sort_by(f64::total_cmp);
    format!(
        "median {:.3} (rounds: {})",
        ratios[ratios.len() / 2],
        ratios
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn row(what: &str, conns: usize, s: &Figures, p: &Figures, piped: &Figures) {
    println!(
        "{what:<28} {conns:>5} | {:>9.0} {:>7.2} {:>7.2} {:>6} | {:>9.0} {:>7.2} {:>7.2} | \
         {:>5.0} % | {:>9.0} {:>7.2} | {:>5.0} %",
        s.rate,
        s.p50_ms,
        s.p99_ms,
        s.errors,
        p.rate,
        p.p50_ms,
        p.p99_ms,
        100.0 * s.rate / p.rate,
        piped.rate,
        piped.p50_ms,
        100.0 * s.rate / piped.rate,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::var_os("BENCH_FLOOR_SERVE").is_some() {
        return floor_serve().await;
    }
    let secs = Duration::from_secs(
        std::env::var("BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    // The deployment endpoint's model (see `deployment_figures`).
    let fake = FakeProvider::with_default(Reply::openai_text(&["Hello", " there."])).await;
    // Connections kept open, as a real provider's are: one connection per
    // completion made `connect` alone 9 % of the server's CPU (perf).
    fake.keep_alive();
    let fake_model = fake.model_config("fake");
    let cx = TestContext::with_config("bench_api", move |c| c.models.push(fake_model)).await;
    let user = cx.user("bench").await;
    let org = user.personal_org().await;
    for i in 0..CONVERSATIONS {
        user.client
            .conversation_create()
            .org_id(org)
            .body(ConversationCreate::builder().title(format!("Conversation {i}")))
            .send()
            .await
            .expect("conversation");
    }
    let (server, base) = start_binary(&cx.db_url).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss = rss_mb(server.0.id());

    let root = workspace_tests::data_root();
    let pgbench_bin = workspace_embedded_db::PgInstall::locate_or_provision(&root)
        .expect("PostgreSQL binaries")
        .bin_dir
        .join("pgbench");
    let target = pg_target(&cx.db_url);
    // A personal access token of the same user: `users/me` with it runs
    // one statement too (the token is looked up in it).
    let pat = user
        .client
        .auth_tokens_create()
        .body(
            workspace_client::types::TokenCreate::builder()
                .name("bench".to_string())
                .scopes(vec!["*:*".to_string()]),
        )
        .send()
        .await
        .expect("a personal access token")
        .into_inner()
        .token;
    let pat_hash =
        workspace_server::authn::hash_secret(&pat)
            .iter()
            .fold(String::new(), |mut hex, b| {
                use std::fmt::Write as _;
                let _ = write!(hex, "{b:02x}");
                hex
            });
    // The token's session and issue time: the session check is part of
    // both statements.
    let session: (uuid::Uuid, i64) = cx
        .db()
        .await
        .query_one(
            "SELECT id, extract(epoch FROM created_at)::int8 FROM sessions \
             WHERE user_id = $1 ORDER BY created_at DESC LIMIT 1",
            &[&user.id],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .expect("the login's session");
    let vars = [
        ("token_hash", format!("\\x{pat_hash}")),
        ("user_id", user.id.to_string()),
        ("org_id", org.to_string()),
        ("session_id", session.0.to_string()),
        ("issued_at", session.1.to_string()),
        ("limit", "100".to_string()),
        ("offset", "0".to_string()),
    ];
    let tracing = std::env::var("BENCH_TRACING").is_ok_and(|v| v == "1");
    let traced = if tracing {
        let collector = discarding_collector().await;
        let (process, base) = start_binary_with(&cx.db_url, Some(&collector)).await;
        Some((process, base))
    } else {
        None
    };
    let mut endpoints: Vec<(&str, String, String, &str)> = vec![
        (
            "GET /api/conversation/list",
            format!("{base}/api/conversation/list?org_id={org}"),
            script(&[
                (
                    organizations::ACCESS_BY_ORG,
                    &["user_id", "org_id", "session_id", "issued_at"],
                ),
                (
                    conversations::CONVERSATION_LIST,
                    &["org_id", "limit", "offset"],
                ),
            ]),
            &user.token,
        ),
        (
            "GET /api/users/me",
            format!("{base}/api/users/me"),
            script(&[(users::USER_ME, &["user_id", "session_id", "issued_at"])]),
            &user.token,
        ),
        (
            "GET /api/users/me (PAT)",
            format!("{base}/api/users/me"),
            script(&[(users::USER_ME_BY_TOKEN, &["token_hash"])]),
            &pat,
        ),
    ];
    // `BENCH_BASELINE`: the same two endpoints on an earlier build, driven
    // in the same rounds (no pgbench of their own: an empty script).
    let baseline = match std::env::var("BENCH_BASELINE") {
        Ok(bin) if !bin.is_empty() => Some(baseline(&cx, &bin, "bench_api_baseline", None).await),
        _ => None,
    };
    let baseline_token = baseline
        .as_ref()
        .map(|(_, _, token, _)| token.clone())
        .unwrap_or_default();
    if let Some((_, before_base, _, before_org)) = &baseline {
        endpoints.push((
            "GET /api/conversation/list (baseline)",
            format!("{before_base}/api/conversation/list?org_id={before_org}"),
            String::new(),
            &baseline_token,
        ));
        endpoints.push((
            "GET /api/users/me (baseline)",
            format!("{before_base}/api/users/me"),
            String::new(),
            &baseline_token,
        ));
    }
    if let Some((_, traced_base)) = &traced {
        endpoints.push((
            "GET /api/conversation/list (traced)",
            format!("{traced_base}/api/conversation/list?org_id={org}"),
            endpoints[0].2.clone(),
            &user.token,
        ));
    }
    let floor = if std::env::var("BENCH_FLOOR").is_ok_and(|v| v == "0") {
        None
    } else {
        Some(start_floor(&cx.db_url, &vars).await)
    };
    if let Some((_, floor_base)) = &floor {
        endpoints.push((
            FLOOR,
            format!("{floor_base}/api/conversation/list?org_id={org}"),
            endpoints[0].2.clone(),
            &user.token,
        ));
    }
    let traced_index = endpoints.iter().position(|e| e.0.ends_with("(traced)"));

    // `BENCH_HOLD=SECS`: print the endpoints and the token, keep the server
    // up that long (for profiling it under an external load), then stop.
    if let Some(hold) = std::env::var("BENCH_HOLD")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        println!("server pid {}", server.0.id());
        for (what, url, _, _) in &endpoints {
            println!("{what}: {url}");
        }
        println!("token: {}", user.token);
        // Each endpoint's pgbench script and command, to run beside it.
        let dir = std::env::temp_dir().join("bench-hold");
        std::fs::create_dir_all(&dir).expect("the scripts' directory");
        for (i, (what, _, sql, _)) in endpoints.iter().enumerate() {
            if sql.is_empty() {
                continue;
            }
            let file = dir.join(format!("{i}.sql"));
            std::fs::write(&file, sql).expect("a script");
            std::fs::write(dir.join(format!("{i}-piped.sql")), pipelined(sql)).expect("a script");
            let defines: Vec<String> = vars.iter().map(|(k, v)| format!("-D {k}={v}")).collect();
            println!(
                "pgbench {what}: PGPASSWORD={} {} -n -M prepared -j 2 -h {} -p {} -U {} {} -f {} {}",
                target.password.as_deref().unwrap_or(""),
                pgbench_bin.display(),
                target.host,
                target.port,
                target.user,
                defines.join(" "),
                file.display(),
                target.dbname
            );
        }
        tokio::time::sleep(Duration::from_secs(hold)).await;
        drop(server);
        cx.teardown().await;
        return;
    }

    let use_wrk = !std::env::var("BENCH_DRIVER").is_ok_and(|d| d == "reqwest")
        && Command::new("wrk").arg("--version").output().is_ok();
    let driver = if use_wrk {
        "wrk"
    } else {
        "in-process reqwest clients"
    };
    println!(
        "\nworkspace-server (release, driven by {driver}) vs pgbench -M prepared running the \
         endpoint's own SQL; {} s each, interleaved",
        secs.as_secs()
    );
    println!(
        "{:<28} {:>5} | {:>9} {:>7} {:>7} {:>6} | {:>9} {:>7} {:>7} | {:>7} | {:>9} {:>7} | {:>7}",
        "endpoint",
        "conns",
        "req/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "pgbench",
        "p50 ms",
        "p99 ms",
        "share",
        "pipeline",
        "p50 ms",
        "share"
    );
    // Each round measures every endpoint and connection count, the server
    // and pgbench back to back; the machine's speed drifts by ±15 % over
    // minutes, so a pair's ratio is steadier than either figure.
    let mut shares: Vec<Vec<f64>> = vec![Vec::new(); endpoints.len() * CONNECTIONS.len()];
    let mut piped_shares: Vec<Vec<f64>> = shares.clone();
    // The server's own rate, per endpoint and connections, per round.
    let mut rates: Vec<Vec<f64>> = shares.clone();
    // `BENCH_ONLY=deploy`: the deployment endpoint alone.
    let list_rounds = if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "deploy") {
        0
    } else {
        rounds
    };
    for round in 1..=list_rounds {
        if rounds > 1 {
            println!("round {round} of {rounds}");
        }
        for (e, (what, url, sql, token)) in endpoints.iter().enumerate() {
            for (c, conns) in CONNECTIONS.into_iter().enumerate() {
                let s = if use_wrk {
                    wrk(url, token, conns, secs).expect("wrk's report")
                } else {
                    drive(url, token, conns, secs).await
                };
                rates[e * CONNECTIONS.len() + c].push(s.rate);
                if sql.is_empty() {
                    println!(
                        "{what:<28} {conns:>5} | {:>9.0} {:>7.2} {:>7.2} {:>6} |",
                        s.rate, s.p50_ms, s.p99_ms, s.errors
                    );
                    continue;
                }
                let p = pgbench(&pgbench_bin, &target, sql, &vars, conns, secs);
                let piped = pgbench(&pgbench_bin, &target, &pipelined(sql), &vars, conns, secs);
                row(what, conns, &s, &p, &piped);
                shares[e * CONNECTIONS.len() + c].push(100.0 * s.rate / p.rate);
                piped_shares[e * CONNECTIONS.len() + c].push(100.0 * s.rate / piped.rate);
            }
        }
    }
    if list_rounds > 1 {
        println!(
            "\nshare of pgbench, then of pgbench pipelined, median of {rounds} rounds \
             (lowest, highest)"
        );
        for (e, (what, _, sql, _)) in endpoints.iter().enumerate() {
            if sql.is_empty() {
                continue;
            }
            for (c, conns) in CONNECTIONS.into_iter().enumerate() {
                let median = |all: &[Vec<f64>]| {
                    let mut v = all[e * CONNECTIONS.len() + c].clone();
                    v.sort_by(f64::total_cmp);
                    format!(
                        "{:>5.0} % ({:.0} %, {:.0} %)",
                        v[v.len() / 2],
                        v[0],
                        v[v.len() - 1]
                    )
                };
                println!(
                    "{what:<28} {conns:>5} | {} | pipelined {}",
                    median(&shares),
                    median(&piped_shares)
                );
            }
        }
    }
    if baseline.is_some() && list_rounds > 0 {
        // This build (tracing off) over the baseline, each round's pair;
        // the baseline's rows are endpoints 3 and 4.
        println!("\nthis build (tracing off) / the baseline build, throughput, per round");
        for (e, what) in [(0, "GET /api/conversation/list"), (1, "GET /api/users/me")] {
            for (c, conns) in CONNECTIONS.into_iter().enumerate() {
                let now = &rates[e * CONNECTIONS.len() + c];
                let before = &rates[(3 + e) * CONNECTIONS.len() + c];
                println!("{what:<28} {conns:>5} connections: {}", ratios(now, before));
            }
        }
    }
    if traced.is_some() && list_rounds > 0 {
        // Traced over untraced, each round's pair (run back to back).
        println!("\ntracing on / off, GET /api/conversation/list throughput, per round");
        let traced = traced_index.expect("the traced endpoint");
        for (c, conns) in CONNECTIONS.into_iter().enumerate() {
            let on = &shares[traced * CONNECTIONS.len() + c];
            let off = &shares[c];
            println!("{conns:>5} connections: {}", ratios(on, off));
        }
    }
    if floor.is_some() && list_rounds > 0 {
        // This build over the bare stack, each round's pair of shares
        // (each of its own pgbench run, as the traced ratio).
        println!(
            "\nthis build / the bare stack (hyper + tokio-postgres, the same batch and JSON), \
             GET /api/conversation/list throughput, per round"
        );
        let bare = endpoints.len() - 1;
        for (c, conns) in CONNECTIONS.into_iter().enumerate() {
            let now = &shares[c];
            let floor = &shares[bare * CONNECTIONS.len() + c];
            println!("{conns:>5} connections: {}", ratios(now, floor));
        }
    }
    println!(
        "\nserver resident memory: {idle_rss:.1} MB idle, {:.1} MB after the load",
        rss_mb(server.0.id())
    );
    if list_rounds > 0 && std::env::var("BENCH_PERF").is_ok_and(|v| v == "1") {
        // The untraced server, and the traced one when there is one (the
        // last endpoint).
        let mut profiles = vec![(server.0.id(), &endpoints[0])];
        if let Some((process, _)) = &traced {
            profiles.push((process.0.id(), &endpoints[traced_index.expect("traced")]));
        }
        for (pid, (what, url, _, token)) in profiles {
            profiled(&format!("{what} at 8 connections"), pid, secs, async {
                if use_wrk {
                    wrk(url, token, 8, secs);
                } else {
                    drive(url, token, 8, secs).await;
                }
            })
            .await;
        }
    }
    drop(server);
    if !std::env::var("BENCH_DEPLOY").is_ok_and(|v| v == "0") {
        deployment_figures(&cx, &fake, secs, rounds, use_wrk).await;
    }
    cx.teardown().await;
}
