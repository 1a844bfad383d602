//! `workspace deployments invoke|models`: talks to a deployed agent through
//! its OpenAI-compatible surface with the deployment's key (not the
//! profile's token), streaming the answer, or lists the model it answers as.

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgMatches, Command};

fn key_arg() -> Arg {
    Arg::new("key")
        .long("key")
        .env("WORKSPACE_DEPLOYMENT_KEY")
        .required(true)
        .hide_env_values(true)
        .help("The deployment's key (wsk_live_…); also WORKSPACE_DEPLOYMENT_KEY")
}

pub fn command() -> Command {
    Command::new("invoke")
        .about("Send a message to a deployed agent with its key and print the streamed answer")
        .arg(key_arg())
        .arg(
            Arg::new("message")
                .long("message")
                .help("The message (default: standard input, without its trailing newline)"),
        )
        .arg(
            Arg::new("no-stream")
                .long("no-stream")
                .action(clap::ArgAction::SetTrue)
                .help("Wait for the whole answer and print the chat.completion JSON"),
        )
}

/// `workspace deployments models`.
pub fn models_command() -> Command {
    Command::new("models")
        .about("List the model a deployment answers as (GET /v1/models, with its key)")
        .arg(key_arg())
}

/// Prints the deployment's OpenAI-compatible model list as JSON.
pub async fn models(url: &str, m: &ArgMatches) -> Result<()> {
    let key = m.get_one::<String>("key").context("--key")?;
    let response = reqwest::Client::new()
        .get(format!(
            "{}/api/agent_deploy/v1/models",
            url.trim_end_matches('/')
        ))
        .bearer_auth(key)
        .send()
        .await
        .map_err(|e| {
            output::report_unreachable(url, &e);
            anyhow::Error::new(output::Reported)
        })?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        bail!(
            "{status}: {}: {}",
            body["error"]["code"].as_str().unwrap_or("error"),
            body["error"]["message"].as_str().unwrap_or("")
        );
    }
    println!("{}", serde_json::to_string_pretty(&body)?);
    Ok(())
}

pub async fn run(url: &str, m: &ArgMatches) -> Result<()> {
    use std::io::Write;
    let key = m.get_one::<String>("key").context("--key")?;
    let message = match m.get_one::<String>("message") {
        Some(text) => text.clone(),
        None => crate::read_stdin_message()?,
    };
    if message.trim().is_empty() {
        bail!("the message is empty (give --message or standard input)");
    }
    let stream = !m.get_flag("no-stream");
    let response = reqwest::Client::new()
        .post(format!(
            "{}/api/agent_deploy/v1/chat/completions",
            url.trim_end_matches('/')
        ))
        .bearer_auth(key)
        .json(&serde_json::json!({
            "messages": [{"role": "user", "content": message}],
            "stream": stream,
        }))
        .send()
        .await
        .map_err(|e| {
            output::report_unreachable(url, &e);
            anyhow::Error::new(output::Reported)
        })?;
    if !response.status().is_success() {
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        bail!(
            "{status}: {}: {}",
            body["error"]["code"].as_str().unwrap_or("error"),
            body["error"]["message"].as_str().unwrap_or("")
        );
    }
    if !stream {
        let body: serde_json::Value = response.json().await?;
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    let mut events = workspace_client::sse::SseReader::from_response(response);
    let mut stdout = std::io::stdout();
    while let Some(event) = events.next().await {
        let event = event.context("reading the stream")?;
        if event.data.trim() == "[DONE]" {
            println!();
            return Ok(());
        }
        let chunk: serde_json::Value = event.json()?;
        if let Some(error) = chunk.get("error") {
            println!();
            bail!(
                "{}: {}",
                error["code"].as_str().unwrap_or("error"),
                error["message"].as_str().unwrap_or("")
            );
        }
        if let Some(text) = chunk["choices"][0]["delta"]["content"].as_str() {
            print!("{text}");
            stdout.flush()?;
        }
    }
    println!();
    bail!("the stream ended before the answer was complete")
}
