//! The Workspace server: the implementation of the API trait in
//! `workspace-api`, its business rules (`app`), and its data layer (`db`).

pub mod app;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod backup;
pub mod chat_hub;
pub mod config;
pub mod context;
pub mod db;
pub mod embedder;
pub mod error;
pub mod extract;
pub mod fetch;
pub mod hashing;
mod http_entrypoints;
pub mod kb_config;
pub mod kb_sources;
pub mod keys;
pub mod leases;
pub mod logging;
pub mod mailer;
pub mod mcp;
pub mod media;
pub mod metrics;
mod metrics_server;
pub mod providers;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
mod sse;
pub mod storage;
pub mod tasks;
pub mod telemetry;
pub mod transcribe;
pub mod usage;

use anyhow::{Context, Result};
use config::Config;
use context::ServerContext;
use std::net::SocketAddr;
use workspace_embedded_db::{Cluster, PgInstall};

pub use http_entrypoints::WorkspaceImpl;

/// The name of the database the embedded cluster serves.
pub const EMBEDDED_DATABASE: &str = "workspace";

/// A running server and, when it owns one, its private database cluster.
pub struct Server {
    pub http: dropshot::HttpServer<ServerContext>,
    embedded: Option<Cluster>,
    /// Background tasks (leases and sweeps of answers, the LISTEN fan-out,
    /// expiry of counters, the metrics listener), stopped at the end of a
    /// shutdown.
    tasks: std::sync::Arc<tasks::BackgroundTasks>,
    /// The durable jobs' workers (knowledge-base ingestion, deletions),
    /// which end by themselves at shutdown (see [`context::ShutdownPhase`]).
    kb_workers: Vec<tokio::task::JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
    log: slog::Logger,
    /// Spans' exporter while tracing is on (flushed when dropped).
    telemetry: telemetry::Telemetry,
}

impl Server {
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// Whether the next account to sign up becomes a system administrator
    /// (`auth.first_account_admin` and no account yet): the banner says so.
    pub async fn awaits_first_account(&self) -> bool {
        let cx = self.http.app_private();
        cx.config.auth.first_account_admin == Some(true)
            && matches!(cx.datastore.any_account().await, Ok(false))
    }

    /// Where `/metrics` is served, when it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// First drains for `http.drain_secs`: `/readyz` answers 503 at once
    /// (a load balancer takes the instance out of rotation) while requests
    /// are still served, each HTTP/1 response with `Connection: close`.
    /// Then stops accepting requests, closes idle connections and open
    /// WebSockets (1001, going away); lets in-flight requests, this
    /// instance's answers and its jobs (ingestion, deletions) finish for
    /// `http.shutdown_grace_secs` (workers claim no new job). Then ends the answers still running as
    /// interrupted (through their generators: their streams get a last
    /// `error` event; one stuck a few seconds more is closed in the
    /// database as a sweeper would) and hands the jobs still running back to
    /// the queue, waits a few seconds more for the requests, and stops the
    /// background tasks. Last, leaves the embedded cluster: it is stopped
    /// only when no other server uses the same data directory (the last one
    /// out stops it).
    pub async fn shutdown(self) -> Result<()> {
        self.shutdown_unless(std::future::pending()).await
    }

    /// [`Server::shutdown`], whose drain window and grace period
    /// `cut_short` ends early when it resolves first (a second Ctrl-C).
    pub async fn shutdown_unless(self, cut_short: impl Future<Output = ()>) -> Result<()> {
        use context::ShutdownPhase;
        use tokio::time::{Instant, timeout_at};
        /// How long answers, then requests, may take to end once the
        /// answers are told to.
        const AFTER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
        let cx = self.http.app_private();
        let grace = std::time::Duration::from_secs(cx.config.http.shutdown_grace_secs);
        let drain = cx.config.http.drain();
        let (leases, datastore) = (cx.leases.clone(), cx.datastore.clone());
        let usage = cx.usage.clone();
        let phase = cx.shutdown.clone();
        let workers = self.kb_workers;
        // Until `deadline`, or until no answer is generated and no job run
        // here.
        let drained = |deadline: Instant| {
            let (leases, workers) = (&leases, &workers);
            async move {
                let idle = || leases.is_empty() && workers.iter().all(|w| w.is_finished());
                while !idle() && Instant::now() < deadline {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                idle()
            }
        };
        let mut cut_short = std::pin::pin!(cut_short);
        // Not ready, still serving: the balancer notices before anything
        // is refused or closed under it.
        self.http.begin_draining();
        let mut cut = false;
        if !drain.is_zero() {
            slog::info!(self.log, "shutdown: draining (not ready; responses close their \
                connections)"; "drain_secs" => drain.as_secs_f64());
            tokio::select! {
                () = tokio::time::sleep(drain) => {}
                () = &mut cut_short => {
                    slog::warn!(self.log, "shutdown: the drain window was cut short");
                    cut = true;
                }
            }
        }
        phase.send_replace(ShutdownPhase::Draining);
        let mut close = std::pin::pin!(self.http.close());
        // Answers whose clients left are still generated (by tasks of
        // their own): they get the grace period too, as jobs do.
        let deadline = Instant::now() + grace;
        let (mut closed, idle) = if cut {
            (None, false)
        } else {
            let grace_period = async {
                let closed = timeout_at(deadline, &mut close).await.ok();
                (closed, drained(deadline).await)
            };
            tokio::select! {
                done = grace_period => done,
                () = &mut cut_short => {
                    slog::warn!(self.log, "shutdown: the grace period was cut short");
                    (None, false)
                }
            }
        };
        if !idle || closed.is_none() {
            phase.send_replace(ShutdownPhase::GraceOver);
            leases.interrupt();
            let stuck = if drained(Instant::now() + AFTER_GRACE).await {
                0
            } else {
                app::streams::interrupt_own(&leases, &datastore, app::on_answers_closed, &self.log)
                    .await
            };
            if closed.is_none() {
                closed = timeout_at(Instant::now() + AFTER_GRACE, &mut close)
                    .await
                    .ok();
            }
            slog::warn!(self.log, "the shutdown grace period ended: answers still running \
                were interrupted, jobs handed back"; "answers_closed_in_the_database" => stuck,
                "requests_open" => closed.is_none());
        }
        match closed {
            Some(result) => result.map_err(|e| anyhow::anyhow!(e))?,
            None => slog::warn!(self.log, "stopping with requests still open"),
        }
        // What the usage recorder gathered is written before it stops.
        let _ = tokio::time::timeout(AFTER_GRACE, usage.flush()).await;
        // The spans of the last requests are sent before it stops.
        let _ = tokio::time::timeout(AFTER_GRACE, self.telemetry.shutdown()).await;
        self.tasks.abort_all();
        if let Some(cluster) = self.embedded {
            let stopped = tokio::task::spawn_blocking(move || cluster.release()).await??;
            if stopped {
                slog::info!(self.log, "stopped the embedded PostgreSQL cluster");
            } else {
                slog::info!(
                    self.log,
                    "left the embedded PostgreSQL cluster running: another server uses it"
                );
            }
        }
        Ok(())
    }
}

/// The data directory: `database.data_dir`, else `WORKSPACE_DATA_DIR`, else
/// the platform's default (see `workspace_embedded_db::data_root`).
pub fn data_root(config: &Config) -> std::path::PathBuf {
    config
        .database
        .data_dir
        .clone()
        .unwrap_or_else(workspace_embedded_db::data_root)
}

/// Starts the embedded cluster (provisioning binaries if needed) and makes
/// sure the server's database exists. Returns the cluster and the URL.
pub async fn start_embedded_database(
    config: &Config,
    log: &slog::Logger,
) -> Result<(Cluster, String)> {
    let root = data_root(config);
    slog::info!(log, "DATABASE_URL is unset: using an embedded PostgreSQL cluster";
        "data_dir" => root.join("pgdata").display().to_string());
    let cluster = tokio::task::spawn_blocking(move || -> Result<Cluster> {
        let install = PgInstall::locate_or_provision(&root)?;
        Cluster::ensure_started(&install, &root.join("pgdata"))
    })
    .await??;
    if !cluster.install.has_pgvector() {
        slog::warn!(log, "the embedded PostgreSQL has no pgvector extension");
    }
    db::ensure_database(&cluster.url("postgres"), EMBEDDED_DATABASE).await?;
    let url = cluster.url(EMBEDDED_DATABASE);
    Ok((cluster, url))
}

/// Starts the server: database (embedded when no URL is configured),
/// migrations, token keys, then HTTP.
pub async fn start(mut config: Config, log: slog::Logger) -> Result<Server> {
    // A taken port is said plainly, before the database is touched.
    if let Err(e) = std::net::TcpListener::bind(config.bind_address) {
        anyhow::bail!(
            "cannot listen on {}: {e} (is another server running? choose another \
             address with --bind or BIND_ADDRESS)",
            config.bind_address
        );
    }
    // On a fresh embedded install the first account administers it
    // (`auth.first_account_admin`).
    config
        .auth
        .first_account_admin
        .get_or_insert(config.database.url.is_none());
    let (embedded, url) = match &config.database.url {
        Some(url) => (None, url.clone()),
        None => {
            // The embedded database's keys live in its data directory,
            // generated at the first start (see `keys`).
            if config.secrets.key_file.is_none() {
                config.secrets.key_file = Some(data_root(&config).join(keys::KEY_FILE_NAME));
            }
            config.secrets.generate_key_file = true;
            let (cluster, url) = start_embedded_database(&config, &log).await?;
            (Some(cluster), url)
        }
    };
    let server = start_with_database(config, &url, log.clone()).await;
    match server {
        Ok(mut server) => {
            server.embedded = embedded;
            Ok(server)
        }
        Err(e) => {
            if let Some(cluster) = embedded {
                let _ = tokio::task::spawn_blocking(move || cluster.release()).await;
            }
            Err(e)
        }
    }
}

/// The datastore on `url` as configured (its pool and shared connections).
pub fn datastore(
    config: &Config,
    url: &str,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
) -> Result<db::Datastore> {
    let pool = db::pool(
        url,
        config.database.pool_size,
        std::time::Duration::from_millis(config.database.pool_wait_ms),
        tls.clone(),
    )?;
    let pipelines = db::pipelines(url, config.database.shared_connections(), tls)?;
    Ok(db::Datastore::new(
        pool,
        pipelines,
        config.database.backoff(),
    ))
}

/// Starts the server on the given database (migrating it first).
pub async fn start_with_database(config: Config, url: &str, log: slog::Logger) -> Result<Server> {
    let log = logging::redacting(log, config.slog_level()?);
    let tls = db::tls(config.database.ca_file.as_deref())?;
    db::migrate(url, &tls).await?;
    let (chat_hub, chat_listener) = chat_hub::Hub::start(url.to_string(), tls.clone(), log.clone());
    let datastore = datastore(&config, url, tls)?;

    // The audit key is installed by `keys::load` (the datastore's audit
    // writer reads it); it is not needed here.
    let keys::ServerKeys {
        jwt_secret,
        secrets,
        link_key,
        audit_key: _,
    } = keys::load(&keys::KeySource::from_config(&config)?, &datastore, &log).await?;
    let tokens = authn::TokenKeys::new(&jwt_secret, config.auth.token_lifetime_secs);
    let mailer = mailer::from_config(&config.mail, &datastore, &log)?;

    let metrics: std::sync::Arc<metrics::Metrics> = Default::default();
    let models = model_catalog(&config, &datastore, &metrics, &log).await?;

    let mcp_catalog = mcp_catalog(&config, &datastore).await?;
    let mcp_client: std::sync::Arc<dyn mcp::McpClient> = std::sync::Arc::new(mcp::RmcpClient {
        timeout: std::time::Duration::from_secs(config.mcp.timeout_secs),
        log: log.new(slog::o!("component" => "mcp")),
    });

    let kb = kb_services(&config, link_key)?;
    let transcriber: Option<std::sync::Arc<dyn transcribe::Transcriber>> =
        transcribe::OpenAiTranscriber::new(
            providers::registry::http_client(&config)?,
            &config.transcription,
        )
        .map(|t| std::sync::Arc::new(t) as _);

    workspace_api::extract::set_body_read_timeout(std::time::Duration::from_secs(
        config.http.body_read_timeout_secs,
    ));
    let api = workspace_api::workspace_api_mod::api_description::<WorkspaceImpl>()
        .map_err(|e| anyhow::anyhow!("building the API description: {e}"))?;
    let dropshot_config = dropshot::ConfigDropshot {
        bind_address: config.bind_address,
        default_request_body_max_bytes: config.request_body_max_bytes,
        default_handler_task_mode: dropshot::HandlerTaskMode::Detached,
        log_headers: Vec::new(),
        ..Default::default()
    };
    let hashing = std::sync::Arc::new(hashing::PasswordHashing::new(
        config.auth.hash_concurrency(),
        config.auth.hash_queue,
        std::time::Duration::from_millis(config.auth.hash_max_wait_ms),
    ));
    let tasks: std::sync::Arc<tasks::BackgroundTasks> = Default::default();
    tasks.adopt("chat_listener", &chat_listener);
    let metrics_source = metrics::Source {
        metrics: metrics.clone(),
        datastore: datastore.clone(),
        hashing: hashing.clone(),
        tasks: tasks.clone(),
    };
    let metrics_bind = config.metrics.bind_address;
    let metrics_token = config.metrics.token.clone();
    // Leases of the answers this instance generates (see `app::streams`).
    let leases: std::sync::Arc<app::streams::Leases> = Default::default();
    spawn_maintenance(&tasks, &config, &datastore, &leases, &log);
    let shutdown = tokio::sync::watch::Sender::new(context::ShutdownPhase::Serving);
    // Usage of model calls, written in batches; crossed budget thresholds
    // are notified by a task of their own.
    let (usage, usage_writer) = {
        let (store, mailer, notice_log) = (datastore.clone(), mailer.clone(), log.clone());
        let on_threshold: usage::OnThreshold = std::sync::Arc::new(move |event| {
            let (datastore, mailer, log) = (store.clone(), mailer.clone(), notice_log.clone());
            tokio::spawn(async move {
                app::usage::budget_threshold_reached(&datastore, &*mailer, &event, &log).await;
            });
        });
        usage::UsageRecorder::start(
            datastore.clone(),
            config.usage.clone(),
            on_threshold,
            log.new(slog::o!("component" => "usage")),
        )
    };
    tasks.adopt("usage_writer", &usage_writer);
    let ingestion = std::sync::Arc::new(app::kb_ingest::Ingestion {
        usage: usage.clone(),
        datastore: datastore.clone(),
        files: kb.files.clone(),
        embedders: kb.embedders.clone(),
        secrets: secrets.clone(),
        kb: config.kb.clone(),
        fetch: config.fetch.clone(),
        files_config: config.files.clone(),
        http: fetch::client(&config.fetch).context("building the source fetch client")?,
        jobs: app::jobs::Settings {
            channel: db::datastore::kb_jobs::KB_JOBS_CHANNEL,
            poll: std::time::Duration::from_millis(config.kb.poll_interval_ms),
            lease_secs: config.kb.lease_secs.max(3) as f64,
            hub: chat_hub.clone(),
            shutdown: shutdown.subscribe(),
            log: log.new(slog::o!("component" => "kb")),
        },
        log: log.new(slog::o!("component" => "kb")),
    });
    let mut kb_workers = app::kb_ingest::start(ingestion);
    for (i, worker) in kb_workers.iter().enumerate() {
        tasks.adopt(&format!("kb_worker_{i}"), worker);
    }
    let deletion_workers = app::deletion::start(std::sync::Arc::new(app::deletion::Deletion {
        datastore: datastore.clone(),
        files: kb.files.clone(),
        secrets: secrets.clone(),
        fetch: config.fetch.clone(),
        config: config.deletion.clone(),
        jobs: app::jobs::Settings {
            channel: db::datastore::deletion::DELETION_JOBS_CHANNEL,
            poll: std::time::Duration::from_millis(config.deletion.poll_interval_ms),
            lease_secs: config.deletion.lease_secs.max(3) as f64,
            hub: chat_hub.clone(),
            shutdown: shutdown.subscribe(),
            log: log.new(slog::o!("component" => "deletion")),
        },
        log: log.new(slog::o!("component" => "deletion")),
    }));
    for (i, worker) in deletion_workers.iter().enumerate() {
        tasks.adopt(&format!("deletion_worker_{i}"), worker);
    }
    let webhook_workers = app::webhooks::start(std::sync::Arc::new(app::webhooks::Deliveries {
        datastore: datastore.clone(),
        secrets: secrets.clone(),
        mailer: mailer.clone(),
        config: config.webhooks.clone(),
        http: app::webhooks::client(&config.webhooks, config.fetch.allow_private_networks)
            .context("building the webhook client")?,
        allow_private: config.fetch.allow_private_networks,
        jobs: app::jobs::Settings {
            channel: db::datastore::webhooks::WEBHOOKS_CHANNEL,
            poll: std::time::Duration::from_millis(config.webhooks.poll_interval_ms),
            lease_secs: config.webhooks.lease_secs as f64,
            hub: chat_hub.clone(),
            shutdown: shutdown.subscribe(),
            log: log.new(slog::o!("component" => "webhooks")),
        },
        log: log.new(slog::o!("component" => "webhooks")),
    }));
    for (i, worker) in webhook_workers.iter().enumerate() {
        tasks.adopt(&format!("webhook_worker_{i}"), worker);
    }
    // They end by themselves at shutdown, and are waited for alike.
    kb_workers.extend(deletion_workers);
    kb_workers.extend(webhook_workers);
    if config.kb.workers > 0 {
        provision_local_model(kb.embedders.local.model_dir().to_path_buf(), log.clone());
    }
    let context = ServerContext {
        usage,
        budget_cache: Default::default(),
        config,
        datastore,
        tokens,
        secrets,
        mailer,
        models,
        files: kb.files,
        download_links: kb.download_links.clone(),
        embedders: kb.embedders,
        hashing,
        metrics,
        chat_hub: chat_hub.clone(),
        leases,
        transcriber,
        log: log.clone(),
        mcp: mcp_client,
        mcp_catalog,
        shutdown,
        token_touches: crate::authn::RecentTouches::default(),
    };
    // One open file per client connection: the soft limit (often 1024)
    // would cap concurrent streams far below what memory allows.
    if let Some((before, after)) = config::raise_open_file_limit()
        && before != after
    {
        slog::debug!(log, "raised the open-file limit"; "from" => before, "to" => after);
    }
    let connection_limits = dropshot::ConnectionLimits {
        max_connections: Some(context.config.http.max_connections()),
        first_byte_timeout: Some(std::time::Duration::from_secs(
            context.config.http.first_byte_timeout_secs.max(1),
        )),
        header_read_timeout: Some(std::time::Duration::from_secs(
            context.config.http.header_read_timeout_secs.max(1),
        )),
    };
    let cors = context.config.http.cors_policy();
    let server_timing = context.config.http.server_timing;
    let telemetry = telemetry::Telemetry::start(&context.config.telemetry, &log)
        .context("starting the OpenTelemetry exporter")?;
    let http = dropshot::ServerBuilder::new(api, context, log.clone())
        .config(dropshot_config)
        .connection_limits(connection_limits)
        .cors(cors)
        .server_timing(server_timing)
        .not_found(std::sync::Arc::new(app::scim::unknown_path))
        .start()
        .context("starting the HTTP server")?;
    if let Some(links) = &kb.download_links {
        links.default_base_url(format!("http://{}", http.local_addr()));
    }
    http.app_private()
        .config
        .mail
        .set_bound_address(http.local_addr());
    if !chat_hub.ready(std::time::Duration::from_secs(5)).await {
        slog::warn!(log, "the chat listener is not connected yet");
    }
    let mut metrics_addr = None;
    if let Some(bind) = metrics_bind {
        let (addr, task) = metrics_server::start(bind, metrics_source, metrics_token, log.clone())
            .await
            .context("starting the metrics listener")?;
        slog::info!(log, "metrics listening"; "address" => addr.to_string());
        metrics_addr = Some(addr);
        tasks.adopt("metrics_listener", &task);
    }
    Ok(Server {
        http,
        embedded: None,
        tasks,
        kb_workers,
        metrics_addr,
        log,
        telemetry,
    })
}

/// The model catalog: clients for the configured models, stored by name so
/// that their ids stay stable across restarts.
async fn model_catalog(
    config: &Config,
    datastore: &db::Datastore,
    metrics: &std::sync::Arc<metrics::Metrics>,
    log: &slog::Logger,
) -> Result<providers::ModelRegistry> {
    let specs = providers::registry::configured_models(config)?;
    let names: Vec<(&str, &str)> = specs
        .iter()
        .map(|s| (s.name.as_str(), s.provider.as_str()))
        .collect();
    let ids = datastore
        .models_sync(&names)
        .await
        .map_err(|e| anyhow::anyhow!("storing the model catalog: {e}"))?;
    let router = std::sync::Arc::new(providers::router::RouterContext {
        datastore: datastore.clone(),
        metrics: metrics.clone(),
        policy: providers::router::RoutePolicy::from_config(config),
        log: log.new(slog::o!("component" => "router")),
        epoch: Default::default(),
    });
    let models = providers::ModelRegistry::new(
        specs,
        ids,
        providers::RetryPolicy::from_config(config),
        Some(router),
    );
    for model in models.list() {
        slog::info!(log, "model offered"; "name" => &model.name, "provider" => &model.provider,
            "id" => model.id.to_string());
    }
    Ok(models)
}

/// The MCP catalog, stored by name so that server ids stay stable.
async fn mcp_catalog(
    config: &Config,
    datastore: &db::Datastore,
) -> Result<std::collections::HashMap<uuid::Uuid, mcp::config::McpServerConfig>> {
    let mcp_specs: Vec<db::datastore::mcp::McpServerSpec<'_>> = config
        .mcp_servers
        .iter()
        .map(|s| db::datastore::mcp::McpServerSpec {
            name: &s.name,
            toolkit_name: &s.toolkit_name,
            toolkit_slug: &s.toolkit_slug,
            toolkit_logo: s.toolkit_logo.as_deref(),
            url: &s.url,
            auth: s.auth.as_str(),
        })
        .collect();
    let mcp_ids = datastore
        .mcp_servers_sync(&mcp_specs)
        .await
        .map_err(|e| anyhow::anyhow!("storing the MCP server catalog: {e}"))?;
    Ok(mcp_ids
        .into_iter()
        .zip(config.mcp_servers.iter().cloned())
        .collect())
}

/// The instance's maintenance tasks: expiring counters and old stream
/// events, the heartbeat of this instance's answer leases, and the sweeper
/// that closes answers whose instance died.
fn spawn_maintenance(
    tasks: &tasks::BackgroundTasks,
    config: &Config,
    datastore: &db::Datastore,
    leases: &std::sync::Arc<app::streams::Leases>,
    log: &slog::Logger,
) {
    tasks.spawn(
        "counter_janitor",
        expire_counters(
            datastore.clone(),
            (
                config.auth.login_window_secs,
                config.auth.refresh_token_lifetime_secs,
            ),
            log.clone(),
        ),
    );
    tasks.spawn(
        "audit_maintenance",
        app::audit::maintenance(
            datastore.clone(),
            config.audit.retention_days,
            std::time::Duration::from_secs(config.audit.maintenance_interval_secs),
            log.clone(),
        ),
    );
    match app::audit::Checkpoints::from_config(config) {
        Ok(sinks) => tasks.spawn(
            "audit_checkpoints",
            app::audit::checkpoints(
                datastore.clone(),
                sinks,
                std::time::Duration::from_secs(config.audit.checkpoint_interval_secs),
                log.clone(),
            ),
        ),
        Err(e) => slog::error!(log, "audit checkpoints are not published"; "error" => %e),
    }
    tasks.spawn(
        "stream_janitor",
        app::streams::janitor(datastore.clone(), log.clone()),
    );
    let streams = &config.streams;
    tasks.spawn(
        "stream_heartbeat",
        app::streams::heartbeat(
            leases.clone(),
            datastore.clone(),
            std::time::Duration::from_secs(streams.heartbeat_secs),
            log.clone(),
        ),
    );
    tasks.spawn(
        "stream_sweeper",
        app::streams::sweeper(
            datastore.clone(),
            std::time::Duration::from_secs(streams.sweep_interval_secs),
            std::time::Duration::from_secs(streams.lease_secs),
            app::on_answers_closed,
            log.clone(),
        ),
    );
}

/// First run: fetches the local embedding model's files now (about 84 MB),
/// not when the first document waits for them.
fn provision_local_model(dir: std::path::PathBuf, log: slog::Logger) {
    tokio::task::spawn_blocking(move || {
        if !embedder::local::is_provisioned(&dir) {
            slog::info!(log, "downloading the local embedding model (about 84 MB)";
                "dir" => dir.display().to_string());
            match embedder::local::provision(&dir) {
                Ok(()) => slog::info!(log, "local embedding model ready"),
                Err(e) => slog::warn!(log, "provisioning the local embedding model failed; \
                    ingestion retries it"; "error" => format!("{e:#}")),
            }
        }
    });
}

/// The services of files and knowledge bases.
struct KbServices {
    files: std::sync::Arc<dyn storage::FileStore>,
    download_links: Option<std::sync::Arc<storage::LinkSigner>>,
    embedders: embedder::EmbedderRegistry,
}

fn kb_services(config: &Config, link_key: Vec<u8>) -> Result<KbServices> {
    let data_dir = data_root(config);
    // The key file's (shared by every instance, so any of them verifies
    // any link).
    let links = std::sync::Arc::new(storage::LinkSigner::new(
        link_key,
        config.files.public_base_url.clone(),
    ));
    let files = storage::from_config(&config.storage, &data_dir, links.clone())?;
    let download_links =
        (config.storage.backend == kb_config::StorageBackend::Local).then_some(links);
    let embedders = embedder::registry(config, &data_dir)?;
    Ok(KbServices {
        files,
        download_links,
        embedders,
    })
}

/// Deletes expired rate-limit windows and failed logins once a minute,
/// and sessions, refresh tokens and reset tokens that no longer count
/// (`windows`: the failed-login window and the refresh-token lifetime).
async fn expire_counters(datastore: db::Datastore, windows: (u64, u64), log: slog::Logger) {
    let (login_window_secs, refresh_lifetime_secs) = windows;
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
    loop {
        tick.tick().await;
        match datastore
            .expire_counters(login_window_secs, refresh_lifetime_secs)
            .await
        {
            Ok(0) => {}
            Ok(n) => slog::debug!(log, "expired rate-limit counters and sessions"; "rows" => n),
            Err(e) => slog::warn!(log, "expiring rate-limit counters failed"; "error" => %e),
        }
        if let Err(e) = datastore.deployment_rate_windows_expire().await {
            slog::warn!(log, "expiring deployment rate windows failed"; "error" => %e);
        }
    }
}

/// The layering rule: `lib.rs` → `http_entrypoints` → `app` → everything
/// else; nothing below `app` names `crate::app` (not in code, not in a doc
/// link), so the layers stay acyclic.
#[cfg(test)]
mod layering {
    use std::path::Path;

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("source folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn nothing_below_app_imports_app() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let upper = |p: &Path| {
            let rel = p.strip_prefix(&src).expect("under src");
            rel.starts_with("app")
                || rel.starts_with("http_entrypoints")
                || rel.starts_with("bin")
                || rel == Path::new("lib.rs")
        };
        let offenders: Vec<String> = files
            .iter()
            .filter(|p| !upper(p))
            .filter(|p| {
                std::fs::read_to_string(p)
                    .expect("readable source")
                    .contains("crate::app")
            })
            .map(|p| p.display().to_string())
            .collect();
        assert!(files.len() > 50, "{} files found", files.len());
        assert!(
            offenders.is_empty(),
            "modules below app import app: {offenders:?}"
        );
    }

    /// Credentials are checked in one room: the sealed values that carry
    /// an authorization (`OrgAccess`, `DeploymentAccess`, `LiveAccess`,
    /// `DownloadGrant`, `GatewayAccess`, `OAuthCallbackGrant`,
    /// `SystemAdmin`) are granted only in `authz.rs` and by the
    /// `authorize_*` calls of `context.rs`.
    #[test]
    fn sealed_accesses_are_granted_only_where_credentials_are_checked() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let sealed = [
            "OrgAccess",
            "DeploymentAccess",
            "LiveAccess",
            "DownloadGrant",
            "GatewayAccess",
            "OAuthCallbackGrant",
            "SystemAdmin",
        ];
        let allowed = [src.join("authz.rs"), src.join("context.rs")];
        let mut offenders = Vec::new();
        for file in files.iter().filter(|f| !allowed.contains(f)) {
            let text = std::fs::read_to_string(file).expect("readable source");
            for name in sealed {
                if text.contains(&format!("{name}::grant(")) || text.contains(&format!("{name} {{"))
                {
                    offenders.push(format!("{}: {name}", file.display()));
                }
            }
        }
        let context = std::fs::read_to_string(&allowed[1]).expect("context.rs");
        for name in &sealed[1..6] {
            assert!(
                context.contains(&format!("{name}::grant(")),
                "{name} is not granted by context.rs"
            );
        }
        assert!(
            offenders.is_empty(),
            "sealed accesses built elsewhere: {offenders:?}"
        );
    }

    /// The module a source file defines, as a path: `app/chat/mod.rs` is
    /// `app::chat`, `lib.rs` is the crate root (empty).
    fn module_of(src: &Path, file: &Path) -> String {
        let rel = file
            .strip_prefix(src)
            .expect("under src")
            .with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
            parts.pop();
        }
        parts.join("::")
    }

    /// The `crate::…` and `super::…` paths a source names (outside its
    /// comments and its test module), `use crate::{a, b::c}` groups
    /// expanded one level, as absolute paths.
    fn paths_named(module: &str, text: &str) -> Vec<String> {
        let code: String = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default()
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let mut out = Vec::new();
        for (prefix, base) in [("crate::", String::new()), ("super::", parent.to_string())] {
            let mut rest = code.as_str();
            while let Some(at) = rest.find(prefix) {
                let before = rest[..at].chars().next_back();
                rest = &rest[at + prefix.len()..];
                if before.is_some_and(ident) {
                    continue;
                }
                let path_len = rest
                    .find(|c: char| !(ident(c) || c == ':'))
                    .unwrap_or(rest.len());
                let path = rest[..path_len].trim_end_matches(':');
                let join = |p: &str| match (base.is_empty(), p.is_empty()) {
                    (true, _) => p.to_string(),
                    (false, true) => base.clone(),
                    (false, false) => format!("{base}::{p}"),
                };
                if rest[path_len..].starts_with('{') {
                    let group = &rest[path_len + 1..];
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for item in group.split(',') {
                        let item: String = item
                            .trim()
                            .chars()
                            .take_while(|&c| ident(c) || c == ':')
                            .collect();
                        let item = item.trim_end_matches(':');
                        out.push(join(
                            &[path, item]
                                .iter()
                                .filter(|s| !s.is_empty())
                                .cloned()
                                .collect::<Vec<_>>()
                                .join("::"),
                        ));
                    }
                } else {
                    out.push(join(path));
                }
            }
        }
        out
    }

    /// No two server modules import each other, directly or through
    /// others: the layers stay acyclic (lib → http_entrypoints → app →
    /// services → db → foundations), and within a layer no module leans
    /// on one that leans back.
    #[test]
    fn no_modules_import_each_other_in_a_cycle() {
        use std::collections::{BTreeMap, BTreeSet};
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules: BTreeMap<String, &Path> = files
            .iter()
            .map(|f| (module_of(&src, f), f.as_path()))
            .collect();
        // A path names the longest module that is a prefix of it.
        let resolve = |path: &str| -> Option<String> {
            let parts: Vec<&str> = path.split("::").collect();
            (1..=parts.len())
                .rev()
                .map(|n| parts[..n].join("::"))
                .find(|m| modules.contains_key(m))
        };
        let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (module, file) in &modules {
            let text = std::fs::read_to_string(file).expect("readable source");
            let targets = paths_named(module, &text)
                .iter()
                .filter_map(|p| resolve(p))
                .filter(|t| t != module)
                .collect();
            edges.insert(module, targets);
        }
        // Depth-first search; a back edge is a cycle.
        fn visit<'a>(
            m: &'a str,
            edges: &'a BTreeMap<&str, BTreeSet<String>>,
            state: &mut BTreeMap<&'a str, bool>,
            stack: &mut Vec<&'a str>,
            cycles: &mut Vec<String>,
        ) {
            state.insert(m, false);
            stack.push(m);
            for next in edges.get(m).into_iter().flatten() {
                match state.get(next.as_str()) {
                    None => visit(next, edges, state, stack, cycles),
                    Some(false) => {
                        let from = stack.iter().position(|s| s == next).unwrap_or(0);
                        cycles.push(format!("{} -> {next}", stack[from..].join(" -> ")));
                    }
                    Some(true) => {}
                }
            }
            stack.pop();
            state.insert(m, true);
        }
        let mut state = BTreeMap::new();
        let mut cycles = Vec::new();
        for m in edges.keys() {
            if !state.contains_key(m) {
                visit(m, &edges, &mut state, &mut Vec::new(), &mut cycles);
            }
        }
        assert!(modules.len() > 50, "{} modules found", modules.len());
        assert!(
            edges.values().map(BTreeSet::len).sum::<usize>() > 200,
            "the import graph looks empty: {edges:?}"
        );
        assert!(cycles.is_empty(), "import cycles: {cycles:#?}");
    }

    #[test]
    fn paths_are_read_from_uses_and_expressions() {
        let text = "use crate::{app::chat, db::Datastore};\n\
                    use super::sibling::Thing;\n\
                    // crate::commented::out\n\
                    fn f() { crate::metrics::count(); }\n";
        assert_eq!(
            paths_named("app::chat::live", text),
            [
                "app::chat",
                "db::Datastore",
                "metrics::count",
                "app::chat::sibling::Thing"
            ]
        );
    }
}
