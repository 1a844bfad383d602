//! Running tool code outside the server: the [`ToolExecutor`] trait and its
//! one implementation, [`BwrapExecutor`], a `python3` process under
//! bubblewrap.
//!
//! The sandbox: a new user, PID, network, IPC, UTS and mount namespace
//! (`--unshare-all`: no network at all, loopback included), the host's root
//! mounted read-only, a private `/tmp` (tmpfs), a fresh `/proc` and a
//! minimal `/dev`, an empty environment, killed with the server
//! (`--die-with-parent`) and its whole PID namespace killed with it. When
//! the server runs as root, every run gets its own unprivileged uid/gid
//! (`setpriv`), so root-only files such as `/etc/shadow` are unreadable and
//! the process limit counts that run's processes only. Limits (`prlimit`):
//! CPU seconds, address space, processes, file size, open files, no core
//! dumps; the server adds a wall-clock limit and bounds what it reads of
//! stdout and stderr. Arguments go in as JSON on stdin; the result comes
//! back as JSON on stdout (what the tool prints goes to stderr, discarded).
//! When bubblewrap or python3 is missing the executor refuses: code never
//! runs unsandboxed.

use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    fn command(&self) -> tokio::process::Command {
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
                "--ro-bind",
                "/",
                "/",
                "--tmpfs",
                "/tmp",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--chdir",
                "/tmp",
                "--",
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

    fn check_available(&self) -> Result<(), ExecError> {
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
        Ok(())
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
        self.check_available()?;
        let started = Instant::now();
        let mut child = self
            .command()
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
