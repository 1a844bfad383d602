//! Checks request bodies the server sent to a model provider against the
//! provider's official SDK types (PyPI `openai` and `anthropic`, pinned in
//! xtask's `PYTHON_REQUIREMENTS`), with `tests/peers/provider_bodies.py`:
//! pydantic validates each body against
//! `openai.types.chat.completion_create_params.CompletionCreateParams…`
//! or `anthropic.types.message_create_params.MessageCreateParams…`, with
//! keys the types do not declare refused and every content part checked.
//!
//! Bodies come from the fake provider's records
//! ([`crate::fake_provider::Recorded::body`]).

use std::io::Write;
use std::process::{Command, Stdio};

/// Validates `bodies` (each a whole request body) as `kind`'s requests:
/// `"openai"` (chat completions) or `"anthropic"` (Messages). `Err` holds
/// the script's report: one line per failure, `body N (kind): location:
/// message`, N being the index in `bodies`. Runs the Python of
/// [`crate::python`] (`cargo xtask test` installs both SDKs into it).
pub fn validate_provider_bodies(kind: &str, bodies: &[serde_json::Value]) -> Result<(), String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join("provider_bodies.py");
    let mut input = String::new();
    for body in bodies {
        input.push_str(&serde_json::json!({"kind": kind, "body": body}).to_string());
        input.push('\n');
    }
    let mut child = Command::new(crate::python())
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", script.display()))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Written from another thread: the script's output may fill its pipe
    // before it has read all of its input.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    let written = writer.join().expect("the writing thread");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match (output.status.success(), written) {
        (true, Ok(())) => Ok(()),
        (true, Err(e)) => Err(format!("writing the bodies to the script: {e}")),
        (false, _) => Err(format!(
            "the {kind} SDK's types refuse what was sent ({}):\n{report}",
            output.status
        )),
    }
}
