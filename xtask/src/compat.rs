//! The guard against breaking changes of the published document.
//!
//! The last released document is kept in `openapi/released/workspace.json`.
//! `cargo xtask check` compares `openapi/workspace.json` with it through
//! Oxide's `drift` (the comparer `dropshot-api-manager` uses) plus the
//! `error_code`s each response lists, which drift does not read:
//!
//! - a change that breaks clients written against the released document
//!   (an operation, a field, a status or an `error_code` removed, a type
//!   narrowed, a new required input, an enum value removed; drift's
//!   backward-incompatible, incompatible and unhandled classes) passes only
//!   when `info.version`'s major number was raised and `CHANGELOG.md` has a
//!   section for the new version that says what broke (a line starting
//!   with `Breaking`);
//! - an additive change (drift's forward-incompatible class: a new
//!   operation, an optional input, a new field of an answer) needs the
//!   minor number raised;
//! - wording (descriptions, summaries) needs nothing.
//!
//! `cargo xtask release` records the current document as released.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

pub const RELEASED: &str = "openapi/released/workspace.json";
const CURRENT: &str = "openapi/workspace.json";
const CHANGELOG: &str = "CHANGELOG.md";

/// What changed between two documents, for clients.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Changes that break clients of the old document.
    pub breaking: Vec<String>,
    /// Changes old clients do not notice (new operations, fields, inputs
    /// that are optional).
    pub additive: Vec<String>,
}

/// Compares `old` (released) with `new`.
pub fn compare(old: &Value, new: &Value) -> Result<Verdict> {
    use drift::ChangeClass::*;
    let mut verdict = Verdict::default();
    for change in drift::compare(old, new)? {
        let at = change
            .paths
            .first()
            .map(|p| p.new.to_string())
            .unwrap_or_default();
        for info in change.changes {
            let line = format!("{at}: {}", info.message);
            // drift 0.2 calls every change of an object's property set or
            // of its required list "unhandled"; the kinds (and the
            // direction: a new required answer field is additive, a new
            // required input breaks) are told apart here.
            if info.class == Unhandled
                && matches!(
                    info.message.as_str(),
                    "object properties changed" | "object required properties changed"
                )
            {
                for path in &change.paths {
                    properties(old, new, path, &mut verdict);
                }
                continue;
            }
            if info.message == "oneOf schema count changed" && new_stream_events(old, new, &at) {
                verdict.additive.push(format!(
                    "{at}: a new stream event, which clients skip when they do not know it"
                ));
                continue;
            }
            if info.message == "oneOf schema count changed" && opt_in_values(old, new, &at) {
                verdict.additive.push(format!(
                    "{at}: a value answered only to clients that ask for it"
                ));
                continue;
            }
            if let Some(status) = info
                .message
                .strip_prefix("operation added a new response code ")
                && SCOPE_REFUSALS.contains(&(at.as_str(), status))
            {
                verdict.additive.push(format!(
                    "{at}: {status}, a token's scopes enforced where the released server forgot them"
                ));
                continue;
            }
            if info.message == "string schema changed" && declared_rule(old, new, &at) {
                verdict.additive.push(format!(
                    "{at}: a rule the server enforced, declared as a pattern"
                ));
                continue;
            }
            match info.class {
                BackwardIncompatible | Incompatible | Unhandled => verdict.breaking.push(line),
                ForwardIncompatible => verdict.additive.push(line),
                Trivial => {}
            }
        }
    }
    verdict.additive.sort();
    verdict.additive.dedup();
    // Statuses and error codes, listed in the responses' descriptions.
    let new_codes = error_codes(new);
    for (op, status, code) in error_codes(old) {
        if !new_codes.contains(&(op.clone(), status.clone(), code.clone())) {
            verdict
                .breaking
                .push(format!("{op}: {status} no longer answers `{code}`"));
        }
    }
    let old_codes = error_codes(old);
    for (op, status, code) in new_codes {
        if !old_codes.contains(&(op.clone(), status.clone(), code.clone())) {
            verdict
                .additive
                .push(format!("{op}: {status} may answer `{code}`"));
        }
    }
    verdict.breaking.sort();
    verdict.breaking.dedup();
    Ok(verdict)
}

/// Input schemas whose strings gained a `pattern` stating a rule the
/// server already enforced in the released version (its 400 for those
/// values): no request that succeeded against it fails now, so the
/// document catching up with the server is additive. Issue #33: a tool
/// category's name and description without NUL (PostgreSQL text cannot
/// hold it), an MCP instance's name without control characters.
const DECLARED_RULES: &[&str] = &["CategoryCreate", "CategoryUpdate", "InstanceRename"];

/// Operations that gained a `403` because the released server failed to
/// check a personal access token's scopes there (issue #51: a `kb:read`
/// token created organizations): (operation path, status). Only a request
/// the released server should have refused meets the new status, and it
/// is the status every other operation answers such a token; counted as
/// additive, not as a break a major version would announce.
const SCOPE_REFUSALS: &[(&str, &str)] = &[("#/paths/~1api~1org~1create_org/post", "403")];

/// Values added to an answer's enum that the server answers only to clients
/// that ask for them (an optional input they did not know), so clients of
/// the released document never receive them: (schema, value). Issue #34:
/// `GET /api/users/list` lists suspended members (`status` `suspended`)
/// only with `include_suspended=true`; the operations that return the
/// value otherwise (`users/suspend`, `users/reactivate`) are new.
const OPT_IN_VALUES: &[(&str, &str)] = &[("UserListStatus", "suspended")];

/// Stream event unions that are open: their descriptions (and the stream
/// operations') tell clients to skip an event whose `type` they do not
/// know, so an event added there is additive: (schema, new `type`s).
/// A model's reasoning streams as `reasoning` events; a routed answer says
/// which model and deployment answer (`route`) and when it starts over
/// (`restart`).
const STREAM_EVENTS: &[(&str, &[&str])] = &[
    ("ChatStreamEvent", &["reasoning", "route", "restart"]),
    (
        "ConversationStreamEvent",
        &["reasoning", "route", "restart"],
    ),
];

/// Whether the change at `at` adds only [`STREAM_EVENTS`] to an open
/// union: every released entry is still there (by reference) and each new
/// one is a listed event.
fn new_stream_events(old: &Value, new: &Value, at: &str) -> bool {
    let Some(name) = at
        .strip_prefix("#/components/schemas/")
        .and_then(|rest| rest.split([' ', '/']).next())
    else {
        return false;
    };
    let Some((_, allowed)) = STREAM_EVENTS.iter().find(|(schema, _)| *schema == name) else {
        return false;
    };
    let one_of = |doc: &Value| {
        doc["components"]["schemas"][name]["oneOf"]
            .as_array()
            .cloned()
    };
    let (Some(old_of), Some(new_of)) = (one_of(old), one_of(new)) else {
        return false;
    };
    // The event's `type`: its own schema's one-value enum.
    let event_type = |entry: &Value| -> Option<String> {
        let schema = match entry["$ref"].as_str() {
            Some(r) => new.pointer(r.trim_start_matches('#'))?,
            None => entry,
        };
        match schema["properties"]["type"]["enum"].as_array()?.as_slice() {
            [Value::String(v)] => Some(v.clone()),
            _ => None,
        }
    };
    let added: Vec<&Value> = new_of.iter().filter(|e| !old_of.contains(e)).collect();
    old_of.iter().all(|e| new_of.contains(e))
        && !added.is_empty()
        && added
            .iter()
            .all(|e| event_type(e).is_some_and(|t| allowed.contains(&t.as_str())))
}

/// Whether the change at `at` is one of [`OPT_IN_VALUES`]: the schema's
/// `oneOf` is the released one plus exactly the listed values' entries.
fn opt_in_values(old: &Value, new: &Value, at: &str) -> bool {
    let Some(name) = at
        .strip_prefix("#/components/schemas/")
        .and_then(|rest| rest.split([' ', '/']).next())
    else {
        return false;
    };
    let allowed: Vec<&str> = OPT_IN_VALUES
        .iter()
        .filter(|(schema, _)| *schema == name)
        .map(|(_, value)| *value)
        .collect();
    let one_of = |doc: &Value| {
        doc["components"]["schemas"][name]["oneOf"]
            .as_array()
            .cloned()
    };
    let (Some(old_of), Some(new_of)) = (one_of(old), one_of(new)) else {
        return false;
    };
    let (kept, added): (Vec<&Value>, Vec<&Value>) =
        new_of.iter().partition(|entry| old_of.contains(entry));
    let value_of = |entry: &Value| -> Option<String> {
        match entry["enum"].as_array()?.as_slice() {
            [Value::String(v)] => Some(v.clone()),
            _ => None,
        }
    };
    !added.is_empty()
        && kept.len() == old_of.len()
        && added
            .iter()
            .all(|entry| value_of(entry).is_some_and(|v| allowed.contains(&v.as_str())))
}

/// Whether the change at `at` is one of [`DECLARED_RULES`]: the schema is
/// the same in both documents but for patterns and descriptions.
fn declared_rule(old: &Value, new: &Value, at: &str) -> bool {
    let Some(name) = at
        .strip_prefix("#/components/schemas/")
        .and_then(|rest| rest.split([' ', '/']).next())
    else {
        return false;
    };
    if !DECLARED_RULES.contains(&name) {
        return false;
    }
    fn bare(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| *k != "pattern" && *k != "description")
                    .map(|(k, v)| (k.clone(), bare(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(bare).collect()),
            other => other.clone(),
        }
    }
    let schema = |doc: &Value| bare(&doc["components"]["schemas"][name]);
    schema(old) == schema(new) && !schema(new).is_null()
}

/// Sorts a change of an object's properties: in an input, a property
/// removed (clients still send it; objects refuse unknown fields) or a new
/// required one breaks clients, a new optional one is additive; in an
/// answer, a property removed (or no longer always present) breaks
/// clients, a new one is additive.
fn properties(old: &Value, new: &Value, path: &drift::ChangePath, verdict: &mut Verdict) {
    let schema = |doc: &Value, pointer: &str| -> Value {
        doc.pointer(pointer.trim_start_matches('#'))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let (o, n) = (
        schema(old, path.old.current_pointer()),
        schema(new, path.new.current_pointer()),
    );
    let names = |s: &Value, key: &str| -> BTreeSet<String> {
        match key {
            "properties" => s["properties"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            _ => s[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        }
    };
    let (old_props, new_props) = (names(&o, "properties"), names(&n, "properties"));
    let (old_req, new_req) = (names(&o, "required"), names(&n, "required"));
    let at = path.new.current_pointer();
    let input = path.comparison == drift::ChangeComparison::Input;
    for p in old_props.difference(&new_props) {
        verdict
            .breaking
            .push(format!("{at}: property `{p}` removed"));
    }
    for p in new_props.difference(&old_props) {
        if input && new_req.contains(p) {
            verdict
                .breaking
                .push(format!("{at}: new required input `{p}`"));
        } else {
            verdict.additive.push(format!("{at}: property `{p}` added"));
        }
    }
    for p in old_props.intersection(&new_props) {
        match (input, old_req.contains(p), new_req.contains(p)) {
            (true, false, true) => verdict
                .breaking
                .push(format!("{at}: input `{p}` now required")),
            (false, true, false) => verdict
                .breaking
                .push(format!("{at}: `{p}` no longer always answered")),
            _ => {}
        }
    }
}

/// (operation id, status, error code) of every response that lists its
/// codes ("`error_code`: `a`, `b`.").
fn error_codes(doc: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for item in doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for op in item.as_object().into_iter().flat_map(|m| m.values()) {
            let Some(id) = op["operationId"].as_str() else {
                continue;
            };
            for (status, response) in op["responses"].as_object().into_iter().flatten() {
                for code in crate::listed_codes(response["description"].as_str().unwrap_or("")) {
                    out.insert((id.to_string(), status.clone(), code));
                }
            }
        }
    }
    out
}

/// `major.minor.patch` of a document's `info.version`.
fn version(doc: &Value) -> Result<(u64, u64, u64)> {
    let text = doc["info"]["version"]
        .as_str()
        .context("the document has no info.version")?;
    let parts: Vec<u64> = text
        .split('.')
        .map(|p| {
            p.parse()
                .with_context(|| format!("info.version {text:?} is not semver"))
        })
        .collect::<Result<_>>()?;
    match parts.as_slice() {
        [a, b, c] => Ok((*a, *b, *c)),
        _ => bail!("info.version {text:?} is not major.minor.patch"),
    }
}

fn read(root: &Path, path: &str) -> Result<Value> {
    let text =
        std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {path}"))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {path}"))
}

/// The rule, given the two documents and the changelog's text.
pub fn judge(released: &Value, current: &Value, changelog: &str) -> Result<()> {
    let (old, new) = (version(released)?, version(current)?);
    let verdict = compare(released, current)?;
    let shown = |v: (u64, u64, u64)| format!("{}.{}.{}", v.0, v.1, v.2);
    if !verdict.breaking.is_empty() {
        let mut message = format!(
            "openapi/workspace.json breaks clients of the released {} ({RELEASED}):\n",
            shown(old)
        );
        for line in &verdict.breaking {
            message.push_str(&format!("  - {line}\n"));
        }
        if new.0 <= old.0 {
            message.push_str(&format!(
                "Keep the API compatible, or raise info.version's major number (API_VERSION in \
                 server/api) above {} and say what broke in {CHANGELOG}.",
                old.0
            ));
            bail!(message);
        }
        let section = changelog_section(changelog, &shown(new));
        if !section.is_some_and(|s| {
            s.lines().any(|l| {
                l.trim_start_matches(['-', '*', ' '])
                    .starts_with("Breaking")
            })
        }) {
            message.push_str(&format!(
                "The major number was raised: {CHANGELOG} needs a `## {}` section with a line \
                 starting `Breaking` that says what broke.",
                shown(new)
            ));
            bail!(message);
        }
        return Ok(());
    }
    if !verdict.additive.is_empty() && (new.0, new.1) <= (old.0, old.1) {
        let mut message = format!(
            "openapi/workspace.json adds to the released {}: raise info.version's minor number \
             (API_VERSION in server/api):\n",
            shown(old)
        );
        for line in verdict.additive.iter().take(20) {
            message.push_str(&format!("  - {line}\n"));
        }
        bail!(message);
    }
    if new < old {
        bail!(
            "info.version {} is below the released {}",
            shown(new),
            shown(old)
        );
    }
    Ok(())
}

/// The text of `## <version>` in the changelog, up to the next section.
fn changelog_section<'a>(changelog: &'a str, version: &str) -> Option<&'a str> {
    let start = changelog.lines().position(|l| {
        l.trim_start_matches('#').split_whitespace().next() == Some(version) && l.starts_with("## ")
    })?;
    let lines: Vec<&str> = changelog.lines().collect();
    let begin = changelog.find(lines[start])?;
    let rest = &changelog[begin + lines[start].len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `cargo xtask check`'s step.
pub fn check(root: &Path) -> Result<()> {
    let released = read(root, RELEASED)?;
    let current = read(root, CURRENT)?;
    let changelog = std::fs::read_to_string(root.join(CHANGELOG)).unwrap_or_default();
    judge(&released, &current, &changelog)?;
    println!("ok: no breaking change against {RELEASED}");
    Ok(())
}

/// `cargo xtask release`: records the current document as released (its
/// version needs a section in the changelog).
pub fn release(root: &Path) -> Result<()> {
    let current = read(root, CURRENT)?;
    let (a, b, c) = version(&current)?;
    let v = format!("{a}.{b}.{c}");
    let changelog = std::fs::read_to_string(root.join(CHANGELOG)).unwrap_or_default();
    if changelog_section(&changelog, &v).is_none() {
        bail!("{CHANGELOG} has no `## {v}` section: say what this release changes");
    }
    if let Ok(released) = read(root, RELEASED) {
        judge(&released, &current, &changelog)?;
    }
    let path = root.join(RELEASED);
    std::fs::create_dir_all(path.parent().expect("a folder"))?;
    std::fs::copy(root.join(CURRENT), &path)?;
    println!("released {v}: wrote {RELEASED}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn current() -> Value {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace");
        read(root, CURRENT).expect("the document")
    }

    fn with_version(mut doc: Value, v: &str) -> Value {
        doc["info"]["version"] = json!(v);
        doc
    }

    #[test]
    fn the_same_document_passes() {
        let doc = current();
        let verdict = compare(&doc, &doc).unwrap();
        assert!(
            verdict.breaking.is_empty() && verdict.additive.is_empty(),
            "{verdict:?}"
        );
        judge(&doc, &doc, "").unwrap();
    }

    #[test]
    fn breaking_edits_are_caught() {
        let old = current();
        type Edit = Box<dyn Fn(&mut Value)>;
        let edits: Vec<(&str, Edit)> = vec![
            (
                "an operation removed",
                Box::new(|d| {
                    d["paths"].as_object_mut().unwrap().remove("/api/users/me");
                }),
            ),
            (
                "a field of an answer removed",
                Box::new(|d| {
                    let s = &mut d["components"]["schemas"]["CurrentUser"];
                    s["properties"].as_object_mut().unwrap().remove("email");
                    let req = s["required"].as_array_mut().unwrap();
                    req.retain(|r| r != "email");
                }),
            ),
            (
                "a new required input",
                Box::new(|d| {
                    let s = &mut d["components"]["schemas"]["SendMessageRequest"];
                    s["properties"]["mood"] = json!({"type": "string"});
                    s["required"] = json!(["content", "mood"]);
                }),
            ),
            (
                "an optional input made required",
                Box::new(|d| {
                    let s = &mut d["components"]["schemas"]["SendMessageRequest"];
                    s["required"] = json!(["content", "chat_id"]);
                }),
            ),
            (
                "a field of an answer no longer always answered",
                Box::new(|d| {
                    let s = &mut d["components"]["schemas"]["CurrentUser"];
                    let req = s["required"].as_array_mut().unwrap();
                    req.retain(|r| r != "email");
                }),
            ),
            (
                "a type narrowed",
                Box::new(|d| {
                    d["components"]["schemas"]["SendMessageRequest"]["properties"]["content"] =
                        json!({"type": "integer"});
                }),
            ),
            (
                "a declared schema narrowed otherwise",
                Box::new(|d| {
                    let s = &mut d["components"]["schemas"]["InstanceRename"];
                    s["properties"]["name"]["maxLength"] = json!(50);
                }),
            ),
            (
                "an enum value removed",
                Box::new(|d| {
                    d["components"]["schemas"]["ChatStatus"]["enum"] = json!(["ACTIVE", "DELETED"]);
                }),
            ),
            (
                "an error code removed",
                Box::new(|d| {
                    let r = &mut d["paths"]["/api/auth/signup"]["post"]["responses"]["409"];
                    r["description"] = json!("Conflict. `error_code`: `something_else`.");
                }),
            ),
        ];
        for (what, edit) in edits {
            let mut new = old.clone();
            edit(&mut new);
            let verdict = compare(&old, &new).unwrap();
            assert!(!verdict.breaking.is_empty(), "{what}: not caught");
            // Not even with a minor raise; a major raise needs the changelog.
            assert!(
                judge(&old, &with_version(new.clone(), "0.2.0"), "").is_err(),
                "{what}"
            );
            let major = with_version(new.clone(), "1.0.0");
            assert!(
                judge(&old, &major, "## 1.0.0\n- Added things\n").is_err(),
                "{what}"
            );
            judge(
                &old,
                &major,
                "# Changes\n\n## 1.0.0\n\n- Breaking: {what}\n\n## 0.1.0\n",
            )
            .unwrap();
        }
    }

    #[test]
    fn additive_edits_need_a_minor_raise() {
        let old = current();
        let mut new = old.clone();
        // An optional field of an answer and a new error code.
        new["components"]["schemas"]["CurrentUser"]["properties"]["avatar_url"] =
            json!({"type": "string"});
        let verdict = compare(&old, &new).unwrap();
        assert!(verdict.breaking.is_empty(), "{:?}", verdict.breaking);
        assert!(!verdict.additive.is_empty());
        let same = old["info"]["version"].as_str().unwrap().to_string();
        assert!(judge(&old, &with_version(new.clone(), &same), "").is_err());
        let (a, b, _) = version(&old).unwrap();
        judge(&old, &with_version(new, &format!("{a}.{}.0", b + 1)), "").unwrap();
    }

    #[test]
    fn a_declared_rule_is_additive_only_where_listed() {
        // The released document had no pattern on these names.
        let mut old = current();
        for (schema, field) in [("InstanceRename", "name"), ("CategoryCreate", "name")] {
            let p = &mut old["components"]["schemas"][schema]["properties"][field];
            p.as_object_mut().unwrap().remove("pattern");
        }
        let verdict = compare(&old, &current()).unwrap();
        assert!(verdict.breaking.is_empty(), "{:?}", verdict.breaking);
        assert!(
            verdict
                .additive
                .iter()
                .any(|l| l.contains("declared as a pattern")),
            "{:?}",
            verdict.additive
        );
        // A pattern added anywhere else narrows the document.
        let mut new = current();
        new["components"]["schemas"]["SendMessageRequest"]["properties"]["content"]["pattern"] =
            json!("^a");
        assert!(!compare(&current(), &new).unwrap().breaking.is_empty());
    }

    #[test]
    fn a_scope_refusal_is_additive_only_where_listed() {
        // The released create_org had no 403.
        let mut old = current();
        let path = "/api/org/create_org";
        old["paths"][path]["post"]["responses"]
            .as_object_mut()
            .unwrap()
            .remove("403");
        let verdict = compare(&old, &current()).unwrap();
        assert!(verdict.breaking.is_empty(), "{:?}", verdict.breaking);
        assert!(
            verdict
                .additive
                .iter()
                .any(|l| l.contains("scopes enforced")),
            "{:?}",
            verdict.additive
        );
        // A 403 added to another operation breaks its clients.
        let mut old = current();
        old["paths"]["/api/org/update"]["put"]["responses"]
            .as_object_mut()
            .unwrap()
            .remove("403")
            .expect("org/update answers 403");
        assert!(!compare(&old, &current()).unwrap().breaking.is_empty());
    }

    #[test]
    fn a_listed_stream_event_is_additive_only_where_listed() {
        // The released document's ChatStreamEvent had no `reasoning`.
        let mut old = current();
        old["components"]["schemas"]["ChatStreamEvent"]["oneOf"]
            .as_array_mut()
            .unwrap()
            .retain(|e| e["$ref"] != "#/components/schemas/ChatStreamEventReasoning");
        let verdict = compare(&old, &current()).unwrap();
        assert!(verdict.breaking.is_empty(), "{:?}", verdict.breaking);
        assert!(
            verdict
                .additive
                .iter()
                .any(|l| l.contains("a new stream event")),
            "{:?}",
            verdict.additive
        );
        // An event not listed, or an event removed, breaks clients.
        let mut new = current();
        new["components"]["schemas"]["ChatStreamEvent"]["oneOf"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "object", "properties": {"type": {"type": "string", "enum": ["surprise"]}}}));
        assert!(!compare(&current(), &new).unwrap().breaking.is_empty());
        let mut new = current();
        new["components"]["schemas"]["ChatStreamEvent"]["oneOf"]
            .as_array_mut()
            .unwrap()
            .retain(|e| e["$ref"] != "#/components/schemas/ChatStreamEventTitle");
        assert!(!compare(&current(), &new).unwrap().breaking.is_empty());
    }

    #[test]
    fn an_opt_in_value_is_additive_only_where_listed() {
        // The released document's UserListStatus had no `suspended`.
        let mut old = current();
        let of = old["components"]["schemas"]["UserListStatus"]["oneOf"]
            .as_array_mut()
            .unwrap();
        of.retain(|e| e["enum"][0] != "suspended");
        let verdict = compare(&old, &current()).unwrap();
        assert!(verdict.breaking.is_empty(), "{:?}", verdict.breaking);
        assert!(
            verdict
                .additive
                .iter()
                .any(|l| l.contains("answered only to clients that ask")),
            "{:?}",
            verdict.additive
        );
        // Any other value added to it, or to another enum, breaks clients.
        let mut new = current();
        new["components"]["schemas"]["UserListStatus"]["oneOf"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "string", "enum": ["banned"]}));
        assert!(!compare(&current(), &new).unwrap().breaking.is_empty());
        let mut new = current();
        new["components"]["schemas"]["IngestionStage"]["oneOf"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "string", "enum": ["suspended"]}));
        assert!(!compare(&current(), &new).unwrap().breaking.is_empty());
    }

    #[test]
    fn a_new_field_always_answered_is_additive() {
        let old = current();
        let mut new = old.clone();
        let s = &mut new["components"]["schemas"]["CurrentUser"];
        s["properties"]["avatar_url"] = json!({"type": "string"});
        s["required"]
            .as_array_mut()
            .unwrap()
            .push(json!("avatar_url"));
        let verdict = compare(&old, &new).unwrap();
        assert!(verdict.breaking.is_empty(), "{:?}", verdict.breaking);
        assert!(
            verdict.additive.iter().any(|a| a.contains("avatar_url")),
            "{:?}",
            verdict.additive
        );
    }

    #[test]
    fn wording_needs_nothing() {
        let old = current();
        let mut new = old.clone();
        new["paths"]["/api/users/me"]["get"]["summary"] = json!("Who am I?");
        let verdict = compare(&old, &new).unwrap();
        assert!(
            verdict.breaking.is_empty() && verdict.additive.is_empty(),
            "{verdict:?}"
        );
    }
}
