//! Hand-written `kb` commands: `create` (optionally from a local folder,
//! with progress bars for the uploads and the ingestion), `search` (a
//! readable list) and `query` (a streamed answer with its numbered
//! sources). The other `kb` commands are generated.
//!
//! Progress bars go to stderr and only when it is a terminal.

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, ArgMatches, Command};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::{Client, ClientInfo};

/// The hand-written `kb` commands (replacing the generated `create` and
/// `search`).
pub const HAND_WRITTEN: &[&str] = &["create", "search", "query"];

fn uuid_arg(name: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_parser(clap::value_parser!(Uuid))
}

fn flag(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .action(ArgAction::SetTrue)
        .help(help)
}

pub(crate) fn commands() -> Vec<Command> {
    vec![
        Command::new("create")
            .about(
                "Create a knowledge base, optionally from the files of a local folder \
                 (uploaded, then ingested; progress on stderr)",
            )
            .arg(uuid_arg("org-id").required(true))
            .arg(Arg::new("name").long("name").required(true))
            .arg(
                Arg::new("description")
                    .long("description")
                    .default_value(""),
            )
            .arg(
                Arg::new("embedding-model")
                    .long("embedding-model")
                    .default_value("all-minilm-l6-v2")
                    .help("One of the server's embedders"),
            )
            .arg(
                Arg::new("from")
                    .long("from")
                    .value_name("DIR")
                    .help("Upload every regular, non-hidden file of DIR as a file source"),
            )
            .arg(flag("no-wait", "Do not follow the ingestion"))
            .arg(
                Arg::new("timeout")
                    .long("timeout")
                    .value_parser(clap::value_parser!(u64))
                    .default_value("1800")
                    .help("Seconds to follow the ingestion before giving up"),
            )
            .arg(flag("id-only", "Print only the new knowledge base's id")),
        Command::new("search")
            .about("Search a knowledge base (hybrid: meaning and keywords); best first")
            .arg(uuid_arg("kb-id").required(true))
            .arg(Arg::new("query").required(true))
            .arg(
                Arg::new("limit")
                    .long("limit")
                    .value_parser(clap::value_parser!(u32)),
            )
            .arg(
                Arg::new("score-threshold")
                    .long("score-threshold")
                    .value_parser(clap::value_parser!(f64)),
            )
            .arg(flag("json", "Print the response JSON")),
        Command::new("query")
            .about("Ask a knowledge base: a model's answer citing numbered sources")
            .arg(uuid_arg("kb-id").required(true))
            .arg(Arg::new("question").required(true))
            .arg(uuid_arg("model-id"))
            .arg(
                Arg::new("limit")
                    .long("limit")
                    .value_parser(clap::value_parser!(u32)),
            )
            .arg(flag(
                "no-stream",
                "Wait for the whole answer and print it as JSON",
            )),
    ]
}

pub(crate) async fn run(client: &Client, name: &str, m: &ArgMatches) -> Result<()> {
    match name {
        "create" => create(client, m).await,
        "search" => search(client, m).await,
        "query" => query(client, m).await,
        other => bail!("unknown kb command {other}"),
    }
}

fn bar(len: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Prints an API error's body and fails with the usual exit code.
async fn failed(response: reqwest::Response) -> anyhow::Error {
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(body) => eprintln!(
            "error: {} {}: {}",
            status.as_u16(),
            body["error_code"].as_str().unwrap_or(""),
            body["message"].as_str().unwrap_or(&text)
        ),
        Err(_) => eprintln!("error: {status}: {text}"),
    }
    anyhow::Error::new(output::Reported)
}

/// The files of `dir` to upload, sorted by name.
fn files_of(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if !hidden && entry.file_type()?.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("{} has no files to upload", dir.display());
    }
    Ok(files)
}

async fn create(client: &Client, m: &ArgMatches) -> Result<()> {
    let org = *m.get_one::<Uuid>("org-id").context("--org-id")?;
    let id_only = m.get_flag("id-only");
    let mut file_ids = Vec::new();
    if let Some(dir) = m.get_one::<String>("from") {
        let files = files_of(std::path::Path::new(dir))?;
        let total: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
            .sum();
        let progress = bar(total, "uploading {msg} [{bar:30}] {bytes}/{total_bytes}");
        for (i, path) in files.iter().enumerate() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "upload".to_string());
            progress.set_message(format!("{name} {}/{}", i + 1, files.len()));
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let size = bytes.len() as u64;
            match client.chat_upload_file(org, None, &name, bytes).await {
                Ok(upload) => file_ids.push(upload.into_inner().id),
                Err(workspace_client::Error::ErrorResponse(e)) => {
                    progress.abandon();
                    bail!("uploading {name}: {} ({})", e.message, e.error_code);
                }
                Err(e) => {
                    progress.abandon();
                    return Err(e).with_context(|| format!("uploading {name}"));
                }
            }
            progress.inc(size);
        }
        progress.finish_and_clear();
        if !id_only {
            eprintln!("uploaded {} files ({total} bytes)", file_ids.len());
        }
    }
    let mut body = serde_json::json!({
        "name": m.get_one::<String>("name").context("--name")?,
        "description": m.get_one::<String>("description").cloned().unwrap_or_default(),
        "embedding_model": m.get_one::<String>("embedding-model").context("--embedding-model")?,
        "sources": [],
    });
    if !file_ids.is_empty() {
        body["sources"] = serde_json::json!([{"type": "file", "config": {"file_ids": file_ids}}]);
    }
    let response = client
        .client()
        .post(format!("{}/api/kb/create", client.baseurl()))
        .query(&[("org_id", org.to_string())])
        .json(&body)
        .send()
        .await
        .context("connecting")?;
    if !response.status().is_success() {
        return Err(failed(response).await);
    }
    let created: serde_json::Value = response.json().await?;
    let kb = created["id"]
        .as_str()
        .context("no id in the answer")?
        .to_string();
    if !m.get_flag("no-wait") && created["status"] == "processing" {
        let timeout = Duration::from_secs(*m.get_one::<u64>("timeout").unwrap_or(&1800));
        follow(client, &kb, timeout, id_only).await?;
    }
    if id_only {
        println!("{kb}");
    } else {
        println!("{}", serde_json::to_string_pretty(&created)?);
    }
    Ok(())
}

/// Follows `ingestion_status` until the knowledge base is ready; failed
/// documents are listed and make the exit code 1.
async fn follow(client: &Client, kb: &str, timeout: Duration, quiet: bool) -> Result<()> {
    let started = Instant::now();
    let progress = bar(0, "ingesting [{bar:30}] {pos}/{len} documents {msg}");
    loop {
        let response = client
            .client()
            .get(format!("{}/api/kb/ingestion_status", client.baseurl()))
            .query(&[("kb_id", kb)])
            .send()
            .await
            .context("connecting")?;
        if !response.status().is_success() {
            progress.abandon();
            return Err(failed(response).await);
        }
        let status: serde_json::Value = response.json().await?;
        let total = status["documents_total"].as_u64().unwrap_or(0);
        let done = status["documents_done"].as_u64().unwrap_or(0);
        let failed_docs = status["documents_failed"].as_u64().unwrap_or(0);
        progress.set_length(total);
        progress.set_position(done);
        if failed_docs > 0 {
            progress.set_message(format!("({failed_docs} failed)"));
        }
        if status["status"] == "ready" {
            progress.finish_and_clear();
            if failed_docs == 0 {
                if !quiet {
                    eprintln!("ingested {done} documents");
                }
                return Ok(());
            }
            report_failures(client, kb).await?;
            bail!("{failed_docs} of {total} documents failed (retry one with `kb retry-document`)");
        }
        if started.elapsed() > timeout {
            progress.abandon();
            bail!(
                "ingestion still running after {} s ({done}/{total} documents); follow it with \
                 `kb ingestion-status --kb-id {kb}`",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn report_failures(client: &Client, kb: &str) -> Result<()> {
    let mut page = 1;
    loop {
        let response = client
            .client()
            .get(format!("{}/api/kb/list_documents", client.baseurl()))
            .query(&[("kb_id", kb), ("page", &page.to_string()), ("limit", "100")])
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(failed(response).await);
        }
        let body: serde_json::Value = response.json().await?;
        let documents = body["documents"].as_array().cloned().unwrap_or_default();
        for d in &documents {
            if d["status"] == "failed" {
                eprintln!(
                    "failed: {} ({}): {}",
                    d["title"].as_str().unwrap_or(""),
                    d["id"].as_str().unwrap_or(""),
                    d["error"].as_str().unwrap_or("")
                );
            }
        }
        if documents.len() < 100 {
            return Ok(());
        }
        page += 1;
    }
}

async fn search(client: &Client, m: &ArgMatches) -> Result<()> {
    let kb = *m.get_one::<Uuid>("kb-id").context("--kb-id")?;
    let mut body = serde_json::json!({"query": m.get_one::<String>("query").context("QUERY")?});
    if let Some(limit) = m.get_one::<u32>("limit") {
        body["limit"] = (*limit).into();
    }
    if let Some(t) = m.get_one::<f64>("score-threshold") {
        body["score_threshold"] = (*t).into();
    }
    let response = client
        .client()
        .post(format!("{}/api/kb/search", client.baseurl()))
        .query(&[("kb_id", kb.to_string())])
        .json(&body)
        .send()
        .await
        .context("connecting")?;
    if !response.status().is_success() {
        return Err(failed(response).await);
    }
    let found: serde_json::Value = response.json().await?;
    if m.get_flag("json") {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(());
    }
    let results = found["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        eprintln!("no results");
    }
    for (i, r) in results.iter().enumerate() {
        let first_line = r["content"]
            .as_str()
            .unwrap_or("")
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_control())
            .take(100)
            .collect::<String>();
        println!(
            "{:>2}. {:.3}  {}  {}\n    {first_line}",
            i + 1,
            r["score"].as_f64().unwrap_or(0.0),
            r["metadata"]["title"].as_str().unwrap_or(""),
            r["document_id"].as_str().unwrap_or(""),
        );
    }
    Ok(())
}

async fn query(client: &Client, m: &ArgMatches) -> Result<()> {
    let kb = *m.get_one::<Uuid>("kb-id").context("--kb-id")?;
    let stream = !m.get_flag("no-stream");
    let mut body = serde_json::json!({
        "query": m.get_one::<String>("question").context("QUESTION")?,
        "stream": stream,
    });
    if let Some(model) = m.get_one::<Uuid>("model-id") {
        body["model_id"] = model.to_string().into();
    }
    if let Some(limit) = m.get_one::<u32>("limit") {
        body["limit"] = (*limit).into();
    }
    let mut response = client
        .client()
        .post(format!("{}/api/kb/query", client.baseurl()))
        .query(&[("kb_id", kb.to_string())])
        .json(&body)
        .send()
        .await
        .context("connecting")?;
    if !response.status().is_success() {
        return Err(failed(response).await);
    }
    if !stream {
        let answer: serde_json::Value = response.json().await?;
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let mut buffer = String::new();
    let mut sources = Vec::new();
    let mut stdout = std::io::stdout();
    while let Some(bytes) = response.chunk().await.context("reading the stream")? {
        buffer.push_str(&String::from_utf8_lossy(&bytes));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            for data in block.lines().filter_map(|l| l.strip_prefix("data:")) {
                let event: serde_json::Value = serde_json::from_str(data.trim())?;
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
                        if !sources.is_empty() {
                            println!("\nSources:");
                        }
                        for s in &sources {
                            println!(
                                "[{}] {} (score {:.3}){}",
                                s["index"],
                                s["title"].as_str().unwrap_or(""),
                                s["score"].as_f64().unwrap_or(0.0),
                                s["url"]
                                    .as_str()
                                    .map(|u| format!(" {u}"))
                                    .unwrap_or_default()
                            );
                        }
                        return Ok(());
                    }
                    Some("error") => {
                        println!();
                        eprintln!(
                            "error: {}: {}",
                            event["error_code"].as_str().unwrap_or("error"),
                            event["message"].as_str().unwrap_or("")
                        );
                        return Err(anyhow::Error::new(output::Reported));
                    }
                    _ => {}
                }
            }
        }
    }
    println!();
    bail!("the answer's stream ended before it was complete")
}
