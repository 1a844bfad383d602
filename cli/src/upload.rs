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
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let chat = m.get_one::<uuid::Uuid>("chat-id").copied();
    let path = std::path::PathBuf::from(m.get_one::<String>("file").context("FILE")?);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "upload".to_string());
    let progress = progress_bar(bytes.len() as u64, &name);
    let len = bytes.len() as u64;
    let result = client.chat_upload_file(org, chat, &name, bytes).await;
    match result {
        Ok(upload) => {
            progress.set_position(len);
            progress.finish();
            println!("{}", serde_json::to_string_pretty(&upload.into_inner())?);
            Ok(())
        }
        Err(e) => {
            progress.abandon();
            output::report_error(&e);
            Err(anyhow::Error::new(output::Reported))
        }
    }
}

/// A bytes bar on stderr while the file is sent (the whole file is one
/// request, so it fills when the server has it); hidden unless stderr is a
/// terminal.
fn progress_bar(len: u64, name: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "uploading {msg} {spinner} [{bar:30}] {bytes}/{total_bytes} {elapsed}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(name.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}
