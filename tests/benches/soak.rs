//! Soak (not a test): hostile-but-honest load with a database outage in the
//! middle, against the release `workspace-server` binary.
//!
//! - A private PostgreSQL cluster in a temporary directory (never the
//!   shared test cluster: this program stops it).
//! - The release binary as a separate process on that cluster (log level
//!   `warn`, a daily chat limit high enough not to interfere).
//! - `SOAK_CLIENTS` clients (default 200) for `SOAK_SECS` seconds (default
//!   60), each looping over a mix: 55 % reads (`conversation/list`,
//!   `users/me`), 30 % writes (`conversation/create`, the id of every
//!   acknowledged one remembered) and 15 % streamed answers
//!   (`conversation/stream_chat`, the text of every answer that ended with
//!   `end` remembered).
//! - At 40 % of the run PostgreSQL is stopped (`pg_ctl stop -m fast`) for
//!   `SOAK_OUTAGE_SECS` seconds (default 10), then started again on the
//!   same port.
//!
//! Printed: requests, answers by status, 5xx other than 503 (target 0),
//! acknowledged writes missing afterwards (target 0), delivered answers not
//! stored (target 0), the server's peak resident memory, and the recovery
//! time (PostgreSQL accepting connections again → the first acknowledged
//! write). Exit status 1 when a target is missed.
//!
//! Run with `cargo xtask soak` (builds the release binary first).

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

const USERS: usize = 10;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `pg_ctl` on the private cluster (as `postgres` when running as root).
fn pg_ctl(bin: &Path, args: &[&str], data: &Path) {
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join("pg_ctl"));
        c
    } else {
        Command::new(bin.join("pg_ctl"))
    };
    let output = cmd
        .args(args)
        .arg("-D")
        .arg(data)
        .stdin(Stdio::null())
        .output()
        .expect("running pg_ctl");
    assert!(
        output.status.success(),
        "pg_ctl {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn start_options(port: u16) -> String {
    format!(
        "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' \
         -c max_connections=200"
    )
}

#[derive(Default)]
struct Tally {
    requests: u64,
    by_status: BTreeMap<String, u64>,
    acknowledged: Vec<(usize, Uuid)>,
    /// (user index, assistant message id, delivered text)
    delivered: Vec<(usize, String, String)>,
}

impl Tally {
    fn count(&mut self, what: String) {
        self.requests += 1;
        *self.by_status.entry(what).or_default() += 1;
    }
}

struct User {
    token: String,
    org: Uuid,
    session: Uuid,
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

async fn setup_user(http: &reqwest::Client, base: &str, i: usize) -> User {
    let email = format!("soak{i}@example.com");
    let password = "correct horse battery staple";
    post(
        http,
        &format!("{base}/api/auth/signup"),
        None,
        json!({"email": email, "first_name": "Soak", "last_name": format!("User{i}"), "password": password}),
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
    let me: Value = http
        .get(format!("{base}/api/users/me"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("me")
        .json()
        .await
        .expect("me json");
    let org: Uuid = me["organizations"][0]["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("org id");
    let models: Value = http
        .get(format!("{base}/api/models/list?org_id={org}"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("models")
        .json()
        .await
        .expect("models json");
    let model = models[0]["id"].as_str().expect("a model").to_string();
    let conversation = post(
        http,
        &format!("{base}/api/conversation/create?org_id={org}"),
        Some(&token),
        json!({"title": "soak streams"}),
    )
    .await;
    let session = post(
        http,
        &format!("{base}/api/conversation/create_session?org_id={org}"),
        Some(&token),
        json!({"conversation_id": conversation["id"], "model_id": model}),
    )
    .await;
    User {
        token,
        org,
        session: session["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("session id"),
    }
}

/// One streamed answer: `Ok(Some((message_id, text)))` when it ended with
/// `end`, `Ok(None)` when it ended otherwise, `Err(status)` when refused.
async fn stream_one(
    http: &reqwest::Client,
    base: &str,
    user: &User,
    n: u64,
) -> Result<Option<(String, String)>, String> {
    let r = http
        .post(format!(
            "{base}/api/conversation/stream_chat?org_id={}",
            user.org
        ))
        .bearer_auth(&user.token)
        .json(&json!({"chat_session_id": user.session, "message": format!("soak message {n}")}))
        .send()
        .await
        .map_err(|_| "transport".to_string())?;
    if !r.status().is_success() {
        return Err(r.status().as_u16().to_string());
    }
    let mut events = workspace_client::sse::SseReader::from_response(r);
    let mut id = None;
    let mut text = String::new();
    while let Some(event) = events.next().await {
        let Ok(event) = event else {
            return Ok(None);
        };
        let Ok(v) = event.json::<Value>() else {
            continue;
        };
        match v["type"].as_str() {
            Some("start") => id = v["message_id"].as_str().map(str::to_string),
            Some("content") => text.push_str(v["content"].as_str().unwrap_or_default()),
            Some("end") => return Ok(id.map(|id| (id, text))),
            Some("error") => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

#[allow(clippy::too_many_arguments)]
async fn client_loop(
    http: reqwest::Client,
    base: String,
    users: Arc<Vec<User>>,
    me: usize,
    deadline: Instant,
    tally: Arc<Mutex<Tally>>,
    first_write_after: Arc<Mutex<Option<Instant>>>,
    restarted: Arc<Mutex<Option<Instant>>>,
) {
    let ui = me % users.len();
    let user = &users[ui];
    let mut n: u64 = me as u64 * 1_000_000;
    while Instant::now() < deadline {
        n += 1;
        let pick = (n.wrapping_mul(2_654_435_761) >> 7) % 100;
        let outcome = if pick < 55 {
            let url = if pick < 35 {
                format!("{base}/api/conversation/list?org_id={}&limit=20", user.org)
            } else {
                format!("{base}/api/users/me")
            };
            match http.get(url).bearer_auth(&user.token).send().await {
                Ok(r) => {
                    let s = r.status().as_u16().to_string();
                    let _ = r.bytes().await;
                    s
                }
                Err(_) => "transport".to_string(),
            }
        } else if pick < 85 {
            let sent = Instant::now();
            let r = http
                .post(format!(
                    "{base}/api/conversation/create?org_id={}",
                    user.org
                ))
                .bearer_auth(&user.token)
                .json(&json!({"title": format!("soak {n}")}))
                .send()
                .await;
            match r {
                Ok(r) if r.status().as_u16() == 201 => {
                    let v: Option<Value> = r.json().await.ok();
                    let id = v
                        .as_ref()
                        .and_then(|v| v["id"].as_str())
                        .and_then(|s| s.parse::<Uuid>().ok());
                    if let Some(id) = id {
                        tally.lock().unwrap().acknowledged.push((ui, id));
                        if let Some(up) = *restarted.lock().unwrap() {
                            let mut first = first_write_after.lock().unwrap();
                            if sent >= up && first.is_none() {
                                *first = Some(Instant::now());
                            }
                        }
                    }
                    "201".to_string()
                }
                Ok(r) => {
                    let s = r.status().as_u16().to_string();
                    let _ = r.bytes().await;
                    s
                }
                Err(_) => "transport".to_string(),
            }
        } else {
            match stream_one(&http, &base, user, n).await {
                Ok(Some((id, text))) => {
                    tally.lock().unwrap().delivered.push((ui, id, text));
                    "200 end".to_string()
                }
                Ok(None) => "200 without end".to_string(),
                Err(s) => s,
            }
        };
        // While the server says it is unavailable, wait as a well-behaved
        // client would (its Retry-After is 1 s; a shorter pause keeps the
        // pressure on).
        let pause = outcome.starts_with("503") || outcome == "transport";
        tally.lock().unwrap().count(outcome);
        if pause {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let clients = env_u64("SOAK_CLIENTS", 200) as usize;
    let secs = env_u64("SOAK_SECS", 60);
    let outage = env_u64("SOAK_OUTAGE_SECS", 10);
    let bin = std::env::var("WORKSPACE_SERVER_BIN")
        .expect("WORKSPACE_SERVER_BIN: the workspace-server binary (cargo xtask soak)");

    // A private cluster this program may stop.
    let dir = tempfile::tempdir().expect("tempdir");
    if is_root() {
        let _ = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .status();
    }
    let root = workspace_tests::data_root();
    let install =
        workspace_embedded_db::PgInstall::locate_or_provision(&root).expect("PostgreSQL binaries");
    let data: PathBuf = dir.path().join("pg");
    let cluster =
        workspace_embedded_db::Cluster::ensure_started(&install, &data).expect("a private cluster");
    let port = cluster.port;
    let db_url = cluster.url("postgres");
    // From here on the cluster is driven with pg_ctl on a fixed port.
    pg_ctl(&install.bin_dir, &["stop", "-m", "fast", "-w"], &data);
    let log = dir.path().join("pg-soak.log");
    std::fs::write(&log, "").expect("log file");
    if is_root() {
        let _ = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&log)
            .status();
    }
    let log_arg = log.display().to_string();
    let options = start_options(port);
    pg_ctl(
        &install.bin_dir,
        &["start", "-w", "-t", "60", "-l", &log_arg, "-o", &options],
        &data,
    );

    let config = dir.path().join("soak.toml");
    std::fs::write(
        &config,
        "[features]\ndaily_chat_limit = 100000000\n\n[providers]\noffline_chunk_delay_ms = 20\n",
    )
    .expect("config");
    let http_port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("port")
        .port();
    let server = workspace_tests::ChildGuard(
        Command::new(&bin)
            .args(["--bind", &format!("127.0.0.1:{http_port}")])
            .arg("--config")
            .arg(&config)
            .env("DATABASE_URL", &db_url)
            .env("WORKSPACE_JWT_SECRET", workspace_tests::TEST_JWT_SECRET)
            .env("WORKSPACE_SECRET_KEYS", workspace_tests::TEST_SECRET_KEY)
            .env("WORKSPACE_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting workspace-server"),
    );
    let pid = server.0.id();
    let base = format!("http://127.0.0.1:{http_port}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .timeout(Duration::from_secs(60))
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
    assert!(up, "workspace-server did not become ready");

    let mut users = Vec::new();
    for i in 0..USERS {
        users.push(setup_user(&http, &base, i).await);
    }
    let users = Arc::new(users);
    println!(
        "\nsoak: {clients} clients x {secs} s against the release binary; PostgreSQL stopped \
         for {outage} s at {} s",
        secs * 2 / 5
    );

    let tally = Arc::new(Mutex::new(Tally::default()));
    let first_write_after = Arc::new(Mutex::new(None));
    let restarted = Arc::new(Mutex::new(None));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for me in 0..clients {
        tasks.push(tokio::spawn(client_loop(
            http.clone(),
            base.clone(),
            users.clone(),
            me,
            deadline,
            tally.clone(),
            first_write_after.clone(),
            restarted.clone(),
        )));
    }

    // Resident memory, sampled; the outage in the middle.
    let sampler = tokio::spawn(async move {
        let mut peak: f64 = 0.0;
        while Instant::now() < deadline + Duration::from_secs(5) {
            peak = peak.max(workspace_tests::proc_status_kb(pid, "VmRSS:"));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        peak
    });
    tokio::time::sleep(Duration::from_secs(secs * 2 / 5)).await;
    let bin_dir = install.bin_dir.clone();
    let data2 = data.clone();
    tokio::task::spawn_blocking(move || pg_ctl(&bin_dir, &["stop", "-m", "fast", "-w"], &data2))
        .await
        .expect("stop");
    let stopped_at = start.elapsed();
    tokio::time::sleep(Duration::from_secs(outage)).await;
    let bin_dir = install.bin_dir.clone();
    let data2 = data.clone();
    let (log2, options2) = (log_arg.clone(), options.clone());
    tokio::task::spawn_blocking(move || {
        pg_ctl(
            &bin_dir,
            &["start", "-w", "-t", "60", "-l", &log2, "-o", &options2],
            &data2,
        )
    })
    .await
    .expect("start");
    let back = Instant::now();
    *restarted.lock().unwrap() = Some(back);
    // Readiness as the operator sees it.
    let mut ready_after = None;
    while ready_after.is_none() && back.elapsed() < Duration::from_secs(60) {
        if http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            ready_after = Some(back.elapsed());
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    for t in tasks {
        t.await.expect("client");
    }
    let peak_sampled = sampler.await.expect("sampler");
    let peak_hwm = workspace_tests::proc_status_kb(pid, "VmHWM:");
    // Answers delivered near the end may still be being written.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let (db, conn) = tokio_postgres::connect(&db_url, tokio_postgres::NoTls)
        .await
        .expect("database after the soak");
    tokio::spawn(conn);
    let tally = Arc::try_unwrap(tally)
        .ok()
        .expect("tally")
        .into_inner()
        .unwrap();
    let ids: Vec<Uuid> = tally.acknowledged.iter().map(|(_, id)| *id).collect();
    let found: i64 = db
        .query_one(
            "SELECT count(*) FROM conversations WHERE id = ANY($1)",
            &[&ids],
        )
        .await
        .expect("count")
        .get(0);
    let missing_writes = ids.len() as i64 - found;
    let mut missing_answers = 0;
    for (_, id, text) in &tally.delivered {
        let Ok(id) = id.parse::<Uuid>() else {
            missing_answers += 1;
            continue;
        };
        let row = db
            .query_opt(
                "SELECT content FROM conversation_messages WHERE id = $1",
                &[&id],
            )
            .await
            .expect("answer");
        match row {
            Some(r) if r.get::<_, String>(0).ends_with(text.as_str()) => {}
            _ => missing_answers += 1,
        }
    }
    let other_5xx: u64 = tally
        .by_status
        .iter()
        .filter(|(k, _)| k.starts_with('5') && !k.starts_with("503"))
        .map(|(_, v)| *v)
        .sum();

    println!("requests: {}", tally.requests);
    for (status, n) in &tally.by_status {
        println!("  {status:<16} {n}");
    }
    println!(
        "acknowledged writes: {} (missing afterwards: {missing_writes}, target 0)",
        ids.len()
    );
    println!(
        "answers delivered with end: {} (not stored: {missing_answers}, target 0)",
        tally.delivered.len()
    );
    println!("5xx other than 503: {other_5xx} (target 0)");
    println!(
        "peak resident memory: {:.1} MB (VmHWM), {:.1} MB sampled",
        peak_hwm / 1024.0,
        peak_sampled / 1024.0
    );
    println!(
        "outage: PostgreSQL stopped at {:.1} s for {outage} s; /readyz 200 {} after it \
         accepted connections again; first acknowledged write sent after the restart: {}",
        stopped_at.as_secs_f64(),
        ready_after.map_or("never".to_string(), |d| format!("{} ms", d.as_millis())),
        first_write_after
            .lock()
            .unwrap()
            .map_or("never".to_string(), |t| format!(
                "{} ms",
                t.duration_since(back).as_millis()
            )),
    );
    drop(server);
    pg_ctl(&install.bin_dir, &["stop", "-m", "fast", "-w"], &data);
    if missing_writes != 0 || missing_answers != 0 || other_5xx != 0 {
        std::process::exit(1);
    }
}
