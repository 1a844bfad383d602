//! A rolling restart behind a real load balancer loses no request (issue
//! #33): three `workspace-server` processes on one database behind Debian's
//! `haproxy` (health checks on `/readyz`, `fall 2`, `retries 2`, `option
//! redispatch`), eight clients writing through it the whole time, and each
//! instance in turn stopped with SIGTERM and started again on its port, ten
//! times over. A stopping instance reports not ready first and keeps
//! serving for `http.drain_secs`, its responses closing their connections,
//! before it closes anything (see `Server::shutdown_unless`); every request
//! must get its answer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use workspace_client::types::ConversationCreate;
use workspace_tests::TestContext;

/// The balancer's health-check interval, in milliseconds.
const CHECK_MS: u64 = 250;
/// The instances' drain window: above the time haproxy takes to mark an
/// instance down (`fall 2` checks, `CHECK_MS` apart, plus one check).
const DRAIN_SECS: f64 = 1.2;
const INSTANCES: usize = 3;
const CLIENTS: usize = 8;
const ROUNDS: usize = 10;
/// Each client's pause between two requests.
const PAUSE: Duration = Duration::from_millis(5);

/// Debian's haproxy, or a failure that says how to get it.
fn haproxy() -> PathBuf {
    [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .expect("haproxy (apt-get install haproxy; .ci/run installs it)")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// One `workspace-server` process on a fixed port.
struct Instance {
    name: String,
    port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<std::process::Child>,
}

impl Instance {
    fn start(&mut self, binary: &Path) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the instance's log");
        let child = std::process::Command::new(binary)
            .env("WORKSPACE_DATA_DIR", workspace_tests::data_root())
            .arg("--config")
            .arg(&self.config)
            .env_remove("WORKSPACE_CONFIG")
            .env_remove("DATABASE_URL")
            .env("WORKSPACE_LOG_LEVEL", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting workspace-server");
        self.child = Some(child);
    }

    async fn wait_ready(&self) {
        let url = format!("http://127.0.0.1:{}/readyz", self.port);
        let http = workspace_tests::http();
        let started = Instant::now();
        while !http.get(&url).send().await.is_ok_and(|r| r.status() == 200) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{} did not become ready (log: {})",
                self.name,
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then waits for the process to end.
    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let status = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -TERM {}", child.id());
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("waiting for the instance") {
                assert!(status.success(), "{} stopped with {status}", self.name);
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} did not stop (log: {})",
                self.name,
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// haproxy in the foreground, killed on drop.
struct Balancer {
    child: std::process::Child,
    socket: PathBuf,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Balancer {
    /// The servers haproxy's health checks currently find up.
    async fn up(&self) -> Vec<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(mut s) = tokio::net::UnixStream::connect(&self.socket).await else {
            return Vec::new();
        };
        if s.write_all(b"show stat\n").await.is_err() {
            return Vec::new();
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        // CSV: proxy name, server name, ..., the status in column 18.
        out.lines()
            .filter(|l| l.starts_with("instances,"))
            .filter_map(|l| {
                let cols: Vec<&str> = l.split(',').collect();
                (cols.get(17) == Some(&"UP") && cols[1] != "BACKEND").then(|| cols[1].to_string())
            })
            .collect()
    }

    async fn wait_up(&self, name: &str) {
        let started = Instant::now();
        while !self.up().await.iter().any(|n| n == name) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "haproxy did not see {name} up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_behind_haproxy_loses_no_request() {
    let haproxy = haproxy();
    let binary = workspace_tests::server_binary()
        .expect("the workspace-server executable (cargo xtask test builds it)");
    let cx = TestContext::new("rolling_restart").await;
    // Configurations and logs; removed when the test passes.
    let dir = std::env::temp_dir()
        .join("workspace-tests")
        .join(format!("rolling-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");

    // The instances: the server executable on the test's database.
    let mut instances: Vec<Instance> = (0..INSTANCES)
        .map(|i| {
            let name = format!("i{i}");
            let port = free_port();
            let config = dir.join(format!("{name}.toml"));
            std::fs::write(
                &config,
                format!(
                    "bind_address = \"127.0.0.1:{port}\"\n\
                     [database]\nurl = {:?}\npool_size = 4\n\
                     {}\
                     [http]\ndrain_secs = {DRAIN_SECS}\nshutdown_grace_secs = 5\n",
                    cx.db_url,
                    workspace_tests::keys_toml()
                ),
            )
            .expect("writing the instance's configuration");
            Instance {
                log: dir.join(format!("{name}.log")),
                name,
                port,
                config,
                child: None,
            }
        })
        .collect();
    for instance in &mut instances {
        instance.start(&binary);
    }
    for instance in &instances {
        instance.wait_ready().await;
    }

    // The balancer.
    let front = free_port();
    let socket = dir.join("haproxy.sock");
    let servers: String = instances
        .iter()
        .map(|i| format!("    server {} 127.0.0.1:{} check\n", i.name, i.port))
        .collect();
    let haproxy_config = dir.join("haproxy.cfg");
    std::fs::write(
        &haproxy_config,
        format!(
            "global\n    maxconn 512\n    stats socket {} mode 600 level admin\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n\
             \x20   timeout server 30s\n    retries 2\n    option redispatch\n\
             frontend api\n    bind 127.0.0.1:{front}\n    default_backend instances\n\
             backend instances\n    balance roundrobin\n    option httpchk GET /readyz\n\
             \x20   default-server inter {CHECK_MS}ms fall 2 rise 2\n{servers}",
            socket.display()
        ),
    )
    .expect("writing haproxy's configuration");
    let child = std::process::Command::new(&haproxy)
        .arg("-db")
        .arg("-f")
        .arg(&haproxy_config)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("haproxy.log")).expect("haproxy's log file"))
        .spawn()
        .expect("starting haproxy");
    let balancer = Balancer { child, socket };
    for instance in &instances {
        balancer.wait_up(&instance.name).await;
    }
    let base = format!("http://127.0.0.1:{front}");

    // Eight clients, each with its own keep-alive connections to the
    // balancer, writing until told to stop (one user: signing up is slow
    // in a debug build, and the balancer does not care who asks).
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut clients = Vec::new();
    let user = cx.user("rolling").await;
    let org = user.personal_org().await;
    for n in 0..CLIENTS {
        let client = workspace_client::Client::authenticated(&base, &user.token).expect("client");
        let (stop, sent, errors) = (stop.clone(), sent.clone(), errors.clone());
        clients.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let result = client
                    .conversation_create()
                    .org_id(org)
                    .body(ConversationCreate::builder().title(format!("client {n}, #{i}")))
                    .send()
                    .await;
                sent.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = result {
                    errors
                        .lock()
                        .expect("errors")
                        .push(format!("client {n}, request {i}: {e}"));
                }
                // A steady load that leaves the two cores of a CI machine
                // room to restart instances quickly.
                tokio::time::sleep(PAUSE).await;
            }
        }));
    }

    // Ten rolling restarts: each instance in turn stopped (SIGTERM),
    // started again on its port, and back in rotation before the next.
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for _round in 0..ROUNDS {
        for instance in &mut instances {
            let restart = Instant::now();
            instance.stop().await;
            instance.start(&binary);
            instance.wait_ready().await;
            balancer.wait_up(&instance.name).await;
            slowest = slowest.max(restart.elapsed());
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.expect("a client");
    }
    let sent = sent.load(Ordering::Relaxed);
    let errors = errors.lock().expect("errors").clone();
    eprintln!(
        "{ROUNDS} rolling restarts of {INSTANCES} instances in {elapsed:?} (slowest restart \
         {slowest:?}): {sent} requests, {} errors",
        errors.len()
    );
    assert!(
        errors.is_empty(),
        "requests lost during the rolling restarts (logs in {}):\n{}",
        dir.display(),
        errors.join("\n")
    );
    assert!(sent > 1000, "too few requests to say anything: {sent}");

    // Every answered write is stored.
    let stored: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM conversations", &[])
        .await
        .expect("counting")
        .get(0);
    assert_eq!(stored as usize, sent);

    drop(balancer);
    for instance in &mut instances {
        instance.stop().await;
    }
    cx.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The drain window itself, on an in-process instance: once a shutdown
/// begins, `/readyz` answers `503` at once while other requests are still
/// served, each response with `Connection: close`; only after
/// `http.drain_secs` does the instance stop accepting.
#[tokio::test]
async fn a_draining_instance_reports_not_ready_and_still_serves() {
    let cx = TestContext::new("drain_window").await;
    let server = cx.second_instance(|c| c.http.drain_secs = 1.5).await;
    let base = format!("http://{}", server.local_addr());
    let http = reqwest::Client::new();
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    assert!(ready.headers().get("connection").is_none());

    let began = Instant::now();
    let stopping = tokio::spawn(server.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(ready.headers()["connection"], "close");
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["error_code"], "server_busy");
    // Still serving, on a new connection each time.
    let alive = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(alive.status(), 200);
    assert_eq!(alive.headers()["connection"], "close");

    stopping.await.unwrap().unwrap();
    assert!(
        began.elapsed() >= Duration::from_millis(1500),
        "stopped after {:?}, before the drain window ended",
        began.elapsed()
    );
    // Stopped: nothing listens any more.
    assert!(http.get(format!("{base}/healthz")).send().await.is_err());
    cx.teardown().await;
}
