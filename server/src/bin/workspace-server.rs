//! The Workspace server binary.
//!
//! `workspace-server [--config FILE] [--bind ADDR]`. With no configuration
//! at all it runs on an embedded PostgreSQL cluster and the offline
//! providers. Stops gracefully on SIGTERM or Ctrl-C.
//!
//! `workspace-server db dump FILE` / `db restore FILE` back the database and
//! the uploaded files up and restore them with the bundled PostgreSQL
//! clients (see `workspace_server::backup`); `workspace-server db url`
//! prints the URL of the running embedded cluster's database.
//!
//! `workspace-server keys generate --file PATH` / `keys export --file
//! PATH` make the key file (see `workspace_server::keys`).
//!
//! `workspace-server extract-worker` is internal: the server runs itself
//! that way to parse an uploaded file in a memory-limited process.

use anyhow::Result;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use workspace_server::config::Config;

#[derive(Parser)]
#[command(name = "workspace-server", version, about = "The Workspace API server")]
struct Args {
    /// TOML configuration file (see workspace.example.toml); also
    /// WORKSPACE_CONFIG.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on; overrides the file and BIND_ADDRESS.
    #[arg(long)]
    bind: Option<SocketAddr>,
    #[command(subcommand)]
    command: Option<Subcommand>,
}

#[derive(clap::Subcommand)]
enum Subcommand {
    /// Back up and restore the database, print its URL.
    #[command(subcommand)]
    Db(DbCommand),
    /// Print the URL of the running embedded database (same as `db url`).
    #[command(hide = true)]
    DbUrl,
    /// The server's key file (token secret, sealing keys): kept apart from
    /// the database and its backups.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(clap::Subcommand)]
enum KeysCommand {
    /// Write a new key file (mode 0600) for servers on DATABASE_URL; give
    /// every instance the same file (WORKSPACE_KEY_FILE). Refuses to
    /// replace a file.
    Generate {
        /// Where to write it.
        #[arg(long)]
        file: PathBuf,
    },
    /// Move the keys that earlier versions kept in the database into a
    /// key file (created mode 0600, or checked if it exists) and delete
    /// them from the database. The same keys: nobody is logged out, every
    /// sealed secret still opens.
    Export {
        /// The key file.
        #[arg(long)]
        file: PathBuf,
    },
}

#[derive(clap::Subcommand)]
enum DbCommand {
    /// Write a backup to FILE (`-`: standard output): one archive holding
    /// the database (the bundled pg_dump; safe while servers run) and,
    /// with the local file store, every uploaded file it refers to, with
    /// a manifest of sizes and SHA-256s. Not in it: the key file, and
    /// with the S3 store the bucket's objects (said when it is written).
    /// The embedded cluster is started for the while if no server runs.
    Dump {
        /// Where to write the backup (`-`: standard output).
        file: PathBuf,
    },
    /// Replace the database's contents (and the local store's files) with
    /// a backup made by `db dump`; a failed restore leaves both as they
    /// were. Refused if a file the database refers to is not there
    /// afterwards (not in the backup; for a database-only backup of an
    /// earlier version, not in the file store; with S3, not in the
    /// bucket), unless --without-files. Stop the servers first (checked
    /// for the embedded database).
    Restore {
        /// The backup to restore.
        file: PathBuf,
        /// Restore even if uploaded files the database refers to are
        /// missing (their downloads then fail); the missing ones are
        /// listed.
        #[arg(long)]
        without_files: bool,
    },
    /// Print the URL of the running embedded database, with its password
    /// (for psql or other tools).
    Url,
}

fn main() -> std::process::ExitCode {
    // `workspace-server extract-worker TYPE MAX_BYTES`: parse one untrusted
    // file in this memory-limited child process (see
    // `workspace_server::extract`), before any runtime or thread starts.
    if let Some(code) = workspace_server::extract::worker::main_if_worker() {
        return code;
    }
    serve()
}

#[tokio::main]
async fn serve() -> std::process::ExitCode {
    // Errors are said in one plain line (with their causes), never as a
    // backtrace: the common ones are an operator's to fix (a taken port,
    // a bad configuration file).
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("workspace-server: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let args = Args::parse();
    let mut config = Config::load(args.config.as_deref())?;
    match &args.command {
        Some(Subcommand::Db(DbCommand::Dump { file })) => {
            let report = workspace_server::backup::dump(&config, file).await?;
            if file.as_os_str() != "-" {
                eprintln!("wrote {}", file.display());
            }
            eprintln!("{}", report.notes());
            return Ok(());
        }
        Some(Subcommand::Keys(KeysCommand::Generate { file })) => {
            workspace_server::keys::generate_file(file)?;
            eprintln!(
                "wrote {} (mode 0600): set WORKSPACE_KEY_FILE to it on every instance, and \
                 back it up apart from the database",
                file.display()
            );
            return Ok(());
        }
        Some(Subcommand::Keys(KeysCommand::Export { file })) => {
            let log = slog::Logger::root(slog::Discard, slog::o!());
            if workspace_server::backup::export_keys(&config, file, &log).await? {
                eprintln!(
                    "moved the keys from the database into {} (mode 0600): set \
                     WORKSPACE_KEY_FILE to it on every instance, and back it up apart from \
                     the database",
                    file.display()
                );
            } else {
                eprintln!("the database holds no keys: nothing to export");
            }
            return Ok(());
        }
        Some(Subcommand::Db(DbCommand::Restore {
            file,
            without_files,
        })) => {
            let report = workspace_server::backup::restore(&config, file, *without_files).await?;
            eprintln!("restored {}: {}", file.display(), report.notes());
            return Ok(());
        }
        _ => {}
    }
    if let Some(Subcommand::DbUrl | Subcommand::Db(DbCommand::Url)) = args.command {
        let root = config
            .database
            .data_dir
            .clone()
            .unwrap_or_else(workspace_embedded_db::data_root);
        let url = workspace_embedded_db::running_url(
            &root.join("pgdata"),
            workspace_server::EMBEDDED_DATABASE,
        )
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no embedded database is running under {} (start workspace-server first; \
                 with DATABASE_URL set there is none)",
                root.display()
            )
        })?;
        println!("{url}");
        return Ok(());
    }
    if let Some(bind) = args.bind {
        config.bind_address = bind;
    }
    // The buffered stderr drain, written out when `_flusher` drops at the
    // end of `main`.
    let (log, _flusher) = workspace_server::logging::stderr_logger();
    let log = slog::Logger::root(
        slog::Drain::fuse(slog::LevelFilter::new(log, config.slog_level()?)),
        slog::o!(),
    );

    let data_dir = config
        .database
        .data_dir
        .clone()
        .unwrap_or_else(workspace_embedded_db::data_root);
    let embedded = config.database.url.is_none();
    let (grace_secs, drain_secs) = (config.http.shutdown_grace_secs, config.http.drain_secs);
    // Installed before the server starts: a SIGTERM that comes as soon as
    // it answers (a supervisor, a test) must not find the default action,
    // which kills the process without stopping the embedded cluster.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let server = workspace_server::start(config, log.clone()).await?;
    // For people: where it is and how to stop it (the log lines are JSON).
    let url = format!("http://{}", server.local_addr());
    eprintln!(
        "\nWorkspace is running (workspace-server {}, API {})\n  API            {url}\n  API reference  {url}/docs \
         (OpenAPI document: {url}/openapi.json)\n  Data           {}{}\n{}  Ctrl-C to stop.\n",
        env!("CARGO_PKG_VERSION"),
        workspace_api::API_VERSION,
        data_dir.display(),
        if embedded {
            " (embedded PostgreSQL; DATABASE_URL unset)"
        } else {
            ""
        },
        if server.awaits_first_account().await {
            "  First account  the first account to sign up becomes a system administrator\n"
        } else {
            ""
        },
    );

    tokio::select! {
        _ = sigterm.recv() => slog::info!(log, "SIGTERM received: shutting down"),
        _ = tokio::signal::ctrl_c() => slog::info!(log, "interrupt received: shutting down"),
    }
    eprintln!(
        "Stopping: not ready, still serving for {drain_secs} s (http.drain_secs); then \
         requests and answers in progress get up to {grace_secs} s \
         (http.shutdown_grace_secs); Ctrl-C again to stop now."
    );
    // A second signal ends the drain window and the grace period: answers still running end as
    // interrupted, jobs go back to the queue, the cluster is left cleanly.
    let again = async move {
        tokio::select! {
            _ = sigterm.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    server.shutdown_unless(again).await?;
    slog::info!(log, "stopped");
    Ok(())
}
