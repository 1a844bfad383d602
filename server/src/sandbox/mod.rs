//! Running tool code outside the server: the [`ToolExecutor`] trait and its
//! one implementation, [`BwrapExecutor`], a `python3` process under
//! bubblewrap.
//!
//! The sandbox: a new user, PID, network, IPC, UTS and mount namespace
//! (`--unshare-all`: no network at all, loopback included), no
//! capabilities (`--cap-drop ALL`), an empty environment, killed with the
//! server (`--die-with-parent`) and its whole PID namespace killed with it.
//! Its file system is an explicit allow-list ([`SandboxMounts`]), never the
//! host's root: `/usr` read-only (the Python runtime, its standard library
//! and the packages installed for tools), the merged-`/usr` links (`/bin`,
//! `/lib`, `/lib64`, `/sbin`), of `/etc` only what the dynamic linker and
//! Python read (`ld.so.cache`, `localtime`, `alternatives`, `python3*`), the
//! interpreter's own prefix when it lives outside `/usr`, a private `/tmp`
//! (tmpfs), a fresh `/proc` of its own PID namespace and a minimal `/dev`
//! (`null`, `zero`, `random`, `urandom`, ...). Nothing of the data directory,
//! the configuration, the secrets file, `/home`, `/root`, `/var` or another
//! run is visible; the server refuses to run code when one of its own
//! paths would be (a data directory configured under `/usr`, say). When the
//! server runs as root, every run gets its own unprivileged uid/gid
//! (`setpriv`), so the process limit counts that run's processes only.
//! Limits (`prlimit`): CPU seconds, address space, processes, file size,
//! open files, no core dumps; the server adds a wall-clock limit and
//! bounds what it reads of stdout and stderr. Arguments go in as JSON on
//! stdin; the result comes back as JSON on stdout (what the tool prints
//! goes to stderr, discarded). When bubblewrap or python3 is missing the
//! executor refuses: code never runs unsandboxed.

use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub mod call;

const RUNNER: &str = include_str!("runner.py");

/// Limits and programs of the sandbox (`[sandbox]` in the configuration).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// The bubblewrap binary.
    pub bwrap: PathBuf,
    /// The Python interpreter inside the sandbox (must be readable by an
    /// unprivileged user: the system's, not one under `/root`).
    pub python: PathBuf,
    /// Wall-clock limit of one run, in milliseconds.
    pub timeout_ms: u64,
    /// CPU-time limit, in seconds.
    pub cpu_secs: u64,
    /// Address-space limit, in MiB.
    pub memory_mib: u64,
    /// Most processes (and threads) of one run.
    pub max_processes: u32,
    /// Largest result (stdout), in bytes; beyond it the run is killed.
    pub max_output_bytes: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            python: PathBuf::from("/usr/bin/python3"),
            timeout_ms: 10_000,
            cpu_secs: 5,
            memory_mib: 512,
            max_processes: 32,
            max_output_bytes: 1024 * 1024,
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ExecRequest {
    pub code: String,
    /// The function `code` defines.
    pub function: String,
    /// Keyword arguments.
    pub args: serde_json::Map<String, Value>,
    /// Packages that must be importable.
    pub requirements: Vec<String>,
}

/// Why a run did not produce a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolFailure {
    /// `tool_error`, `tool_timeout`, `tool_cpu_limit`, `tool_memory_limit`,
    /// `tool_output_too_large`, `tool_bad_output`.
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct ExecOutcome {
    pub result: Result<Value, ToolFailure>,
    pub duration: Duration,
}

/// Why nothing ran.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ExecError {
    #[error("the tool sandbox is unavailable: {0}")]
    Unavailable(String),
    #[error("required packages are not installed in the sandbox: {}", .0.join(", "))]
    RequirementMissing(Vec<String>),
}

impl From<ExecError> for crate::error::Error {
    fn from(e: ExecError) -> Self {
        match e {
            ExecError::Unavailable(_) => crate::error::Error::Unavailable {
                code: "tool_sandbox_unavailable",
                message: e.to_string(),
            },
            ExecError::RequirementMissing(_) => {
                crate::error::Error::invalid("tool_requirement_missing", e.to_string())
            }
        }
    }
}

/// Runs tool code somewhere other than the server process.
#[async_trait::async_trait]
pub trait ToolExecutor: Send + Sync {
    async fn execute(&self, request: &ExecRequest) -> Result<ExecOutcome, ExecError>;
}

/// `python3` under bubblewrap (see the module documentation).
pub struct BwrapExecutor {
    pub config: SandboxConfig,
    /// The server's own paths (data directory, configuration and secrets
    /// files): a run is refused when the sandbox would see one of them.
    pub protected: Vec<PathBuf>,
}

/// The read-only file system a tool run sees: what bubblewrap binds, in
/// order. Built from the host's layout (merged `/usr` or not) and the
/// configured interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxMounts {
    /// `(host path, sandbox path)` bound read-only; skipped when missing.
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// `(link target, sandbox path)` symbolic links.
    pub links: Vec<(String, PathBuf)>,
}

/// The top-level directories that a merged-`/usr` system has as links into
/// `/usr` (Debian since 12) and older systems as directories of their own.
const USR_LINKS: &[&str] = &["bin", "lib", "lib32", "lib64", "libx32", "sbin"];

/// What of `/etc` a Python process reads: the dynamic linker's cache, the
/// time zone, Debian's alternatives links (shared libraries such as BLAS
/// are reached through them) and Debian's `sitecustomize`.
const ETC_FILES: &[&str] = &["ld.so.cache", "localtime", "alternatives"];

impl SandboxMounts {
    /// The allow-list for `python` on this host.
    pub fn for_python(python: &std::path::Path) -> SandboxMounts {
        let mut binds = vec![(PathBuf::from("/usr"), PathBuf::from("/usr"))];
        let mut links = Vec::new();
        for name in USR_LINKS {
            let path = PathBuf::from("/").join(name);
            match std::fs::read_link(&path) {
                Ok(target) => links.push((target.display().to_string(), path)),
                Err(_) if path.is_dir() => binds.push((path.clone(), path)),
                Err(_) => {}
            }
        }
        for name in ETC_FILES {
            let path = PathBuf::from("/etc").join(name);
            binds.push((path.clone(), path));
        }
        if let Ok(entries) = std::fs::read_dir("/etc") {
            let mut pythons: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                .map(|e| e.path())
                .collect();
            pythons.sort();
            binds.extend(pythons.into_iter().map(|p| (p.clone(), p)));
        }
        // An interpreter outside /usr (a pyenv or venv build): its prefix,
        // the directory above its `bin/`.
        let real = std::fs::canonicalize(python).unwrap_or_else(|_| python.to_path_buf());
        if !real.starts_with("/usr")
            && let Some(prefix) = real.parent().and_then(|bin| bin.parent())
            && prefix != std::path::Path::new("/")
        {
            binds.push((prefix.to_path_buf(), prefix.to_path_buf()));
        }
        SandboxMounts { binds, links }
    }

    /// Whether `path` (absolute, as the server sees it) is visible inside.
    pub fn exposes(&self, path: &std::path::Path) -> bool {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.binds.iter().any(|(host, _)| {
            let host = std::fs::canonicalize(host).unwrap_or_else(|_| host.clone());
            real.starts_with(&host)
                || (host.starts_with(&real) && real != std::path::Path::new("/"))
        })
    }

    fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (host, inside) in &self.binds {
            args.push("--ro-bind-try".to_string());
            args.push(host.display().to_string());
            args.push(inside.display().to_string());
        }
        for (target, inside) in &self.links {
            args.push("--symlink".to_string());
            args.push(target.clone());
            args.push(inside.display().to_string());
        }
        args
    }
}

/// Largest amount of stderr read (the tool's prints); beyond it the run is
/// killed as `tool_output_too_large`.
const MAX_STDERR_BYTES: usize = 64 * 1024;

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Reads at most `limit` bytes; `Err(())` when there was more.
async fn read_bounded(
    mut r: impl tokio::io::AsyncRead + Unpin,
    limit: usize,
) -> Result<Vec<u8>, ()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return Ok(buf),
            Ok(n) => {
                if buf.len() + n > limit {
                    return Err(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

#[derive(Deserialize)]
struct RunnerResult {
    status: String,
    #[serde(default)]
    output: Value,
    #[serde(default)]
    message: String,
    #[serde(default)]
    missing: Vec<String>,
}

impl BwrapExecutor {
    fn command(&self, mounts: &SandboxMounts) -> tokio::process::Command {
        let c = &self.config;
        let mut args: Vec<String> = Vec::new();
        let mut program = "prlimit".to_string();
        if running_as_root() {
            // A fresh unprivileged uid per run: root-only files are closed
            // and RLIMIT_NPROC counts only this run's processes.
            let id = 1_000_000 + rand::random::<u32>() % 1_000_000;
            program = "setpriv".into();
            args.extend([
                format!("--reuid={id}"),
                format!("--regid={id}"),
                "--clear-groups".into(),
                "--".into(),
                "prlimit".into(),
            ]);
            args.push(format!("--nproc={}", c.max_processes));
        }
        args.extend([
            format!("--cpu={}:{}", c.cpu_secs, c.cpu_secs + 1),
            format!("--as={}", c.memory_mib * 1024 * 1024),
            format!("--fsize={}", 16 * 1024 * 1024),
            "--nofile=64".into(),
            "--core=0".into(),
            "--".into(),
        ]);
        args.push(c.bwrap.display().to_string());
        args.extend(
            [
                "--unshare-all",
                "--die-with-parent",
                "--new-session",
                "--cap-drop",
                "ALL",
                "--clearenv",
                "--setenv",
                "PATH",
                "/usr/bin:/bin",
                "--setenv",
                "LANG",
                "C.UTF-8",
            ]
            .map(String::from),
        );
        args.extend(mounts.args());
        args.extend(
            [
                "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp", "--",
            ]
            .map(String::from),
        );
        args.push(c.python.display().to_string());
        args.extend(["-I", "-B", "-c", RUNNER].map(String::from));
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    fn check_available(&self) -> Result<SandboxMounts, ExecError> {
        for (what, path) in [
            ("bubblewrap", &self.config.bwrap),
            ("python3", &self.config.python),
        ] {
            if !path.exists() {
                return Err(ExecError::Unavailable(format!(
                    "{what} is not installed at {}",
                    path.display()
                )));
            }
        }
        let mounts = SandboxMounts::for_python(&self.config.python);
        if let Some(path) = self.protected.iter().find(|p| mounts.exposes(p)) {
            return Err(ExecError::Unavailable(format!(
                "the sandbox would expose the server's own files ({}); \
                 keep the data directory and configuration outside /usr and the Python prefix",
                path.display()
            )));
        }
        Ok(mounts)
    }
}

fn failure(code: &'static str, message: impl Into<String>) -> Result<Value, ToolFailure> {
    Err(ToolFailure {
        code,
        message: message.into(),
    })
}

#[async_trait::async_trait]
impl ToolExecutor for BwrapExecutor {
    async fn execute(&self, request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
        let mounts = self.check_available()?;
        let started = Instant::now();
        let mut child = self
            .command(&mounts)
            .spawn()
            .map_err(|e| ExecError::Unavailable(format!("starting the sandbox: {e}")))?;
        let input = serde_json::json!({
            "code": request.code,
            "function": request.function,
            "args": request.args,
            "requirements": request.requirements,
        })
        .to_string();
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
        let max_out = self.config.max_output_bytes;
        let out_task = tokio::spawn(read_bounded(stdout, max_out));
        let err_task = tokio::spawn(read_bounded(stderr, MAX_STDERR_BYTES));
        let timeout = Duration::from_millis(self.config.timeout_ms);

        // Wait for exit, the wall clock, or an output overflow.
        let mut out_task = out_task;
        let mut err_task = err_task;
        let mut out: Option<Result<Vec<u8>, ()>> = None;
        let mut err_over = false;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let verdict: Option<Result<Value, ToolFailure>> = loop {
            tokio::select! {
                _ = &mut deadline => break Some(failure("tool_timeout",
                    format!("the tool ran longer than {} ms", self.config.timeout_ms))),
                r = &mut out_task, if out.is_none() => {
                    let r = r.unwrap_or(Ok(Vec::new()));
                    if r.is_err() {
                        break Some(failure("tool_output_too_large",
                            format!("the result exceeded {max_out} bytes")));
                    }
                    out = Some(r);
                }
                r = &mut err_task, if !err_over => {
                    err_over = true;
                    if matches!(r, Ok(Err(()))) {
                        break Some(failure("tool_output_too_large",
                            format!("the tool printed more than {MAX_STDERR_BYTES} bytes")));
                    }
                }
                _ = child.wait(), if out.is_some() && err_over => break None,
            }
        };
        if verdict.is_some() {
            let _ = child.start_kill();
        }
        let status = child.wait().await.ok();
        writer.abort();
        let duration = started.elapsed();
        let result = match verdict {
            Some(v) => v,
            None => {
                let bytes = match out {
                    Some(Ok(b)) => b,
                    _ => Vec::new(),
                };
                match serde_json::from_slice::<RunnerResult>(&bytes) {
                    Ok(r) => match r.status.as_str() {
                        "ok" => Ok(r.output),
                        "requirement_missing" => {
                            return Err(ExecError::RequirementMissing(r.missing));
                        }
                        "memory" => failure("tool_memory_limit", "the tool ran out of memory"),
                        "bad_output" => failure(
                            "tool_bad_output",
                            format!("the result is not JSON-serialisable: {}", r.message),
                        ),
                        _ => failure("tool_error", r.message),
                    },
                    Err(_) => {
                        use std::os::unix::process::ExitStatusExt;
                        // bubblewrap reports a signal-killed child as 128 + signal.
                        let signal = status.and_then(|s| {
                            s.signal()
                                .or(s.code().filter(|c| *c > 128).map(|c| c - 128))
                        });
                        match signal {
                            Some(24) | Some(9) if duration.as_secs() >= self.config.cpu_secs => {
                                failure("tool_cpu_limit", "the tool used up its CPU time")
                            }
                            Some(s) => {
                                failure("tool_error", format!("the tool was killed by signal {s}"))
                            }
                            None => failure(
                                "tool_error",
                                format!(
                                    "the tool exited without a result (status {})",
                                    status.and_then(|s| s.code()).unwrap_or(-1)
                                ),
                            ),
                        }
                    }
                }
            }
        };
        Ok(ExecOutcome { result, duration })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_allow_list_binds_usr_and_little_else() {
        let mounts = SandboxMounts::for_python(Path::new("/usr/bin/python3"));
        let hosts: Vec<&Path> = mounts.binds.iter().map(|(h, _)| h.as_path()).collect();
        assert!(hosts.contains(&Path::new("/usr")), "{hosts:?}");
        for host in &hosts {
            assert!(
                host.starts_with("/usr")
                    || host.starts_with("/etc/")
                    || USR_LINKS.iter().any(|l| host == &Path::new("/").join(l)),
                "{host:?} is bound"
            );
            assert_ne!(*host, Path::new("/etc"));
        }
        assert!(!mounts.exposes(Path::new("/var/lib/workspace")));
        assert!(!mounts.exposes(Path::new("/etc/workspace.toml")));
        assert!(!mounts.exposes(Path::new("/root")));
        assert!(mounts.exposes(Path::new("/usr/local/share/data")));
    }

    #[tokio::test]
    async fn a_data_directory_the_sandbox_would_see_is_refused() {
        let executor = BwrapExecutor {
            config: SandboxConfig::default(),
            protected: vec![PathBuf::from("/usr/local/share/workspace-data")],
        };
        // (The suite requires bubblewrap and python3: `cargo xtask test`
        // checks for them before it builds.)
        let err = executor
            .execute(&ExecRequest {
                code: "def run():\n    return 1\n".into(),
                function: "run".into(),
                args: Default::default(),
                requirements: vec![],
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ExecError::Unavailable(m) if m.contains("expose")),
            "{err:?}"
        );
    }
}
