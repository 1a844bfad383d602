//! `workspace mcp connect SERVER_ID` and `workspace mcp playground
//! MESSAGE`: hand-written beside the generated `mcp` commands. `playground`
//! prints the reply's text on stdout as it streams, and each tool call and
//! server recommendation as a JSON line on stderr. `connect` It starts the connection (`connect_account`), prints the
//! authorization URL for the user to open in a browser, then waits for the
//! OAuth callback by polling the caller's instances until the session's
//! instance appears.
//!
//! Exit codes: 0 when the instance is `active` (printed as JSON); 1 for an
//! API error or an instance that `needs_reauth`; 3 when `--timeout` passes
//! first (a denied or failed authorization is not visible through the API:
//! the provider's error goes to the browser's frontend page, so the command
//! waits until the timeout).

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgMatches, Command};
use std::time::{Duration, Instant};
use workspace_client::Client;
use workspace_client::types::ConnectAccount;

/// The hand-written `mcp` subcommands.
pub const HAND_WRITTEN: &[&str] = &["connect", "playground"];

/// The exit code of a command that stopped waiting at `--timeout`.
pub const EXIT_TIMEOUT: i32 = 3;

pub fn commands() -> Vec<Command> {
    let uuid = || clap::value_parser!(uuid::Uuid);
    vec![
        Command::new("connect")
            .about("Connect your account to an MCP server: print the authorization URL, wait for the callback")
            .long_about(
                "Connect your account to an MCP server of the catalog (`mcp list-servers`).\n\n\
                 Starts the connection (`POST /api/mcp/connect_account`). For an OAuth server, \
                 prints the authorization URL on stdout (and a hint on stderr): open it in a \
                 browser and approve; the provider sends the browser back to this service, \
                 which creates the instance. Meanwhile the command polls your instances until \
                 the session's instance appears, then prints it as JSON (id, name, server_id, \
                 session_id, status). A server without authentication is connected at once.\n\n\
                 Exit codes: 0 connected (`active`); 1 an API error or an instance that needs \
                 a new authorization (`needs_reauth`); 3 --timeout passed without a callback \
                 (a denied authorization is only shown in the browser, so it also ends here).",
            )
            .arg(
                Arg::new("server-id")
                    .required(true)
                    .value_name("SERVER_ID")
                    .value_parser(uuid())
                    .help("The MCP server (an id of `mcp list-servers`)"),
            )
            .arg(
                Arg::new("org-id")
                    .long("org-id")
                    .required(true)
                    .value_parser(uuid())
                    .help("The organization"),
            )
            .arg(
                Arg::new("flow-type")
                    .long("flow-type")
                    .help("Where the flow started (e.g. `chat`, `settings`), handed back to the frontend"),
            )
            .arg(
                Arg::new("timeout")
                    .long("timeout")
                    .value_parser(clap::value_parser!(u64).range(1..))
                    .default_value("300")
                    .value_name("SECONDS")
                    .help("Stop waiting for the callback after this many seconds (exit code 3)"),
            )
            .arg(
                Arg::new("interval")
                    .long("interval")
                    .value_parser(clap::value_parser!(u64).range(1..=60))
                    .default_value("2")
                    .value_name("SECONDS")
                    .help("Seconds between two looks at the instances"),
            ),
        playground_command(),
    ]
}

/// `workspace mcp playground`.
fn playground_command() -> Command {
    Command::new("playground")
        .about("Chat with MCP tools: print the streamed reply; tool calls go to stderr as JSON lines")
        .arg(
            Arg::new("org-id")
                .long("org-id")
                .value_parser(clap::value_parser!(uuid::Uuid))
                .help("The organization (default: your personal one)"),
        )
        .arg(
            Arg::new("instance")
                .long("instance")
                .action(clap::ArgAction::Append)
                .value_parser(clap::value_parser!(uuid::Uuid))
                .help("An MCP instance of yours whose tools the model may call (repeatable; none: the service picks servers)"),
        )
        .arg(
            Arg::new("model")
                .long("model")
                .help("The model's name (default: the service's playground model)"),
        )
        .arg(
            Arg::new("message")
                .help("The message (default: standard input, less one trailing newline)"),
        )
}

async fn playground(client: &Client, m: &ArgMatches) -> Result<()> {
    use std::io::Write;
    use workspace_client::ClientInfo;
    let content = match m.get_one::<String>("message") {
        Some(text) => text.clone(),
        None => crate::read_stdin_message()?,
    };
    let mut body = serde_json::json!({ "content": content });
    let instances: Vec<String> = m
        .get_many::<uuid::Uuid>("instance")
        .into_iter()
        .flatten()
        .map(|id| id.to_string())
        .collect();
    if !instances.is_empty() {
        body["mcp_instance_ids"] = instances.into();
    }
    if let Some(model) = m.get_one::<String>("model") {
        body["model"] = model.clone().into();
    }
    let mut request = client
        .client()
        .post(format!("{}/api/mcp_playground/chat", client.baseurl()))
        .json(&body);
    if let Some(org) = m.get_one::<uuid::Uuid>("org-id") {
        request = request.query(&[("org_id", org.to_string())]);
    }
    let response = request.send().await.context("connecting")?;
    if !response.status().is_success() {
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        output::report_api_error(
            status.as_u16(),
            body["error_code"].as_str().unwrap_or("error"),
            body["message"].as_str().unwrap_or(""),
        );
        return Err(reported());
    }
    let mut events = workspace_client::sse::SseReader::from_response(response);
    let mut stdout = std::io::stdout();
    while let Some(event) = events.next().await {
        let item: serde_json::Value = event.context("reading the stream")?.json()?;
        if let Some(error) = item["error"].as_str() {
            println!();
            eprintln!("error: {error}");
            return Err(reported());
        }
        let tool = item.get("tool").is_some_and(|t| !t.is_null());
        if tool || item.get("mcp").is_some() {
            eprintln!("{item}");
        }
        match item["message"].as_str() {
            Some("DONE") => {
                println!();
                return Ok(());
            }
            Some(text) => {
                print!("{text}");
                stdout.flush()?;
            }
            None => {}
        }
    }
    println!();
    bail!("the stream ended before the reply was complete")
}

pub async fn run(client: &Client, name: &str, m: &ArgMatches) -> Result<()> {
    match name {
        "connect" => connect(client, m).await,
        "playground" => playground(client, m).await,
        other => bail!("unknown mcp command {other}"),
    }
}

fn reported() -> anyhow::Error {
    anyhow::Error::new(output::Reported)
}

/// Ends the process with `code` after the message was printed.
#[derive(Debug)]
pub struct ExitWith(pub i32);

impl std::fmt::Display for ExitWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit code {}", self.0)
    }
}

impl std::error::Error for ExitWith {}

async fn connect(client: &Client, m: &ArgMatches) -> Result<()> {
    let server = *m.get_one::<uuid::Uuid>("server-id").context("SERVER_ID")?;
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let flow_type = m
        .get_one::<String>("flow-type")
        .map(|f| f.parse::<workspace_client::types::ConnectAccountFlowType>())
        .transpose()
        .map_err(|e| anyhow::anyhow!("--flow-type: {e}"))?;
    let timeout = Duration::from_secs(*m.get_one::<u64>("timeout").context("--timeout")?);
    let interval = Duration::from_secs(*m.get_one::<u64>("interval").context("--interval")?);

    let start = client
        .mcp_connect_account()
        .org_id(org)
        .body(
            ConnectAccount::builder()
                .server_id(server)
                .flow_type(flow_type),
        )
        .send()
        .await
        .map_err(|e| {
            output::report_error(&e);
            reported()
        })?
        .into_inner();
    let session: uuid::Uuid = start
        .id
        .parse()
        .context("the session id of the answer is not a UUID")?;
    if start.status != "active" {
        println!("{}", start.redirect_url);
        eprintln!(
            "Open the URL above in a browser and approve the access; waiting for the callback \
             (up to {} s)...",
            timeout.as_secs()
        );
    }
    let deadline = Instant::now() + timeout;
    loop {
        let instances = client
            .mcp_list_instances()
            .org_id(org)
            .server_id(server)
            .send()
            .await
            .map_err(|e| {
                output::report_error(&e);
                reported()
            })?
            .into_inner()
            .instances;
        if let Some(instance) = instances.into_iter().find(|i| i.session_id == session) {
            match instance.status.as_str() {
                "active" => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&instance).context("encoding the instance")?
                    );
                    return Ok(());
                }
                other => {
                    eprintln!(
                        "error: the instance {} is {other}: run `workspace mcp connect` again",
                        instance.id
                    );
                    return Err(reported());
                }
            }
        }
        let now = Instant::now();
        if now >= deadline {
            eprintln!(
                "error: no callback within {} s (the authorization was not completed, or was \
                 denied): run the command again",
                timeout.as_secs()
            );
            return Err(anyhow::Error::new(ExitWith(EXIT_TIMEOUT)));
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
    }
}
