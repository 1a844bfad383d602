//! The audit log, for the organization's admins and system administrators:
//!
//! - `workspace audit list [--org-id ID] [filters]`: the generated command
//!   (one page; `--cursor` with the page's `next_cursor` for the next).
//! - `workspace audit verify [--org-id ID]`: the generated command (each
//!   chain checked, with the first broken `seq`, the `problem` found, the
//!   first keyed `seq` and the signed checkpoint it was compared with).
//! - `workspace audit export [--org-id ID] [filters] [--output FILE]`:
//!   every matching event as JSON Lines, streamed to stdout (or FILE) as
//!   the server sends it, never held whole.

use crate::output;
use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Command};
use futures::StreamExt;
use std::io::Write;
use workspace_client::{Client, types};

/// The hand-written `audit` commands.
pub(crate) const HAND_WRITTEN: &[&str] = &["export"];

fn text_arg(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name).long(name).help(help)
}

fn time_arg(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_parser(clap::value_parser!(chrono::DateTime<chrono::Utc>))
        .help(help)
}

fn uuid_arg(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_parser(clap::value_parser!(uuid::Uuid))
        .help(help)
}

pub(crate) fn commands() -> Vec<Command> {
    vec![
        Command::new("export")
            .about("Export audit events as JSON Lines")
            .long_about(
                "Export the audit log: every event matching the filters, newest first, one JSON \
                 object per line, streamed as the server sends it: `workspace audit export \
                 --org-id ID > audit.jsonl`. Without --org-id, every event (system \
                 administrators).",
            )
            .arg(uuid_arg(
                "org-id",
                "The organization (absent: everything, system administrators)",
            ))
            .arg(uuid_arg(
                "actor-id",
                "Only events by this user, token or deployment",
            ))
            .arg(text_arg(
                "action",
                "Only this action; a trailing `*` makes it a prefix (`role.*`)",
            ))
            .arg(text_arg(
                "target-kind",
                "Only events about this kind of object",
            ))
            .arg(text_arg("target-id", "Only events about this object"))
            .arg(
                Arg::new("outcome")
                    .long("outcome")
                    .value_parser(["success", "failure", "denied"])
                    .help("Only this outcome"),
            )
            .arg(time_arg(
                "from",
                "Only events at or after this time (RFC 3339)",
            ))
            .arg(time_arg("to", "Only events before this time (RFC 3339)"))
            .arg(
                Arg::new("output")
                    .long("output")
                    .short('o')
                    .help("Write to this file instead of stdout"),
            ),
    ]
}

fn reported<T: serde::Serialize + std::fmt::Debug>(e: workspace_client::Error<T>) -> anyhow::Error {
    output::report_error(&e);
    anyhow::Error::new(output::Reported)
}

/// `audit export`.
pub(crate) async fn run(client: &Client, command: &str, m: &ArgMatches) -> Result<()> {
    anyhow::ensure!(command == "export", "unknown command: audit {command}");
    let mut request = client.audit_export();
    if let Some(v) = m.get_one::<uuid::Uuid>("org-id") {
        request = request.org_id(*v);
    }
    if let Some(v) = m.get_one::<uuid::Uuid>("actor-id") {
        request = request.actor_id(*v);
    }
    if let Some(v) = m.get_one::<String>("action") {
        request = request.action(v.as_str());
    }
    if let Some(v) = m.get_one::<String>("target-kind") {
        request = request.target_kind(v.as_str());
    }
    if let Some(v) = m.get_one::<String>("target-id") {
        request = request.target_id(v.as_str());
    }
    if let Some(v) = m.get_one::<String>("outcome") {
        request = request.outcome(match v.as_str() {
            "failure" => types::AuditOutcome::Failure,
            "denied" => types::AuditOutcome::Denied,
            _ => types::AuditOutcome::Success,
        });
    }
    if let Some(v) = m.get_one::<chrono::DateTime<chrono::Utc>>("from") {
        request = request.from(*v);
    }
    if let Some(v) = m.get_one::<chrono::DateTime<chrono::Utc>>("to") {
        request = request.to(*v);
    }
    let mut stream = request.send().await.map_err(reported)?.into_inner();
    let mut out: Box<dyn Write> = match m.get_one::<String>("output") {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {path}"))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.context("the export ended early (it is incomplete)")?;
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(())
}
