//! `workspace kb create|search|query`: hand-written beside the generated
//! `kb` commands. `create --from DIR` uploads a folder and follows the
//! ingestion with progress bars; `search` prints a readable list; `query`
//! prints a streamed answer and its numbered sources.

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, ArgMatches, Command};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::io::IsTerminal;
use std::time::{Duration, Instant};
use workspace_client::{Client, ClientInfo};

/// The hand-written `kb` subcommands (their names shadow no generated one:
/// `kb_create`, `kb_search` and the streamed `kb_query` are listed in
/// [`crate::tree::HAND_WRITTEN`]).
pub const HAND_WRITTEN: &[&str] = &["create", "search", "query"];

/// Default embedder of `kb create` (the server's default).
const DEFAULT_EMBEDDING_MODEL: &str = "all-minilm-l6-v2";

pub fn commands() -> Vec<Command> {
    let uuid = || clap::value_parser!(uuid::Uuid);
    vec![
        Command::new("create")
            .visible_alias("create-kb")
            .about("Create a knowledge base from a local folder: upload, create, follow ingestion")
            .long_about(
                "Create a knowledge base from a local folder.\n\n\
                 Uploads every regular, non-hidden file of DIR (not recursive) with a \
                 progress bar, creates the knowledge base with one `file` source listing \
                 the uploads, then follows the ingestion (documents done/total) until the \
                 knowledge base is `ready` or --timeout passes. Failed documents are printed \
                 with their errors and make the exit code 1. Prints the knowledge base as \
                 JSON (only its id with --id-only).",
            )
            .arg(
                Arg::new("org-id")
                    .long("org-id")
                    .required(true)
                    .value_parser(uuid()),
            )
            .arg(Arg::new("name").long("name").required(true))
            .arg(
                Arg::new("description")
                    .long("description")
                    .default_value(""),
            )
            .arg(
                Arg::new("embedding-model")
                    .long("embedding-model")
                    .default_value(DEFAULT_EMBEDDING_MODEL),
            )
            .arg(
                Arg::new("from")
                    .long("from")
                    .required(true)
                    .value_name("DIR")
                    .help("Folder whose files are uploaded (not recursive, hidden files skipped)"),
            )
            .arg(
                Arg::new("no-wait")
                    .long("no-wait")
                    .action(ArgAction::SetTrue)
                    .help("Do not follow the ingestion"),
            )
            .arg(
                Arg::new("timeout")
                    .long("timeout")
                    .value_parser(clap::value_parser!(u64))
                    .default_value("600")
                    .value_name("SECONDS")
                    .help("Stop following the ingestion after this many seconds (exit code 1)"),
            )
            .arg(id_only_arg()),
        Command::new("search")
            .about("Search a knowledge base (score, document, first line of each chunk)")
            .arg(
                Arg::new("kb-id")
                    .long("kb-id")
                    .required(true)
                    .value_parser(uuid()),
            )
            .arg(Arg::new("query").required(true).value_name("QUERY"))
            .arg(
                Arg::new("limit")
                    .long("limit")
                    .value_parser(clap::value_parser!(u32).range(1..=50))
                    .help("1 to 50 results (default 10)"),
            )
            .arg(
                Arg::new("score-threshold")
                    .long("score-threshold")
                    .value_parser(clap::value_parser!(f64))
                    .help("0 to 1 (default 0.1)"),
            )
            .arg(
                Arg::new("json")
                    .long("json")
                    .action(ArgAction::SetTrue)
                    .help("Print the raw JSON response"),
            ),
        Command::new("query")
            .about("Ask a knowledge base a question; prints the streamed answer and its sources")
            .arg(
                Arg::new("kb-id")
                    .long("kb-id")
                    .required(true)
                    .value_parser(uuid()),
            )
            .arg(Arg::new("question").required(true).value_name("QUESTION"))
            .arg(
                Arg::new("model-id")
                    .long("model-id")
                    .value_parser(uuid())
                    .help("A model of `models list` (default: the first offered)"),
            )
            .arg(
                Arg::new("limit")
                    .long("limit")
                    .value_parser(clap::value_parser!(u32).range(1..=50))
                    .help("Chunks retrieved, 1 to 50 (default 10)"),
            )
            .arg(
                Arg::new("no-stream")
                    .long("no-stream")
                    .action(ArgAction::SetTrue)
                    .help("Wait for the whole answer and print it as JSON {answer, sources}"),
            ),
    ]
}

/// `--id-only` / `-q`: print only the new object's id.
pub fn id_only_arg() -> Arg {
    Arg::new("id-only")
        .long("id-only")
        .short('q')
        .action(ArgAction::SetTrue)
        .help("Print only the new id")
}

pub async fn run(client: &Client, name: &str, m: &ArgMatches) -> Result<()> {
    match name {
        "create" => create(client, m).await,
        "search" => search(client, m).await,
        "query" => query(client, m).await,
        other => bail!("unknown kb command {other}"),
    }
}

/// An API error already printed as `error: STATUS CODE: MESSAGE`.
fn reported() -> anyhow::Error {
    anyhow::Error::new(output::Reported)
}

/// Sends a request; a non-2xx answer is printed like the generated
/// commands print theirs and becomes [`output::Reported`].
async fn send(client: &Client, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            output::report_unreachable(client.baseurl(), &e);
            return Err(reported());
        }
    };
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or_default();
    output::report_api_error(
        status,
        body["error_code"].as_str().unwrap_or("error"),
        body["message"].as_str().unwrap_or(""),
    );
    Err(reported())
}

fn url(client: &Client, path: &str) -> String {
    format!("{}{path}", client.baseurl().trim_end_matches('/'))
}

async fn get_json(client: &Client, path: &str, query: &[(&str, String)]) -> Result<Value> {
    let response = send(client, client.client().get(url(client, path)).query(query)).await?;
    response.json().await.context("reading the response")
}

fn bar(len: u64, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// The regular, non-hidden files of `dir`, by name.
fn folder_files(dir: &std::path::Path) -> Result<Vec<(String, std::path::PathBuf, u64)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if name.starts_with('.') || !meta.is_file() {
            continue;
        }
        files.push((name, entry.path(), meta.len()));
    }
    files.sort();
    Ok(files)
}

async fn create(client: &Client, m: &ArgMatches) -> Result<()> {
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let dir = std::path::PathBuf::from(m.get_one::<String>("from").context("--from")?);
    let files = folder_files(&dir)?;
    if files.is_empty() {
        eprintln!("error: {} holds no regular files to upload", dir.display());
        std::process::exit(2);
    }
    if files.len() > 100 {
        eprintln!(
            "error: {} holds {} files; a file source takes at most 100",
            dir.display(),
            files.len()
        );
        std::process::exit(2);
    }

    let total_bytes: u64 = files.iter().map(|f| f.2).sum();
    let upload_bar = bar(
        total_bytes,
        "uploading {msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}",
    );
    let mut file_ids = Vec::with_capacity(files.len());
    for (done, (name, path, _)) in files.iter().enumerate() {
        upload_bar.set_message(format!("{}/{} {name}", done, files.len()));
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let len = bytes.len() as u64;
        match client.chat_upload_file(org, None, name, bytes).await {
            Ok(upload) => file_ids.push(upload.into_inner().id),
            Err(e) => {
                upload_bar.abandon();
                eprintln!("error: uploading {name}:");
                output::report_error(&e);
                return Err(reported());
            }
        }
        upload_bar.inc(len);
    }
    upload_bar.set_message(format!("{}/{} files", files.len(), files.len()));
    upload_bar.finish();

    let body = json!({
        "name": m.get_one::<String>("name").context("--name")?,
        "description": m.get_one::<String>("description").cloned().unwrap_or_default(),
        "embedding_model": m.get_one::<String>("embedding-model").context("--embedding-model")?,
        "sources": [{"type": "file", "config": {"file_ids": file_ids}}],
    });
    let created: Value = send(
        client,
        client
            .client()
            .post(url(client, "/api/kb/create"))
            .query(&[("org_id", org.to_string())])
            .json(&body),
    )
    .await?
    .json()
    .await
    .context("reading the created knowledge base")?;
    let kb_id = created["id"].as_str().unwrap_or_default().to_string();
    let id_only = m.get_flag("id-only");

    let outcome = if m.get_flag("no-wait") {
        Ok(None)
    } else {
        let timeout = Duration::from_secs(*m.get_one::<u64>("timeout").unwrap_or(&600));
        follow(client, &kb_id, timeout).await
    };
    if id_only {
        println!("{kb_id}");
    } else {
        let mut shown = created.clone();
        if let Ok(Some(status)) = &outcome {
            shown["status"] = status["status"].clone();
            shown["ingestion"] = status.clone();
        }
        println!("{}", serde_json::to_string_pretty(&shown)?);
    }
    match outcome? {
        Some(status) if status["documents_failed"].as_i64().unwrap_or(0) > 0 => {
            print_failed_documents(client, &kb_id).await?;
            eprintln!(
                "error: {} of {} documents failed",
                status["documents_failed"], status["documents_total"]
            );
            Err(reported())
        }
        _ => Ok(()),
    }
}

/// Polls `kb ingestion_status` with a progress bar until the knowledge
/// base is `ready`; an error after `timeout`.
async fn follow(client: &Client, kb_id: &str, timeout: Duration) -> Result<Option<Value>> {
    let started = Instant::now();
    let progress = bar(
        0,
        "ingesting [{bar:30}] {pos}/{len} documents {msg} {elapsed}",
    );
    loop {
        let status = get_json(
            client,
            "/api/kb/ingestion_status",
            &[("kb_id", kb_id.to_string())],
        )
        .await?;
        let total = status["documents_total"].as_i64().unwrap_or(0).max(0) as u64;
        let done = status["documents_done"].as_i64().unwrap_or(0).max(0) as u64;
        let failed = status["documents_failed"].as_i64().unwrap_or(0);
        progress.set_length(total);
        progress.set_position(done);
        if failed > 0 {
            progress.set_message(format!("({failed} failed)"));
        }
        if status["status"] == "ready" {
            progress.finish();
            return Ok(Some(status));
        }
        if started.elapsed() >= timeout {
            progress.abandon();
            bail!(
                "timed out after {}s following the ingestion ({done}/{total} documents done); \
                 see `workspace kb ingestion-status --kb-id {kb_id}`",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn print_failed_documents(client: &Client, kb_id: &str) -> Result<()> {
    let mut page = 1u32;
    loop {
        let listed = get_json(
            client,
            "/api/kb/list_documents",
            &[
                ("kb_id", kb_id.to_string()),
                ("page", page.to_string()),
                ("limit", "100".to_string()),
            ],
        )
        .await?;
        let documents = listed["documents"].as_array().cloned().unwrap_or_default();
        for d in documents.iter().filter(|d| d["status"] == "failed") {
            eprintln!(
                "failed: {}: {}",
                d["title"].as_str().unwrap_or("?"),
                d["error"].as_str().unwrap_or("unknown error")
            );
        }
        let total = listed["total"].as_i64().unwrap_or(0);
        if documents.is_empty() || i64::from(page) * 100 >= total {
            return Ok(());
        }
        page += 1;
    }
}

async fn search(client: &Client, m: &ArgMatches) -> Result<()> {
    let kb = m.get_one::<uuid::Uuid>("kb-id").context("--kb-id")?;
    let mut body = json!({"query": m.get_one::<String>("query").context("QUERY")?});
    if let Some(limit) = m.get_one::<u32>("limit") {
        body["limit"] = json!(limit);
    }
    if let Some(t) = m.get_one::<f64>("score-threshold") {
        body["score_threshold"] = json!(t);
    }
    let response: Value = send(
        client,
        client
            .client()
            .post(url(client, "/api/kb/search"))
            .query(&[("kb_id", kb.to_string())])
            .json(&body),
    )
    .await?
    .json()
    .await
    .context("reading the search results")?;
    if m.get_flag("json") {
        println!("{}", serde_json::to_string_pretty(&response)?);
        return Ok(());
    }
    let results = response["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        println!("no results");
    }
    for (i, r) in results.iter().enumerate() {
        let title = r["metadata"]["title"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| r["document_id"].as_str().unwrap_or("?").to_string());
        let first = r["content"]
            .as_str()
            .unwrap_or("")
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        println!(
            "{:>2}. {:.3}  {}\n    {}",
            i + 1,
            r["score"].as_f64().unwrap_or(0.0),
            output::escape_cell(&title),
            output::escape_cell(first)
        );
    }
    Ok(())
}

fn print_sources(sources: &[Value]) {
    print!("{}", render_sources(sources));
}

/// `Sources:` and one `[n] title <url> (score s)` line per cited chunk.
pub(crate) fn render_sources(sources: &[Value]) -> String {
    let mut out = String::new();
    if sources.is_empty() {
        return out;
    }
    out.push_str("\nSources:\n");
    for s in sources {
        let mut line = format!(
            "[{}] {}",
            s["index"].as_u64().unwrap_or(0),
            output::escape_cell(s["title"].as_str().unwrap_or("?"))
        );
        if let Some(url) = s["url"].as_str() {
            line.push_str(&format!(" <{url}>"));
        }
        line.push_str(&format!(
            " (score {:.3})",
            s["score"].as_f64().unwrap_or(0.0)
        ));
        out.push_str(&line);
        out.push('\n');
    }
    out
}

async fn query(client: &Client, m: &ArgMatches) -> Result<()> {
    use std::io::Write;
    let kb = m.get_one::<uuid::Uuid>("kb-id").context("--kb-id")?;
    let stream = !m.get_flag("no-stream");
    let mut body = json!({
        "query": m.get_one::<String>("question").context("QUESTION")?,
        "stream": stream,
    });
    if let Some(model) = m.get_one::<uuid::Uuid>("model-id") {
        body["model_id"] = json!(model);
    }
    if let Some(limit) = m.get_one::<u32>("limit") {
        body["limit"] = json!(limit);
    }
    let response = send(
        client,
        client
            .client()
            .post(url(client, "/api/kb/query"))
            .query(&[("kb_id", kb.to_string())])
            .header(
                reqwest::header::ACCEPT,
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .json(&body),
    )
    .await?;
    if !stream {
        let answer: Value = response.json().await.context("reading the answer")?;
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let mut events = workspace_client::sse::SseReader::from_response(response);
    let mut sources = Vec::new();
    let mut stdout = std::io::stdout();
    while let Some(event) = events.next().await {
        let event: Value = event
            .context("reading the stream")?
            .json()
            .context("a stream event")?;
        match event["type"].as_str() {
            Some("sources") => {
                sources = event["sources"].as_array().cloned().unwrap_or_default();
            }
            Some("content") => {
                print!("{}", event["content"].as_str().unwrap_or(""));
                stdout.flush()?;
            }
            Some("end") => {
                println!();
                print_sources(&sources);
                return Ok(());
            }
            Some("error") => {
                println!();
                output::report_api_error(
                    0,
                    event["error_code"].as_str().unwrap_or("error"),
                    event["message"].as_str().unwrap_or(""),
                );
                return Err(reported());
            }
            _ => {}
        }
    }
    println!();
    bail!("the stream ended before the answer was complete")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stream_events_are_read_across_chunks() {
        let chunks: Vec<Result<bytes::Bytes, reqwest::Error>> = [
            "data: {\"type\":\"sources\",\"sources\":[{\"index\":1,",
            "\"title\":\"a.txt\",\"url\":null,\"score\":0.9}]}\n\ndata: {\"type\":\"start\",\"message_id\":\"m\"}\n\ndata: {\"type\":\"content\",",
            "\"content\":\"Hi [1]\"}\n\ndata: {\"type\":\"end\"}\n\n",
        ]
        .into_iter()
        .map(|c| Ok(bytes::Bytes::from_static(c.as_bytes())))
        .collect();
        let mut reader = workspace_client::sse::SseReader::new(futures::stream::iter(chunks));
        let mut events: Vec<Value> = Vec::new();
        while let Some(event) = reader.next().await {
            events.push(event.unwrap().json().unwrap());
        }
        assert_eq!(events.len(), 4);
        assert_eq!(events[0]["type"], "sources");
        assert_eq!(events[1]["type"], "start");
        assert_eq!(events[2]["content"], "Hi [1]");
        assert_eq!(events[3]["type"], "end");
        let sources = vec![
            json!({"index": 1, "title": "a.txt", "url": null, "score": 0.9}),
            json!({"index": 2, "title": "page\ntwo", "url": "https://example.com/p", "score": 0.5}),
        ];
        assert_eq!(
            render_sources(&sources),
            "\nSources:\n[1] a.txt (score 0.900)\n[2] page\\ntwo <https://example.com/p> (score 0.500)\n"
        );
        assert_eq!(render_sources(&[]), "");
    }
}
