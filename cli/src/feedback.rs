//! Feedback on answers, for the organization's admins:
//!
//! - `workspace feedback list --org-id ID [filters]`: the generated
//!   command, shown as a table (`--format json` for the page as JSON);
//!   `--cursor` with the page's `next cursor:` line for the next page.
//! - `workspace feedback export --org-id ID --format csv|jsonl [filters]
//!   [--output FILE]`: the whole filtered set, streamed to stdout (or
//!   FILE) as the server sends it, never held whole. JSON Lines unless
//!   `--format csv`.

use crate::output;
use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Command};
use futures::StreamExt;
use std::io::Write;
use workspace_client::{Client, types};

/// The hand-written `feedback` commands.
pub(crate) const HAND_WRITTEN: &[&str] = &["export"];

/// The operation shown as a table unless `--format json` is given.
pub(crate) const LIST_OPERATION: &str = "org_feedback_list";

fn uuid_arg(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_parser(clap::value_parser!(uuid::Uuid))
        .help(help)
}

pub(crate) fn commands() -> Vec<Command> {
    vec![
        Command::new("export")
            .about("Export the organization's feedback on answers (CSV or JSON Lines)")
            .long_about(
                "Export the feedback given on answers in the organization (admins): every \
                 rating matching the filters, newest first, with its question, answer, model, \
                 knowledge bases, rater, comment and tags. `--format csv` writes CSV (a header \
                 row; cells that would start a spreadsheet formula begin with an apostrophe); \
                 otherwise JSON Lines, one object per line. Streamed as the server sends it: \
                 `workspace feedback export --org-id ID --format csv > feedback.csv`.",
            )
            .arg(uuid_arg("org-id", "The organization's id").required(true))
            .arg(
                Arg::new("rating")
                    .long("rating")
                    .value_parser(["up", "down"])
                    .help("Only this rating"),
            )
            .arg(uuid_arg("model-id", "Only answers of this model"))
            .arg(uuid_arg("user-id", "Only ratings given by this user"))
            .arg(
                Arg::new("area")
                    .long("area")
                    .value_parser(["chat", "conversation"])
                    .help("Only answers of chats, or of conversations"),
            )
            .arg(
                Arg::new("tag")
                    .long("tag")
                    .help("Only ratings with this tag"),
            )
            .arg(
                Arg::new("from")
                    .long("from")
                    .value_parser(clap::value_parser!(chrono::DateTime<chrono::Utc>))
                    .help("Only ratings first given at or after this time (RFC 3339)"),
            )
            .arg(
                Arg::new("to")
                    .long("to")
                    .value_parser(clap::value_parser!(chrono::DateTime<chrono::Utc>))
                    .help("Only ratings first given before this time (RFC 3339)"),
            )
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

/// `feedback export`; `format` is the global `--format` (`csv`, else
/// JSON Lines).
pub(crate) async fn run(
    client: &Client,
    command: &str,
    m: &ArgMatches,
    format: &str,
) -> Result<()> {
    anyhow::ensure!(command == "export", "unknown command: feedback {command}");
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let format = if format == "csv" {
        types::FeedbackExportFormat::Csv
    } else {
        types::FeedbackExportFormat::Jsonl
    };
    let mut request = client.org_feedback_export().org_id(org).format(format);
    if let Some(v) = m.get_one::<String>("rating") {
        request = request.rating(if v == "up" {
            types::FeedbackRating::Up
        } else {
            types::FeedbackRating::Down
        });
    }
    if let Some(v) = m.get_one::<uuid::Uuid>("model-id") {
        request = request.model_id(*v);
    }
    if let Some(v) = m.get_one::<uuid::Uuid>("user-id") {
        request = request.user_id(*v);
    }
    if let Some(v) = m.get_one::<String>("area") {
        request = request.area(if v == "chat" {
            types::FeedbackArea::Chat
        } else {
            types::FeedbackArea::Conversation
        });
    }
    if let Some(v) = m.get_one::<String>("tag") {
        request = request.tag(v.as_str());
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
