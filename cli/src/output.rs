//! How command results are printed.

use crate::generated_cli::CliConfig;
use workspace_client::{Error, ResponseValue};

/// Marks an error that was already printed.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("error already reported")
    }
}

impl std::error::Error for Reported {}

/// Prints an API or transport error to stderr.
pub fn report_error<T: serde::Serialize + std::fmt::Debug>(error: &Error<T>) {
    match error {
        Error::ErrorResponse(response) => {
            let status = response.status();
            let body = serde_json::to_value(response.as_ref()).unwrap_or_default();
            let code = body
                .get("error_code")
                .and_then(|v| v.as_str())
                .unwrap_or("error");
            let message = body.get("message").and_then(|v| v.as_str()).unwrap_or("");
            report_api_error(status.as_u16(), code, message);
        }
        Error::CommunicationError(e) => {
            let url = e
                .url()
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default();
            report_unreachable(&url, e)
        }
        other => eprintln!("error: {other}"),
    }
}

/// `error: STATUS CODE: MESSAGE` (without the status when 0, e.g. an error
/// event of a stream), plus the hint to log in again for `token_expired`.
pub fn report_api_error(status: u16, code: &str, message: &str) {
    if status == 0 {
        eprintln!("error: {code}: {message}");
    } else {
        eprintln!("error: {status} {code}: {message}");
    }
    if code == "token_expired" {
        eprintln!("{TOKEN_EXPIRED_HINT}");
    } else if status == 401 && matches!(code, "unauthenticated" | "invalid_token") {
        eprintln!("{LOG_IN_HINT}");
    }
}

/// What to do about an expired token.
pub const TOKEN_EXPIRED_HINT: &str = "expired: run workspace auth login";

/// What to do about a `401` without a usable token (after `auth logout`,
/// or a token the server no longer accepts).
pub const LOG_IN_HINT: &str = "not logged in: run workspace auth login --email EMAIL \
     (--profile NAME for another profile)";

/// A connection failure: the URL tried and where the URL comes from.
pub fn report_unreachable(url: &str, error: &dyn std::fmt::Display) {
    eprintln!("{}", unreachable_message(url, error));
}

pub fn unreachable_message(url: &str, error: &dyn std::fmt::Display) -> String {
    format!(
        "error: cannot reach the server at {url}: {error}\n\
         is workspace-server running? (WORKSPACE_URL / --url)"
    )
}

/// A table cell or one-line field: newlines, tabs and other control
/// characters escaped (`\n`, `\t`, `\u{1b}`), so that a value cannot
/// break the layout or drive the terminal.
pub fn escape_cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// JSON on stdout.
pub struct JsonOutput;

impl CliConfig for JsonOutput {
    fn success_item<T>(&self, value: &ResponseValue<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        let text = serde_json::to_string_pretty(value.as_ref()).unwrap_or_default();
        println!("{text}");
    }

    fn success_no_item(&self, _value: &ResponseValue<()>) {}

    fn error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        report_error(value);
    }

    fn list_start<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        print!("[");
    }

    fn list_item<T>(&self, value: &T)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        print!("{}", serde_json::to_string(value).unwrap_or_default());
    }

    fn list_end_success<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        println!("]");
    }

    fn list_end_error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        println!("]");
        report_error(value);
    }
}

/// `--id-only`: only the new object's `id` (or its first `*_id` field) on
/// stdout; JSON for answers without one.
pub struct IdOnlyOutput;

fn id_of(value: &serde_json::Value) -> Option<String> {
    let object = value.as_object()?;
    object
        .get("id")
        .or_else(|| {
            object
                .iter()
                .find(|(k, _)| k.ends_with("_id"))
                .map(|(_, v)| v)
        })
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

impl CliConfig for IdOnlyOutput {
    fn success_item<T>(&self, value: &ResponseValue<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        let json = serde_json::to_value(value.as_ref()).unwrap_or_default();
        match id_of(&json) {
            Some(id) => println!("{id}"),
            None => JsonOutput.success_item(value),
        }
    }

    fn success_no_item(&self, value: &ResponseValue<()>) {
        JsonOutput.success_no_item(value)
    }

    fn error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        report_error(value);
    }

    fn list_start<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_start::<T>()
    }

    fn list_item<T>(&self, value: &T)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_item(value)
    }

    fn list_end_success<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_end_success::<T>()
    }

    fn list_end_error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_end_error(value)
    }
}

/// Keeps the successful answer (as JSON) instead of printing it; errors
/// are printed as usual.
#[derive(Clone, Default)]
pub struct CaptureOutput(std::sync::Arc<std::sync::Mutex<Option<serde_json::Value>>>);

impl CaptureOutput {
    pub fn take(&self) -> Option<serde_json::Value> {
        self.0.lock().ok().and_then(|mut v| v.take())
    }
}

impl CliConfig for CaptureOutput {
    fn success_item<T>(&self, value: &ResponseValue<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        if let Ok(mut slot) = self.0.lock() {
            *slot = serde_json::to_value(value.as_ref()).ok();
        }
    }

    fn success_no_item(&self, _value: &ResponseValue<()>) {}

    fn error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        report_error(value);
    }

    fn list_start<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
    }

    fn list_item<T>(&self, _value: &T)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
    }

    fn list_end_success<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
    }

    fn list_end_error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        report_error(value);
    }
}

/// How a list command is shown as a table: where the rows are, which
/// columns (header, JSON pointer into a row), and an optional total.
pub struct Table {
    pub operation_id: &'static str,
    /// JSON pointer to the array of rows ("" when the result is the array).
    pub rows: &'static str,
    pub columns: &'static [(&'static str, &'static str)],
    /// JSON pointer to a total printed under the table.
    pub total: Option<&'static str>,
}

/// The commands with a table layout (`--format table`); every other
/// command prints JSON whatever the format.
pub const TABLES: &[Table] = &[
    Table {
        operation_id: "auth_sessions",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("CURRENT", "/current"),
            ("CREATED", "/created_at"),
            ("LAST USED", "/last_used_at"),
            ("ADDRESS", "/ip_address"),
            ("USER AGENT", "/user_agent"),
        ],
        total: None,
    },
    Table {
        operation_id: "invitations_list",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("EMAIL", "/email"),
            ("STATUS", "/status"),
            ("ROLE", "/role/name"),
            ("INVITED BY", "/invited_by/name"),
            ("EXPIRES", "/expires_at"),
        ],
        total: None,
    },
    Table {
        operation_id: "users_list",
        rows: "/users",
        columns: &[
            ("ID", "/id"),
            ("INVITE ID", "/invite_id"),
            ("EMAIL", "/email"),
            ("NAME", "/full_name"),
            ("STATUS", "/status"),
            ("ROLE", "/organizations/0/role_name"),
        ],
        total: Some("/total"),
    },
    Table {
        operation_id: "invitations_bulk_create",
        rows: "/invitations",
        columns: &[
            ("ID", "/id"),
            ("EMAIL", "/email"),
            ("STATUS", "/status"),
            ("ERROR", "/error_code"),
        ],
        total: None,
    },
    Table {
        operation_id: "org_list",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("NAME", "/name"),
            ("SLUG", "/slug"),
            ("ROLE", "/user_role/role_name"),
            ("LEVEL", "/user_role/level"),
        ],
        total: None,
    },
    Table {
        operation_id: "roles_list_roles",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("NAME", "/name"),
            ("LEVEL", "/hierarchy_level"),
            ("SYSTEM", "/is_system_role"),
            ("DESCRIPTION", "/description"),
        ],
        total: None,
    },
    Table {
        operation_id: "roles_list_permissions",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("NAME", "/name"),
            ("DESCRIPTION", "/description"),
        ],
        total: None,
    },
    Table {
        operation_id: "models_list",
        rows: "",
        columns: &[("ID", "/id"), ("NAME", "/name"), ("PROVIDER", "/provider")],
        total: None,
    },
    Table {
        operation_id: "chat_folders_list",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("NAME", "/name"),
            ("CHATS", "/chat_count"),
            ("CREATED", "/created_at"),
        ],
        total: None,
    },
    Table {
        operation_id: "conversation_list",
        rows: "",
        columns: &[
            ("ID", "/id"),
            ("TITLE", "/title"),
            ("ARCHIVED", "/is_archived"),
            ("UPDATED", "/updated_at"),
        ],
        total: None,
    },
    Table {
        operation_id: "conversation_messages",
        rows: "/messages",
        columns: &[
            ("ID", "/id"),
            ("ROLE", "/role"),
            ("STATUS", "/status"),
            ("CREATED", "/created_at"),
            ("CONTENT", "/content"),
        ],
        total: Some("/total"),
    },
    Table {
        operation_id: "org_feedback_list",
        rows: "/items",
        columns: &[
            ("CREATED", "/created_at"),
            ("AREA", "/area"),
            ("RATING", "/rating"),
            ("MODEL", "/model/name"),
            ("RATER", "/user/email"),
            ("TAGS", "/tags"),
            ("COMMENT", "/comment"),
            ("MESSAGE", "/message_id"),
        ],
        total: None,
    },
];

pub fn table_for(operation_id: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.operation_id == operation_id)
}

fn cell(value: Option<&serde_json::Value>) -> String {
    match value {
        None | Some(serde_json::Value::Null) => "-".to_string(),
        Some(serde_json::Value::String(s)) => escape_cell(s),
        Some(other) => escape_cell(&other.to_string()),
    }
}

/// Renders `value` as an aligned text table (JSON when it has no rows
/// array where the layout expects one).
pub fn render_table(table: &Table, value: &serde_json::Value) -> String {
    let Some(rows) = value.pointer(table.rows).and_then(|r| r.as_array()) else {
        return serde_json::to_string_pretty(value).unwrap_or_default();
    };
    let mut lines: Vec<Vec<String>> = vec![table.columns.iter().map(|c| c.0.to_string()).collect()];
    for row in rows {
        lines.push(
            table
                .columns
                .iter()
                .map(|(_, pointer)| cell(row.pointer(pointer)))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..table.columns.len())
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
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if let Some(total) = table.total {
        out.push_str(&format!("total: {}\n", cell(value.pointer(total))));
    }
    // A cursor-paged list: where the next page starts (`--cursor`).
    if let Some(next) = value.get("next_cursor").and_then(|c| c.as_str()) {
        out.push_str(&format!("next cursor: {}\n", escape_cell(next)));
    }
    out
}

/// A table on stdout for commands listed in [`TABLES`].
pub struct TableOutput(pub &'static Table);

impl CliConfig for TableOutput {
    fn success_item<T>(&self, value: &ResponseValue<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        let json = serde_json::to_value(value.as_ref()).unwrap_or_default();
        print!("{}", render_table(self.0, &json));
    }

    fn success_no_item(&self, value: &ResponseValue<()>) {
        JsonOutput.success_no_item(value)
    }

    fn error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        report_error(value);
    }

    fn list_start<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_start::<T>()
    }

    fn list_item<T>(&self, value: &T)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_item(value)
    }

    fn list_end_success<T>(&self)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_end_success::<T>()
    }

    fn list_end_error<T>(&self, value: &Error<T>)
    where
        T: schemars::JsonSchema + serde::Serialize + std::fmt::Debug,
    {
        JsonOutput.list_end_error(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_show_nulls_and_totals() {
        let users = table_for("users_list").unwrap();
        let value = serde_json::json!({
            "users": [
                {"id": "u1", "invite_id": null, "email": "a@example.com", "full_name": "A B",
                 "status": "active", "organizations": [{"role_name": "owner"}]},
                {"id": null, "invite_id": "i1", "email": "long.name@example.com", "full_name": "",
                 "status": "pending", "organizations": [{"role_name": "member"}]}
            ],
            "total": 2
        });
        let text = render_table(users, &value);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("ID  INVITE ID  EMAIL"), "{text}");
        assert!(
            lines[1].contains("a@example.com") && lines[1].ends_with("owner"),
            "{text}"
        );
        assert!(lines[2].starts_with("-   i1"), "{text}");
        assert_eq!(lines[3], "total: 2");
        // Not the expected shape: JSON.
        assert!(render_table(users, &serde_json::json!({"x": 1})).contains("\"x\""));
    }

    #[test]
    fn cells_escape_newlines_and_control_characters() {
        assert_eq!(escape_cell("a\nb\tc\u{1b}[31m"), "a\\nb\\tc\\u{1b}[31m");
        assert_eq!(escape_cell("plain é"), "plain é");
    }

    #[test]
    fn every_table_names_a_real_operation() {
        for table in TABLES {
            assert!(
                crate::generated_cli::CliCommand::iter()
                    .any(|c| c.operation_id() == table.operation_id),
                "{}",
                table.operation_id
            );
        }
    }
}
