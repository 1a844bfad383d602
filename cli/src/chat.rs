//! Hand-written `chat` commands: `send`, `edit`, `regenerate`, `resume`
//! and `prompt` (streams), `rename`, `archive`, `pin` and `unpin` (shortcuts of
//! `update`), `search QUERY` (a readable table), `transcribe FILE`
//! (multipart), `watch` (the WebSocket) and `share` (prints a new share
//! link). The other `chat` commands are generated (`shares`,
//! `share-revoke`, `shared`, `chat folders ...` among them).

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::io::Write;
use uuid::Uuid;
use workspace_client::{Client, ClientInfo};

fn org_arg() -> Arg {
    Arg::new("org-id")
        .long("org-id")
        .required(true)
        .value_parser(clap::value_parser!(Uuid))
}

fn uuid_arg(name: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_parser(clap::value_parser!(Uuid))
}

fn kb_arg() -> Arg {
    Arg::new("kb")
        .long("kb")
        .action(ArgAction::Append)
        .value_parser(clap::value_parser!(Uuid))
        .help("A knowledge base to retrieve from (repeatable)")
}

pub(crate) fn commands() -> Vec<Command> {
    vec![
        Command::new("send")
            .about(
                "Send a message and print the streamed answer (a new chat without --chat-id); \
                 chat and message ids go to stderr",
            )
            .arg(org_arg())
            .arg(uuid_arg("chat-id"))
            .arg(uuid_arg("model-id"))
            .arg(uuid_arg("agent-id"))
            .arg(kb_arg())
            .args(reasoning_args())
            .arg(
                Arg::new("file")
                    .long("file")
                    .action(ArgAction::Append)
                    .help(
                        "A file to upload and send with the message (repeatable): images and \
                         PDFs reach a model that takes them as such, other files as text",
                    ),
            )
            .arg(
                Arg::new("message")
                    .help("The message (default: standard input, less one trailing newline)"),
            ),
        Command::new("edit")
            .about(
                "Edit a question: a new version of it (a branch), answered and printed like \
                 `send`; the earlier version stays (`chat switch-branch`)",
            )
            .arg(org_arg())
            .arg(uuid_arg("message-id").required(true))
            .arg(uuid_arg("model-id"))
            .arg(uuid_arg("agent-id"))
            .arg(kb_arg())
            .args(reasoning_args())
            .arg(
                Arg::new("message")
                    .help("The new text (default: standard input, less one trailing newline)"),
            ),
        Command::new("regenerate")
            .about(
                "Answer a question again (a sibling of the given answer), printed like `send`; \
                 the earlier answers stay (`chat switch-branch`)",
            )
            .arg(org_arg())
            .arg(uuid_arg("message-id").required(true))
            .arg(uuid_arg("model-id"))
            .arg(uuid_arg("agent-id"))
            .arg(kb_arg())
            .args(reasoning_args()),
        Command::new("resume")
            .about("Resume an answer's stream after the given event number")
            .arg(org_arg())
            .arg(uuid_arg("message-id").required(true))
            .arg(
                Arg::new("last-event-id")
                    .long("last-event-id")
                    .value_parser(clap::value_parser!(u32)),
            ),
        Command::new("rename")
            .about("Rename a chat")
            .arg(org_arg())
            .arg(uuid_arg("chat-id").required(true))
            .arg(Arg::new("title").required(true)),
        Command::new("archive")
            .about("Archive a chat")
            .arg(org_arg())
            .arg(uuid_arg("chat-id").required(true)),
        Command::new("pin")
            .about("Pin a chat (pinned chats come first in `chat list`)")
            .arg(org_arg())
            .arg(uuid_arg("chat-id").required(true)),
        Command::new("unpin")
            .about("Unpin a chat")
            .arg(org_arg())
            .arg(uuid_arg("chat-id").required(true)),
        Command::new("search")
            .about(
                "Search your chats (titles and messages) and print a table of the chats found, \
                 best first, each with its best matching message; `--format json` prints the page",
            )
            .arg(org_arg())
            .arg(
                Arg::new("query")
                    .required(true)
                    .help("What to look for: words (\"a phrase\", or, -word) or any part of a text"),
            )
            .arg(
                Arg::new("limit")
                    .long("limit")
                    .value_parser(clap::value_parser!(u32).range(1..=50))
                    .help("Results per page, 1 to 50 (default 20)"),
            )
            .arg(
                Arg::new("cursor")
                    .long("cursor")
                    .help("Continue after a page: its `next` cursor (printed under the table)"),
            )
            .arg(
                Arg::new("status")
                    .long("status")
                    .value_parser(["ACTIVE", "ARCHIVED", "DELETED"])
                    .help("Only chats in this state (default: active and archived)"),
            )
            .arg(uuid_arg("folder-id").help("Only the chats in this folder")),
        Command::new("transcribe")
            .about("Transcribe an audio file (MP3, WAV, M4A, OGG, FLAC, WebM); prints {text, language}")
            .arg(org_arg())
            .arg(Arg::new("language").long("language").help("e.g. en-US"))
            .arg(Arg::new("file").required(true)),
        Command::new("share")
            .about(
                "Make a read-only share link of a chat (a snapshot of its active path) and print \
                 its URL; the link is shown only now (revoke it with `chat share-revoke`)",
            )
            .arg(org_arg())
            .arg(uuid_arg("chat-id").required(true))
            .arg(
                Arg::new("json")
                    .long("json")
                    .action(ArgAction::SetTrue)
                    .help("Print the whole answer (id, token, path, url, ...) as JSON instead"),
            ),
        Command::new("watch")
            .about(
                "Print the live notices of your chats (titles, finished answers) as JSON lines; \
                 http:// servers only",
            )
            .arg(org_arg()),
        Command::new("prompt")
            .about("Suggest three prompts from a text (streamed, one per line; nothing is stored)")
            .arg(org_arg())
            .arg(uuid_arg("model-id").help("The model that suggests (default: the chat default)"))
            .arg(
                Arg::new("text")
                    .help("The text to suggest from (default: standard input, less one trailing newline)"),
            ),
    ]
}

fn reported<T>(e: workspace_client::Error<T>) -> anyhow::Error
where
    T: std::fmt::Debug + serde::Serialize,
{
    output::report_error(&e);
    anyhow::Error::new(output::Reported)
}

pub(crate) async fn run(client: &Client, name: &str, m: &ArgMatches) -> Result<()> {
    let org = *m.get_one::<Uuid>("org-id").context("--org-id")?;
    match name {
        "send" => send(client, org, m).await,
        "edit" | "regenerate" => {
            let message = *m.get_one::<Uuid>("message-id").context("--message-id")?;
            let mut body = serde_json::json!({"message_id": message});
            if name == "edit" {
                body["content"] = match m.get_one::<String>("message") {
                    Some(text) => text.clone(),
                    None => crate::read_stdin_message()?,
                }
                .into();
            }
            add_answer_options(&mut body, m);
            let path = if name == "edit" {
                "edit_message"
            } else {
                "regenerate"
            };
            post_stream(client, org, path, &body).await
        }
        "prompt" => {
            let text = match m.get_one::<String>("text") {
                Some(text) => text.clone(),
                None => crate::read_stdin_message()?,
            };
            let mut body = serde_json::json!({ "text": text });
            if let Some(model) = m.get_one::<Uuid>("model-id") {
                body["model_id"] = model.to_string().into();
            }
            post_stream(client, org, "prompt", &body).await
        }
        "resume" => resume(client, "chat", m).await,
        "rename" | "archive" | "pin" | "unpin" => {
            let chat = *m.get_one::<Uuid>("chat-id").context("--chat-id")?;
            let body = match name {
                "rename" => {
                    serde_json::json!({"title": m.get_one::<String>("title").context("TITLE")?})
                }
                "archive" => serde_json::json!({"status": "ARCHIVED"}),
                _ => serde_json::json!({"pinned": name == "pin"}),
            };
            let response = client
                .client()
                .put(format!("{}/api/chat", client.baseurl()))
                .query(&[("org_id", org.to_string()), ("chat_id", chat.to_string())])
                .json(&body)
                .send()
                .await
                .context("connecting")?;
            print_json_answer(response).await
        }
        "search" => search(client, org, m).await,
        "transcribe" => transcribe(client, org, m).await,
        "watch" => watch(client, org).await,
        "share" => share(client, org, m).await,
        other => bail!("unknown chat command {other}"),
    }
}

/// `chat share`: the link's URL on stdout (the only time it is shown),
/// its id and how to revoke it on stderr.
async fn share(client: &Client, org: Uuid, m: &ArgMatches) -> Result<()> {
    let chat = *m.get_one::<Uuid>("chat-id").context("--chat-id")?;
    let created = client
        .chat_share_create()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .map_err(reported)?
        .into_inner();
    if m.get_flag("json") {
        println!("{}", serde_json::to_string_pretty(&created)?);
    } else {
        println!("{}", created.url);
    }
    eprintln!(
        "share link {} ({} messages): anyone with the link reads this snapshot; it is shown \
         only now. Revoke it with `workspace chat share-revoke --org-id {org} --share-id {}`",
        created.id, created.message_count, created.id
    );
    Ok(())
}

async fn search(client: &Client, org: Uuid, m: &ArgMatches) -> Result<()> {
    use workspace_client::types::ChatStatus;
    let mut request = client
        .chat_search()
        .org_id(org)
        .q(m.get_one::<String>("query").context("QUERY")?.as_str());
    if let Some(limit) = m.get_one::<u32>("limit") {
        request = request.limit(*limit);
    }
    if let Some(cursor) = m.get_one::<String>("cursor") {
        request = request.cursor(cursor.as_str());
    }
    if let Some(status) = m.get_one::<String>("status") {
        request = request.status(match status.as_str() {
            "ARCHIVED" => ChatStatus::Archived,
            "DELETED" => ChatStatus::Deleted,
            _ => ChatStatus::Active,
        });
    }
    if let Some(folder) = m.get_one::<Uuid>("folder-id") {
        request = request.folder_id(*folder);
    }
    let page = request.send().await.map_err(reported)?.into_inner();
    let page = serde_json::to_value(&page)?;
    // JSON when asked for by name (`--format json` or WORKSPACE_FORMAT);
    // a table otherwise.
    let json_asked = m.get_one::<String>("format").map(String::as_str) == Some("json")
        && m.value_source("format") != Some(clap::parser::ValueSource::DefaultValue);
    if json_asked {
        println!("{}", serde_json::to_string_pretty(&page)?);
    } else {
        print!("{}", render_search(&page));
    }
    Ok(())
}

/// The snippet of a search result for a terminal: the HTML's entities
/// decoded, matches in `[` `]`.
fn snippet_text(html: &str) -> String {
    html.replace("<mark>", "[")
        .replace("</mark>", "]")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A search page as a table: chat, where it matched, title, snippet; the
/// cursor of the next page under it.
fn render_search(page: &serde_json::Value) -> String {
    let results = page["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        return "no chats found\n".to_string();
    }
    let mut lines = vec![[
        "CHAT".to_string(),
        "MATCH".to_string(),
        "TITLE".to_string(),
        "SNIPPET".to_string(),
    ]];
    for r in &results {
        let matched = match (r["title_match"].as_bool(), r["role"].as_str()) {
            (Some(true), _) => "title".to_string(),
            (_, Some(role)) => role.to_lowercase(),
            _ => "-".to_string(),
        };
        lines.push([
            r["chat_id"].as_str().unwrap_or("-").to_string(),
            matched,
            output::escape_cell(r["title"].as_str().unwrap_or("")),
            output::escape_cell(&snippet_text(r["snippet"].as_str().unwrap_or(""))),
        ]);
    }
    let widths: Vec<usize> = (0..3)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in &lines {
        for (cell, width) in line.iter().zip(&widths) {
            out.push_str(&format!("{cell:<width$}  "));
        }
        out.push_str(&line[3]);
        out.push('\n');
    }
    if let Some(next) = page["next_cursor"].as_str() {
        out.push_str(&format!("next: --cursor {next}\n"));
    }
    out
}

async fn send(client: &Client, org: Uuid, m: &ArgMatches) -> Result<()> {
    let chat = m.get_one::<Uuid>("chat-id").copied();
    let message = match m.get_one::<String>("message") {
        Some(text) => text.clone(),
        None => crate::read_stdin_message()?,
    };
    let mut uploads = Vec::new();
    for path in m.get_many::<String>("file").into_iter().flatten() {
        let path = std::path::PathBuf::from(path);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "upload".to_string());
        let upload = client
            .chat_upload_file(org, chat, &name, bytes)
            .await
            .map_err(reported)?;
        uploads.push(upload.into_inner().id);
    }
    let mut body = serde_json::json!({"content": message});
    if let Some(c) = chat {
        body["chat_id"] = c.to_string().into();
    }
    add_answer_options(&mut body, m);
    if !uploads.is_empty() {
        body["upload_ids"] = serde_json::json!(uploads);
    }
    post_stream(client, org, "send_message", &body).await
}

/// `--reasoning-effort` and `--reasoning-budget`: how hard a reasoning
/// model thinks (each applies to models of its kind, see `models list`).
fn reasoning_args() -> [Arg; 2] {
    [
        Arg::new("reasoning-effort")
            .long("reasoning-effort")
            .value_parser(["minimal", "low", "medium", "high"])
            .help("Reasoning effort of a model whose `reasoning` is `effort`"),
        Arg::new("reasoning-budget")
            .long("reasoning-budget")
            .value_parser(clap::value_parser!(u32))
            .help(
                "Thinking budget in tokens (1024 or more) of a model whose `reasoning` is `budget`",
            ),
    ]
}

/// `--model-id`, `--agent-id`, `--kb` and the reasoning options into an
/// answer's request body.
fn add_answer_options(body: &mut serde_json::Value, m: &ArgMatches) {
    let mut settings = serde_json::Map::new();
    if let Some(effort) = m.try_get_one::<String>("reasoning-effort").ok().flatten() {
        settings.insert("reasoning_effort".into(), effort.clone().into());
    }
    if let Some(budget) = m.try_get_one::<u32>("reasoning-budget").ok().flatten() {
        settings.insert("reasoning_budget_tokens".into(), (*budget).into());
    }
    if !settings.is_empty() {
        body["settings"] = settings.into();
    }
    for (key, arg) in [("model_id", "model-id"), ("agent_id", "agent-id")] {
        if let Some(id) = m.get_one::<Uuid>(arg) {
            body[key] = id.to_string().into();
        }
    }
    let kbs: Vec<Uuid> = m
        .get_many::<Uuid>("kb")
        .into_iter()
        .flatten()
        .copied()
        .collect();
    if !kbs.is_empty() {
        body["knowledge_base_ids"] = serde_json::json!(kbs);
    }
}

/// Posts an answer's request to `/api/chat/<path>` and prints its stream.
/// `chat resume` and `conversation resume`: the answer `--message-id` of
/// `area` (`chat` or `conversation`) streamed again after
/// `--last-event-id` (`Last-Event-ID`), printed as it arrives.
pub(crate) async fn resume(client: &Client, area: &str, m: &ArgMatches) -> Result<()> {
    let org = *m.get_one::<Uuid>("org-id").context("--org-id")?;
    let message = *m.get_one::<Uuid>("message-id").context("--message-id")?;
    let mut request = client
        .client()
        .get(format!("{}/api/{area}/stream", client.baseurl()))
        .query(&[
            ("org_id", org.to_string()),
            ("message_id", message.to_string()),
        ]);
    if let Some(id) = m.get_one::<u32>("last-event-id") {
        request = request.header("Last-Event-ID", id.to_string());
    }
    let response = request.send().await.context("connecting")?;
    if !response.status().is_success() {
        bail!("{}: {}", response.status(), response.text().await?);
    }
    print_answer(
        workspace_client::sse::SseReader::from_response(response),
        &format!(
            "the stream ended before the answer was complete (resume it with `{area} resume`)"
        ),
    )
    .await
}

async fn post_stream(
    client: &Client,
    org: Uuid,
    path: &str,
    body: &serde_json::Value,
) -> Result<()> {
    let response = client
        .client()
        .post(format!("{}/api/chat/{path}", client.baseurl()))
        .query(&[("org_id", org.to_string())])
        .json(body)
        .send()
        .await
        .context("connecting")?;
    if !response.status().is_success() {
        bail!("{}: {}", response.status(), response.text().await?);
    }
    print_stream(response).await
}

/// Prints the `content` of a chat stream; `start`, `title` and the end go
/// to stderr. An `error` event exits 1.
async fn print_stream(response: reqwest::Response) -> Result<()> {
    print_answer(
        workspace_client::sse::SseReader::from_response(response),
        "the stream ended before the answer was complete (resume it with `chat resume`)",
    )
    .await
}

/// Prints the `content` of an answer's stream (chat or conversation) to
/// stdout; `start` (of a chat) and `title` go to stderr, and after the
/// answer its `sources` (`[n] document title (score s)`, as `kb query`).
/// A change of deployment (`route`, after the first) and a `restart` (the
/// text printed so far is void; the whole answer follows on a new line)
/// are said on stderr. An
/// `error` event prints `error: <code>: <message>` and exits 1; a stream
/// that ends before `end` fails with `cut`.
pub async fn print_answer(mut events: workspace_client::sse::SseReader, cut: &str) -> Result<()> {
    let mut stdout = std::io::stdout();
    let mut sources = Vec::new();
    // A title that arrives while the answer's line is open on stdout waits
    // for its end: on a terminal both streams share the screen, and
    // `title: …` would be glued to the answer's last words.
    let mut mid_line = false;
    let mut title = None;
    // The model's reasoning goes to stderr, as it streams, before the
    // answer's text; a line ends it.
    let mut thinking = false;
    while let Some(event) = events.next().await {
        let event: serde_json::Value = event.context("reading the stream")?.json()?;
        if thinking && event["type"].as_str() != Some("reasoning") {
            eprintln!();
            thinking = false;
        }
        match event["type"].as_str() {
            Some("reasoning") => {
                if !thinking {
                    eprint!("thinking: ");
                    thinking = true;
                }
                eprint!("{}", event["content"].as_str().unwrap_or(""));
                std::io::stderr().flush()?;
            }
            Some("start") if event["chat_id"].is_string() => eprintln!(
                "chat {} message {}",
                event["chat_id"].as_str().unwrap_or(""),
                event["message_id"].as_str().unwrap_or("")
            ),
            Some("content") => {
                let text = event["content"].as_str().unwrap_or("");
                print!("{text}");
                stdout.flush()?;
                if !text.is_empty() {
                    mid_line = !text.ends_with('\n');
                }
            }
            Some("sources") => {
                sources = event["sources"].as_array().cloned().unwrap_or_default();
            }
            // A routed model: who answers, said on stderr when it changes.
            Some("route") if event["reason"].as_str() != Some("first") => {
                if mid_line {
                    println!();
                    mid_line = false;
                }
                eprintln!(
                    "route: {} ({}) answers: {}",
                    event["model"].as_str().unwrap_or(""),
                    event["deployment"].as_str().unwrap_or(""),
                    event["reason"].as_str().unwrap_or("")
                );
            }
            // What was printed is void: the answer follows again, whole.
            Some("restart") => {
                if mid_line {
                    println!();
                    mid_line = false;
                }
                eprintln!("restart: the answer starts over; the text above is void");
            }
            Some("title") => {
                let line = format!("title: {}", event["title"].as_str().unwrap_or(""));
                if mid_line {
                    title = Some(line);
                } else {
                    eprintln!("{line}");
                }
            }
            Some("end") => {
                println!();
                if let Some(line) = title.take() {
                    eprintln!("{line}");
                }
                eprint!("{}", render_sources(&sources));
                return Ok(());
            }
            Some("error") => {
                println!();
                if let Some(line) = title.take() {
                    eprintln!("{line}");
                }
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
    println!();
    bail!("{cut}")
}

async fn transcribe(client: &Client, org: Uuid, m: &ArgMatches) -> Result<()> {
    let path = std::path::PathBuf::from(m.get_one::<String>("file").context("FILE")?);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let boundary = format!("workspace-{}", Uuid::new_v4().simple());
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut query = vec![("org_id", org.to_string())];
    if let Some(l) = m.get_one::<String>("language") {
        query.push(("language", l.clone()));
    }
    let response = client
        .client()
        .post(format!("{}/api/chat/transcribe", client.baseurl()))
        .query(&query)
        .header(
            reqwest::header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .context("connecting")?;
    print_json_answer(response).await
}

/// Prints a JSON answer, or its error (`error: CODE: MESSAGE`, exit 1).
async fn print_json_answer(response: reqwest::Response) -> Result<()> {
    let status = response.status();
    let value: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        eprintln!(
            "error: {}: {}",
            value["error_code"].as_str().unwrap_or("error"),
            value["message"].as_str().unwrap_or("")
        );
        return Err(anyhow::Error::new(output::Reported));
    }
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

async fn watch(client: &Client, org: Uuid) -> Result<()> {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let ticket = client
        .chat_ws_ticket()
        .org_id(org)
        .send()
        .await
        .map_err(reported)?
        .into_inner()
        .ticket;
    let base = client.baseurl();
    let Some(host) = base.strip_prefix("http://") else {
        bail!("chat watch supports http:// servers only (put a TLS proxy's plain side in --url)");
    };
    let host = host.trim_end_matches('/');
    let stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("connecting to {host}"))?;
    let url = format!("ws://{host}/api/chat/ws?org_id={org}&ticket={ticket}");
    let (mut ws, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .context("opening the WebSocket")?;
    let mut stdout = std::io::stdout();
    while let Some(message) = ws.next().await {
        match message.context("reading the WebSocket")? {
            Message::Text(text) => {
                writeln!(stdout, "{text}")?;
                stdout.flush()?;
            }
            Message::Close(frame) => {
                if let Some(f) = frame
                    && f.code != tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Normal
                {
                    bail!("closed by the server: {}", f.reason);
                }
                break;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The knowledge-base chunks an answer cited, named by their document's
/// title (the chunk's `metadata.title`) as `kb query` names them.
fn render_sources(sources: &[serde_json::Value]) -> String {
    let named: Vec<serde_json::Value> = sources
        .iter()
        .map(|s| {
            serde_json::json!({
                "index": s["index"],
                "title": s["metadata"]["title"],
                "url": s["metadata"]["url"],
                "score": s["score"],
            })
        })
        .collect();
    crate::kb::render_sources(&named)
}

#[cfg(test)]
mod source_tests {
    #[test]
    fn sources_are_named_by_their_document() {
        let sources = vec![serde_json::json!({
            "index": 1, "knowledge_base_id": "k", "document_id": "d", "chunk_id": "c",
            "content": "Sourdough loaves", "score": 0.75, "metadata": {"title": "bakery.txt"}
        })];
        assert_eq!(
            super::render_sources(&sources),
            "\nSources:\n[1] bakery.txt (score 0.750)\n"
        );
        assert_eq!(super::render_sources(&[]), "");
    }
}
