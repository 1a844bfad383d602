//! `workspace files download LINK`: an uploaded file's bytes through the
//! signed link `chat upload` (and `chat show`'s uploads) hand out. The
//! signature in the link is the credential, so no token is sent with it:
//! a presigned object-store link points at another host, which must never
//! see the profile's token.

use anyhow::{Context, Result, bail};
use clap::{Arg, ArgMatches, Command};
use std::io::Write;
use workspace_client::{Client, ClientInfo};

pub fn download_command() -> Command {
    Command::new("download")
        .about("Download an uploaded file through its signed link (stdout, or --output FILE)")
        .arg(Arg::new("link").required(true).value_name("LINK").help(
            "The file's signed link (the `url` of an upload), absolute or a path on this server",
        ))
        .arg(
            Arg::new("output")
                .long("output")
                .short('o')
                .value_name("FILE")
                .help("Write the bytes to FILE (created or replaced) instead of stdout"),
        )
}

pub async fn download(client: &Client, m: &ArgMatches) -> Result<()> {
    let link = m.get_one::<String>("link").context("LINK")?;
    let url = if link.starts_with('/') {
        format!("{}{link}", client.baseurl().trim_end_matches('/'))
    } else {
        link.clone()
    };
    // A client of its own: the API client sends the profile's token.
    let mut response = reqwest::Client::new()
        .get(&url)
        .send()
        .await
        .context("connecting")?;
    if !response.status().is_success() {
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        bail!(
            "{status}: {}: {}",
            body["error_code"].as_str().unwrap_or("error"),
            body["message"].as_str().unwrap_or("")
        );
    }
    let mut out: Box<dyn Write> = match m.get_one::<String>("output") {
        Some(path) => {
            Box::new(std::fs::File::create(path).with_context(|| format!("creating {path}"))?)
        }
        None => Box::new(std::io::stdout()),
    };
    while let Some(chunk) = response.chunk().await.context("reading the file")? {
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(())
}
