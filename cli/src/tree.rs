//! The curated command tree: where each generated operation sits.

use crate::generated_cli::{Cli, CliCommand};
use crate::output::JsonOutput;
use clap::{ArgMatches, Command};

/// Explicit placements; every other operation `area_action` becomes
/// `workspace area action` (underscores in the action become hyphens).
const OVERRIDES: &[(&str, &[&str])] = &[
    ("users_me", &["me"]),
    ("healthz", &["system", "health"]),
    ("readyz", &["system", "ready"]),
    // Chat area.
    ("chat_get", &["chat", "show"]),
    ("chat_delete_session", &["chat", "delete"]),
    ("chat_bulk_delete_sessions", &["chat", "bulk-delete"]),
    // Knowledge bases: `kb create|search` are hand-written (kb.rs); the
    // generated ones (any source type, filters) stay under `-raw` names.
    ("kb_create", &["kb", "create-raw"]),
    ("kb_search", &["kb", "search-raw"]),
];

/// Operations with a hand-written command instead.
const HAND_WRITTEN: &[&str] = &["auth_login"];

/// About-lines of the groups.
const GROUPS: &[(&str, &str)] = &[
    ("auth", "Sign up, log in, manage stored credentials"),
    ("system", "Service health"),
    ("users", "Users"),
    ("org", "Organizations and membership"),
    ("roles", "Roles and permissions"),
    ("invitations", "Invitations"),
    ("conversation", "Conversations and streamed chat"),
    ("models", "Language models"),
    (
        "kb",
        "Knowledge bases: sources, documents, search, RAG query",
    ),
    (
        "chat",
        "Chat sessions, streamed answers (resumable), uploads, knowledge bases usable in chat",
    ),
    ("tools", "Tool categories, tools and sandboxed test runs"),
    ("agents", "Agents and their test runs"),
    (
        "deployments",
        "Agent deployments, their keys, and invoking a deployed agent",
    ),
    (
        "mcp",
        "MCP servers, account connections, instances and gateway URLs",
    ),
];

pub fn command_path(operation_id: &str) -> Vec<String> {
    if let Some((_, path)) = OVERRIDES.iter().find(|(id, _)| *id == operation_id) {
        return path.iter().map(|s| s.to_string()).collect();
    }
    match operation_id.split_once('_') {
        Some((area, action)) => vec![area.to_string(), action.replace('_', "-")],
        None => vec![operation_id.to_string()],
    }
}

fn generated() -> impl Iterator<Item = (CliCommand, Vec<String>)> {
    CliCommand::iter()
        .filter(|c| !HAND_WRITTEN.contains(&c.operation_id()))
        .map(|c| (c, command_path(c.operation_id())))
}

fn insert(parent: Command, path: &[String], leaf: Command) -> Command {
    let (head, rest) = path.split_first().expect("non-empty command path");
    let name = head.clone();
    if rest.is_empty() {
        return parent.subcommand(leaf.name(name));
    }
    let exists = parent.get_subcommands().any(|c| c.get_name() == name);
    let parent = if exists {
        parent
    } else {
        let about = GROUPS
            .iter()
            .find(|(g, _)| *g == name)
            .map(|(_, a)| *a)
            .unwrap_or("");
        parent.subcommand(
            Command::new(name.clone())
                .about(about)
                .subcommand_required(true)
                .arg_required_else_help(true),
        )
    };
    parent.mut_subcommand(name, |group| insert(group, rest, leaf))
}

pub fn add_generated_commands(mut root: Command) -> Command {
    for (cmd, path) in generated() {
        root = insert(root, &path, Cli::<JsonOutput>::get_command(cmd));
    }
    root
}

/// `workspace conversation chat`: hand-written because the generated CLI
/// cannot stream (`conversation_stream_chat` is left out of it).
pub fn add_conversation_commands(root: Command) -> Command {
    let path = ["conversation".to_string(), "chat".to_string()];
    insert(root, &path, crate::conversation_chat_command())
}

/// `workspace chat upload FILE`: hand-written (multipart).
pub fn add_upload_command(root: Command) -> Command {
    let path = ["chat".to_string(), "upload".to_string()];
    insert(root, &path, crate::upload::command())
}

/// `workspace deployments invoke`: hand-written (a deployment key, and a
/// streamed OpenAI-compatible answer).
pub fn add_invoke_command(root: Command) -> Command {
    let path = ["deployments".to_string(), "invoke".to_string()];
    insert(root, &path, crate::invoke::command())
}

/// `workspace kb create|search|query` (see `kb.rs`).
pub fn add_kb_commands(mut root: Command) -> Command {
    for cmd in crate::kb::commands() {
        let path = ["kb".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

/// The hand-written `chat` commands (see `chat.rs`).
pub const CHAT_HAND_WRITTEN: &[&str] =
    &["send", "resume", "rename", "archive", "transcribe", "watch"];

/// `workspace chat send|resume|rename|archive|transcribe|watch`.
pub fn add_chat_commands(mut root: Command) -> Command {
    for cmd in crate::chat::commands() {
        let path = ["chat".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

/// `workspace mcp connect` (see `mcp.rs`).
pub fn add_mcp_commands(mut root: Command) -> Command {
    for cmd in crate::mcp::commands() {
        let path = ["mcp".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

pub fn add_auth_commands(mut root: Command) -> Command {
    let path = |s: &str| vec!["auth".to_string(), s.to_string()];
    root = insert(root, &path("login"), crate::auth_login_command());
    for cmd in crate::auth_other_commands() {
        let name = cmd.get_name().to_string();
        root = insert(root, &path(&name), cmd);
    }
    root
}

/// Final touches on the whole tree, after every command is placed:
/// - a command's `about` is the first line of its description (the group
///   listing shows one line each); the whole description moves to
///   `long_about` (`--help` of the command itself);
/// - progenitor's `--json-body-template` gets a real help text;
/// - `create` commands take `--id-only`/`-q`;
/// - a command named `VERB-GROUP` (`org create-org`, `roles list-roles`)
///   gets the visible alias `VERB` when that name is free in its group.
pub fn polish(root: Command) -> Command {
    polish_command(root, None)
}

fn noun_forms(group: &str) -> Vec<String> {
    let mut forms = vec![group.to_string(), format!("{group}s")];
    if let Some(singular) = group.strip_suffix('s') {
        forms.push(singular.to_string());
    }
    forms
}

fn polish_command(mut cmd: Command, group: Option<&str>) -> Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    if names.is_empty() {
        return polish_leaf(cmd);
    }
    let parent = cmd.get_name().to_string();
    let mut taken: std::collections::HashSet<String> = cmd
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(str::to_string))
        })
        .collect();
    for name in names {
        let alias = (group.is_some() || parent != "workspace")
            .then(|| {
                noun_forms(&parent)
                    .iter()
                    .find_map(|n| name.strip_suffix(&format!("-{n}")).map(str::to_string))
            })
            .flatten()
            .filter(|verb| !verb.is_empty() && !taken.contains(verb));
        if let Some(verb) = &alias {
            taken.insert(verb.clone());
        }
        let parent_name = parent.clone();
        cmd = cmd.mut_subcommand(&name, move |c| {
            let c = polish_command(c, Some(&parent_name));
            match alias {
                Some(verb) => c.visible_alias(verb),
                None => c,
            }
        });
    }
    cmd
}

fn polish_leaf(mut cmd: Command) -> Command {
    if let Some(about) = cmd.get_about().map(|a| a.to_string())
        && let Some((first, _)) = about.split_once('\n')
    {
        let first = first.trim().to_string();
        if cmd.get_long_about().is_none() {
            cmd = cmd.long_about(about.clone());
        }
        cmd = cmd.about(first);
    }
    if cmd
        .get_arguments()
        .any(|a| a.get_id() == "json-body-template")
    {
        cmd = cmd.mut_arg("json-body-template", |a| {
            a.help("Print an example JSON body for --json-body (fields and types) and exit")
        });
    }
    if cmd.get_name().starts_with("create") && !cmd.get_arguments().any(|a| a.get_id() == "id-only")
    {
        cmd = cmd.arg(crate::kb::id_only_arg());
    }
    cmd
}

/// The chosen subcommand path and the leaf's matches.
pub fn leaf(matches: &ArgMatches) -> (Vec<String>, &ArgMatches) {
    let mut path = Vec::new();
    let mut current = matches;
    while let Some((name, sub)) = current.subcommand() {
        path.push(name.to_string());
        current = sub;
    }
    (path, current)
}

pub fn command_for(path: &[String]) -> Option<CliCommand> {
    generated().find(|(_, p)| p == path).map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_a_unique_command() {
        let mut seen = std::collections::HashSet::new();
        for (cmd, path) in generated() {
            assert!(
                seen.insert(path.clone()),
                "{} collides at {path:?}",
                cmd.operation_id()
            );
        }
        assert!(seen.contains(&vec!["me".to_string()]));
        assert!(seen.contains(&vec!["auth".to_string(), "signup".to_string()]));
    }

    #[test]
    fn tree_builds_and_validates() {
        let root = polish(add_mcp_commands(add_kb_commands(add_chat_commands(
            add_invoke_command(add_upload_command(add_conversation_commands(
                add_auth_commands(add_generated_commands(crate::root_command())),
            ))),
        ))));
        root.clone().debug_assert();
        let org = root.find_subcommand("org").unwrap();
        let create = org.find_subcommand("create").expect("alias `org create`");
        assert_eq!(create.get_name(), "create-org");
        assert!(create.get_arguments().any(|a| a.get_id() == "id-only"));
        let signup = root
            .find_subcommand("auth")
            .and_then(|a| a.find_subcommand("signup"))
            .unwrap();
        let about = signup.get_about().unwrap().to_string();
        assert!(!about.contains('\n'), "{about}");
        assert!(signup.get_long_about().is_some());
    }
}
