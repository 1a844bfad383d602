//! `cargo xtask bench route`: answers that survive a failing provider,
//! beside LiteLLM's proxy on the same fake providers, and the CPU that
//! routing costs when every deployment is healthy (issue #53).
//!
//! **Fault runs.** Three fake OpenAI-compatible providers on 127.0.0.1
//! (`FakeProvider::scripted`, HTTP/1.1 keep-alive) stream the same
//! scripted answer: `PIECES` content chunks, one every `PACE`. The
//! *primary* fails 30 % of the requests it receives, in a seeded mix
//! dealt in blocks of 100 requests (the same sequence in every run and
//! for both systems, by the order requests reach it): before the answer
//! (20 %) a `429` with `Retry-After: 1` (4), a `429` without (4), a
//! `529` (4), a `500` (4), a TCP reset before any byte (2), a stall of
//! `STALL` before the first byte (2); in the middle of the answer (10 %),
//! after 2 to 12 of its 16 data parts, a TCP reset (4), a stall of
//! `STALL` (3), a malformed chunk (3). The *secondary* and the *backup*
//! never fail. `ROUTE_ANSWERS` (default 1,000) answers are asked at
//! `ROUTE_CONNECTIONS` (default 32) at a time, each a different question
//! ("Question N: …", which is how the fakes tell which answer met which
//! fault); an answer counts as *completed* when its stream ends normally,
//! and *equal* when its text is exactly the script.
//!
//! Each system runs this twice, on fresh fakes and a fresh process:
//! with cooldowns of 1 s (a deployment that fails is left alone for a
//! while, so the primary receives fewer requests, and so deals fewer
//! faults, the better a router avoids it: the fakes' line says how many
//! each system met), and without cooldowns (a cooldown of 0: the primary
//! keeps taking first attempts, so many more answers meet a fault and a
//! broken stream: the failover itself under load). Ours still sends one
//! request at a time to a deployment right after a failure that cools it
//! at once (`429`, `529`, a refused connection), the others going on to
//! the secondary until that probe answers, so its primary takes fewer
//! first attempts than LiteLLM's, which tries it every time.
//!
//! - Ours: the `workspace-server` executable (a separate process;
//!   `WORKSPACE_SERVER_BIN`, which `cargo xtask bench route` builds),
//!   configured as the README's routing section says: model `chat-main`
//!   with deployments `primary` (weight 1) and `secondary` (weight 0:
//!   only when the primary is unavailable), `fallbacks = ["chat-backup"]`
//!   (one deployment on the backup fake), `max_retries = 2`,
//!   `retry_backoff_ms = 50`, `first_event_timeout_secs = 1`,
//!   `idle_timeout_secs = 1`, `fail_window_secs = 60`; with cooldowns
//!   `allowed_fails = 3`, `cooldown_secs = 1`, `max_cooldown_secs = 5`;
//!   without, `allowed_fails = 1000000`, `cooldown_secs = 0`,
//!   `max_cooldown_secs = 0`. Driven through `POST /api/chat/send_message`
//!   into chats created beforehand (a new chat would also ask the model
//!   for a title): the chat send operation is what the issue's "chat
//!   answers" are, and its stream is the one that carries `route` and
//!   `restart` events, which the client follows (on `restart` it drops
//!   the text so far). The OpenAI-compatible deployment endpoint runs an
//!   agent and has no restart event, so it would not be the same answer.
//!   Ours also stores every answer (LiteLLM, without a database, stores
//!   nothing): after the run each chat is read back and its stored answer
//!   compared too.
//! - LiteLLM: its proxy (`litellm[proxy]` `LITELLM_PIN`, installed with
//!   pip into `target/litellm-venv` on first use; its default single
//!   worker, or `ROUTE_LITELLM_WORKERS`, whose cooldowns are then each
//!   worker's own, as LiteLLM shares them only through Redis; no
//!   database, a master key) with a generated `config.yaml`: two
//!   `chat-main` deployments on the same fakes with `order: 1` and
//!   `order: 2` (LiteLLM's way to try the second only after the first),
//!   `fallbacks: [{chat-main: [chat-backup]}]`, `num_retries: 2`,
//!   `retry_after: 0`, `stream_timeout: 1` (its per-read timeout: before
//!   the first byte and between chunks); with cooldowns `allowed_fails: 3`
//!   (a minute), `cooldown_time: 1`; without, `disable_cooldowns: true`.
//!   Driven through `POST /v1/chat/completions` with `stream: true`;
//!   completed means `data: [DONE]` with no error event.
//!
//! Before its first fault run each system answers `ROUTE_BASELINE_ANSWERS`
//! (default 200) questions without faults (ours: `cpu-one` below;
//! LiteLLM: a `chat-healthy` group on a fake of its own), the latency to
//! read the fault runs' against.
//!
//! Printed: per system and run, answers, completed, equal to the script,
//! the time from sending to the end of the stream (p50/p99 of the
//! completed answers) and the CPU time of the system's processes per
//! answer (`/proc/<pid>/stat`: ours the server process, whose PostgreSQL
//! backends are shown apart; LiteLLM its proxy's process group); what
//! each fake received and how many faults were dealt; ours' `route` and
//! `restart` events; per fault kind, how many of the answers that met it
//! came out whole.
//!
//! **CPU of routing.** The last server also offers `cpu-one` (one
//! deployment, no fallback: not routed) and `cpu-two` (two deployments,
//! weight 1 each, on two healthy fakes: routed): `ROUTE_CPU_ANSWERS`
//! (default 2,000) answers each, in alternating windows of
//! `ROUTE_CPU_WINDOW` (default 250) at `ROUTE_CONNECTIONS` (one-two-two-one
//! order, after a warm-up window of each). CPU time is read from
//! `/proc/<pid>/stat` (user + system, every thread of the server process,
//! at clock-tick resolution) before and after each window, and likewise
//! for the PostgreSQL backends connected to the bench's database (the
//! shared health the router reads lives there); printed per answer for
//! each model, with the difference and its standard error over the
//! windows.
//!
//! `ROUTE_SEED` changes the fault sequence; `ROUTE_FAULTS=mid` deals only
//! the broken streams (10 % of the primary's requests: they cool nothing
//! down at once, so in the run without cooldowns the primary keeps its
//! share of first attempts and far more answers break mid-stream);
//! `ROUTE_SKIP_LITELLM=1` runs
//! ours alone. When the server does not accept the routing configuration
//! (a build without deployments), our half prints "router not available"
//! and LiteLLM's half still runs.

use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::sse::SseReader;
use workspace_tests::fake_provider::{Action, FakeProvider, Recorded, Reply};

/// The LiteLLM release the comparison runs (the newest whose `proxy`
/// extra installs from the registry reachable here with Python 3.11:
/// 1.108.10 and later pin companion packages it does not have).
const LITELLM_PIN: &str = "litellm[proxy]==1.108.5";
/// Content chunks of the scripted answer.
const PIECES: usize = 12;
/// Pause before each data part of an answer.
const PACE: Duration = Duration::from_millis(2);
/// How long a stalled fake writes nothing (then it goes on).
const STALL: Duration = Duration::from_secs(10);
/// The longest an answer may take before the client gives up on it.
const ANSWER_LIMIT: Duration = Duration::from_secs(60);
const MASTER_KEY: &str = "sk-bench-route-0123456789abcdef0123456789abcdef";

/// A fault run's cooldown setting, the same for both systems.
#[derive(Clone, Copy)]
enum Cooldowns {
    /// A failing deployment is left alone for 1 s (ours: `cooldown_secs =
    /// 1`, `max_cooldown_secs = 5`, `allowed_fails = 3`; LiteLLM:
    /// `cooldown_time: 1`, `allowed_fails: 3`).
    OneSecond,
    /// Never left alone, so every fault meets the failover (ours:
    /// `cooldown_secs = 0`, `max_cooldown_secs = 0`, `allowed_fails =
    /// 1000000`; LiteLLM: `disable_cooldowns: true`).
    Off,
}

impl Cooldowns {
    fn label(self) -> &'static str {
        match self {
            Cooldowns::OneSecond => "cooldown 1 s",
            Cooldowns::Off => "no cooldown",
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pieces() -> Vec<String> {
    (0..PIECES)
        .map(|i| format!("Part {i} of the scripted answer. "))
        .collect()
}

/// The text every answer must come out as.
fn script() -> String {
    pieces().concat()
}

/// The reply every fake streams: a role chunk, `PIECES` content chunks, a
/// finish chunk, a usage chunk, `[DONE]` (16 data parts).
fn answer() -> Reply {
    let pieces = pieces();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Reply::openai_text(&pieces).paced(PACE)
}

fn question(i: usize) -> String {
    format!("Question {i}: what is the scripted answer?")
}

/// The answer number of a request (from its last user message).
fn question_number(request: &Recorded) -> Option<usize> {
    let (_, content) = request
        .messages()
        .into_iter()
        .rev()
        .find(|(role, _)| role == "user")?;
    content
        .strip_prefix("Question ")?
        .split(':')
        .next()?
        .parse()
        .ok()
}

/// A fault the primary deals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    RateLimitedRetryAfter,
    RateLimited,
    Overloaded,
    ServerError,
    ResetBeforeResponse,
    StallBeforeFirstByte,
    ResetMidStream,
    StallMidStream,
    MalformedMidStream,
}

impl Fault {
    /// Each fault and how many of every 100 primary requests get it.
    const MIX: [(Fault, usize); 9] = [
        (Fault::RateLimitedRetryAfter, 4),
        (Fault::RateLimited, 4),
        (Fault::Overloaded, 4),
        (Fault::ServerError, 4),
        (Fault::ResetBeforeResponse, 2),
        (Fault::StallBeforeFirstByte, 2),
        (Fault::ResetMidStream, 4),
        (Fault::StallMidStream, 3),
        (Fault::MalformedMidStream, 3),
    ];

    fn mid_stream(self) -> bool {
        matches!(
            self,
            Fault::ResetMidStream | Fault::StallMidStream | Fault::MalformedMidStream
        )
    }

    fn label(self) -> &'static str {
        match self {
            Fault::RateLimitedRetryAfter => "429 with Retry-After: 1",
            Fault::RateLimited => "429 without Retry-After",
            Fault::Overloaded => "529 overloaded",
            Fault::ServerError => "500",
            Fault::ResetBeforeResponse => "reset before the response",
            Fault::StallBeforeFirstByte => "stall before the first byte",
            Fault::ResetMidStream => "reset after k chunks",
            Fault::StallMidStream => "stall after k chunks",
            Fault::MalformedMidStream => "malformed chunk at k",
        }
    }

    /// What the fake does; `k` (2 to 12): data parts written before a
    /// mid-stream fault (the role chunk and at least one content chunk).
    fn action(self, k: usize) -> Action {
        match self {
            Fault::RateLimitedRetryAfter => {
                Action::Reply(Reply::error(429, "rate limited").header("retry-after", "1"))
            }
            Fault::RateLimited => Action::Reply(Reply::error(429, "rate limited")),
            Fault::Overloaded => Action::Reply(Reply::error(529, "overloaded")),
            Fault::ServerError => Action::Reply(Reply::error(500, "internal error")),
            Fault::ResetBeforeResponse => Action::Reset,
            Fault::StallBeforeFirstByte => Action::Stall(STALL, answer()),
            Fault::ResetMidStream => Action::ResetAfter(k, answer()),
            Fault::StallMidStream => Action::Reply(answer().stall_after(k, STALL)),
            Fault::MalformedMidStream => Action::Reply(answer().malformed_at(k)),
        }
    }
}

/// SplitMix64: the seeded sequence the fault mix is dealt from.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The faults dealt in every 100 primary requests: [`Fault::MIX`], or with
/// `ROUTE_FAULTS=mid` only its broken streams (10 %: faults that cool no
/// deployment down at once, so without cooldowns the primary keeps its
/// share of first attempts and the failover inside a stream is what is
/// measured).
fn mix() -> &'static [(Fault, usize)] {
    static MIX: std::sync::OnceLock<Vec<(Fault, usize)>> = std::sync::OnceLock::new();
    MIX.get_or_init(|| {
        let mid = std::env::var("ROUTE_FAULTS").is_ok_and(|v| v == "mid");
        Fault::MIX
            .into_iter()
            .filter(|(f, _)| !mid || f.mid_stream())
            .collect()
    })
}

/// The primary's fault for its request `seq` (if any) and `k`: block
/// `seq / 100` is a seeded shuffle of the faults of [`mix`] and healthy
/// answers.
fn dealt(seed: u64, seq: usize) -> (Option<Fault>, usize) {
    let mut deck: Vec<Option<Fault>> = mix()
        .iter()
        .flat_map(|&(f, n)| std::iter::repeat_n(Some(f), n))
        .collect();
    deck.resize(100, None);
    let mut state = seed ^ (seq / 100) as u64;
    for i in (1..deck.len()).rev() {
        let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
        deck.swap(i, j);
    }
    let mut state = seed ^ 0x5EED ^ seq as u64;
    let k = 2 + (splitmix(&mut state) % 11) as usize;
    (deck[seq % 100], k)
}

/// What a fake saw: per request, the answer it belonged to and the fault
/// dealt (`None`: answered normally).
type Log = Arc<Mutex<Vec<(Option<usize>, Option<Fault>)>>>;

/// The three fakes of a fault run.
struct Fakes {
    primary: FakeProvider,
    secondary: FakeProvider,
    backup: FakeProvider,
    primary_log: Log,
}

impl Fakes {
    async fn start(seed: u64) -> Fakes {
        let primary_log: Log = Arc::default();
        let log = primary_log.clone();
        let primary = FakeProvider::scripted(move |seq, request| {
            let (fault, k) = dealt(seed, seq);
            log.lock().unwrap().push((question_number(request), fault));
            fault.map_or_else(|| Action::Reply(answer()), |f| f.action(k))
        })
        .await;
        let secondary = healthy().await;
        let backup = healthy().await;
        for fake in [&primary, &secondary, &backup] {
            fake.keep_alive();
        }
        Fakes {
            primary,
            secondary,
            backup,
            primary_log,
        }
    }

    /// Answer number -> the faults it met on the primary.
    fn faults_by_answer(&self) -> BTreeMap<usize, Vec<Fault>> {
        let mut by_answer: BTreeMap<usize, Vec<Fault>> = BTreeMap::new();
        for (answer, fault) in self.primary_log.lock().unwrap().iter() {
            if let (Some(a), Some(f)) = (answer, fault) {
                by_answer.entry(*a).or_default().push(*f);
            }
        }
        by_answer
    }

    fn describe(&self) -> String {
        let log = self.primary_log.lock().unwrap();
        let faults = log.iter().filter(|(_, f)| f.is_some()).count();
        format!(
            "primary {} requests ({faults} faults dealt), secondary {}, backup {}",
            log.len(),
            self.secondary.requests().len(),
            self.backup.requests().len()
        )
    }
}

async fn healthy() -> FakeProvider {
    let fake = FakeProvider::scripted(|_, _| Action::Reply(answer())).await;
    fake.keep_alive();
    fake
}

fn v1(fake: &FakeProvider) -> String {
    format!("{}/v1", fake.base_url())
}

/// How one answer went.
#[derive(Clone, Debug, Default)]
struct Outcome {
    completed: bool,
    equal: bool,
    ms: f64,
    /// Why it did not complete.
    error: Option<String>,
    /// `restart` events (ours).
    restarts: usize,
    /// The `reason`s of `route` events after the first (ours).
    takeovers: Vec<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs `answer(i)` for `i` in `0..n`, `connections` at a time.
async fn drive<F, Fut>(n: usize, connections: usize, answer: F) -> Vec<Outcome>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    let answer = Arc::new(answer);
    let next = Arc::new(AtomicUsize::new(0));
    let results = Arc::new(Mutex::new(vec![Outcome::default(); n]));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (answer, next, results) = (answer.clone(), next.clone(), results.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let sent = Instant::now();
                let mut outcome = match tokio::time::timeout(ANSWER_LIMIT, answer(i)).await {
                    Ok(o) => o,
                    Err(_) => Outcome {
                        error: Some("no end within 60 s".into()),
                        ..Outcome::default()
                    },
                };
                outcome.ms = sent.elapsed().as_secs_f64() * 1000.0;
                results.lock().unwrap()[i] = outcome;
            }
        }));
    }
    for task in tasks {
        task.await.expect("a driver task");
    }
    Arc::try_unwrap(results)
        .expect("no task left")
        .into_inner()
        .unwrap()
}

/// Reads an error response's status and body into an outcome.
async fn refused(response: reqwest::Response) -> Outcome {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or_default();
    let code = body["error_code"]
        .as_str()
        .or(body["error"]["type"].as_str())
        .unwrap_or("?")
        .to_string();
    Outcome {
        error: Some(format!("HTTP {status} {code}")),
        ..Outcome::default()
    }
}

/// Our server, started from its executable on a fresh database.
struct Ours {
    _child: workspace_tests::ChildGuard,
    pid: u32,
    base: String,
    metrics: String,
    database: String,
    token: String,
    org: Uuid,
    /// Model name -> id.
    models: BTreeMap<String, String>,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

/// The server's configuration: the fault run's models on `fakes`, the CPU
/// comparison's on `h1` and `h2`.
fn ours_config(
    fakes: &Fakes,
    h1: &FakeProvider,
    h2: &FakeProvider,
    cooldowns: Cooldowns,
) -> String {
    let deployment = |name: &str, url: String, weight: u32| {
        format!(
            "[[models.deployments]]\nname = \"{name}\"\nprovider = \"openai_compatible\"\n\
             base_url = \"{url}\"\napi_key = \"sk-bench-{name}\"\n\
             upstream_model = \"fake-upstream\"\nweight = {weight}\n\n"
        )
    };
    let single = |model: &str, url: String| {
        format!(
            "[[models]]\nname = \"{model}\"\nprovider = \"openai_compatible\"\n\
             base_url = \"{url}\"\napi_key = \"sk-bench-{model}\"\n\
             upstream_model = \"fake-upstream\"\n\n"
        )
    };
    let cooling = match cooldowns {
        Cooldowns::OneSecond => "allowed_fails = 3\ncooldown_secs = 1\nmax_cooldown_secs = 5\n",
        Cooldowns::Off => "allowed_fails = 1000000\ncooldown_secs = 0\nmax_cooldown_secs = 0\n",
    };
    let metrics_port = free_port();
    format!(
        "[features]\ndaily_chat_limit = 100000000\n\n\
         [rate_limits]\nlogin_per_address = 0\nlogin_global = 0\n\
         signup_per_address = 0\nsignup_global = 0\n\n\
         [metrics]\nbind_address = \"127.0.0.1:{metrics_port}\"\n\n\
         [providers]\noffline_model = false\nconnect_timeout_secs = 2\n\
         idle_timeout_secs = 1\nfirst_event_timeout_secs = 1\nmax_retries = 2\n\
         retry_backoff_ms = 50\nfail_window_secs = 60\n{cooling}\n\
         [[models]]\nname = \"chat-main\"\nfallbacks = [\"chat-backup\"]\n\n{}{}{}{}\
         [[models]]\nname = \"cpu-two\"\n\n{}{}",
        deployment("primary", v1(&fakes.primary), 1),
        deployment("secondary", v1(&fakes.secondary), 0),
        single("chat-backup", v1(&fakes.backup)),
        single("cpu-one", v1(h1)),
        deployment("h1", v1(h1), 1),
        deployment("h2", v1(h2), 1),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("port")
        .port()
}

async fn post(http: &reqwest::Client, url: &str, token: Option<&str>, body: Value) -> Value {
    let mut request = http.post(url).json(&body);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let value: Value = response.json().await.unwrap_or_default();
    assert!(status.is_success(), "{url}: {status} {value}");
    value
}

/// Starts the server on a new database; `Err` with the reason when it
/// exits before it is ready (its log's last lines).
async fn start_ours(admin_url: &str, config: String) -> Result<Ours, String> {
    let database = format!("bench_route_{}", Uuid::new_v4().simple());
    let (admin, connection) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
        .await
        .expect("connecting to PostgreSQL");
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .expect("creating the bench database");
    let db_url = workspace_tests::url_for(admin_url, &database).expect("a PostgreSQL URL");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("route.toml");
    std::fs::write(&path, config).expect("config");
    let metrics = config_metrics(&path);
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
    let child = workspace_tests::server_command()
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .arg("--config")
        .arg(&path)
        .env("DATABASE_URL", &db_url)
        .env("WORKSPACE_JWT_SECRET", workspace_tests::TEST_JWT_SECRET)
        .env("WORKSPACE_SECRET_KEYS", workspace_tests::TEST_SECRET_KEY)
        .env("WORKSPACE_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting workspace-server");
    let mut child = workspace_tests::ChildGuard(child);
    let pid = child.0.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    loop {
        if let Ok(Some(_)) = child.0.try_wait() {
            let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(tail.join("\n"));
        }
        let ready = http.get(format!("{base}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (token, org) = sign_up(&http, &base).await;
    let list: Value = http
        .get(format!("{base}/api/models/list?org_id={org}"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("models")
        .json()
        .await
        .expect("models json");
    let models = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m["name"].as_str()?.into(), m["id"].as_str()?.into())))
        .collect();
    Ok(Ours {
        _child: child,
        pid,
        base,
        metrics,
        database,
        token,
        org,
        models,
        http,
        dir,
    })
}

/// The metrics URL of a configuration written by [`ours_config`].
fn config_metrics(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let addr = text
        .lines()
        .find_map(|l| l.strip_prefix("bind_address = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or("127.0.0.1:0");
    format!("http://{addr}/metrics")
}

async fn sign_up(http: &reqwest::Client, base: &str) -> (String, Uuid) {
    let email = "route@example.com";
    let password = workspace_tests::TEST_PASSWORD;
    post(
        http,
        &format!("{base}/api/auth/signup"),
        None,
        json!({"email": email, "first_name": "Route", "last_name": "Bench", "password": password}),
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
    let org = me["organizations"][0]["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("org id");
    (token, org)
}

impl Ours {
    fn model(&self, name: &str) -> String {
        self.models
            .get(name)
            .unwrap_or_else(|| panic!("model {name} offered: {:?}", self.models))
            .clone()
    }

    /// `n` empty chats (16 created at a time).
    async fn chats(&self, n: usize) -> Vec<String> {
        let url = format!("{}/api/chat?org_id={}", self.base, self.org);
        futures::stream::iter(0..n)
            .map(|_| {
                let (http, url, token) = (self.http.clone(), url.clone(), self.token.clone());
                async move {
                    post(&http, &url, Some(&token), json!({"title": "route"})).await["id"]
                        .as_str()
                        .expect("chat id")
                        .to_string()
                }
            })
            .buffered(16)
            .collect()
            .await
    }

    /// Answers `n` questions with `model` into `chats`, `connections` at
    /// a time.
    async fn run(
        &self,
        model: &str,
        chats: Arc<Vec<String>>,
        first: usize,
        n: usize,
        connections: usize,
    ) -> Vec<Outcome> {
        let url = format!("{}/api/chat/send_message?org_id={}", self.base, self.org);
        let (http, token, model) = (self.http.clone(), self.token.clone(), self.model(model));
        drive(n, connections, move |i| {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            let body = json!({"chat_id": chats[first + i], "model_id": model,
                "content": question(first + i)});
            async move { ours_answer(&http, &url, &token, body).await }
        })
        .await
    }

    /// Stored answers (of `chats`) whose text is the script and whose
    /// status is `complete`.
    async fn stored_equal(&self, chats: &[String]) -> usize {
        let script = script();
        let checks = futures::stream::iter(chats.iter().cloned())
            .map(|chat| {
                let url = format!("{}/api/chat?org_id={}&chat_id={chat}", self.base, self.org);
                let (http, token, script) = (self.http.clone(), self.token.clone(), script.clone());
                async move {
                    let chat: Value = http
                        .get(url)
                        .bearer_auth(token)
                        .send()
                        .await
                        .ok()?
                        .json()
                        .await
                        .ok()?;
                    let last = chat["messages"].as_array()?.last()?.clone();
                    Some(last["content"] == script.as_str() && last["status"] == "complete")
                }
            })
            .buffered(16)
            .collect::<Vec<_>>()
            .await;
        checks.into_iter().filter(|c| *c == Some(true)).count()
    }

    /// A `/metrics` counter summed over its labels (NaN when absent).
    async fn counter(&self, name: &str) -> f64 {
        let Ok(response) = self.http.get(&self.metrics).send().await else {
            return f64::NAN;
        };
        let text = response.text().await.unwrap_or_default();
        let values: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        if values.is_empty() {
            f64::NAN
        } else {
            values.iter().sum()
        }
    }
}

/// One answer through `send_message`: the `content` events' text, emptied
/// on `restart`; completed on `end` with `finish_reason: stop`.
async fn ours_answer(http: &reqwest::Client, url: &str, token: &str, body: Value) -> Outcome {
    let response = match http.post(url).bearer_auth(token).json(&body).send().await {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                error: Some(format!("request: {e}")),
                ..Outcome::default()
            };
        }
    };
    if !response.status().is_success() {
        return refused(response).await;
    }
    let mut events = SseReader::from_response(response);
    let (mut text, mut restarts, mut takeovers) = (String::new(), 0, Vec::new());
    while let Some(event) = events.next().await {
        let Ok(event) = event else { break };
        let Ok(v) = event.json::<Value>() else {
            continue;
        };
        match v["type"].as_str() {
            Some("content") => text.push_str(v["content"].as_str().unwrap_or("")),
            Some("restart") => {
                restarts += 1;
                text.clear();
            }
            Some("route") if v["reason"] != "first" => {
                takeovers.push(v["reason"].as_str().unwrap_or("?").to_string());
            }
            Some("end") => {
                let completed = v["finish_reason"] == "stop";
                return Outcome {
                    completed,
                    equal: completed && text == script(),
                    restarts,
                    takeovers,
                    ..Outcome::default()
                };
            }
            Some("error") => {
                return Outcome {
                    error: Some(format!("error event {}", v["error_code"])),
                    restarts,
                    takeovers,
                    ..Outcome::default()
                };
            }
            _ => {}
        }
    }
    Outcome {
        error: Some("stream ended without end".into()),
        restarts,
        takeovers,
        ..Outcome::default()
    }
}

/// The directory cargo builds into (this executable is
/// `target/<profile>/deps/route-…`).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// `target/litellm-venv` with [`LITELLM_PIN`] installed (once per pin);
/// its `litellm` program.
fn litellm_program() -> PathBuf {
    let venv = target_dir().join("litellm-venv");
    let marker = venv.join(".workspace-litellm");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(LITELLM_PIN) {
        println!(
            "installing {LITELLM_PIN} into {} (pip, about 750 MB)",
            venv.display()
        );
        if !venv.join("bin/python").is_file() {
            let status = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .expect("python3 -m venv");
            assert!(status.success(), "creating {}", venv.display());
        }
        let status = Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                LITELLM_PIN,
            ])
            .status()
            .expect("pip");
        assert!(status.success(), "pip install {LITELLM_PIN}");
        std::fs::write(&marker, LITELLM_PIN).expect("marker");
    }
    venv.join("bin/litellm")
}

/// LiteLLM's proxy configuration for `fakes` (see the module's comment).
fn litellm_config(fakes: &Fakes, healthy: &FakeProvider, cooldowns: Cooldowns) -> String {
    let cooling = match cooldowns {
        Cooldowns::OneSecond => "  allowed_fails: 3\n  cooldown_time: 1\n",
        Cooldowns::Off => "  disable_cooldowns: true\n",
    };
    let deployment = |group: &str, id: &str, url: String, order: Option<u32>| {
        let order = order.map_or(String::new(), |o| format!("      order: {o}\n"));
        format!(
            "  - model_name: {group}\n    litellm_params:\n      model: openai/fake-upstream\n\
             \x20     api_base: {url}\n      api_key: sk-bench-{id}\n{order}\
             \x20     stream_timeout: 1\n      timeout: 30\n    model_info:\n      id: {id}\n"
        )
    };
    format!(
        "model_list:\n{}{}{}{}\
         router_settings:\n  routing_strategy: simple-shuffle\n  num_retries: 2\n\
         \x20 retry_after: 0\n{cooling}\
         \x20 fallbacks: [{{\"chat-main\": [\"chat-backup\"]}}]\n\
         litellm_settings:\n  num_retries: 2\n  request_timeout: 30\n  drop_params: true\n\
         general_settings:\n  master_key: {MASTER_KEY}\n",
        deployment("chat-main", "primary", v1(&fakes.primary), Some(1)),
        deployment("chat-main", "secondary", v1(&fakes.secondary), Some(2)),
        deployment("chat-backup", "backup", v1(&fakes.backup), None),
        deployment("chat-healthy", "healthy", v1(healthy), None),
    )
}

/// The LiteLLM proxy in its own process group, stopped (SIGTERM to the
/// group, then SIGKILL) when dropped.
struct LiteLlm {
    child: std::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for LiteLlm {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

async fn start_litellm(
    program: &Path,
    fakes: &Fakes,
    healthy: &FakeProvider,
    workers: usize,
    cooldowns: Cooldowns,
) -> LiteLlm {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, litellm_config(fakes, healthy, cooldowns)).expect("litellm config");
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("litellm.log")).expect("log");
    let child = Command::new(program)
        .arg("--config")
        .arg(&config)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--num_workers", &workers.to_string()])
        // The model price list ships with the package: no download.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("starting the LiteLLM proxy");
    let proxy = LiteLlm {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let http = reqwest::Client::new();
    for _ in 0..1200 {
        let live = http
            .get(format!("{}/health/liveliness", proxy.base))
            .send()
            .await;
        if live.is_ok_and(|r| r.status().is_success()) {
            return proxy;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(proxy._dir.path().join("litellm.log")).unwrap_or_default();
    panic!("the LiteLLM proxy did not start; its log:\n{log}");
}

/// One streamed answer through LiteLLM: the chunks' `delta.content`;
/// completed on `[DONE]` without an error event.
async fn litellm_answer(http: &reqwest::Client, url: &str, model: &str, i: usize) -> Outcome {
    let body = json!({"model": model, "stream": true,
        "messages": [{"role": "user", "content": question(i)}]});
    let response = match http
        .post(url)
        .bearer_auth(MASTER_KEY)
        .json(&body)
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                error: Some(format!("request: {e}")),
                ..Outcome::default()
            };
        }
    };
    if !response.status().is_success() {
        return refused(response).await;
    }
    let mut events = SseReader::from_response(response);
    let mut text = String::new();
    while let Some(event) = events.next().await {
        let Ok(event) = event else { break };
        if event.data == "[DONE]" {
            return Outcome {
                completed: true,
                equal: text == script(),
                ..Outcome::default()
            };
        }
        let Ok(chunk) = event.json::<Value>() else {
            continue;
        };
        if !chunk["error"].is_null() {
            let error = chunk["error"]["message"].as_str().unwrap_or("?");
            return Outcome {
                error: Some(format!(
                    "error event: {}",
                    error.chars().take(60).collect::<String>()
                )),
                ..Outcome::default()
            };
        }
        if let Some(piece) = chunk
            .pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
        {
            text.push_str(piece);
        }
    }
    Outcome {
        error: Some("stream ended without [DONE]".into()),
        ..Outcome::default()
    }
}

/// A table row of a system's fault run.
struct Row {
    system: String,
    outcomes: Vec<Outcome>,
    /// CPU ms an answer of the system's process (ours: the server; its
    /// database backends are in `fakes`' line).
    cpu_ms: f64,
    fakes: String,
    by_answer: BTreeMap<usize, Vec<Fault>>,
}

fn print_rows(rows: &[Row]) {
    let width = rows
        .iter()
        .map(|r| r.system.chars().count())
        .max()
        .unwrap_or(6)
        + 1;
    println!(
        "{:<width$} {:>8} {:>10} {:>16} {:>9} {:>9} {:>11}",
        "system", "answers", "completed", "equal to script", "p50 ms", "p99 ms", "CPU ms/ans"
    );
    for row in rows {
        let completed = row.outcomes.iter().filter(|o| o.completed).count();
        let equal = row.outcomes.iter().filter(|o| o.equal).count();
        let mut ms: Vec<f64> = row
            .outcomes
            .iter()
            .filter(|o| o.completed)
            .map(|o| o.ms)
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "{:<width$} {:>8} {:>10} {:>16} {:>9.1} {:>9.1} {:>11.2}",
            row.system,
            row.outcomes.len(),
            completed,
            equal,
            percentile(&ms, 0.5),
            percentile(&ms, 0.99),
            row.cpu_ms
        );
    }
    println!(
        "(p50/p99: sending to the end of the stream, completed answers; CPU: the system's process)"
    );
    for row in rows.iter().filter(|r| !r.fakes.is_empty()) {
        println!("{}: the fakes received: {}", row.system, row.fakes);
        let mut errors: BTreeMap<String, usize> = BTreeMap::new();
        for o in &row.outcomes {
            if let Some(e) = &o.error {
                *errors.entry(e.clone()).or_default() += 1;
            } else if o.completed && !o.equal {
                *errors.entry("completed, text differs".into()).or_default() += 1;
            }
        }
        let restarts: usize = row.outcomes.iter().map(|o| o.restarts).sum();
        let mut takeovers: BTreeMap<&str, usize> = BTreeMap::new();
        for reason in row.outcomes.iter().flat_map(|o| &o.takeovers) {
            *takeovers.entry(reason).or_default() += 1;
        }
        if restarts > 0 || !takeovers.is_empty() {
            println!("  route events after the first: {takeovers:?}; restart events: {restarts}");
        }
        for (e, n) in errors {
            println!("  {n} x {e}");
        }
    }
    print_breakdown(rows);
}

/// Per fault kind and fault run: answers that met it on the primary, and
/// of those how many came out equal to the script.
fn print_breakdown(rows: &[Row]) {
    let rows: Vec<&Row> = rows.iter().filter(|r| !r.fakes.is_empty()).collect();
    let width = rows
        .iter()
        .map(|r| r.system.chars().count())
        .max()
        .unwrap_or(6)
        + 2;
    print!("\n{:<30}", "whole / met on the primary");
    for row in &rows {
        print!("{:>width$}", row.system);
    }
    println!();
    for &(fault, _) in mix() {
        print!("{:<30}", fault.label());
        for row in &rows {
            let met: Vec<usize> = row
                .by_answer
                .iter()
                .filter(|(_, faults)| faults.contains(&fault))
                .map(|(a, _)| *a)
                .collect();
            let whole = met
                .iter()
                .filter(|&&a| row.outcomes.get(a).is_some_and(|o| o.equal))
                .count();
            print!("{:>width$}", format!("{whole}/{}", met.len()));
        }
        println!();
    }
}

/// The fields of `/proc/<pid>/stat` from the third (after the command,
/// which may hold spaces).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// CPU seconds (user + system, every thread) of a process so far; `None`
/// when it is gone.
fn cpu_secs(pid: u32, ticks: f64) -> Option<f64> {
    let fields = stat_fields(pid)?;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// CPU seconds of every process of a process group (LiteLLM's workers).
fn group_cpu_secs(group: u32, ticks: f64) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return f64::NAN;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            stat_fields(pid).is_some_and(|f| f.get(2).is_some_and(|g| *g == group.to_string()))
        })
        .filter_map(|pid| cpu_secs(pid, ticks))
        .sum()
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU of the server and of the PostgreSQL backends of its database.
struct CpuProbe {
    admin: tokio_postgres::Client,
    database: String,
    pid: u32,
    ticks: f64,
}

impl CpuProbe {
    /// (server CPU s, backend pid -> CPU s).
    async fn read(&self) -> (f64, BTreeMap<u32, f64>) {
        let rows = self
            .admin
            .query(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1",
                &[&self.database],
            )
            .await
            .expect("pg_stat_activity");
        let backends = rows
            .iter()
            .filter_map(|r| {
                let pid = r.get::<_, i32>(0) as u32;
                Some((pid, cpu_secs(pid, self.ticks)?))
            })
            .collect();
        (cpu_secs(self.pid, self.ticks).unwrap_or(f64::NAN), backends)
    }
}

/// Backend CPU spent between two readings: a backend seen in both counts
/// its difference, one that appeared counts all of its time.
fn backend_delta(before: &BTreeMap<u32, f64>, after: &BTreeMap<u32, f64>) -> f64 {
    after
        .iter()
        .map(|(pid, t)| t - before.get(pid).copied().unwrap_or(0.0))
        .sum()
}

fn mean_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, (var / n).sqrt())
}

/// The CPU comparison: `cpu-one` against `cpu-two`, per answer (ms).
async fn cpu_comparison(ours: &Ours, admin_url: &str, connections: usize) {
    let per_arm = env_usize("ROUTE_CPU_ANSWERS", 2000);
    let window = env_usize("ROUTE_CPU_WINDOW", 250).max(1);
    let windows = per_arm.div_ceil(window).max(2);
    let probe = probe(ours, admin_url).await;
    // A warm-up window of each, then one-two-two-one.
    let total = (2 + 2 * windows) * window;
    let chats = Arc::new(ours.chats(total).await);
    let mut next = 0;
    // Per model: per-window (server ms, backends ms) an answer.
    let mut figures: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    let mut failed = 0;
    for w in 0..2 + 2 * windows {
        let model = if matches!(w % 4, 0 | 3) {
            "cpu-one"
        } else {
            "cpu-two"
        };
        let before = probe.read().await;
        let outcomes = ours
            .run(model, chats.clone(), next, window, connections)
            .await;
        let after = probe.read().await;
        next += window;
        failed += outcomes.iter().filter(|o| !o.equal).count();
        if w >= 2 {
            let server = (after.0 - before.0) * 1000.0 / window as f64;
            let backends = backend_delta(&before.1, &after.1) * 1000.0 / window as f64;
            figures.entry(model).or_default().push((server, backends));
        }
    }
    println!(
        "\nCPU per answer, every deployment healthy ({windows} windows of {window} answers \
         per model, {connections} connections; /proc/<pid>/stat user+system at 1/{} s; \
         {failed} answers not equal to the script):",
        probe.ticks
    );
    println!(
        "{:<34} {:>16} {:>22}",
        "ms CPU per answer (mean ± s.e.)", "server process", "PostgreSQL backends"
    );
    let mut means = BTreeMap::new();
    for model in ["cpu-one", "cpu-two"] {
        let f = &figures[model];
        let server: Vec<f64> = f.iter().map(|x| x.0).collect();
        let backends: Vec<f64> = f.iter().map(|x| x.1).collect();
        let (s, s_se) = mean_se(&server);
        let (b, b_se) = mean_se(&backends);
        let label = if model == "cpu-one" {
            "one deployment (cpu-one)"
        } else {
            "two deployments (cpu-two)"
        };
        println!("{label:<34} {s:>9.3} ± {s_se:<5.3} {b:>15.3} ± {b_se:<5.3}");
        means.insert(model, (s, s_se, b, b_se));
    }
    let (s1, se1, b1, bse1) = means["cpu-one"];
    let (s2, se2, b2, bse2) = means["cpu-two"];
    let (ds, dse) = (s2 - s1, (se1.powi(2) + se2.powi(2)).sqrt());
    let (db, dbse) = (b2 - b1, (bse1.powi(2) + bse2.powi(2)).sqrt());
    println!(
        "{:<34} {ds:>9.3} ± {dse:<5.3} {db:>15.3} ± {dbse:<5.3}",
        "routing added (two - one)"
    );
    println!(
        "routing added, server + database: {:.3} ms per answer (target: at most 0.1 ms)",
        ds + db
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

/// What every run shares.
struct Setup {
    answers: usize,
    baseline: usize,
    connections: usize,
    seed: u64,
    admin_url: String,
}

async fn bench() {
    let setup = Setup {
        answers: env_usize("ROUTE_ANSWERS", 1000),
        baseline: env_usize("ROUTE_BASELINE_ANSWERS", 200),
        connections: env_usize("ROUTE_CONNECTIONS", 32),
        seed: env_usize("ROUTE_SEED", 53) as u64,
        admin_url: std::env::var("WORKSPACE_TEST_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| workspace_tests::admin_url().expect("the test cluster")),
    };
    let skip_litellm = std::env::var("ROUTE_SKIP_LITELLM").is_ok_and(|v| v == "1");
    // Installed before anything runs: pip's first install takes minutes.
    let litellm = (!skip_litellm).then(litellm_program);
    println!(
        "\nbench route: {} streamed answers at {} connections, twice (cooldown 1 s, no \
         cooldown); the primary fails {} % of its requests ({} % in the middle of the answer; \
         seed {}); answers of {PIECES} chunks, {} ms apart; stalls {} s; first a baseline of {} \
         answers without faults",
        setup.answers,
        setup.connections,
        mix().iter().map(|(_, n)| n).sum::<usize>(),
        mix()
            .iter()
            .filter(|(f, _)| f.mid_stream())
            .map(|(_, n)| n)
            .sum::<usize>(),
        setup.seed,
        PACE.as_millis(),
        STALL.as_secs(),
        setup.baseline
    );
    println!("{}", source_state());
    let mut rows = Vec::new();
    let mut stored = Vec::new();
    let (h1, h2) = (healthy().await, healthy().await);
    let mut last = None;
    for (i, cooldowns) in [Cooldowns::OneSecond, Cooldowns::Off]
        .into_iter()
        .enumerate()
    {
        let fakes = Fakes::start(setup.seed).await;
        let config = ours_config(&fakes, &h1, &h2, cooldowns);
        let ours = match start_ours(&setup.admin_url, config).await {
            Ok(ours) => ours,
            Err(log) => {
                println!(
                    "ours: router not available (the server refused its configuration):\n{log}"
                );
                break;
            }
        };
        let (baseline, fault_run, equal) =
            ours_runs(&ours, &setup, &fakes, cooldowns, i == 0).await;
        rows.extend(baseline);
        rows.push(fault_run);
        stored.push((cooldowns.label(), equal));
        if let Some(previous) = last.replace(ours) {
            drop_ours(previous, &setup.admin_url).await;
        }
    }
    if let Some(program) = litellm {
        let workers = env_usize("ROUTE_LITELLM_WORKERS", 1);
        for (i, cooldowns) in [Cooldowns::OneSecond, Cooldowns::Off]
            .into_iter()
            .enumerate()
        {
            rows.extend(litellm_runs(&program, &setup, workers, cooldowns, i == 0).await);
        }
    }

    println!();
    print_rows(&rows);
    for (label, equal) in stored {
        println!(
            "ours, {label}: stored answers equal to the script and complete: {equal} / {}",
            setup.answers
        );
    }
    if let Some(ours) = last {
        cpu_comparison(&ours, &setup.admin_url, setup.connections).await;
        let log = ours.dir.path().join("server.log");
        let lines = std::fs::read_to_string(&log)
            .map(|l| l.lines().count())
            .unwrap_or(0);
        println!("(the server logged {lines} lines at warn and above)");
        drop_ours(ours, &setup.admin_url).await;
    }
}

/// The repository's commit and whether `server/` has uncommitted changes
/// now (the server executable was built from the tree as it was then).
fn source_state() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let head = git(&["rev-parse", "--short", "HEAD"]);
    let changed = git(&["status", "--porcelain", "--", "server"])
        .lines()
        .count();
    format!(
        "source: {head}, {changed} uncommitted paths under server/; server executable: {}",
        workspace_tests::server_binary()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "none".into())
    )
}

/// Stops the server and drops its database.
async fn drop_ours(ours: Ours, admin_url: &str) {
    let database = ours.database.clone();
    drop(ours);
    if let Ok((admin, connection)) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls).await
    {
        tokio::spawn(connection);
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            .await;
    }
}

/// A CPU probe of our server.
async fn probe(ours: &Ours, admin_url: &str) -> CpuProbe {
    let (admin, connection) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
        .await
        .expect("connecting to PostgreSQL");
    tokio::spawn(connection);
    CpuProbe {
        admin,
        database: ours.database.clone(),
        pid: ours.pid,
        ticks: clock_ticks(),
    }
}

/// Ours: the baseline (`cpu-one`, no faults) when asked, and the fault
/// run (`chat-main`); the stored answers of the fault run equal to the
/// script.
async fn ours_runs(
    ours: &Ours,
    setup: &Setup,
    fakes: &Fakes,
    cooldowns: Cooldowns,
    with_baseline: bool,
) -> (Option<Row>, Row, usize) {
    let probe = probe(ours, &setup.admin_url).await;
    let first = if with_baseline { setup.baseline } else { 0 };
    let chats = Arc::new(ours.chats(first + setup.answers).await);
    let before = probe.read().await;
    let baseline = if with_baseline {
        let outcomes = ours
            .run("cpu-one", chats.clone(), 0, first, setup.connections)
            .await;
        let after = probe.read().await;
        Some(Row {
            system: "ours, no faults".into(),
            cpu_ms: (after.0 - before.0) * 1000.0 / first as f64,
            outcomes,
            fakes: String::new(),
            by_answer: BTreeMap::new(),
        })
    } else {
        None
    };
    let start = probe.read().await;
    let outcomes = ours
        .run(
            "chat-main",
            chats.clone(),
            first,
            setup.answers,
            setup.connections,
        )
        .await;
    let end = probe.read().await;
    let equal = ours.stored_equal(&chats[first..]).await;
    let cooldown_count = ours
        .counter("workspace_model_deployment_cooldowns_total")
        .await;
    let fault_run = Row {
        system: format!("ours, {}", cooldowns.label()),
        cpu_ms: (end.0 - start.0) * 1000.0 / setup.answers as f64,
        fakes: format!(
            "{}; cooldowns (/metrics) {cooldown_count}; PostgreSQL backends {:.2} CPU ms an answer",
            fakes.describe(),
            backend_delta(&start.1, &end.1) * 1000.0 / setup.answers as f64
        ),
        by_answer: answers_from(fakes.faults_by_answer(), first),
        outcomes,
    };
    (baseline, fault_run, equal)
}

/// Faults by answer renumbered from `first` (the fault run's first answer
/// is 0, as its outcomes are).
fn answers_from(
    by_answer: BTreeMap<usize, Vec<Fault>>,
    first: usize,
) -> BTreeMap<usize, Vec<Fault>> {
    by_answer
        .into_iter()
        .filter_map(|(a, f)| Some((a.checked_sub(first)?, f)))
        .collect()
}

/// LiteLLM: the baseline (`chat-healthy`, no faults) when asked, and the
/// fault run (`chat-main`), on fresh fakes dealt the same faults as ours.
async fn litellm_runs(
    program: &Path,
    setup: &Setup,
    workers: usize,
    cooldowns: Cooldowns,
    with_baseline: bool,
) -> Vec<Row> {
    let fakes = Fakes::start(setup.seed).await;
    let healthy = healthy().await;
    let proxy = start_litellm(program, &fakes, &healthy, workers, cooldowns).await;
    let pid = proxy.child.id();
    let ticks = clock_ticks();
    let url = format!("{}/v1/chat/completions", proxy.base);
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let name = format!(
        "LiteLLM {} ×{workers}",
        LITELLM_PIN.rsplit('=').next().unwrap_or("")
    );
    let first = if with_baseline { setup.baseline } else { 0 };
    let mut runs = vec![("chat-main", first, setup.answers)];
    if with_baseline {
        runs.insert(0, ("chat-healthy", 0, first));
    }
    let mut rows = Vec::new();
    for (model, from, n) in runs {
        let before = group_cpu_secs(pid, ticks);
        let (http, url) = (http.clone(), url.clone());
        let outcomes = drive(n, setup.connections, move |i| {
            let (http, url) = (http.clone(), url.clone());
            async move { litellm_answer(&http, &url, model, from + i).await }
        })
        .await;
        let after = group_cpu_secs(pid, ticks);
        let faulty = model == "chat-main";
        rows.push(Row {
            system: if faulty {
                format!("{name}, {}", cooldowns.label())
            } else {
                format!("{name}, no faults")
            },
            cpu_ms: (after - before) * 1000.0 / n as f64,
            outcomes,
            fakes: if faulty {
                fakes.describe()
            } else {
                String::new()
            },
            by_answer: if faulty {
                answers_from(fakes.faults_by_answer(), from)
            } else {
                BTreeMap::new()
            },
        });
    }
    drop(proxy);
    rows
}
