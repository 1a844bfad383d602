//! The organization's usage and cost, for its admins (issue #36):
//!
//! - `workspace usage report --org-id ID --group-by day|user|model|deployment|token|kind
//!   [--from T] [--to T]`: a table with a totals line (`--format json` for
//!   the report as JSON, `--format csv` for the server's CSV export).
//!
//! Budgets are generated commands: `workspace budgets list|create|update|delete`.

use crate::output;
use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Command};
use futures::StreamExt;
use std::io::Write;
use workspace_client::{Client, types};

/// The hand-written `usage` commands.
pub(crate) const HAND_WRITTEN: &[&str] = &["report"];

pub(crate) fn commands() -> Vec<Command> {
    vec![
        Command::new("report")
            .about("Report the organization's model usage and cost (admins)")
            .long_about(
                "Report the organization's model calls (admins): calls, tokens in and out (the \
                 provider's figures, or estimated when it reports none), and cost from the \
                 server's price table, grouped by day, user, model, deployment, token or kind, \
                 with totals. A table by default; `--format json` prints the report, `--format \
                 csv` the server's CSV export: `workspace usage report --org-id ID --group-by \
                 model --format csv > usage.csv`.",
            )
            .arg(
                Arg::new("org-id")
                    .long("org-id")
                    .required(true)
                    .value_parser(clap::value_parser!(uuid::Uuid))
                    .help("The organization's id"),
            )
            .arg(
                Arg::new("group-by")
                    .long("group-by")
                    .value_parser(["day", "user", "model", "deployment", "token", "kind"])
                    .default_value("day")
                    .help("What to group by"),
            )
            .arg(
                Arg::new("from")
                    .long("from")
                    .value_parser(clap::value_parser!(chrono::DateTime<chrono::Utc>))
                    .help("From this time, inclusive (RFC 3339; default 30 days before --to)"),
            )
            .arg(
                Arg::new("to")
                    .long("to")
                    .value_parser(clap::value_parser!(chrono::DateTime<chrono::Utc>))
                    .help("To this time, exclusive (RFC 3339; default now)"),
            ),
    ]
}

fn reported<T: serde::Serialize + std::fmt::Debug>(e: workspace_client::Error<T>) -> anyhow::Error {
    output::report_error(&e);
    anyhow::Error::new(output::Reported)
}

fn group_by(v: &str) -> types::UsageGroupBy {
    match v {
        "user" => types::UsageGroupBy::User,
        "model" => types::UsageGroupBy::Model,
        "deployment" => types::UsageGroupBy::Deployment,
        "token" => types::UsageGroupBy::Token,
        "kind" => types::UsageGroupBy::Kind,
        _ => types::UsageGroupBy::Day,
    }
}

/// The report's table: one row per group.
const REPORT_TABLE: output::Table = output::Table {
    operation_id: "org_usage_report",
    rows: "/groups",
    columns: &[
        ("KEY", "/key"),
        ("LABEL", "/label"),
        ("CALLS", "/calls"),
        ("INPUT", "/input_tokens"),
        ("OUTPUT", "/output_tokens"),
        ("TOTAL", "/total_tokens"),
        ("COST_MICROS", "/cost_micros"),
        ("ESTIMATED", "/estimated_calls"),
        ("UNFINISHED", "/unfinished_calls"),
    ],
    total: None,
};

/// `usage report`; `format` is the global `--format` (`json`, `csv`, else
/// a table).
pub(crate) async fn run(
    client: &Client,
    command: &str,
    m: &ArgMatches,
    format: &str,
    format_given: bool,
) -> Result<()> {
    anyhow::ensure!(command == "report", "unknown command: usage {command}");
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let by = group_by(
        m.get_one::<String>("group-by")
            .map_or("day", |s| s.as_str()),
    );
    let from = m.get_one::<chrono::DateTime<chrono::Utc>>("from").copied();
    let to = m.get_one::<chrono::DateTime<chrono::Utc>>("to").copied();
    if format == "csv" {
        let mut request = client.org_usage_export().org_id(org).group_by(by);
        if let Some(v) = from {
            request = request.from(v);
        }
        if let Some(v) = to {
            request = request.to(v);
        }
        let mut stream = request.send().await.map_err(reported)?.into_inner();
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        while let Some(chunk) = stream.next().await {
            out.write_all(&chunk.context("the export ended early")?)?;
        }
        out.flush()?;
        return Ok(());
    }
    let mut request = client.org_usage_report().org_id(org).group_by(by);
    if let Some(v) = from {
        request = request.from(v);
    }
    if let Some(v) = to {
        request = request.to(v);
    }
    let report = request.send().await.map_err(reported)?.into_inner();
    let json = serde_json::to_value(&report)?;
    if format == "json" && format_given {
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    print!("{}", output::render_table(&REPORT_TABLE, &json));
    let t = &report.totals;
    println!(
        "total: {} calls, {} tokens ({} in, {} out), {:.6} USD ({} estimated, {} unfinished)",
        t.calls,
        t.total_tokens,
        t.input_tokens,
        t.output_tokens,
        t.cost_micros as f64 / 1_000_000.0,
        t.estimated_calls,
        t.unfinished_calls
    );
    Ok(())
}
