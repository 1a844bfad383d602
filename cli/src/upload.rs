//! `workspace chat upload FILE`: hand-written because progenitor cannot
//! generate multipart operations (`chat_upload_file` is left out of the
//! generated client and CLI).

use crate::output;
use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Command};
use workspace_client::Client;

pub(crate) fn command() -> Command {
    Command::new("upload")
        .about("Upload a file for a chat (prints {id, message_id, filename, file_size, content_type, url})")
        .arg(
            Arg::new("org-id")
                .long("org-id")
                .required(true)
                .value_parser(clap::value_parser!(uuid::Uuid)),
        )
        .arg(
            Arg::new("chat-id")
                .long("chat-id")
                .value_parser(clap::value_parser!(uuid::Uuid)),
        )
        .arg(Arg::new("file").required(true).help("The file to upload"))
}

pub(crate) async fn run(client: &Client, m: &ArgMatches) -> Result<()> {
    use workspace_client::ClientInfo;
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let chat = m.get_one::<uuid::Uuid>("chat-id").copied();
    let path = std::path::PathBuf::from(m.get_one::<String>("file").context("FILE")?);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "upload".to_string());
    // The multipart body, streamed in 64 KiB pieces so that a progress bar
    // (stderr, on a terminal only) follows what was sent.
    let boundary = format!("workspace-{}", uuid::Uuid::new_v4().simple());
    let safe_name = name.replace(['"', '\r', '\n'], "_");
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
         filename=\"{safe_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let total = body.len() as u64;
    let progress = indicatif::ProgressBar::new(total);
    progress.set_style(
        indicatif::ProgressStyle::with_template("uploading {msg} [{bar:30}] {bytes}/{total_bytes}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.set_message(name.clone());
    let pieces: Vec<bytes::Bytes> = body
        .chunks(64 * 1024)
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    let counter = progress.clone();
    let stream = futures::stream::iter(pieces.into_iter().map(move |piece| {
        counter.inc(piece.len() as u64);
        Ok::<_, std::io::Error>(piece)
    }));
    let mut query = vec![("org_id", org.to_string())];
    if let Some(chat) = chat {
        query.push(("chat_id", chat.to_string()));
    }
    let response = client
        .client()
        .post(format!("{}/api/chat/upload_file", client.baseurl()))
        .query(&query)
        .header(
            reqwest::header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )
        .header(reqwest::header::CONTENT_LENGTH, total)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await;
    progress.finish_and_clear();
    let response = response.context("connecting to the server")?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.is_success() {
        let upload: serde_json::Value = serde_json::from_str(&text)?;
        println!("{}", serde_json::to_string_pretty(&upload)?);
        return Ok(());
    }
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(body) => eprintln!(
            "error: {} {}: {}",
            status.as_u16(),
            body["error_code"].as_str().unwrap_or(""),
            body["message"].as_str().unwrap_or(&text)
        ),
        Err(_) => eprintln!("error: {status}: {text}"),
    }
    Err(anyhow::Error::new(output::Reported))
}
