//! `workspace-server db dump FILE` and `db restore FILE`: backups with the
//! PostgreSQL client programs bundled with the embedded cluster (the
//! system's `pg_dump` is often older than the server, and refuses).
//!
//! With `DATABASE_URL` unset they work on the embedded cluster under the
//! data directory, starting it for the while if no server runs (and
//! stopping it again); with `DATABASE_URL` set, on that database. The
//! password never appears on a command line (it goes to the client in
//! `PGPASSWORD`).

use crate::config::Config;
use anyhow::{Context, Result, anyhow, bail};
use std::path::Path;
use std::process::{Command, Stdio};
use workspace_embedded_db::{Cluster, PgInstall};

/// The database a backup command works on, and what to leave afterwards.
struct Target {
    install: PgInstall,
    url: String,
    /// The embedded cluster, joined or started for this command.
    cluster: Option<Cluster>,
}

impl Target {
    async fn open(config: &Config) -> Result<Target> {
        let root = config
            .database
            .data_dir
            .clone()
            .unwrap_or_else(workspace_embedded_db::data_root);
        let install = {
            let root = root.clone();
            tokio::task::spawn_blocking(move || PgInstall::locate_or_provision(&root)).await??
        };
        match &config.database.url {
            Some(url) => Ok(Target {
                install,
                url: url.clone(),
                cluster: None,
            }),
            None => {
                let cluster = {
                    let install = install.clone();
                    tokio::task::spawn_blocking(move || {
                        Cluster::ensure_started(&install, &root.join("pgdata"))
                    })
                    .await??
                };
                crate::db::ensure_database(&cluster.url("postgres"), crate::EMBEDDED_DATABASE)
                    .await?;
                Ok(Target {
                    install,
                    url: cluster.url(crate::EMBEDDED_DATABASE),
                    cluster: Some(cluster),
                })
            }
        }
    }

    /// A client program with the connection in libpq's environment
    /// variables.
    fn client(&self, program: &str, config: &Config) -> Result<Command> {
        let parsed: tokio_postgres::Config = self
            .url
            .parse()
            .map_err(|e| anyhow!("the database URL is not valid: {e}"))?;
        let mut command = self.install.client(program)?;
        if let Some(tokio_postgres::config::Host::Tcp(host)) = parsed.get_hosts().first() {
            command.env("PGHOST", host);
        }
        if let Some(port) = parsed.get_ports().first() {
            command.env("PGPORT", port.to_string());
        }
        if let Some(user) = parsed.get_user() {
            command.env("PGUSER", user);
        }
        if let Some(password) = parsed.get_password() {
            command.env("PGPASSWORD", String::from_utf8_lossy(password).as_ref());
        }
        if let Some(dbname) = parsed.get_dbname() {
            command.env("PGDATABASE", dbname);
        }
        let sslmode = match parsed.get_ssl_mode() {
            tokio_postgres::config::SslMode::Disable => "disable",
            tokio_postgres::config::SslMode::Require => "require",
            _ => "prefer",
        };
        command.env("PGSSLMODE", sslmode);
        if let Some(ca) = &config.database.ca_file {
            command
                .env("PGSSLROOTCERT", ca)
                .env("PGSSLMODE", "verify-full");
        }
        command.stdin(Stdio::null());
        Ok(command)
    }

    /// Leaves the embedded cluster (stopped if this command started it and
    /// no one else uses it).
    async fn close(self) -> Result<()> {
        if let Some(cluster) = self.cluster {
            tokio::task::spawn_blocking(move || cluster.release()).await??;
        }
        Ok(())
    }
}

/// Writes the whole database to `file` (`-`: standard output) in
/// `pg_dump`'s custom format, consistent even while servers run.
pub async fn dump(config: &Config, file: &Path) -> Result<()> {
    let target = Target::open(config).await?;
    let mut command = target.client("pg_dump", config)?;
    command.args(["--format=custom", "--no-owner", "--no-privileges"]);
    // Without `--file`, pg_dump writes to standard output.
    if file.as_os_str() != "-" {
        command.arg(format!("--file={}", file.display()));
    }
    let result = run(&mut command, "pg_dump");
    target.close().await?;
    result
}

/// Replaces the database's contents with the dump in `file`, in one
/// transaction (a failed restore leaves the database as it was). The
/// servers using the database must be stopped first: with the embedded
/// cluster this is checked.
pub async fn restore(config: &Config, file: &Path) -> Result<()> {
    if !file.is_file() {
        bail!("{}: no such file", file.display());
    }
    let target = Target::open(config).await?;
    let busy = match &target.cluster {
        Some(cluster) => cluster
            .shared_with_others()
            .map(|busy| busy.then(|| cluster.data_dir.clone()))?,
        None => None,
    };
    if let Some(data_dir) = busy {
        target.close().await?;
        bail!(
            "a server (or another program) is using the database under {}: stop it, then restore",
            data_dir.display()
        );
    }
    let result = run(
        target
            .client("pg_restore", config)?
            .args([
                "--clean",
                "--if-exists",
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                "--exit-on-error",
            ])
            .arg(format!(
                "--dbname={}",
                target_dbname(&target.url).unwrap_or_default()
            ))
            .arg(file),
        "pg_restore",
    );
    target.close().await?;
    result
}

fn target_dbname(url: &str) -> Option<String> {
    let parsed: tokio_postgres::Config = url.parse().ok()?;
    parsed.get_dbname().map(str::to_string)
}

fn run(command: &mut Command, name: &str) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    Ok(())
}
