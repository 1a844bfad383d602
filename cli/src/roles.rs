//! `--role NAME|ID` on the commands that give a role (`invitations create`,
//! `users invite`, `org service-accounts-create`): one flag name for all
//! (the generated ones are `--role-id` and `--role`; `--role-id` stays as
//! an alias), and a role's name (`member`) as well as its id. A name is
//! looked up in the organization's roles (`roles list-roles`) before the
//! request is sent. `org service-accounts-create` also takes its scopes as
//! repeated `--scope` flags, so it needs no JSON file.

use crate::generated_cli::{CliCommand, CliConfig};
use anyhow::{Context, Result, bail};
use clap::{ArgMatches, Command};
use workspace_client::Client;

/// The commands whose role argument is widened, and that argument's id in
/// the generated command.
fn role_arg(cmd: CliCommand) -> Option<&'static str> {
    match cmd {
        CliCommand::InvitationsCreate => Some("role-id"),
        CliCommand::UsersInvite => Some("role"),
        CliCommand::OrgServiceAccountsCreate => Some("role-id"),
        _ => None,
    }
}

const HELP: &str = "A role of the organization: its name (e.g. member, admin) or id";

/// The generated command with its role argument read as text, under
/// `--role` with the alias `--role-id`.
pub fn widen(cmd: CliCommand, leaf: Command) -> Command {
    let Some(id) = role_arg(cmd) else {
        return leaf;
    };
    let leaf = leaf.mut_arg(id, |a| {
        a.long("role")
            .alias("role-id")
            .value_name("ROLE")
            .value_parser(clap::builder::NonEmptyStringValueParser::new())
            .help(HELP)
    });
    if !matches!(cmd, CliCommand::OrgServiceAccountsCreate) {
        return leaf;
    }
    leaf.arg(
        clap::Arg::new("scope")
            .long("scope")
            .action(clap::ArgAction::Append)
            .value_name("SCOPE")
            .value_parser(clap::builder::NonEmptyStringValueParser::new())
            .help("A scope of its first token: a permission name or wildcard (`kb:*`); repeatable"),
    )
    .mut_arg("json-body", |a| {
        a.required(false).required_unless_present("scope")
    })
}

/// Whether `cmd` is one of the widened commands (run by [`run`], not by the
/// generated code, which would read the argument as a UUID).
pub fn handles(cmd: CliCommand) -> bool {
    role_arg(cmd).is_some()
}

/// The id of the role `role` (an id, or the name of one of `org`'s roles).
pub async fn resolve(client: &Client, org: uuid::Uuid, role: &str) -> Result<uuid::Uuid> {
    if let Ok(id) = role.parse::<uuid::Uuid>() {
        return Ok(id);
    }
    let roles = match client.roles_list_roles().org_id(org).send().await {
        Ok(r) => r.into_inner(),
        Err(e) => {
            crate::output::report_error(&e);
            return Err(anyhow::Error::new(crate::output::Reported));
        }
    };
    let found: Vec<_> = roles
        .iter()
        .filter(|r| r.name.eq_ignore_ascii_case(role))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.id),
        [] => {
            let names: Vec<&str> = roles.iter().map(|r| r.name.as_str()).collect();
            bail!(
                "the organization has no role named {role:?}; its roles: {}",
                names.join(", ")
            )
        }
        _ => bail!("several roles are named {role:?}: give the role's id"),
    }
}

fn json_body<T: serde::de::DeserializeOwned>(m: &ArgMatches) -> Result<Option<T>> {
    let Some(path) = m.get_one::<std::path::PathBuf>("json-body") else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read {}", path.display()))?;
    let body = serde_json::from_str(&text)
        .with_context(|| format!("failed to parse {}", path.display()))?;
    Ok(Some(body))
}

/// Runs a widened command: the generated command's arguments, with the
/// role resolved first.
pub async fn run<C: CliConfig>(
    client: &Client,
    config: &C,
    cmd: CliCommand,
    m: &ArgMatches,
) -> Result<()> {
    use workspace_client::types;
    let org = *m.get_one::<uuid::Uuid>("org-id").context("--org-id")?;
    let role = match role_arg(cmd).and_then(|id| m.get_one::<String>(id)) {
        Some(role) => Some(resolve(client, org, role).await?),
        None => None,
    };
    match cmd {
        CliCommand::InvitationsCreate => {
            let mut request = client.invitations_create().org_id(org);
            if let Some(body) = json_body::<types::InvitationCreateRequest>(m)? {
                request = request.body(body);
            }
            if let Some(v) = m
                .get_one::<types::InvitationCreateRequestEmail>("email")
                .cloned()
            {
                request = request.body_map(|b| b.email(v));
            }
            if let Some(v) = m
                .get_one::<types::InvitationCreateRequestMessage>("message")
                .cloned()
            {
                request = request.body_map(|b| b.message(v));
            }
            if let Some(v) = role {
                request = request.body_map(|b| b.role_id(v));
            }
            finish(config, request.send().await)
        }
        CliCommand::UsersInvite => {
            let mut request = client.users_invite().org_id(org);
            if let Some(body) = json_body::<types::UserInviteRequest>(m)? {
                request = request.body(body);
            }
            if let Some(v) = m.get_one::<types::UserInviteRequestEmail>("email").cloned() {
                request = request.body_map(|b| b.email(v));
            }
            if let Some(v) = m
                .get_one::<types::UserInviteRequestFirstName>("first-name")
                .cloned()
            {
                request = request.body_map(|b| b.first_name(v));
            }
            if let Some(v) = m
                .get_one::<types::UserInviteRequestLastName>("last-name")
                .cloned()
            {
                request = request.body_map(|b| b.last_name(v));
            }
            if let Some(v) = role {
                request = request.body_map(|b| b.role(v));
            }
            finish(config, request.send().await)
        }
        CliCommand::OrgServiceAccountsCreate => {
            let mut request = client.org_service_accounts_create().org_id(org);
            if let Some(body) = json_body::<types::ServiceAccountCreate>(m)? {
                request = request.body(body);
            }
            if let Some(v) = m
                .get_one::<types::ServiceAccountCreateName>("name")
                .cloned()
            {
                request = request.body_map(|b| b.name(v));
            }
            if let Some(v) = m
                .get_one::<std::num::NonZeroU32>("expires-in-days")
                .copied()
            {
                request = request.body_map(|b| b.expires_in_days(v));
            }
            if let Some(v) = role {
                request = request.body_map(|b| b.role_id(v));
            }
            let scopes: Vec<String> = m
                .get_many::<String>("scope")
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            if !scopes.is_empty() {
                request = request.body_map(|b| b.scopes(scopes));
            }
            finish(config, request.send().await)
        }
        _ => bail!("not a command with a role argument"),
    }
}

fn finish<C: CliConfig, T>(
    config: &C,
    result: Result<
        workspace_client::ResponseValue<T>,
        workspace_client::Error<workspace_client::types::Error>,
    >,
) -> Result<()>
where
    T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
{
    match result {
        Ok(r) => {
            config.success_item(&r);
            Ok(())
        }
        Err(e) => {
            config.error(&e);
            Err(anyhow::Error::new(e))
        }
    }
}
