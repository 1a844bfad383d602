//! `workspace chat export` and `workspace chat import` (issue #35),
//! hand-written: the export is streamed to stdout (or `--out FILE`) as the
//! server sends it, the import sends a file and prints what was imported
//! and skipped as a table (JSON with `--format json`).
//!
//! The file formats are chosen with `--to` and `--from`: `--format` is
//! the global output option (`json` or `table`).

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgMatches, Command};
use std::io::Write;
use uuid::Uuid;
use workspace_client::Client;
use workspace_client::types::{ChatExportFormat, ChatImportFormat, ChatImportResult};

/// The hand-written commands of the `chat` group placed here.
pub(crate) const HAND_WRITTEN: &[&str] = &["export", "import"];

fn org_arg() -> Arg {
    Arg::new("org-id")
        .long("org-id")
        .required(true)
        .value_parser(clap::value_parser!(Uuid))
}

pub(crate) fn commands() -> Vec<Command> {
    vec![
        Command::new("export")
            .about("Export a chat (--chat-id) or all your chats in an organization")
            .long_about(
                "Export one chat (--chat-id) or all your chats in the organization, streamed to \
                 stdout or --out FILE as the server sends it. --to json (default) writes the \
                 whole tree of each chat (a workspace.chat.v1 document, which `chat import` \
                 reads back); --to markdown writes each chat's active path.",
            )
            .arg(org_arg())
            .arg(
                Arg::new("chat-id")
                    .long("chat-id")
                    .value_parser(clap::value_parser!(Uuid))
                    .help("The chat to export (default: all your chats in the organization)"),
            )
            .arg(
                Arg::new("to")
                    .long("to")
                    .value_parser(["json", "markdown"])
                    .default_value("json")
                    .help("The export's format"),
            )
            .arg(
                Arg::new("out")
                    .long("out")
                    .short('o')
                    .help("Write to this file instead of stdout"),
            ),
        Command::new("import")
            .about("Import chats from an export (this service, ChatGPT, Open WebUI, Claude, LibreChat)")
            .long_about(
                "Import the chats of an export file (at most 50 MiB, 1,000 chats, 100,000 \
                 messages) as your chats in the organization: this service's JSON export, \
                 ChatGPT's conversations.json, Open WebUI's chat export, Claude's \
                 conversations.json or LibreChat's export, recognised from the file unless \
                 --from says. Prints the imported and skipped chats as a table (--format json: \
                 the server's answer).",
            )
            .arg(org_arg())
            .arg(
                Arg::new("from")
                    .long("from")
                    .value_parser(["auto", "workspace", "chatgpt", "openwebui", "claude", "librechat"])
                    .default_value("auto")
                    .help("The file's format"),
            )
            .arg(Arg::new("file").required(true).help("The export file (JSON)")),
    ]
}

fn reported<T: serde::Serialize + std::fmt::Debug>(e: workspace_client::Error<T>) -> anyhow::Error {
    output::report_error(&e);
    anyhow::Error::new(output::Reported)
}

pub(crate) async fn run(client: &Client, name: &str, m: &ArgMatches) -> Result<()> {
    let org = *m.get_one::<Uuid>("org-id").context("--org-id")?;
    match name {
        "export" => export(client, org, m).await,
        "import" => import(client, org, m).await,
        other => bail!("unknown command: chat {other}"),
    }
}

async fn export(client: &Client, org: Uuid, m: &ArgMatches) -> Result<()> {
    use futures::TryStreamExt;
    let format = match m.get_one::<String>("to").map(String::as_str) {
        Some("markdown") => ChatExportFormat::Markdown,
        _ => ChatExportFormat::Json,
    };
    let response = match m.get_one::<Uuid>("chat-id") {
        Some(chat) => client.chat_export(org, *chat, format).await,
        None => client.chat_export_all(org, format).await,
    }
    .map_err(reported)?;
    let mut out: Box<dyn Write> = match m.get_one::<String>("out") {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {path}"))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut stream = response.into_inner().into_inner();
    while let Some(chunk) = stream
        .try_next()
        .await
        .context("the export ended early (the document is incomplete)")?
    {
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(())
}

async fn import(client: &Client, org: Uuid, m: &ArgMatches) -> Result<()> {
    let path = m.get_one::<String>("file").context("FILE")?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let from = match m.get_one::<String>("from").map(String::as_str) {
        Some("workspace") => ChatImportFormat::Workspace,
        Some("chatgpt") => ChatImportFormat::Chatgpt,
        Some("openwebui") => ChatImportFormat::Openwebui,
        Some("claude") => ChatImportFormat::Claude,
        Some("librechat") => ChatImportFormat::Librechat,
        _ => ChatImportFormat::Auto,
    };
    let result = client
        .chat_import()
        .org_id(org)
        .format(from)
        .body(bytes)
        .send()
        .await
        .map_err(reported)?
        .into_inner();
    // The global `--format json`, given on the command line or in the
    // environment, prints the answer as it is.
    let json = m.value_source("format") != Some(clap::parser::ValueSource::DefaultValue)
        && m.get_one::<String>("format").map(String::as_str) == Some("json");
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", render(&result));
    }
    Ok(())
}

/// The imported and skipped chats as two tables.
fn render(result: &ChatImportResult) -> String {
    let mut text = format!(
        "Read as {}: {} imported, {} skipped\n",
        result.format,
        result.imported.len(),
        result.skipped.len()
    );
    if !result.imported.is_empty() {
        let rows: Vec<[String; 4]> = result
            .imported
            .iter()
            .map(|c| {
                [
                    c.index.to_string(),
                    c.chat_id.to_string(),
                    c.messages.to_string(),
                    c.title.clone(),
                ]
            })
            .collect();
        text.push_str(&table(["#", "CHAT ID", "MESSAGES", "TITLE"], &rows));
    }
    if !result.skipped.is_empty() {
        let rows: Vec<[String; 4]> = result
            .skipped
            .iter()
            .map(|s| {
                [
                    s.index.to_string(),
                    s.source_id.clone().unwrap_or_else(|| "-".into()),
                    s.reason.to_string(),
                    s.message.clone(),
                ]
            })
            .collect();
        text.push_str("\nSkipped:\n");
        text.push_str(&table(["#", "SOURCE ID", "REASON", "WHY"], &rows));
    }
    text
}

fn table(head: [&str; 4], rows: &[[String; 4]]) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = *w));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut text = line(head.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_are_aligned() {
        let text = super::table(
            ["#", "A", "B", "C"],
            &[["0".into(), "long id".into(), "3".into(), "last".into()]],
        );
        assert_eq!(text, "#  A        B  C\n0  long id  3  last\n");
    }
}
