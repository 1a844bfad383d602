//! The extraction worker: `workspace-server extract-worker TYPE MAX_BYTES
//! [BASE_URL]` reads a file on stdin and writes its text as JSON on stdout, in a
//! process of its own whose address space, CPU time and file writes are
//! limited ([`run`] starts it; [`main_if_worker`] is its entry point).
//!
//! Protocol (stdout, one JSON object): `{"text": "...", "title": ...}`, or
//! `{"error": "corrupt" | "encrypted" | "unsupported", "message": "..."}`.
//! A worker that dies (an allocation refused by the address-space limit
//! aborts it, so does a stack overflow) or runs out of CPU time answers
//! nothing: the parent reads its exit status and its bounded stderr.

use super::{Budget, Document, ExtractError, Isolation};
use crate::kb_config::FilesConfig;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The subcommand that makes the server binary a worker.
pub const SUBCOMMAND: &str = "extract-worker";

/// Most of the worker's stderr read (a panic message or the runtime's
/// "memory allocation of N bytes failed").
const MAX_STDERR: usize = 4096;

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Reply {
    Text {
        text: String,
        #[serde(default)]
        title: Option<String>,
    },
    Error {
        error: String,
        message: String,
    },
}

impl Budget {
    /// The budget of `files.*`: where extraction runs is
    /// `files.extraction_worker`, else this server's own executable when it
    /// is `workspace-server`; in-process only when neither exists (the
    /// server library embedded in another program).
    pub fn from_config(config: &FilesConfig) -> Budget {
        let isolation = match config.extraction_worker.clone().or_else(own_binary) {
            Some(program) => Isolation::Process {
                program,
                memory_mib: config.extraction_memory_mib,
            },
            None => Isolation::InProcess,
        };
        Budget {
            max_bytes: config.max_extracted_bytes,
            timeout: Duration::from_secs(config.extraction_timeout_secs),
            isolation,
        }
    }
}

/// This process's executable, when it is the server binary (which has the
/// worker subcommand).
fn own_binary() -> Option<PathBuf> {
    static OWN: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .filter(|p| p.file_name().is_some_and(|n| n == "workspace-server"))
    })
    .clone()
}

/// Parses `bytes` in a worker process started from `program`.
pub async fn run(
    program: &Path,
    memory_mib: u64,
    content_type: &str,
    base_url: Option<&str>,
    bytes: bytes::Bytes,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Document, ExtractError> {
    let cpu_secs = timeout.as_secs().max(1) + 1;
    let memory = memory_mib.saturating_mul(1024 * 1024);
    let mut command = tokio::process::Command::new(program);
    command
        .arg(SUBCOMMAND)
        .arg(content_type)
        .arg(max_bytes.to_string())
        .args(base_url)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: the closure runs in the child between fork and exec; it only
    // calls setrlimit, which is async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let limit = |resource, value: u64| {
                let rlim = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &rlim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            limit(libc::RLIMIT_AS, memory)?;
            limit(libc::RLIMIT_CPU, cpu_secs)?;
            limit(libc::RLIMIT_FSIZE, 0)?;
            limit(libc::RLIMIT_CORE, 0)?;
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| {
        ExtractError::Corrupt(format!(
            "the extraction worker {} could not start: {e}",
            program.display()
        ))
    })?;
    let mut stdin = child.stdin.take().ok_or_else(no_pipe)?;
    let stdout = child.stdout.take().ok_or_else(no_pipe)?;
    let stderr = child.stderr.take().ok_or_else(no_pipe)?;
    let writer = tokio::spawn(async move {
        // A worker that dies early closes the pipe: not an error here.
        let _ = stdin.write_all(&bytes).await;
        let _ = stdin.shutdown().await;
    });
    // JSON escaping grows text by at most 6 bytes per byte.
    let out_limit = max_bytes.saturating_mul(6).saturating_add(64 * 1024);
    let work = async {
        let (out, err) = tokio::join!(
            read_bounded(stdout, out_limit),
            read_bounded(stderr, MAX_STDERR)
        );
        let status = child.wait().await;
        (out, err, status)
    };
    let (out, err, status) = match tokio::time::timeout(timeout, work).await {
        Ok(done) => done,
        Err(_) => {
            // kill_on_drop ends the worker with `child` (dropped with `work`).
            writer.abort();
            return Err(ExtractError::TimedOut(timeout.as_secs()));
        }
    };
    writer.abort();
    let status =
        status.map_err(|e| ExtractError::Corrupt(format!("the extraction worker: {e}")))?;
    let Some(out) = out else {
        return Err(ExtractError::Corrupt(
            "the extraction worker wrote more than its limit".to_string(),
        ));
    };
    if status.success()
        && let Ok(reply) = serde_json::from_slice::<Reply>(&out)
    {
        return match reply {
            Reply::Text { text, title } => Ok(Document { title, text }),
            Reply::Error { error, message } => Err(match error.as_str() {
                "encrypted" => ExtractError::Encrypted,
                "unsupported" => ExtractError::Unsupported(message),
                "too_large" => ExtractError::TooLarge(memory_mib),
                "timed_out" => ExtractError::TimedOut(timeout.as_secs()),
                _ => ExtractError::Corrupt(message),
            }),
        };
    }
    use std::os::unix::process::ExitStatusExt;
    let said = String::from_utf8_lossy(err.as_deref().unwrap_or_default()).into_owned();
    Err(match status.signal() {
        Some(libc::SIGXCPU) | Some(libc::SIGKILL) => ExtractError::TimedOut(timeout.as_secs()),
        _ if said.contains("memory allocation") || said.contains("out of memory") => {
            ExtractError::TooLarge(memory_mib)
        }
        Some(libc::SIGABRT) | Some(libc::SIGSEGV) => {
            ExtractError::Corrupt("the parser could not read the file".to_string())
        }
        _ => ExtractError::Corrupt("the parser could not read the file".to_string()),
    })
}

fn no_pipe() -> ExtractError {
    ExtractError::Corrupt("the extraction worker has no pipe".to_string())
}

/// Reads at most `limit` bytes; `None` when there was more.
async fn read_bounded(mut r: impl tokio::io::AsyncRead + Unpin, limit: usize) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return Some(buf),
            Ok(n) => {
                if buf.len() + n > limit {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// The worker's entry point: `Some(exit code)` when this process was
/// started as `workspace-server extract-worker TYPE MAX_BYTES [BASE_URL]` (call it
/// first thing in `main`, before any runtime starts), `None` otherwise.
pub fn main_if_worker() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(SUBCOMMAND)) {
        return None;
    }
    let content_type = args.next()?.into_string().ok()?;
    let max_bytes: usize = args.next()?.into_string().ok()?.parse().ok()?;
    let base_url = args.next().and_then(|a| a.into_string().ok());
    // Panic messages are not for anyone: the parent maps the exit.
    std::panic::set_hook(Box::new(|_| {}));
    let mut bytes = Vec::new();
    if std::io::stdin().read_to_end(&mut bytes).is_err() {
        return Some(ExitCode::FAILURE);
    }
    let reply = match std::panic::catch_unwind(|| {
        super::extract_parts(&content_type, &bytes, base_url.as_deref(), max_bytes)
    }) {
        Ok(Ok(document)) => Reply::Text {
            text: super::truncate(super::normalize(&document.text), max_bytes),
            title: document.title,
        },
        Ok(Err(e)) => Reply::Error {
            error: match &e {
                ExtractError::Encrypted => "encrypted",
                ExtractError::Unsupported(_) => "unsupported",
                ExtractError::TooLarge(_) => "too_large",
                ExtractError::TimedOut(_) => "timed_out",
                ExtractError::Corrupt(_) => "corrupt",
            }
            .to_string(),
            message: match e {
                ExtractError::Corrupt(m) | ExtractError::Unsupported(m) => m,
                other => other.to_string(),
            },
        },
        Err(_) => Reply::Error {
            error: "corrupt".into(),
            message: "the parser could not read the file".into(),
        },
    };
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut stdout, &reply).is_ok() && stdout.flush().is_ok();
    Some(if written {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
