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
    ("chat_shares_list", &["chat", "shares"]),
    // `chat search QUERY` is hand-written (a table; chat.rs).
    ("chat_search", &["chat", "search-raw"]),
    ("chat_folders_list", &["chat", "folders", "list"]),
    ("chat_folders_create", &["chat", "folders", "create"]),
    ("chat_folders_rename", &["chat", "folders", "rename"]),
    ("chat_folders_delete", &["chat", "folders", "delete"]),
    ("chat_folders_move", &["chat", "folders", "move"]),
    // Organizations: the membership lifecycle's natural names.
    ("org_update", &["org", "rename"]),
    ("org_transfer_ownership", &["org", "transfer"]),
    // Knowledge bases: `kb create|search` are hand-written (kb.rs); the
    // generated ones (any source type, filters) stay under `-raw` names.
    ("kb_create", &["kb", "create-raw"]),
    ("kb_search", &["kb", "search-raw"]),
    // Feedback on answers: the admins' list (`feedback export` is
    // hand-written, see feedback.rs).
    ("org_feedback_list", &["feedback", "list"]),
    // Usage and budgets (`usage report` is hand-written, see usage.rs).
    ("org_budgets_list", &["budgets", "list"]),
    ("org_budgets_create", &["budgets", "create"]),
    ("org_budgets_update", &["budgets", "update"]),
    ("org_budgets_delete", &["budgets", "delete"]),
    // Single sign-on (issue #37): the provider of an organization, and
    // the two steps of a sign-in (for scripts and checks).
    ("org_sso_get", &["sso", "show"]),
    ("org_sso_put", &["sso", "set"]),
    ("org_sso_delete", &["sso", "remove"]),
    ("auth_sso_start", &["sso", "start"]),
    ("auth_sso_callback", &["sso", "finish"]),
    // SCIM provisioning (issue #37): the identity provider speaks SCIM
    // to `/scim/v2` itself; admins turn it on, map groups, issue tokens.
    ("org_scim_get", &["scim", "show"]),
    ("org_scim_put", &["scim", "set"]),
    ("org_scim_token", &["scim", "token"]),
    ("org_scim_delete", &["scim", "off"]),
    // Webhooks (issue #36).
    ("org_webhooks_create", &["webhooks", "create"]),
    ("org_webhooks_list", &["webhooks", "list"]),
    ("org_webhooks_get", &["webhooks", "get"]),
    ("org_webhooks_update", &["webhooks", "update"]),
    ("org_webhooks_delete", &["webhooks", "delete"]),
    ("org_webhooks_rotate_secret", &["webhooks", "rotate-secret"]),
    ("org_webhooks_test", &["webhooks", "test"]),
    ("org_webhooks_deliveries", &["webhooks", "deliveries"]),
    ("org_webhooks_replay", &["webhooks", "replay"]),
];

/// Operations with a hand-written command instead.
/// (`auth logout` and `auth refresh` manage the stored tokens; `org
/// delete` confirms and follows the deletion; `account delete` asks for
/// the password and forgets the stored tokens.)
const HAND_WRITTEN: &[&str] = &[
    "auth_login",
    "auth_logout",
    "auth_refresh",
    "org_delete",
    "users_delete_me",
    // `chat share` prints the link's URL (chat.rs).
    "chat_share_create",
    // `usage report` prints a table, JSON or the CSV export (usage.rs).
    "org_usage_report",
];

/// About-lines of the groups.
const GROUPS: &[(&str, &str)] = &[
    ("auth", "Sign up, log in, manage stored credentials"),
    (
        "system",
        "Service health and readiness, and the e-mail outbox (system administrators)",
    ),
    ("users", "Users"),
    (
        "account",
        "Your own account: export your data, delete the account",
    ),
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
    (
        "folders",
        "Folders of your chats (private to you, like chats)",
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
    (
        "feedback",
        "Feedback on answers: the organization's list and export (admins)",
    ),
    (
        "audit",
        "The audit log: list, export (JSON Lines) and verify its hash chains (admins)",
    ),
    (
        "usage",
        "Model usage and cost of the organization: reports and CSV (admins)",
    ),
    (
        "budgets",
        "Budgets on tokens or cost per day or month (admins)",
    ),
    (
        "webhooks",
        "Webhook endpoints, their secrets and delivery log (admins)",
    ),
    (
        "sso",
        "Single sign-on with OpenID Connect: an organization's provider (admins) and sign-ins",
    ),
    (
        "scim",
        "SCIM 2.0 provisioning: turn it on, map groups to roles, issue the provider's token (admins)",
    ),
    (
        "files",
        "Uploaded files: download one through its signed link",
    ),
];

/// The operations of the document that have no generated command, and the
/// hand-written command that calls each (streams, uploads, exports, the
/// stored credentials, a deployment's key). Checked against the document
/// and the tree by `every_operation_of_the_document_is_reachable_from_the_cli`.
#[cfg(test)]
pub const HAND_WRITTEN_COMMANDS: &[(&str, &[&str])] = &[
    ("auth_login", &["auth", "login"]),
    ("auth_logout", &["auth", "logout"]),
    ("auth_refresh", &["auth", "refresh"]),
    ("org_delete", &["org", "delete"]),
    ("users_delete_me", &["account", "delete"]),
    ("users_export", &["account", "export"]),
    ("chat_share_create", &["chat", "share"]),
    ("org_usage_report", &["usage", "report"]),
    // `usage report --format csv`.
    ("org_usage_export", &["usage", "report"]),
    ("conversation_stream_chat", &["conversation", "chat"]),
    ("conversation_stream", &["conversation", "resume"]),
    ("files_download", &["files", "download"]),
    ("chat_send_message", &["chat", "send"]),
    ("chat_edit_message", &["chat", "edit"]),
    ("chat_regenerate", &["chat", "regenerate"]),
    ("chat_stream", &["chat", "resume"]),
    ("chat_prompt", &["chat", "prompt"]),
    ("chat_transcribe", &["chat", "transcribe"]),
    ("chat_ws", &["chat", "watch"]),
    ("chat_upload_file", &["chat", "upload"]),
    ("chat_export", &["chat", "export"]),
    // `chat export --all`.
    ("chat_export_all", &["chat", "export"]),
    ("chat_import", &["chat", "import"]),
    ("kb_query", &["kb", "query"]),
    ("org_feedback_export", &["feedback", "export"]),
    ("audit_export", &["audit", "export"]),
    ("deployments_chat_completions", &["deployments", "invoke"]),
    ("deployments_models", &["deployments", "models"]),
    ("mcp_playground_chat", &["mcp", "playground"]),
];

/// Why an operation of the document has no CLI command at all, or `None`
/// when it has one. The only exceptions: protocols whose clients are other
/// programs, and what browsers call by themselves.
#[cfg(test)]
pub fn not_in_cli(operation_id: &str) -> Option<&'static str> {
    if operation_id.starts_with("scim_") {
        Some("SCIM's protocol endpoints: the organization's identity provider is their client")
    } else if operation_id.starts_with("mcp_gateway_") {
        Some("the MCP gateway: any MCP client is its client, with the gateway URL's secret")
    } else if operation_id.ends_with("_preflight") {
        Some("CORS preflights: browsers send them by themselves")
    } else if operation_id == "mcp_callback" {
        Some(
            "the OAuth redirect target: the browser `mcp connect` sends to the provider lands there",
        )
    } else {
        None
    }
}

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
        let leaf = crate::roles::widen(cmd, Cli::<JsonOutput>::get_command(cmd));
        root = insert(root, &path, leaf);
    }
    root
}

/// The whole command tree: the generated commands in their places, the
/// hand-written ones beside them, polished.
pub fn full_tree() -> Command {
    let mut root = crate::root_command();
    root = add_generated_commands(root);
    root = add_auth_commands(root);
    root = add_conversation_commands(root);
    root = add_upload_command(root);
    root = add_invoke_command(root);
    root = add_files_commands(root);
    root = add_chat_commands(root);
    root = add_chat_transfer_commands(root);
    root = add_kb_commands(root);
    root = add_mcp_commands(root);
    root = add_account_commands(root);
    root = add_feedback_commands(root);
    root = add_audit_commands(root);
    root = add_usage_commands(root);
    polish(root)
}

/// `workspace conversation chat|resume`: hand-written because the
/// generated CLI cannot stream (`conversation_stream_chat` and
/// `conversation_stream` are left out of it).
pub fn add_conversation_commands(root: Command) -> Command {
    let path = |s: &str| ["conversation".to_string(), s.to_string()];
    let root = insert(root, &path("chat"), crate::conversation_chat_command());
    insert(root, &path("resume"), crate::conversation_resume_command())
}

/// `workspace files download LINK`: a file's bytes through its signed link
/// (see `files.rs`).
pub fn add_files_commands(root: Command) -> Command {
    let path = ["files".to_string(), "download".to_string()];
    insert(root, &path, crate::files::download_command())
}

/// `workspace chat upload FILE`: hand-written (multipart).
pub fn add_upload_command(root: Command) -> Command {
    let path = ["chat".to_string(), "upload".to_string()];
    insert(root, &path, crate::upload::command())
}

/// `workspace deployments invoke|models`: hand-written (a deployment key,
/// the OpenAI-compatible surface, a streamed answer).
pub fn add_invoke_command(root: Command) -> Command {
    let path = |s: &str| ["deployments".to_string(), s.to_string()];
    let root = insert(root, &path("invoke"), crate::invoke::command());
    insert(root, &path("models"), crate::invoke::models_command())
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
pub const CHAT_HAND_WRITTEN: &[&str] = &[
    "send",
    "edit",
    "regenerate",
    "resume",
    "rename",
    "archive",
    "transcribe",
    "watch",
    "share",
    "pin",
    "unpin",
    "search",
    "prompt",
];

/// `workspace chat send|edit|regenerate|resume|rename|archive|transcribe|watch|share|pin|unpin|search|prompt`.
pub fn add_chat_commands(mut root: Command) -> Command {
    for cmd in crate::chat::commands() {
        let path = ["chat".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

/// `workspace chat export|import` (see `chat_transfer.rs`).
pub fn add_chat_transfer_commands(mut root: Command) -> Command {
    for cmd in crate::chat_transfer::commands() {
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

/// `workspace account export|delete` and `workspace org delete` (see
/// `account.rs`).
pub fn add_account_commands(mut root: Command) -> Command {
    for cmd in crate::account::account_commands() {
        let path = ["account".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    let path = ["org".to_string(), "delete".to_string()];
    insert(root, &path, crate::account::org_delete_command())
}

/// `workspace usage report` (see `usage.rs`).
pub fn add_usage_commands(mut root: Command) -> Command {
    for cmd in crate::usage::commands() {
        let path = ["usage".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

/// `workspace feedback export` (see `feedback.rs`).
pub fn add_feedback_commands(mut root: Command) -> Command {
    for cmd in crate::feedback::commands() {
        let path = ["feedback".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

/// `workspace audit export` (see `audit.rs`).
pub fn add_audit_commands(mut root: Command) -> Command {
    for cmd in crate::audit::commands() {
        let path = ["audit".to_string(), cmd.get_name().to_string()];
        root = insert(root, &path, cmd);
    }
    root
}

pub fn add_auth_commands(mut root: Command) -> Command {
    // An address that already has an account joins with its password: the
    // names are for a new account only (checked by `signup_invite`). The
    // generated arguments are required unless `--json-body` is given; one
    // more exception, `--invite-token` (itself required), makes them
    // optional, as clap has no way to drop the first.
    let optional = |a: clap::Arg| a.required(false).required_unless_present("invite-token");
    root = root.mut_subcommand("auth", |auth| {
        auth.mut_subcommand("signup-invite", |c| {
            c.mut_arg("first-name", |a| {
                optional(a)
                    .help("Your first name (a new account only; an existing account keeps its own)")
            })
            .mut_arg("last-name", |a| {
                optional(a)
                    .help("Your last name (a new account only; an existing account keeps its own)")
            })
        })
    });
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
        return polish_leaf(cmd, group);
    }
    let parent = cmd.get_name().to_string();
    let mut taken: std::collections::HashSet<String> = cmd
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(str::to_string))
        })
        .collect();
    for name in names {
        // Listed by name (clap breaks ties of `display_order` by name).
        cmd = cmd.mut_subcommand(&name, |c| c.display_order(0));
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

/// Descriptions of arguments the document leaves undescribed, by group and
/// argument (`None`: any group); the first match wins.
const ARGUMENT_HELP: &[(Option<&str>, &str, &str)] = &[
    (None, "org-id", "The organization's id"),
    (None, "organization-id", "The organization's id"),
    (None, "agent-id", "The agent's id"),
    (None, "category-id", "The tool category's id"),
    (None, "chat-id", "The chat's id"),
    (None, "chat-session-id", "The chat session's id"),
    (None, "conversation-id", "The conversation's id"),
    (None, "kb-id", "The knowledge base's id"),
    (None, "message-id", "The message's id"),
    (None, "model-id", "The model's id (`workspace models list`)"),
    (
        None,
        "role-id",
        "The role's id (`workspace roles list-roles`)",
    ),
    (None, "user-id", "The user's id"),
    (
        Some("mcp"),
        "server-id",
        "The MCP server's id (`workspace mcp list-servers`)",
    ),
    (
        Some("mcp"),
        "session-id",
        "The MCP session's (connection's) id",
    ),
    (None, "email", "E-mail address"),
    (None, "first-name", "First name"),
    (None, "last-name", "Last name"),
    (Some("kb"), "name", "The knowledge base's name"),
    (Some("agents"), "name", "The agent's name"),
    (Some("tools"), "name", "The tool's (or category's) name"),
    (Some("roles"), "name", "The role's name"),
    (Some("deployments"), "name", "The deployment's name"),
    (Some("org"), "name", "The organization's name"),
    (None, "name", "Name"),
    (
        Some("kb"),
        "description",
        "The knowledge base's description",
    ),
    (Some("agents"), "description", "The agent's description"),
    (
        Some("deployments"),
        "description",
        "The deployment's description",
    ),
    (None, "description", "Description"),
    (None, "title", "Title"),
    (None, "rating", "`up` or `down`"),
    (
        None,
        "embedding-model",
        "Embedding model of the knowledge base (fixed once created)",
    ),
    (
        None,
        "agent-type",
        "The agent's type, e.g. `chat`, `function` (1 to 32 characters)",
    ),
    (
        None,
        "is-public",
        "Visible to every member of the organization",
    ),
    (None, "is-active", "Enabled (agents can use it)"),
    (
        None,
        "channel",
        "Where the deployment is reachable (`api`, `web`, …)",
    ),
    (
        None,
        "rate-limit-per-minute",
        "Requests per minute the deployment accepts",
    ),
    (Some("chat"), "status", "The chat's status"),
    (None, "status", "Status"),
    (
        None,
        "hierarchy-level",
        "0 to 100, at most your own role's level",
    ),
    (
        None,
        "team-members",
        "Whether members may be added (`add_member`)",
    ),
    (
        None,
        "file-upload",
        "Whether knowledge-base and chat file uploads are allowed",
    ),
    (
        None,
        "chat-uploads",
        "Whether attachments in chat messages are allowed",
    ),
    (None, "mcp-sessions", "Maximum concurrent MCP connections"),
    (
        None,
        "daily-chat-limit",
        "Maximum chat messages per day (UTC)",
    ),
    (
        None,
        "last-event-id",
        "Resume after this event id (the `id:` of the last event received)",
    ),
    (Some("chat"), "file", "The audio file to transcribe"),
    (None, "query", "What to search for"),
    (
        None,
        "question",
        "The question to answer from the knowledge base",
    ),
    (None, "shell", "bash, zsh, fish, elvish or powershell"),
];

fn argument_help(group: Option<&str>, id: &str) -> Option<&'static str> {
    ARGUMENT_HELP
        .iter()
        .find(|(g, a, _)| *a == id && (g.is_none() || *g == group))
        .map(|(_, _, help)| *help)
}

fn polish_leaf(mut cmd: Command, group: Option<&str>) -> Command {
    let undescribed: Vec<String> = cmd
        .get_arguments()
        .filter(|a| a.get_help().is_none() && a.get_long_help().is_none())
        .map(|a| a.get_id().to_string())
        .collect();
    for id in undescribed {
        if let Some(help) = argument_help(group, &id) {
            cmd = cmd.mut_arg(id, |a| a.help(help));
        }
    }
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

    /// The operation ids of the published document, with their methods.
    fn document_operations() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/workspace.json");
        let text = std::fs::read_to_string(path).expect("openapi/workspace.json");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("the document");
        let mut ids = Vec::new();
        for item in doc["paths"].as_object().expect("paths").values() {
            for op in item.as_object().expect("a path item").values() {
                if let Some(id) = op["operationId"].as_str() {
                    ids.push(id.to_string());
                }
            }
        }
        ids.sort();
        ids
    }

    fn resolves(root: &Command, path: &[&str]) -> bool {
        let mut current = root;
        for name in path {
            match current.find_subcommand(name) {
                Some(next) => current = next,
                None => return false,
            }
        }
        true
    }

    /// Every operation of the document is reachable from the CLI: a
    /// generated command, a hand-written one (`HAND_WRITTEN_COMMANDS`), or
    /// one of the documented exceptions (`not_in_cli`). A new operation
    /// without either fails here.
    #[test]
    fn every_operation_of_the_document_is_reachable_from_the_cli() {
        let root = full_tree();
        let generated: Vec<&str> = CliCommand::iter()
            .map(|c| c.operation_id())
            .filter(|id| !HAND_WRITTEN.contains(id))
            .collect();
        let ids = document_operations();
        assert!(ids.len() > 150, "{} operations", ids.len());
        let mut unreachable = Vec::new();
        let mut exceptions = 0;
        for id in &ids {
            let hand = HAND_WRITTEN_COMMANDS.iter().find(|(op, _)| op == id);
            let path: Vec<String> = match (generated.contains(&id.as_str()), hand) {
                (true, Some(_)) => {
                    panic!("{id} is generated and also listed as hand-written")
                }
                (true, None) => command_path(id),
                (false, Some((_, path))) => path.iter().map(|s| s.to_string()).collect(),
                (false, None) => {
                    if not_in_cli(id).is_some() {
                        exceptions += 1;
                    } else {
                        unreachable.push(format!("{id}: no command"));
                    }
                    continue;
                }
            };
            assert!(
                not_in_cli(id).is_none(),
                "{id} has a command and an exception"
            );
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            if !resolves(&root, &names) {
                unreachable.push(format!(
                    "{id}: `workspace {}` does not exist",
                    names.join(" ")
                ));
            }
        }
        assert!(
            unreachable.is_empty(),
            "operations the CLI cannot reach:\n{}",
            unreachable.join("\n")
        );
        // The exceptions are the SCIM service, the gateway, the OAuth
        // callback and the preflights, nothing more.
        assert!(exceptions <= 30, "{exceptions} exceptions");
        for (op, _) in HAND_WRITTEN_COMMANDS {
            assert!(ids.iter().any(|id| id == op), "{op} is not in the document");
        }
        // The account's service accounts, made with a login.
        for path in [
            ["org", "service-accounts-create"],
            ["org", "service-accounts-rotate"],
            ["org", "service-accounts-delete"],
        ] {
            assert!(resolves(&root, &path), "{path:?}");
        }
    }

    /// Every group of commands says what it holds in `workspace --help`.
    #[test]
    fn every_group_has_a_description() {
        let root = full_tree();
        let blank: Vec<&str> = root
            .get_subcommands()
            .filter(|c| c.has_subcommands())
            .filter(|c| {
                c.get_about()
                    .is_none_or(|a| a.to_string().trim().is_empty())
            })
            .map(|c| c.get_name())
            .collect();
        assert!(blank.is_empty(), "groups without a description: {blank:?}");
    }

    #[test]
    fn tree_builds_and_validates() {
        let root = full_tree();
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

#[cfg(test)]
mod help_tests {
    use super::*;

    fn missing(cmd: &Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" || arg.is_hide_set() {
                continue;
            }
            let blank = arg
                .get_help()
                .map(|h| h.to_string().trim().is_empty())
                .unwrap_or(true)
                && arg
                    .get_long_help()
                    .map(|h| h.to_string().trim().is_empty())
                    .unwrap_or(true);
            if blank {
                out.push(format!("{path} --{id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            missing(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// `workspace … --help` describes every argument of every command.
    #[test]
    fn every_argument_has_a_description() {
        let mut out = Vec::new();
        missing(&full_tree(), "workspace", &mut out);
        assert!(
            out.is_empty(),
            "arguments without a description:\n{}",
            out.join("\n")
        );
    }

    /// Commands are listed by name; the global options under a heading of
    /// their own, apart from the command's.
    #[test]
    fn commands_are_sorted_and_global_options_apart() {
        let mut root = full_tree();
        // Propagates the global options to the subcommands, as parsing does.
        root.build();
        let mut help = root.clone();
        let text = help.render_help().to_string();
        let listed: Vec<&str> = text
            .split("Commands:")
            .nth(1)
            .unwrap()
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| *name != "help")
            .collect();
        let mut sorted = listed.clone();
        sorted.sort();
        assert_eq!(listed, sorted, "{text}");
        let kb = root.find_subcommand("kb").unwrap();
        let mut create = kb.find_subcommand("create").unwrap().clone();
        let text = create.render_long_help().to_string();
        let (own, global) = text.split_once("Global options:").expect(&text);
        assert!(own.contains("--org-id") && !own.contains("--url"), "{text}");
        assert!(
            global.contains("--url") && global.contains("[env: WORKSPACE_URL"),
            "{text}"
        );
    }
}
