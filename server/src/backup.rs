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
//! A backup is one archive (see [`archive`]): the database dump and, with
//! the local file store, every uploaded file the database refers to, with
//! a manifest to check them against. The dump and the list of files come
//! from one snapshot of the database (`pg_dump --snapshot`), so the files
//! are exactly the ones the dumped rows refer to. With the S3 store the
//! objects stay in the bucket: the manifest names them, and a restore
//! checks the bucket holds every one the database refers to. A restore
//! whose files are not all there refuses (the database put back as it
//! was) unless told `--without-files`; so does one of a database-only
//! backup (what earlier versions wrote) whose files are not in the store.
//!
//! A backup holds the data, not the keys that protect it (the key file,
//! see `crate::keys`): it is written mode 0600 all the same, and the table
//! older versions kept keys in is left out of it. Back the key file up on
//! its own; restoring onto a new machine needs both.

mod archive;

use crate::config::Config;
use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
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

/// Where the server keeps uploaded files.
enum Store {
    /// The local file store's root.
    Local(PathBuf),
    Bucket(crate::kb_config::S3Config),
}

impl Store {
    fn of(config: &Config) -> Store {
        match config.storage.backend {
            crate::kb_config::StorageBackend::Local => Store::Local(
                config
                    .storage
                    .local_dir
                    .clone()
                    .unwrap_or_else(|| crate::data_root(config).join("files")),
            ),
            crate::kb_config::StorageBackend::S3 => Store::Bucket(config.storage.s3.clone()),
        }
    }

    /// The bucket, said for people (`name` or `name at endpoint`).
    fn bucket_name(s3: &crate::kb_config::S3Config) -> String {
        match &s3.endpoint_url {
            Some(endpoint) => format!("{} at {endpoint}", s3.bucket),
            None => s3.bucket.clone(),
        }
    }
}

/// A file the database refers to.
struct Referenced {
    key: String,
    sha256: String,
}

/// The files table's rows (none if the schema has no such table yet), in
/// the transaction or snapshot `client` reads.
async fn referenced_files(client: &tokio_postgres::Client) -> Result<Vec<Referenced>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('public.files') IS NOT NULL AS present",
            &[],
        )
        .await
        .context("reading the list of uploaded files")?
        .get("present");
    if !exists {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            "SELECT DISTINCT storage_key, sha256 FROM files ORDER BY storage_key",
            &[],
        )
        .await
        .context("reading the list of uploaded files")?;
    Ok(rows
        .iter()
        .map(|row| Referenced {
            key: row.get("storage_key"),
            sha256: row.get("sha256"),
        })
        .collect())
}

async fn connect(
    url: &str,
    config: &Config,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
    let tls = crate::db::tls(config.database.ca_file.as_deref())?;
    let (client, connection) = tokio_postgres::connect(url, tls)
        .await
        .context("connecting to the database")?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((client, driver))
}

/// What `db dump` wrote, for the operator.
#[derive(Debug)]
pub struct DumpReport {
    files: u64,
    bytes: u64,
    /// Files the database refers to that were not in the local store.
    missing: Vec<String>,
    /// Files whose bytes differ from the hash recorded at upload.
    damaged: Vec<String>,
    /// The bucket and the number of its objects the database refers to.
    bucket: Option<(String, usize)>,
}

impl DumpReport {
    /// What the backup holds and what it does not, for standard error.
    pub fn notes(&self) -> String {
        let mut notes = match &self.bucket {
            None => format!(
                "the backup holds the database and {} uploaded files ({} bytes)",
                self.files, self.bytes
            ),
            Some((bucket, objects)) => format!(
                "the backup holds the database, NOT the uploaded files: they are {objects} \
                 objects in the bucket {bucket}. Back the bucket up on its own (versioning, \
                 or replication to another bucket): db restore checks that every object the \
                 database refers to is in the configured bucket and refuses otherwise"
            ),
        };
        notes.push_str(
            ".\nIt does not hold the key file (<data dir>/server.keys or WORKSPACE_KEY_FILE): \
             back that up on its own.",
        );
        if !self.missing.is_empty() {
            notes.push_str(&format!(
                "\nWARNING: {} files the database refers to were not in the file store, so \
                 they are not in the backup ({}); restoring it needs --without-files.",
                self.missing.len(),
                first_keys(&self.missing)
            ));
        }
        if !self.damaged.is_empty() {
            notes.push_str(&format!(
                "\nWARNING: {} stored files differ from what was uploaded (their SHA-256 does \
                 not match the database's): {}.",
                self.damaged.len(),
                first_keys(&self.damaged)
            ));
        }
        notes
    }
}

/// The first few of `keys`, for a message.
fn first_keys(keys: &[String]) -> String {
    let mut said = keys
        .iter()
        .take(5)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > 5 {
        said.push_str(&format!(" and {} more", keys.len() - 5));
    }
    said
}

/// Writes a backup archive to `file` (`-`: standard output): the database
/// (in `pg_dump`'s custom format, consistent even while servers run) and,
/// with the local file store, the files it refers to. The file is created
/// mode 0600 (replacing one there, made 0600 first). The database dump is
/// staged in a private scratch file beside `file` (for `-`: in `TMPDIR`)
/// while the archive is written.
pub async fn dump(config: &Config, file: &Path) -> Result<DumpReport> {
    let target = Target::open(config).await?;
    let to_stdout = file.as_os_str() == "-";
    let result = dump_into(&target, config, file, to_stdout).await;
    target.close().await?;
    if result.is_err() && !to_stdout {
        let _ = std::fs::remove_file(file);
    }
    result
}

async fn dump_into(
    target: &Target,
    config: &Config,
    file: &Path,
    to_stdout: bool,
) -> Result<DumpReport> {
    // Opened (and an earlier file emptied) only once the database is
    // found.
    let (output, scratch_dir): (Box<dyn std::io::Write + Send>, PathBuf) = match to_stdout {
        true => (Box::new(std::io::stdout()), std::env::temp_dir()),
        false => (
            Box::new(private_file(file)?),
            match file.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                _ => PathBuf::from("."),
            },
        ),
    };
    let scratch = Scratch::new(&scratch_dir)?;
    // One snapshot for the dump and the list of files: the files are
    // exactly those the dumped rows refer to.
    let (client, driver) = connect(&target.url, config).await?;
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .context("taking a snapshot of the database")?;
    let snapshot: String = client
        .query_one("SELECT pg_export_snapshot() AS snapshot", &[])
        .await
        .context("taking a snapshot of the database")?
        .get("snapshot");
    let files = referenced_files(&client).await?;
    let mut command = target.client("pg_dump", config)?;
    command
        .args([
            "--format=custom",
            "--no-owner",
            "--no-privileges",
            // Keys that earlier versions kept in the database: never in a
            // backup (they are moved into the key file at the next start).
            "--exclude-table-data=server_secrets",
        ])
        .arg(format!("--snapshot={snapshot}"))
        .stdout(scratch.file.try_clone()?);
    let dumped = tokio::task::spawn_blocking(move || run(&mut command, "pg_dump")).await?;
    let _ = client.batch_execute("COMMIT").await;
    drop(client);
    let _ = driver.await;
    dumped?;
    let store = Store::of(config);
    let header = archive::Header {
        format: archive::FORMAT.into(),
        version: archive::VERSION,
        created_at: chrono::Utc::now().to_rfc3339(),
        server_version: env!("CARGO_PKG_VERSION").into(),
        storage: match &store {
            Store::Local(_) => "local".into(),
            Store::Bucket(_) => "s3".into(),
        },
        bucket: match &store {
            Store::Bucket(s3) => Some(s3.bucket.clone()),
            Store::Local(_) => None,
        },
        endpoint: match &store {
            Store::Bucket(s3) => s3.endpoint_url.clone(),
            Store::Local(_) => None,
        },
    };
    tokio::task::spawn_blocking(move || write_archive(output, &header, &scratch, files, &store))
        .await?
}

/// A private (0600) scratch file, removed when dropped.
struct Scratch {
    path: PathBuf,
    file: std::fs::File,
}

impl Scratch {
    fn new(dir: &Path) -> Result<Scratch> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(format!(
            ".workspace-dump-{}-{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot write the scratch file {}", path.display()))?;
        Ok(Scratch { path, file })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The archive: the header, the database dump from `scratch`, the stored
/// files (local store) streamed one by one, the manifest.
fn write_archive(
    output: Box<dyn std::io::Write + Send>,
    header: &archive::Header,
    scratch: &Scratch,
    files: Vec<Referenced>,
    store: &Store,
) -> Result<DumpReport> {
    let output = std::io::BufWriter::with_capacity(256 * 1024, output);
    let mut writer = archive::Writer::new(output, header)?;
    let database = std::fs::File::open(&scratch.path)
        .with_context(|| format!("reading {}", scratch.path.display()))?;
    writer.database(database.metadata()?.len(), database)?;
    let (mut missing, mut damaged) = (Vec::new(), Vec::new());
    let bucket = match store {
        Store::Local(root) => {
            for file in &files {
                match open_stored(root, &file.key)? {
                    Some((stored, bytes)) => {
                        let checked = writer
                            .file(&file.key, bytes, stored)
                            .with_context(|| format!("backing up the stored file {}", file.key))?;
                        if checked.sha256 != file.sha256 {
                            damaged.push(file.key.clone());
                        }
                    }
                    None => missing.push(file.key.clone()),
                }
            }
            None
        }
        Store::Bucket(s3) => Some((Store::bucket_name(s3), files.len())),
    };
    let objects = match bucket {
        Some(_) => files.iter().map(|f| f.key.clone()).collect(),
        None => Vec::new(),
    };
    let (_, manifest) = writer.finish(missing.clone(), objects)?;
    Ok(DumpReport {
        files: manifest.file_count,
        bytes: manifest.file_bytes,
        missing,
        damaged,
        bucket,
    })
}

/// The stored file `key` under `root` and its size: `None` if it is not
/// there (or the key is not one a restore accepts, or not a regular file).
/// Links are not followed.
fn open_stored(root: &Path, key: &str) -> Result<Option<(std::fs::File, u64)>> {
    use std::os::unix::fs::OpenOptionsExt;
    if !archive::valid_key(key) {
        return Ok(None);
    }
    let path = root.join(key);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let meta = file.metadata()?;
    Ok(meta.is_file().then_some((file, meta.len())))
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

/// What `db restore` did, for the operator.
#[derive(Debug)]
pub struct RestoreReport {
    /// Files restored into the local store (from the archive).
    files: u64,
    /// Files the database refers to that are not there (with
    /// `--without-files`).
    missing: Vec<String>,
    /// Where the files are: the local store's root or the bucket.
    place: String,
    /// A database-only backup (no files in it).
    database_only: bool,
}

impl RestoreReport {
    pub fn notes(&self) -> String {
        let mut notes = if self.database_only {
            format!(
                "the backup held only the database; the files it refers to were taken \
                 from {}",
                self.place
            )
        } else {
            format!(
                "restored the database and {} uploaded files into {}",
                self.files, self.place
            )
        };
        if !self.missing.is_empty() {
            notes.push_str(&format!(
                "\nWARNING: restored WITHOUT {} uploaded files the database refers to (not \
                 in {}): {}. Their downloads and extraction fail until they are put back.",
                self.missing.len(),
                self.place,
                first_keys(&self.missing)
            ));
        }
        notes
    }
}

/// Replaces the database's contents (and, for an archive with the local
/// store, the stored files) with the backup in `file`; a failed restore
/// leaves both as they were. Every file the restored database refers to
/// must then be in the file store (from the archive; for a database-only
/// backup, already in place; with S3, in the bucket): else the restore is
/// refused and undone, unless `without_files`. The servers using the
/// database must be stopped first: with the embedded cluster this is
/// checked.
pub async fn restore(config: &Config, file: &Path, without_files: bool) -> Result<RestoreReport> {
    if !file.is_file() {
        bail!("{}: no such file", file.display());
    }
    let format = archive::detect(file)?;
    let root = crate::data_root(config);
    if config.database.url.is_none() {
        existing_cluster(&root)?;
    }
    let store = Store::of(config);
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S").to_string();
    // Unpacked beside the file store (so that it moves in by a rename),
    // checked against its manifest before the database is touched. A name
    // of its own: removed afterwards, whatever happens.
    let unique = format!(
        "restore-{stamp}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let staging = match &store {
        Store::Local(files) => sibling(files, &unique),
        Store::Bucket(_) => root.join(unique),
    };
    // The database found, and no server using it, before anything is
    // unpacked.
    let target = Target::open(config).await?;
    let result = async {
        refuse_if_busy(&target)?;
        let unpacked = match format {
            archive::Format::DatabaseOnly => None,
            archive::Format::Archive => Some(unpack(file, &staging).await?),
        };
        if let Some(unpacked) = &unpacked {
            check_unpacked(unpacked, &store, without_files)?;
        }
        replace(
            &target,
            config,
            file,
            unpacked.as_ref(),
            &store,
            without_files,
            &stamp,
        )
        .await
    }
    .await;
    let _ = std::fs::remove_dir_all(&staging);
    target.close().await?;
    result
}

/// With the embedded cluster: refused while a server (or another
/// program) uses it.
fn refuse_if_busy(target: &Target) -> Result<()> {
    let busy = match &target.cluster {
        Some(cluster) => cluster
            .shared_with_others()
            .map(|busy| busy.then(|| cluster.data_dir.clone()))?,
        None => None,
    };
    if let Some(data_dir) = busy {
        bail!(
            "a server (or another program) is using the database under {}: stop it, then restore",
            data_dir.display()
        );
    }
    Ok(())
}

/// `path` with `.{suffix}` added to its last component.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    path.with_file_name(name)
}

/// Unpacks the archive `file` into `staging` (made here, 0700).
async fn unpack(file: &Path, staging: &Path) -> Result<archive::Unpacked> {
    if let Some(parent) = staging.parent() {
        archive::private_dir(parent)?;
    }
    std::fs::create_dir(staging).with_context(|| format!("cannot create {}", staging.display()))?;
    archive::private_dir(staging)?;
    let input = std::io::BufReader::with_capacity(
        256 * 1024,
        std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?,
    );
    let staging = staging.to_path_buf();
    let unpacked = tokio::task::spawn_blocking(move || {
        let unpacked = archive::unpack(input, &staging)?;
        hand_over(&staging)?;
        Ok::<_, anyhow::Error>(unpacked)
    })
    .await??;
    Ok(unpacked)
}

/// Run as root (the data directory belongs to the server's user): what was
/// unpacked goes to the data directory's owner, or the server could not
/// read it.
fn hand_over(staging: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let Some(parent) = staging.parent() else {
        return Ok(());
    };
    let owner = std::fs::metadata(parent)?;
    let (uid, gid) = (owner.uid(), owner.gid());
    let mut pending = vec![staging.to_path_buf()];
    while let Some(path) = pending.pop() {
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
            .with_context(|| format!("cannot hand {} to the server's user", path.display()))?;
        if std::fs::symlink_metadata(&path)?.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// Before the database is touched: the archive fits this server's store,
/// and holds every file its database refers to (unless `without_files`).
fn check_unpacked(unpacked: &archive::Unpacked, store: &Store, without_files: bool) -> Result<()> {
    if let Store::Bucket(s3) = store
        && unpacked.manifest.file_count > 0
        && !without_files
    {
        bail!(
            "refused: the backup holds {} uploaded files of a local file store, but this \
             server keeps files in the bucket {}: restore it with storage.backend = \"local\" \
             (then copy the files into the bucket), or pass --without-files",
            unpacked.manifest.file_count,
            Store::bucket_name(s3)
        );
    }
    let missing = &unpacked.manifest.missing;
    if !missing.is_empty() && !without_files {
        bail!(
            "refused: {} uploaded files the database refers to were not in the file store \
             when this backup was made, so they are not in it ({}). Restore with \
             --without-files to go on without them (their downloads then fail)",
            missing.len(),
            first_keys(missing)
        );
    }
    Ok(())
}

/// The database replaced by the backup (the safety dump restored if
/// anything fails, files included), then the unpacked files moved in.
async fn replace(
    target: &Target,
    config: &Config,
    file: &Path,
    unpacked: Option<&archive::Unpacked>,
    store: &Store,
    without_files: bool,
    stamp: &str,
) -> Result<RestoreReport> {
    let dump = unpacked.map(|u| u.database.as_path()).unwrap_or(file);
    // Not `pg_restore --clean`: it drops a partition's inherited primary
    // key before its parent's and fails on partitioned tables (the audit
    // log). Instead: a safety dump of the database as it is, the schema
    // emptied, the backup restored into it (one transaction); if that
    // fails, or the files are not all there, the safety dump is restored
    // the same way, so a failed restore leaves the database as it was.
    let safety = crate::data_root(config).join(format!("before-restore-{stamp}.dump"));
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
    let restored = match restore_into_empty(target, config, dump) {
        Ok(()) => finish_files(target, config, unpacked, store, without_files, stamp).await,
        Err(e) => Err(e),
    };
    match restored {
        Ok((report, replaced)) => {
            let _ = std::fs::remove_file(&safety);
            if let Some(replaced) = replaced {
                let _ = std::fs::remove_dir_all(replaced);
            }
            Ok(report)
        }
        Err(e) => {
            empty_schema(&target.url, config).await?;
            restore_into_empty(target, config, &safety).with_context(|| {
                format!(
                    "the restore failed ({e:#}) and so did putting the database back: \
                     its copy is {}",
                    safety.display()
                )
            })?;
            let _ = std::fs::remove_file(&safety);
            Err(e.context("the restore failed: the database and the files are as they were"))
        }
    }
}

/// After the database is restored: every file it refers to is in place
/// (or `without_files`), then the unpacked files replace the local store.
/// Returns the report and the store's former folder (to remove once the
/// restore is done).
async fn finish_files(
    target: &Target,
    config: &Config,
    unpacked: Option<&archive::Unpacked>,
    store: &Store,
    without_files: bool,
    stamp: &str,
) -> Result<(RestoreReport, Option<PathBuf>)> {
    let (client, driver) = connect(&target.url, config).await?;
    let referenced = referenced_files(&client).await;
    drop(client);
    let _ = driver.await;
    let referenced = referenced?;
    let (missing, place, hint) = match (store, unpacked) {
        (Store::Local(root), _) => {
            let folder = unpacked.map(|u| u.files.as_path()).unwrap_or(root);
            let missing = referenced
                .iter()
                .filter(|f| !archive::valid_key(&f.key) || !folder.join(&f.key).is_file())
                .map(|f| f.key.clone())
                .collect::<Vec<_>>();
            let hint = match unpacked {
                Some(u) if u.header.storage == "s3" => format!(
                    "the backup was made on a server that kept its files in the bucket {}: \
                     they are there, not in the backup",
                    u.header.bucket.as_deref().unwrap_or("(unnamed)")
                ),
                Some(_) => "the backup does not hold them".to_string(),
                None => format!(
                    "the backup holds only the database (made before db dump held the \
                     files): copy the files folder of the server it was made on into {} first",
                    root.display()
                ),
            };
            (missing, root.display().to_string(), hint)
        }
        (Store::Bucket(s3), _) => {
            let objects = bucket_keys(s3).await?;
            let missing = referenced
                .iter()
                .filter(|f| !objects.contains(&f.key))
                .map(|f| f.key.clone())
                .collect::<Vec<_>>();
            let place = format!("the bucket {}", Store::bucket_name(s3));
            let hint =
                "restore the bucket's objects first (from its versions or its replica)".to_string();
            (missing, place, hint)
        }
    };
    if !missing.is_empty() && !without_files {
        bail!(
            "refused: {} uploaded files the database refers to are not in {place} ({}): {hint}. \
             Restore with --without-files to go on without them (their downloads then fail)",
            missing.len(),
            first_keys(&missing)
        );
    }
    let replaced = match (store, unpacked) {
        (Store::Local(root), Some(unpacked)) => swap_in(&unpacked.files, root, stamp)?,
        _ => None,
    };
    Ok((
        RestoreReport {
            files: unpacked.map(|u| u.manifest.file_count).unwrap_or(0),
            missing,
            place,
            database_only: unpacked.is_none(),
        },
        replaced,
    ))
}

/// The keys of every object in the bucket.
async fn bucket_keys(s3: &crate::kb_config::S3Config) -> Result<std::collections::HashSet<String>> {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let bucket = crate::storage::s3_store(s3)?;
    bucket
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .with_context(|| format!("listing the bucket {}", Store::bucket_name(s3)))
}

/// Moves the unpacked files in as the local store's root; the former root
/// is renamed aside (returned, to remove once the restore is done).
fn swap_in(unpacked: &Path, root: &Path, stamp: &str) -> Result<Option<PathBuf>> {
    let aside = sibling(root, &format!("before-restore-{stamp}"));
    let had = std::fs::symlink_metadata(root).is_ok();
    if had {
        std::fs::rename(root, &aside)
            .with_context(|| format!("moving {} aside", root.display()))?;
    }
    if let Err(e) = std::fs::rename(unpacked, root) {
        if had {
            let _ = std::fs::rename(&aside, root);
        }
        return Err(e)
            .with_context(|| format!("moving the restored files into {}", root.display()));
    }
    Ok(had.then_some(aside))
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
