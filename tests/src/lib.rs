//! The integration-test harness.
//!
//! Each [`TestContext`] gets its own database, cloned from a migrated
//! template (`CREATE DATABASE ... TEMPLATE`, a few milliseconds), and its own
//! in-process server on `127.0.0.1:0`. Tests talk to it only through the
//! generated client. The PostgreSQL server is `WORKSPACE_TEST_DATABASE_URL`
//! (an admin URL) when set, else the private cluster that `cargo xtask test`
//! starts (started here on demand too, so `cargo nextest run` works alone).
//!
//! Databases of passing tests are dropped by [`TestContext::teardown`]; a
//! failing test leaves its database behind for inspection.

pub mod fake_provider;
pub mod fake_transcriber;
pub mod fixtures;
pub mod hostile_peers;
pub mod mcp_pager;
pub mod mcp_peers;
pub mod otlp;
pub mod provider_types;
pub mod resources;
pub mod strict_oauth;

/// Provisions the local embedding model's files once for every test
/// process (the data root's `models/all-minilm-l6-v2`, where test servers
/// look), waiting while another process downloads them.
pub async fn ensure_local_model() {
    let dir = data_root().join("models").join("all-minilm-l6-v2");
    tokio::task::spawn_blocking(move || {
        workspace_server::embedder::local::provision_waiting(&dir)
            .expect("provisioning the local embedding model")
    })
    .await
    .expect("provisioning task");
}

/// Where the suite's PostgreSQL, embedding model and stored files live:
/// `WORKSPACE_DATA_DIR` (`cargo xtask test` sets it), else the same
/// `target/test-db` (see [`workspace_embedded_db::test_data_root`]), so a
/// plain `cargo nextest run` never writes into a server's data directory
/// (as root that is `/var/lib/workspace`, which the Debian package owns
/// and purges). Test servers, in-process or executables, get it too.
pub fn data_root() -> std::path::PathBuf {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        if let Some(dir) = std::env::var_os("WORKSPACE_DATA_DIR").filter(|d| !d.is_empty()) {
            return dir.into();
        }
        // target/<profile>/deps/<test binary>
        let target = std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
            .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        workspace_embedded_db::test_data_root(&target).expect("the suite's data directory")
    })
    .clone()
}

/// A `workspace-server` executable ([`server_binary`]) as a command, with
/// the suite's data directory.
pub fn server_command() -> std::process::Command {
    let binary = server_binary().expect(
        "the workspace-server executable (cargo build -p workspace-server, or WORKSPACE_SERVER_BIN)",
    );
    let mut command = std::process::Command::new(binary);
    command.env("WORKSPACE_DATA_DIR", data_root());
    command
}

/// The Python the tests run their Python peers with (aiosmtpd, the openai
/// client): `WORKSPACE_PYTHON` (`cargo xtask test` sets it to its virtual
/// environment, `target/pyenv`), else `python3`.
pub fn python() -> std::ffi::OsString {
    std::env::var_os("WORKSPACE_PYTHON")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into())
}
pub mod s3;
pub mod sse;
pub mod sso_peer;
pub mod web;
pub mod ws;

use anyhow::{Context, Result};
use std::sync::OnceLock;
use tokio_postgres::NoTls;
use uuid::Uuid;
use workspace_client::Client;
use workspace_server::config::Config;

/// The JWT secret of test servers, so tests can forge tokens.
pub const TEST_JWT_SECRET: &str = "test-secret-test-secret-test-secret-0123456789";
/// The sealing key of test servers (`secrets.keys` / `WORKSPACE_SECRET_KEYS`):
/// with a database URL, keys come from the configuration or a key file.
pub const TEST_SECRET_KEY: &str = "1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// The `[auth]` and `[secrets]` tables of a configuration file for a
/// server executable on a test database: the harness's keys (with a
/// database URL they come from the configuration or a key file).
pub fn keys_toml() -> String {
    format!("[auth]\njwt_secret = {TEST_JWT_SECRET:?}\n[secrets]\nkeys = [{TEST_SECRET_KEY:?}]\n")
}

/// The password every [`TestUser`] signs up with.
pub const TEST_PASSWORD: &str = "correct horse battery staple";

/// The test cluster's administrative URL.
pub fn admin_url() -> Result<String> {
    static URL: OnceLock<String> = OnceLock::new();
    if let Some(url) = URL.get() {
        return Ok(url.clone());
    }
    let url = match std::env::var("WORKSPACE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            let root = data_root();
            let install = workspace_embedded_db::PgInstall::locate_or_provision(&root)?;
            workspace_embedded_db::Cluster::ensure_started_with(
                &install,
                &root.join("test-pg"),
                workspace_embedded_db::Durability::Fast,
            )?
            .url("postgres")
        }
    };
    Ok(URL.get_or_init(|| url).clone())
}

/// `admin_url` with another database name.
pub fn url_for(admin: &str, dbname: &str) -> Result<String> {
    let mut config: tokio_postgres::Config = admin.parse()?;
    config.dbname(dbname);
    // Rebuild a key/value connection string that tokio-postgres accepts.
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .collect();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut s = format!("host={} port={port} dbname={dbname}", hosts.join(","));
    if let Some(user) = config.get_user() {
        s.push_str(&format!(" user={user}"));
    }
    if let Some(password) = config.get_password() {
        s.push_str(&format!(
            " password='{}'",
            String::from_utf8_lossy(password)
        ));
    }
    Ok(s)
}

async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Creates (once per migration set, across processes) the migrated template
/// and clones it into a fresh database. Returns the new database's name.
async fn fresh_database() -> Result<String> {
    let admin = admin_url()?;
    let template = format!("ws_tpl_{}", workspace_server::db::migrations_fingerprint());
    let client = connect(&admin)
        .await
        .context("connecting to the test PostgreSQL")?;
    client
        .execute("SELECT pg_advisory_lock(7262532)", &[])
        .await?;
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&template])
        .await?
        .is_some();
    if !exists {
        let building = format!("ws_tpl_build_{}", Uuid::new_v4().simple());
        client
            .batch_execute(&format!("CREATE DATABASE {building}"))
            .await?;
        workspace_server::db::migrate(
            &url_for(&admin, &building)?,
            &workspace_server::db::tls(None)?,
        )
        .await?;
        client
            .batch_execute(&format!("ALTER DATABASE {building} RENAME TO {template}"))
            .await?;
    }
    client
        .execute("SELECT pg_advisory_unlock(7262532)", &[])
        .await?;
    let name = format!("ws_test_{}", Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
        .await
        .context("cloning the template database")?;
    Ok(name)
}

/// A signed-up, logged-in user.
pub struct TestUser {
    pub id: Uuid,
    pub email: String,
    pub token: String,
    /// The refresh token of the login's session.
    pub refresh_token: String,
    pub client: Client,
}

impl TestUser {
    /// The personal organization created at signup.
    pub async fn personal_org(&self) -> Uuid {
        self.client
            .users_me()
            .send()
            .await
            .expect("users_me")
            .organizations[0]
            .id
    }

    /// The id of the model `name` in `org`'s catalog.
    pub async fn model_id(&self, org: Uuid, name: &str) -> Uuid {
        resources::model_id(&self.client, org, name).await
    }

    /// A team organization `name`, created (and owned) by this user.
    pub async fn create_org(&self, name: &str) -> Uuid {
        self.client
            .org_create_org()
            .name(name.to_string())
            .send()
            .await
            .expect("create_org")
            .id
    }

    /// The id of the role `name` in `org`, through `roles/list_roles`.
    pub async fn role_id(&self, org: Uuid, name: &str) -> Uuid {
        self.client
            .roles_list_roles()
            .org_id(org)
            .send()
            .await
            .expect("roles_list_roles")
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no role {name}"))
            .id
    }

    /// Adds `user` to `org` with `role` through `org/add_member`.
    pub async fn add_member(&self, org: Uuid, user: Uuid, role: Uuid) {
        self.client
            .org_add_member()
            .body(
                workspace_client::types::AddMemberRequest::builder()
                    .organization_id(org)
                    .user_id(user)
                    .role_id(role),
            )
            .send()
            .await
            .expect("add_member");
    }
}

/// The configuration every test server starts from: a free port on
/// 127.0.0.1, the test's database, the harness's JWT secret, no rate limits
/// (tests sign up and log in many users from one address; the rate limit
/// tests set their own) and extraction in the server binary's worker.
fn test_config(db_url: &str) -> Config {
    let mut config = Config {
        bind_address: "127.0.0.1:0".parse().expect("address"),
        ..Config::default()
    };
    config.database.url = Some(db_url.to_string());
    config.database.data_dir = Some(data_root());
    config.auth.jwt_secret = Some(TEST_JWT_SECRET.to_string());
    config.secrets.keys = vec![TEST_SECRET_KEY.to_string()];
    config.rate_limits = unlimited();
    config.files.extraction_worker = server_binary();
    // The audit checkpoints of this test's database: a file of its own
    // (the data directory is shared by every test), shared by the test's
    // instances as a deployment's are.
    let dbname = db_url
        .parse::<tokio_postgres::Config>()
        .ok()
        .and_then(|c| c.get_dbname().map(str::to_string))
        .unwrap_or_default();
    config.audit.checkpoint_file =
        Some(data_root().join(format!("audit-checkpoints-{dbname}.jsonl")));
    // No balancer in front: a test server stops without a drain window
    // (the rolling-restart test sets its own).
    config.http.drain_secs = 0.0;
    config
}

/// The `workspace-server` executable of this build: `WORKSPACE_SERVER_BIN`
/// (`cargo xtask test` builds it and sets it), else the one beside the test
/// binary's folder (`target/debug/workspace-server` for
/// `target/debug/deps/integration-…`). Test servers run in-process, so
/// this is what they start as their extraction worker, and what the tests
/// that kill a real server process run.
pub fn server_binary() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("WORKSPACE_SERVER_BIN").filter(|p| !p.is_empty()) {
        return Some(path.into());
    }
    let exe = std::env::current_exe().ok()?;
    let candidate = exe.parent()?.parent()?.join("workspace-server");
    candidate.is_file().then_some(candidate)
}

/// One test's server and database.
pub struct TestContext {
    pub server: workspace_server::Server,
    pub base_url: String,
    pub database: String,
    pub db_url: String,
    /// The server's log file.
    pub log_path: std::path::PathBuf,
    admin_url: String,
}

impl TestContext {
    pub async fn new(test_name: &str) -> TestContext {
        Self::with_config(test_name, |_| {}).await
    }

    /// A context whose server configuration is adjusted by `adjust`.
    pub async fn with_config(test_name: &str, adjust: impl FnOnce(&mut Config)) -> TestContext {
        Self::try_new(test_name, adjust)
            .await
            .expect("starting the test context")
    }

    async fn try_new(test_name: &str, adjust: impl FnOnce(&mut Config)) -> Result<TestContext> {
        let database = fresh_database().await?;
        let admin_url = admin_url()?;
        let db_url = url_for(&admin_url, &database)?;
        let mut config = test_config(&db_url);
        config.database.pool_size = 8;
        adjust(&mut config);
        let log_path = test_log_path(test_name)?;
        let server = workspace_server::start(config, test_logger(test_name)?).await?;
        let base_url = format!("http://{}", server.local_addr());
        Ok(TestContext {
            server,
            base_url,
            database,
            db_url,
            log_path,
            admin_url,
        })
    }

    /// A second server instance on the same database (for checks that state
    /// is shared between instances).
    pub async fn second_instance(
        &self,
        adjust: impl FnOnce(&mut Config),
    ) -> workspace_server::Server {
        let mut config = test_config(&self.db_url);
        adjust(&mut config);
        workspace_server::start(config, test_logger("second").expect("logger"))
            .await
            .expect("starting a second instance")
    }

    /// Starts another instance on the same database, returning the start's
    /// error instead of failing (for checks of start-up refusals).
    pub async fn try_instance(
        &self,
        adjust: impl FnOnce(&mut Config),
    ) -> Result<workspace_server::Server> {
        let mut config = test_config(&self.db_url);
        adjust(&mut config);
        workspace_server::start(config, test_logger("instance")?).await
    }

    /// A server instance on the same database that can crash: it runs on a
    /// runtime of its own, which [`Crashable::crash`] drops, so every task
    /// of the instance (answers being generated, their heartbeats, its
    /// database connections) stops where it is, as when a process dies.
    pub fn crashable_instance(&self, adjust: impl FnOnce(&mut Config)) -> Crashable {
        let mut config = test_config(&self.db_url);
        adjust(&mut config);
        let log = test_logger("crashable").expect("logger");
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (crash_tx, crash_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let server = runtime
                .block_on(workspace_server::start(config, log))
                .expect("starting a crashable instance");
            addr_tx.send(server.local_addr()).expect("address");
            let _ = crash_rx.recv();
            runtime.shutdown_background();
            // No orderly shutdown: it crashed.
            std::mem::forget(server);
        });
        let addr = addr_rx.recv().expect("the crashable instance started");
        Crashable {
            base_url: format!("http://{addr}"),
            crash: crash_tx,
            thread,
        }
    }

    /// A client without credentials.
    pub fn anon(&self) -> Client {
        Client::anonymous(&self.base_url).expect("client")
    }

    /// A client sending the given bearer token.
    pub fn client_with_token(&self, token: &str) -> Client {
        Client::authenticated(&self.base_url, token).expect("client")
    }

    /// Signs up `<name>@example.com` and logs in.
    pub async fn user(&self, name: &str) -> TestUser {
        let email = format!("{name}@example.com");
        let anon = self.anon();
        let created = anon
            .auth_signup()
            .body(
                workspace_client::types::SignupRequest::builder()
                    .email(email.clone())
                    .first_name(name.to_string())
                    .last_name("Tester".to_string())
                    .password(TEST_PASSWORD.to_string()),
            )
            .send()
            .await
            .expect("signup")
            .into_inner();
        let login = anon
            .auth_login()
            .body(
                workspace_client::types::LoginRequest::builder()
                    .email(email.clone())
                    .password(TEST_PASSWORD.to_string()),
            )
            .send()
            .await
            .expect("login")
            .into_inner();
        TestUser {
            id: created.id,
            email,
            client: self.client_with_token(&login.access_token),
            token: login.access_token,
            refresh_token: login.refresh_token,
        }
    }

    /// A direct connection to this test's database, for assertions about
    /// what was (not) written.
    pub async fn db(&self) -> tokio_postgres::Client {
        connect(&self.db_url)
            .await
            .expect("connecting to the test database")
    }

    /// A superuser connection to the PostgreSQL server's admin database.
    pub async fn admin_db(&self) -> tokio_postgres::Client {
        connect(&self.admin_url)
            .await
            .expect("connecting to the admin database")
    }

    /// Shuts the server down and drops the database.
    pub async fn teardown(self) {
        self.server.shutdown().await.expect("server shutdown");
        let client = connect(&self.admin_url).await.expect("admin connection");
        client
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.database
            ))
            .await
            .expect("dropping the test database");
    }
}

/// A server instance that can crash (see
/// [`TestContext::crashable_instance`]).
pub struct Crashable {
    pub base_url: String,
    crash: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Crashable {
    /// Drops the instance's runtime: all its tasks vanish at once.
    pub fn crash(self) {
        let _ = self.crash.send(());
        self.thread.join().expect("the crashable instance's thread");
    }
}

/// Rate limits that never apply.
pub fn unlimited() -> workspace_server::config::RateLimitsConfig {
    workspace_server::config::RateLimitsConfig {
        login_per_address: 0,
        login_global: 0,
        signup_per_address: 0,
        signup_global: 0,
        forgot_password_per_address: 0,
        forgot_password_per_email: 0,
        reset_password_per_address: 0,
        shared_chat_per_address: 0,
        ..Default::default()
    }
}

fn test_log_path(test_name: &str) -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join("workspace-tests");
    std::fs::create_dir_all(&dir)?;
    let safe: String = test_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(dir.join(format!("{safe}.log")))
}

fn test_logger(test_name: &str) -> Result<slog::Logger> {
    let path = test_log_path(test_name)?;
    dropshot::ConfigLogging::File {
        level: dropshot::ConfigLoggingLevel::Debug,
        path: path.display().to_string().into(),
        if_exists: dropshot::ConfigLoggingIfExists::Truncate,
    }
    .to_logger(test_name)
    .map_err(|e| anyhow::anyhow!("test logger: {e}"))
}

thread_local! {
    /// One HTTP client per test thread (and so per test runtime): building
    /// one loads the TLS roots, about 25 ms.
    static HTTP: reqwest::Client = reqwest::Client::new();
}

/// This test thread's HTTP client (for raw requests beside the generated
/// client).
pub fn http() -> reqwest::Client {
    HTTP.with(|c| c.clone())
}

thread_local! {
    static BROWSER: reqwest::Client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
}

/// This test thread's HTTP client that does not follow redirects: a
/// browser's view of an OAuth or download redirect, each `Location` seen.
pub fn browser() -> reqwest::Client {
    BROWSER.with(|c| c.clone())
}

/// Sends a JSON request, with `token` as its bearer token when there is
/// one; returns the status and the JSON body (`null` when there is none).
async fn send_json(
    base_url: &str,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    query: &[(&str, String)],
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request = http()
        .request(method, format!("{base_url}{path}"))
        .query(query);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

/// Sends a JSON request as `token` to the instance at `base_url`
/// (`cx.base_url`, or a second instance's): for the areas the tests drive
/// without the generated client. Returns the status and the JSON body
/// (`null` when there is none).
pub async fn req(
    base_url: &str,
    token: &str,
    method: reqwest::Method,
    path: &str,
    query: &[(&str, String)],
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    send_json(base_url, Some(token), method, path, query, body).await
}

/// Sends a raw JSON request (bypassing the generated client's own
/// validation, to prove the server's) and returns status and `error_code`.
pub async fn raw(
    base_url: &str,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    query: &[(&str, String)],
    body: Option<serde_json::Value>,
) -> (u16, String) {
    let (status, body) = send_json(base_url, token, method, path, query, body).await;
    (
        status,
        body["error_code"].as_str().unwrap_or_default().to_string(),
    )
}

/// Sends `request` and expects `429`: returns its `Retry-After` (in
/// seconds) and `error_code` (or, from a deployment's OpenAI-shaped
/// surface, `error.code`).
pub async fn too_many_requests(request: reqwest::RequestBuilder) -> (u64, String) {
    let response = request.send().await.expect("request");
    assert_eq!(response.status().as_u16(), 429);
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    let body: serde_json::Value = response.json().await.expect("an Error body");
    let code = body["error_code"]
        .as_str()
        .or(body["error"]["code"].as_str())
        .unwrap_or_default();
    (retry, code.to_string())
}

/// The `error_code` and HTTP status of a failed client call.
pub fn error_of<T: std::fmt::Debug>(
    result: Result<T, workspace_client::Error<workspace_client::types::Error>>,
) -> (u16, String) {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(workspace_client::Error::ErrorResponse(resp)) => {
            (resp.status().as_u16(), resp.error_code.clone())
        }
        Err(other) => panic!("expected an error response, got {other:?}"),
    }
}

/// A child process (a server under a benchmark) killed and reaped when
/// dropped.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A figure of `/proc/<pid>/status` in KB (`VmRSS:`, `VmHWM:`); NaN when
/// it cannot be read.
pub fn proc_status_kb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN)
}
