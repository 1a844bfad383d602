//! `workspace-server db dump FILE` and `db restore FILE`: backups with the
//! PostgreSQL client programs bundled with the embedded cluster (the
//! system's `pg_dump` is often older than the server, and refuses).
//!
//! With `DATABASE_URL` unset they work on the embedded cluster under the
//! data directory, starting it for the while if no server runs (and
//! stopping it again); with `DATABASE_URL` set, on that database. They
//! never create a cluster: a data directory without one is an error naming
//! it (a backup of a new empty cluster would look like a backup). The
//! password never appears on a command line (it goes to the client in
//! `PGPASSWORD`).
//!
//! A backup holds the data, not the keys that protect it (the key file,
//! see `crate::keys`): it is written mode 0600 all the same, and the table
//! older versions kept keys in is left out of it. Back the key file up on
//! its own; restoring onto a new machine needs both.

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
        let root = crate::data_root(config);
        if config.database.url.is_none() {
            existing_cluster(&root)?;
        }
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

/// The embedded cluster's directory under `root`, which must hold one.
fn existing_cluster(root: &Path) -> Result<std::path::PathBuf> {
    let pgdata = root.join("pgdata");
    if !pgdata.join("PG_VERSION").is_file() {
        bail!(
            "no database under {}: this is not the server's data directory. Point at the \
             one the server uses with WORKSPACE_DATA_DIR (or database.data_dir in the file \
             given with --config; as root the default is /var/lib/workspace, else \
             ~/.local/share/workspace), or set DATABASE_URL",
            root.display()
        );
    }
    Ok(pgdata)
}

/// Writes the whole database to `file` (`-`: standard output) in
/// `pg_dump`'s custom format, consistent even while servers run. The file
/// is created mode 0600 (replacing one there, made 0600 first).
pub async fn dump(config: &Config, file: &Path) -> Result<()> {
    let target = Target::open(config).await?;
    // Opened (and an earlier file emptied) only once the database is
    // found.
    let output = match file.as_os_str() == "-" {
        true => None,
        false => match private_file(file) {
            Ok(output) => Some(output),
            Err(e) => {
                target.close().await?;
                return Err(e);
            }
        },
    };
    let mut command = target.client("pg_dump", config)?;
    command.args([
        "--format=custom",
        "--no-owner",
        "--no-privileges",
        // Keys that earlier versions kept in the database: never in a
        // backup (they are moved into the key file at the next start).
        "--exclude-table-data=server_secrets",
    ]);
    // Without `--file`, pg_dump writes to standard output.
    if let Some(output) = output {
        command.stdout(output);
    }
    let result = run(&mut command, "pg_dump");
    target.close().await?;
    if result.is_err() && file.as_os_str() != "-" {
        let _ = std::fs::remove_file(file);
    }
    result
}

/// `path` opened for writing, truncated, readable by its owner only.
fn private_file(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // A file that was there keeps its mode through `open`: narrowed before
    // anything is written into it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} private", path.display()))?;
    file.set_len(0)?;
    Ok(file)
}

/// `workspace-server keys export --file PATH`: moves the keys an older
/// version kept in the database into the key file (see `crate::keys`).
pub async fn export_keys(config: &Config, file: &Path, log: &slog::Logger) -> Result<bool> {
    let target = Target::open(config).await?;
    let result = async {
        let tls = crate::db::tls(config.database.ca_file.as_deref())?;
        crate::db::migrate(&target.url, &tls).await?;
        let datastore = crate::datastore(config, &target.url, tls)?;
        crate::keys::export(&datastore, file, log).await
    }
    .await;
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
    // Not `pg_restore --clean`: it drops a partition's inherited primary
    // key before its parent's and fails on partitioned tables (the audit
    // log). Instead: a safety dump of the database as it is, the schema
    // emptied, the backup restored into it (one transaction); if that
    // fails, the safety dump is restored the same way, so a failed restore
    // leaves the database as it was.
    let result = async {
        let safety = crate::data_root(config).join(format!(
            "before-restore-{}.dump",
            chrono::Utc::now().format("%Y%m%dT%H%M%S")
        ));
        let saved = {
            let output = private_file(&safety)?;
            let mut command = target.client("pg_dump", config)?;
            command
                .args(["--format=custom", "--no-owner", "--no-privileges"])
                .stdout(output);
            run(&mut command, "pg_dump (the safety copy)")
        };
        if let Err(e) = saved {
            let _ = std::fs::remove_file(&safety);
            return Err(e);
        }
        empty_schema(&target.url, config).await?;
        match restore_into_empty(&target, config, file) {
            Ok(()) => {
                let _ = std::fs::remove_file(&safety);
                Ok(())
            }
            Err(e) => {
                empty_schema(&target.url, config).await?;
                restore_into_empty(&target, config, &safety).with_context(|| {
                    format!(
                        "the restore failed ({e:#}) and so did putting the database back: \
                         its copy is {}",
                        safety.display()
                    )
                })?;
                let _ = std::fs::remove_file(&safety);
                Err(e.context("the restore failed: the database is as it was"))
            }
        }
    }
    .await;
    target.close().await?;
    result
}

/// Drops everything in the database's `public` schema (extensions with
/// it) and makes it anew, empty, for a restore.
async fn empty_schema(url: &str, config: &Config) -> Result<()> {
    let tls = crate::db::tls(config.database.ca_file.as_deref())?;
    let (client, connection) = tokio_postgres::connect(url, tls)
        .await
        .context("connecting to the database")?;
    let driver = tokio::spawn(connection);
    let emptied = client
        .batch_execute("BEGIN; DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public; COMMIT;")
        .await
        .context("emptying the database before the restore");
    drop(client);
    let _ = driver.await;
    emptied
}

/// `pg_restore` of `file` into the emptied database, in one transaction.
fn restore_into_empty(target: &Target, config: &Config, file: &Path) -> Result<()> {
    run(
        target
            .client("pg_restore", config)?
            .args([
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                "--exit-on-error",
            ])
            // The name only: the password stays in the environment, out of
            // the process list.
            .arg(format!(
                "--dbname={}",
                target_dbname(&target.url).unwrap_or_default()
            ))
            .arg(file),
        "pg_restore",
    )
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
