//! Organizations and accounts that end, hand-written where a person
//! expects more than the generated command:
//!
//! - `workspace org delete --org-id ID --confirm NAME [--wait]`: the
//!   organization's exact name as the confirmation; `--wait` follows the
//!   deletion (`org deletion-status`) until it is done.
//! - `workspace account export [--output FILE]`: the account's data,
//!   streamed to stdout (or FILE) as the server sends it, never held whole.
//! - `workspace account delete [--password P]`: the password as for `auth
//!   login` (flag, `WORKSPACE_PASSWORD`, a prompt, or one line of stdin);
//!   on success the profile's stored token is forgotten (it no longer
//!   works).

use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::io::{IsTerminal, Write};
use workspace_client::Client;

/// The hand-written `account` commands.
pub(crate) const HAND_WRITTEN: &[&str] = &["export", "delete"];

pub(crate) fn account_commands() -> Vec<Command> {
    vec![
        Command::new("export")
            .about("Export your data (profile, memberships, chats, conversations, uploads) as JSON")
            .long_about(
                "Export your data as one JSON document (an AccountExport): your profile, every \
                 membership, your chats with their messages, the conversations you started with \
                 theirs, and your uploads listed (not their bytes). Streamed as the server sends \
                 it: `workspace account export > me.json`.",
            )
            .arg(
                Arg::new("output")
                    .long("output")
                    .short('o')
                    .help("Write to this file instead of stdout"),
            ),
        Command::new("delete")
            .about("Delete your account (export your data first)")
            .long_about(
                "Delete your account. Refused (409 sole_owner) while you are the only owner of \
                 an organization that has other members. Your personal organization and those \
                 where you are the only member are deleted with it; you leave the others, which \
                 keep the conversations you started there. Your token stops working at once.",
            )
            .arg(Arg::new("password").long("password").help(
                "Your password (default: WORKSPACE_PASSWORD, a prompt on a terminal, else one line of stdin)",
            )),
    ]
}

pub(crate) fn org_delete_command() -> Command {
    Command::new("delete")
        .about("Delete an organization and everything it holds (owners only)")
        .long_about(
            "Delete an organization and everything it holds (owners only): it is unusable at \
             once, and a background job deletes its contents. Prints the deletion's status; \
             with --wait, waits until it is done.",
        )
        .arg(
            Arg::new("org-id")
                .long("org-id")
                .required(true)
                .value_parser(clap::value_parser!(uuid::Uuid)),
        )
        .arg(
            Arg::new("confirm")
                .long("confirm")
                .required(true)
                .value_name("NAME")
                .help("The organization's exact name"),
        )
        .arg(
            Arg::new("wait")
                .long("wait")
                .action(ArgAction::SetTrue)
                .help("Wait until the deletion is done (progress on stderr)"),
        )
}

fn reported<T: serde::Serialize + std::fmt::Debug>(e: workspace_client::Error<T>) -> anyhow::Error {
    output::report_error(&e);
    anyhow::Error::new(output::Reported)
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub(crate) async fn org_delete(client: &Client, m: &ArgMatches) -> Result<()> {
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let name = m.get_one::<String>("confirm").context("--confirm")?;
    let accepted = client
        .org_delete()
        .org_id(org)
        .body(workspace_client::types::OrgDeleteRequest::builder().confirm_name(name.clone()))
        .send()
        .await
        .map_err(reported)?
        .into_inner();
    if !m.get_flag("wait") {
        return print_json(&accepted);
    }
    use workspace_client::types::DeletionState;
    let mut last_step = String::new();
    loop {
        let status = client
            .org_deletion_status()
            .org_id(org)
            .send()
            .await
            .map_err(reported)?
            .into_inner();
        if status.step != last_step {
            eprintln!(
                "{}: {} rows, {} files deleted",
                status.step, status.rows_deleted, status.files_deleted
            );
            last_step = status.step.clone();
        }
        match status.state {
            DeletionState::Done => return print_json(&status),
            DeletionState::Failed => {
                print_json(&status)?;
                bail!(
                    "the deletion failed: {}",
                    status.last_error.as_deref().unwrap_or("no reason given")
                );
            }
            DeletionState::Queued | DeletionState::Running => {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}

/// `account export|delete`; `forget_token` is called after a deletion.
pub(crate) async fn run(
    client: &Client,
    command: &str,
    m: &ArgMatches,
    forget_token: impl FnOnce() -> Result<()>,
) -> Result<()> {
    match command {
        "export" => export(client, m).await,
        "delete" => {
            let password = password(m)?;
            let deleted = client
                .users_delete_me()
                .body(workspace_client::types::AccountDeleteRequest::builder().password(password))
                .send()
                .await
                .map_err(reported)?
                .into_inner();
            forget_token()?;
            eprintln!("account deleted; the stored token was forgotten");
            print_json(&deleted)
        }
        other => bail!("unknown command: account {other}"),
    }
}

fn password(m: &ArgMatches) -> Result<String> {
    let password = match m.get_one::<String>("password") {
        Some(p) => p.clone(),
        None if std::env::var("WORKSPACE_PASSWORD").is_ok_and(|p| !p.is_empty()) => {
            std::env::var("WORKSPACE_PASSWORD")?
        }
        None if std::io::stdin().is_terminal() => {
            rpassword::prompt_password("Password (to delete the account): ")?
        }
        None => {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    if password.is_empty() {
        bail!(
            "empty password: give --password, WORKSPACE_PASSWORD, a terminal prompt or one line of stdin"
        );
    }
    Ok(password)
}

/// Streams the export to stdout or `--output`, chunk by chunk.
async fn export(client: &Client, m: &ArgMatches) -> Result<()> {
    use workspace_client::ClientInfo;
    let url = format!("{}/api/users/me/export", client.baseurl());
    let mut response = client
        .client()
        .get(&url)
        .send()
        .await
        .with_context(|| format!("requesting {url}"))?;
    let status = response.status();
    if !status.is_success() {
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        output::report_api_error(
            status.as_u16(),
            body["error_code"].as_str().unwrap_or("error"),
            body["message"].as_str().unwrap_or(""),
        );
        return Err(anyhow::Error::new(output::Reported));
    }
    let mut out: Box<dyn Write> = match m.get_one::<String>("output") {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {path}"))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    while let Some(chunk) = response
        .chunk()
        .await
        .context("the export ended early (the document is incomplete)")?
    {
        out.write_all(&chunk)?;
    }
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}
