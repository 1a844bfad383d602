//! SCIM PATCH (RFC 7644 §3.5.2) applied to a stored (canonical) document.

use serde_json::{Map, Value};

use crate::error::{PATCH_OP_URN, ScimError};
use crate::filter::{CompareOp, Filter, matches_value, parse_value_filter};
use crate::schema::{
    Attr, AttrPath, Kind, Mode, Mutability, Resolved, SchemaDef, attr_value, resolve,
    sanitize_mode, single_value,
};

/// Maximum number of operations in one PATCH request.
pub const MAX_OPERATIONS: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Replace,
    Remove,
}

/// What a PATCH path designates.
#[derive(Debug, Clone)]
enum Target {
    /// A whole extension object.
    Extension(&'static SchemaDef),
    /// An attribute, optionally restricted by a value filter, optionally a
    /// sub-attribute.
    Attr {
        schema: &'static SchemaDef,
        attr: &'static Attr,
        filter: Option<Filter>,
        sub: Option<&'static Attr>,
    },
}

fn get_ci<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

fn bad_path(path: &str) -> ScimError {
    ScimError::invalid_path(format!("invalid or unknown path '{path}'"))
}

/// Index of the `]` closing a value filter, skipping string literals.
fn closing_bracket(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut in_str = false;
    while let Some(&c) = b.get(i) {
        match (in_str, c) {
            (true, b'\\') => i += 1,
            (true, b'"') => in_str = false,
            (false, b'"') => in_str = true,
            (false, b']') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn parse_path(kind: Kind, path: &str) -> Result<Target, ScimError> {
    let path = path.trim();
    let Some(open) = path.find('[') else {
        return match resolve(kind, path) {
            Some(Resolved::Extension(def)) => Ok(Target::Extension(def)),
            Some(Resolved::Attr(p)) => Ok(Target::Attr {
                schema: p.schema,
                attr: p.attr,
                filter: None,
                sub: p.sub,
            }),
            None => Err(bad_path(path)),
        };
    };
    let (head, rest) = path.split_at(open);
    let rest = rest.get(1..).ok_or_else(|| bad_path(path))?;
    let close = closing_bracket(rest).ok_or_else(|| bad_path(path))?;
    let (inner, after) = rest.split_at(close);
    let after = after.get(1..).unwrap_or("");
    let Some(Resolved::Attr(p)) = resolve(kind, head) else {
        return Err(bad_path(path));
    };
    if p.sub.is_some() || !p.attr.is_complex() || !p.attr.multi {
        return Err(bad_path(path));
    }
    let filter = parse_value_filter(kind, p, inner).map_err(|e| {
        ScimError::invalid_path(format!("invalid filter in path '{path}': {}", e.detail))
    })?;
    let sub = if after.is_empty() {
        None
    } else {
        let name = after.strip_prefix('.').ok_or_else(|| bad_path(path))?;
        Some(p.attr.sub_attr(name).ok_or_else(|| bad_path(path))?)
    };
    Ok(Target::Attr {
        schema: p.schema,
        attr: p.attr,
        filter: Some(filter),
        sub,
    })
}

/// The object holding the attributes of `schema` (created for extensions).
fn container<'a>(
    doc: &'a mut Map<String, Value>,
    schema: &SchemaDef,
) -> Result<&'a mut Map<String, Value>, ScimError> {
    if !schema.extension {
        return Ok(doc);
    }
    let slot = doc
        .entry(schema.urn.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| ScimError::invalid_value(format!("'{}' must be an object", schema.urn)))
}

fn path_name(attr: &Attr, sub: Option<&Attr>) -> String {
    match sub {
        Some(s) => format!("{}.{}", attr.name, s.name),
        None => attr.name.to_owned(),
    }
}

fn read_only(attr: &Attr, sub: Option<&Attr>) -> Result<(), ScimError> {
    if attr.mutability == Mutability::ReadOnly
        || sub.is_some_and(|s| s.mutability == Mutability::ReadOnly)
    {
        return Err(ScimError::mutability(format!(
            "attribute '{}' is read-only",
            path_name(attr, sub)
        )));
    }
    Ok(())
}

/// Sets `obj[attr.name] = new`, refusing to change an assigned immutable value.
fn set_checked(
    obj: &mut Map<String, Value>,
    attr: &Attr,
    new: Option<Value>,
    path: &str,
) -> Result<(), ScimError> {
    if attr.mutability == Mutability::Immutable
        && let Some(old) = obj.get(attr.name)
        && new.as_ref() != Some(old)
    {
        return Err(ScimError::mutability(format!(
            "attribute '{path}' is immutable"
        )));
    }
    match new {
        Some(v) => {
            obj.insert(attr.name.to_owned(), v);
        }
        None => {
            obj.remove(attr.name);
        }
    }
    Ok(())
}

/// Two values of a multi-valued attribute are the same when their `value`
/// sub-attributes are equal (or, without `value`, when they are equal).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a.get("value"), b.get("value")) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// After values at `changed` were set, a `primary: true` among them makes
/// every other value non-primary (RFC 7643 §2.4).
fn fix_primary(items: &mut [Value], changed: &[usize]) {
    let new_primary = changed
        .iter()
        .any(|&i| items.get(i).and_then(|v| v.get("primary")) == Some(&Value::Bool(true)));
    if !new_primary {
        return;
    }
    for (i, item) in items.iter_mut().enumerate() {
        if !changed.contains(&i)
            && let Some(o) = item.as_object_mut()
            && o.get("primary") == Some(&Value::Bool(true))
        {
            o.insert("primary".to_owned(), Value::Bool(false));
        }
    }
}

fn array_mut<'a>(
    obj: &'a mut Map<String, Value>,
    attr: &Attr,
) -> Result<&'a mut Vec<Value>, ScimError> {
    let slot = obj
        .entry(attr.name.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        let old = slot.take();
        *slot = Value::Array(if old.is_null() { vec![] } else { vec![old] });
    }
    slot.as_array_mut()
        .ok_or_else(|| ScimError::invalid_value(format!("'{}' must be an array", attr.name)))
}

/// Normalizes the elements given for a multi-valued attribute (a single
/// value is accepted as a one-element list in PATCH).
fn elements(attr: &Attr, v: Value, path: &str) -> Result<Vec<Value>, ScimError> {
    let items = match v {
        Value::Array(a) => a,
        Value::Null => vec![],
        v => vec![v],
    };
    let mut out = Vec::new();
    for item in items {
        if let Some(v) = single_value(attr, item, path, Mode::Patch)? {
            out.push(v);
        }
    }
    Ok(out)
}

/// Values seeded from a filter made only of `eq` comparisons joined by `and`.
fn seed(filter: &Filter, out: &mut Map<String, Value>) -> bool {
    match filter {
        Filter::Compare {
            path: AttrPath { sub: Some(sub), .. },
            op: CompareOp::Eq,
            value,
        } if !value.is_null() => {
            out.insert(sub.name.to_owned(), value.clone());
            true
        }
        Filter::And(a, b) => seed(a, out) && seed(b, out),
        _ => false,
    }
}

fn set_sub(elem: &mut Value, sub: &Attr, new: Option<Value>, path: &str) -> Result<(), ScimError> {
    if !elem.is_object() {
        *elem = Value::Object(Map::new());
    }
    match elem.as_object_mut() {
        Some(o) => set_checked(o, sub, new, path),
        None => Ok(()),
    }
}

fn merge_object(target: &mut Value, new: Value, attr: &Attr, path: &str) -> Result<(), ScimError> {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let (Some(t), Value::Object(n)) = (target.as_object_mut(), new) {
        for (k, v) in n {
            if let Some(sub) = attr.sub_attr(&k) {
                set_checked(t, sub, Some(v), &format!("{path}.{}", sub.name))?;
            }
        }
    }
    Ok(())
}

fn apply_attr(
    op: Op,
    doc: &mut Map<String, Value>,
    schema: &'static SchemaDef,
    attr: &'static Attr,
    filter: Option<&Filter>,
    sub: Option<&'static Attr>,
    value: Option<Value>,
) -> Result<(), ScimError> {
    let path = path_name(attr, sub);
    read_only(attr, sub)?;
    let obj = container(doc, schema)?;
    if op == Op::Remove {
        return remove_attr(obj, attr, filter, sub, value, &path);
    }
    let value =
        value.ok_or_else(|| ScimError::invalid_value(format!("'{path}': a value is required")))?;
    if let Some(filter) = filter {
        let items = array_mut(obj, attr)?;
        let matched: Vec<usize> = (0..items.len())
            .filter(|&i| items.get(i).is_some_and(|v| matches_value(filter, v)))
            .collect();
        if matched.is_empty() {
            if op == Op::Replace {
                return Err(ScimError::no_target(format!(
                    "no value of '{}' matches the filter",
                    attr.name
                )));
            }
            let elem = match sub {
                Some(sub) => {
                    let mut seeded = Map::new();
                    if !seed(filter, &mut seeded) {
                        return Err(ScimError::no_target(format!(
                            "no value of '{}' matches the filter",
                            attr.name
                        )));
                    }
                    let v = single_value(sub, value, &path, Mode::Patch)?;
                    if let Some(v) = v {
                        seeded.insert(sub.name.to_owned(), v);
                    }
                    single_value(attr, Value::Object(seeded), &path, Mode::Patch)?
                }
                None => single_value(attr, value, &path, Mode::Patch)?,
            };
            if let Some(elem) = elem {
                items.push(elem);
                let last = items.len() - 1;
                fix_primary(items, &[last]);
            }
            return Ok(());
        }
        match sub {
            Some(sub) => {
                let v = single_value(sub, value, &path, Mode::Patch)?;
                for &i in &matched {
                    if let Some(elem) = items.get_mut(i) {
                        set_sub(elem, sub, v.clone(), &path)?;
                    }
                }
            }
            None => {
                let v = single_value(attr, value, &path, Mode::Patch)?;
                for &i in &matched {
                    if let Some(elem) = items.get_mut(i) {
                        match (op, &v) {
                            (Op::Add, Some(v)) => merge_object(elem, v.clone(), attr, &path)?,
                            (_, Some(v)) => *elem = v.clone(),
                            (_, None) => {}
                        }
                    }
                }
            }
        }
        fix_primary(items, &matched);
        return Ok(());
    }
    if let Some(sub) = sub {
        let v = single_value(sub, value, &path, Mode::Patch)?;
        if attr.multi {
            let items = array_mut(obj, attr)?;
            if items.is_empty() {
                items.push(Value::Object(Map::new()));
            }
            for elem in items.iter_mut() {
                set_sub(elem, sub, v.clone(), &path)?;
            }
        } else {
            let slot = obj
                .entry(attr.name.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            set_sub(slot, sub, v, &path)?;
        }
        return Ok(());
    }
    if attr.multi {
        let new = elements(attr, value, &path)?;
        if op == Op::Replace {
            obj.insert(attr.name.to_owned(), Value::Array(new));
            return Ok(());
        }
        let items = array_mut(obj, attr)?;
        let mut changed = Vec::new();
        for v in new {
            if items.iter().any(|old| same_value(old, &v)) {
                continue;
            }
            items.push(v);
            changed.push(items.len() - 1);
        }
        fix_primary(items, &changed);
        return Ok(());
    }
    let v = attr_value(attr, value, &path, Mode::Patch)?;
    if attr.is_complex() {
        if let Some(v) = v {
            let slot = obj
                .entry(attr.name.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            merge_object(slot, v, attr, &path)?;
        }
        return Ok(());
    }
    set_checked(obj, attr, v, &path)
}

fn remove_attr(
    obj: &mut Map<String, Value>,
    attr: &'static Attr,
    filter: Option<&Filter>,
    sub: Option<&'static Attr>,
    value: Option<Value>,
    path: &str,
) -> Result<(), ScimError> {
    if sub.is_none() && filter.is_none() && attr.required {
        return Err(ScimError::mutability(format!(
            "attribute '{path}' is required"
        )));
    }
    if let Some(filter) = filter {
        let Some(Value::Array(items)) = obj.get_mut(attr.name) else {
            return Err(ScimError::no_target(format!(
                "no value of '{}' matches the filter",
                attr.name
            )));
        };
        let before = items.len();
        match sub {
            Some(sub) => {
                let mut hit = false;
                for elem in items.iter_mut().filter(|v| matches_value(filter, v)) {
                    hit = true;
                    if let Some(o) = elem.as_object_mut() {
                        o.remove(sub.name);
                    }
                }
                if !hit {
                    return Err(ScimError::no_target(format!(
                        "no value of '{}' matches the filter",
                        attr.name
                    )));
                }
            }
            None => {
                items.retain(|v| !matches_value(filter, v));
                if items.len() == before {
                    return Err(ScimError::no_target(format!(
                        "no value of '{}' matches the filter",
                        attr.name
                    )));
                }
            }
        }
        return Ok(());
    }
    match (sub, obj.get_mut(attr.name)) {
        (Some(sub), Some(Value::Array(items))) => {
            for elem in items.iter_mut() {
                if let Some(o) = elem.as_object_mut() {
                    o.remove(sub.name);
                }
            }
        }
        (Some(sub), Some(Value::Object(o))) => {
            o.remove(sub.name);
        }
        (Some(_), _) => {}
        (None, Some(Value::Array(items))) if matches!(&value, Some(Value::Array(v)) if !v.is_empty()) =>
        {
            // Azure: {"op":"remove","path":"members","value":[{"value":"id"}]}
            let gone = elements(attr, value.unwrap_or(Value::Null), path)?;
            items.retain(|old| !gone.iter().any(|g| same_value(old, g)));
        }
        (None, _) => {
            obj.remove(attr.name);
        }
    }
    Ok(())
}

fn apply_target(
    kind: Kind,
    op: Op,
    doc: &mut Map<String, Value>,
    target: Target,
    value: Option<Value>,
) -> Result<(), ScimError> {
    match target {
        Target::Extension(def) => {
            if op == Op::Remove {
                doc.remove(def.urn);
                return Ok(());
            }
            match value {
                Some(Value::Object(o)) => {
                    for (k, v) in o {
                        if k.eq_ignore_ascii_case("schemas") {
                            continue;
                        }
                        let attr = def.attr(&k).ok_or_else(|| {
                            ScimError::invalid_path(format!(
                                "unknown attribute '{k}' in '{}'",
                                def.urn
                            ))
                        })?;
                        if attr.mutability == Mutability::ReadOnly {
                            continue;
                        }
                        apply_attr(op, doc, def, attr, None, None, Some(v))?;
                    }
                    Ok(())
                }
                Some(Value::Null) | None => Err(ScimError::invalid_value(format!(
                    "'{}': a value is required",
                    def.urn
                ))),
                Some(_) => Err(ScimError::invalid_value(format!(
                    "'{}' must be an object",
                    def.urn
                ))),
            }
        }
        Target::Attr {
            schema,
            attr,
            filter,
            sub,
        } => {
            let _ = kind;
            apply_attr(op, doc, schema, attr, filter.as_ref(), sub, value)
        }
    }
}

fn apply_op(kind: Kind, doc: &mut Map<String, Value>, operation: &Value) -> Result<(), ScimError> {
    let Value::Object(o) = operation else {
        return Err(ScimError::invalid_syntax(
            "each operation must be an object",
        ));
    };
    let op = match get_ci(o, "op")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("add") => Op::Add,
        Some("replace") => Op::Replace,
        Some("remove") => Op::Remove,
        _ => {
            return Err(ScimError::invalid_syntax(
                "'op' must be add, replace or remove",
            ));
        }
    };
    let value = get_ci(o, "value").cloned();
    let path = match get_ci(o, "path") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(ScimError::invalid_path("'path' must be a string")),
    };
    if let Some(path) = path {
        let target = parse_path(kind, path)?;
        return apply_target(kind, op, doc, target, value);
    }
    if op == Op::Remove {
        return Err(ScimError::no_target("remove requires a path"));
    }
    let Some(Value::Object(values)) = value else {
        return Err(ScimError::invalid_value(
            "without a path, the value must be an object",
        ));
    };
    for (k, v) in values {
        if k.eq_ignore_ascii_case("schemas") {
            continue;
        }
        let target = parse_path(kind, &k)?;
        if let Target::Attr { attr, sub, .. } = &target
            && read_only(attr, *sub).is_err()
        {
            // id, meta, groups: ignored in a whole-resource value.
            continue;
        }
        apply_target(kind, op, doc, target, Some(v))?;
    }
    Ok(())
}

/// Applies a PatchOp body to the stored document `doc` (canonical form, as
/// [`crate::schema::sanitize`] makes it, possibly with `id`, `meta` and the
/// read-only attributes, which are kept as they are). On error `doc` is left
/// unchanged. The result is validated like a PUT body and kept canonical.
pub fn apply(kind: Kind, doc: &mut Value, body: &Value) -> Result<(), ScimError> {
    let Value::Object(b) = body else {
        return Err(ScimError::invalid_syntax(
            "the PATCH body must be an object",
        ));
    };
    let is_patch = get_ci(b, "schemas")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter().any(|s| {
                s.as_str()
                    .is_some_and(|s| s.eq_ignore_ascii_case(PATCH_OP_URN))
            })
        });
    if !is_patch {
        return Err(ScimError::invalid_syntax(format!(
            "'schemas' must contain '{PATCH_OP_URN}'"
        )));
    }
    let Some(Value::Array(ops)) = get_ci(b, "Operations") else {
        return Err(ScimError::invalid_syntax("'Operations' must be an array"));
    };
    if ops.is_empty() {
        return Err(ScimError::invalid_syntax("'Operations' is empty"));
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(ScimError::invalid_value(format!(
            "more than {MAX_OPERATIONS} operations"
        )));
    }
    let mut work = match doc {
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    };
    for op in ops {
        apply_op(kind, &mut work, op)?;
    }
    // Keep what sanitize drops on purpose: id, meta, read-only attributes.
    let mut kept = Map::new();
    for (k, v) in &work {
        let read_only = kind
            .core()
            .attr(k)
            .is_some_and(|a| a.mutability == Mutability::ReadOnly && a.name == k);
        if read_only {
            kept.insert(k.clone(), v.clone());
        }
    }
    work.insert(
        "schemas".to_owned(),
        Value::Array(vec![Value::String(kind.schema_urn().to_owned())]),
    );
    let mut clean = sanitize_mode(kind, Value::Object(work), Mode::Strict)?;
    if let Value::Object(c) = &mut clean {
        c.extend(kept);
    }
    *doc = clean;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ENTERPRISE_USER_URN, GROUP_URN, USER_URN};
    use serde_json::json;

    fn user() -> Value {
        json!({
            "schemas": [USER_URN],
            "id": "u1",
            "meta": {"resourceType": "User", "version": "W/\"1\""},
            "userName": "bob",
            "active": true,
            "emails": [
                {"value": "a@x", "type": "work", "primary": true},
                {"value": "b@x", "type": "home"}
            ],
        })
    }

    fn ops(ops: Value) -> Value {
        json!({"schemas": [PATCH_OP_URN], "Operations": ops})
    }

    fn run(kind: Kind, doc: &Value, o: Value) -> Result<Value, ScimError> {
        let mut d = doc.clone();
        apply(kind, &mut d, &ops(o)).map(|()| d)
    }

    fn err_type(kind: Kind, doc: &Value, o: Value) -> Option<&'static str> {
        run(kind, doc, o).unwrap_err().scim_type
    }

    #[test]
    fn okta_and_azure_active() {
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "replace", "value": {"active": false}}]),
        )
        .unwrap();
        assert_eq!(d["active"], json!(false));
        assert_eq!(d["id"], json!("u1"));
        assert_eq!(d["meta"]["version"], json!("W/\"1\""));
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "Replace", "path": "active", "value": "False"}]),
        )
        .unwrap();
        assert_eq!(d["active"], json!(false));
        let d = run(
            Kind::User,
            &d,
            json!([{"op": "replace", "value": {"active": "True", "id": "zz", "meta": {}}}]),
        )
        .unwrap();
        assert_eq!(d["active"], json!(true));
        assert_eq!(d["id"], json!("u1"));
        assert_eq!(
            err_type(
                Kind::User,
                &user(),
                json!([{"op": "replace", "path": "active", "value": "yes"}])
            ),
            Some("invalidValue")
        );
    }

    #[test]
    fn azure_add_value_path_creates_element() {
        let d = run(
            Kind::User,
            &json!({"schemas": [USER_URN], "userName": "bob"}),
            json!([{"op": "Add", "path": "emails[type eq \"work\"].value", "value": "x@y.z"}]),
        )
        .unwrap();
        assert_eq!(d["emails"], json!([{"type": "work", "value": "x@y.z"}]));
        // Existing element: its value is set.
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "Add", "path": "emails[type eq \"work\"].value", "value": "new@x"}]),
        )
        .unwrap();
        assert_eq!(
            d["emails"][0],
            json!({"value": "new@x", "type": "work", "primary": true})
        );
        assert_eq!(d["emails"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn value_paths() {
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "replace", "path": "EMAILS[TYPE eq \"HOME\"].value", "value": "c@x"}]),
        )
        .unwrap();
        assert_eq!(d["emails"][1]["value"], json!("c@x"));
        let d = run(Kind::User, &user(), json!([{"op": "replace", "path": "emails[type eq \"home\"]", "value": {"value": "z@x", "type": "other"}}])).unwrap();
        assert_eq!(d["emails"][1], json!({"value": "z@x", "type": "other"}));
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "remove", "path": "emails[type eq \"work\"]"}]),
        )
        .unwrap();
        assert_eq!(d["emails"], json!([{"value": "b@x", "type": "home"}]));
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "remove", "path": "emails[type eq \"work\"].primary"}]),
        )
        .unwrap();
        assert_eq!(d["emails"][0], json!({"value": "a@x", "type": "work"}));
        // Removing every value leaves the attribute unassigned.
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "remove", "path": "emails[value co \"@x\"]"}]),
        )
        .unwrap();
        assert!(d.get("emails").is_none());
        // Filters matching nothing.
        assert_eq!(
            err_type(
                Kind::User,
                &user(),
                json!([{"op": "replace", "path": "emails[type eq \"other\"].value", "value": "q"}])
            ),
            Some("noTarget")
        );
        assert_eq!(
            err_type(
                Kind::User,
                &user(),
                json!([{"op": "remove", "path": "emails[type eq \"other\"]"}])
            ),
            Some("noTarget")
        );
        assert_eq!(
            err_type(
                Kind::User,
                &user(),
                json!([{"op": "add", "path": "emails[type co \"zz\"].value", "value": "q"}])
            ),
            Some("noTarget")
        );
        // Setting primary on one value clears the others.
        let d = run(
            Kind::User,
            &user(),
            json!([{"op": "replace", "path": "emails[type eq \"home\"].primary", "value": true}]),
        )
        .unwrap();
        assert_eq!(d["emails"][0]["primary"], json!(false));
        assert_eq!(d["emails"][1]["primary"], json!(true));
    }

    #[test]
    fn add_and_replace_attributes() {
        let base = json!({"schemas": [USER_URN], "userName": "bob"});
        let d = run(
            Kind::User,
            &base,
            json!([
                {"op": "add", "path": "NickName", "value": "b"},
                {"op": "add", "path": "name", "value": {"givenName": "Bob"}},
                {"op": "add", "path": "name.familyName", "value": "B"},
                {"op": "add", "path": "emails", "value": [{"value": "a@x", "primary": true}]},
                {"op": "add", "path": "emails", "value": [{"value": "a@x"}, {"value": "b@x", "primary": true}]},
                {"op": "add", "path": "urn:ietf:params:scim:schemas:core:2.0:User:title", "value": "T"},
                {"op": "add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", "value": "D"},
                {"op": "add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value", "value": "m1"},
            ]),
        )
        .unwrap();
        assert_eq!(
            d,
            json!({
                "schemas": [USER_URN, ENTERPRISE_USER_URN],
                "userName": "bob",
                "nickName": "b",
                "title": "T",
                "name": {"givenName": "Bob", "familyName": "B"},
                "emails": [{"value": "a@x", "primary": false}, {"value": "b@x", "primary": true}],
                ENTERPRISE_USER_URN: {"department": "D", "manager": {"value": "m1"}},
            })
        );
        let d2 = run(
            Kind::User,
            &d,
            json!([
                {"op": "replace", "path": "emails", "value": [{"value": "c@x"}]},
                {"op": "replace", "path": "name", "value": {"givenName": "Rob"}},
                {"op": "replace", "path": ENTERPRISE_USER_URN, "value": {"department": "E", "costCenter": "C"}},
                {"op": "replace", "value": {"userName": "rob", "name.middleName": "M", (ENTERPRISE_USER_URN.to_owned() + ":division"): "V"}},
            ]),
        )
        .unwrap();
        assert_eq!(d2["emails"], json!([{"value": "c@x"}]));
        assert_eq!(
            d2["name"],
            json!({"givenName": "Rob", "familyName": "B", "middleName": "M"})
        );
        assert_eq!(
            d2[ENTERPRISE_USER_URN],
            json!({"department": "E", "costCenter": "C", "division": "V", "manager": {"value": "m1"}})
        );
        assert_eq!(d2["userName"], json!("rob"));
        // Extension object without path.
        let d3 = run(
            Kind::User,
            &base,
            json!([{"op": "add", "value": {ENTERPRISE_USER_URN: {"employeeNumber": "7", "schemas": [ENTERPRISE_USER_URN]}}}]),
        )
        .unwrap();
        assert_eq!(d3["schemas"], json!([USER_URN, ENTERPRISE_USER_URN]));
        assert_eq!(d3[ENTERPRISE_USER_URN], json!({"employeeNumber": "7"}));
    }

    #[test]
    fn removes() {
        let d = run(Kind::User, &user(), json!([{"op": "remove", "path": "emails"}, {"op": "remove", "path": "active"}, {"op": "remove", "path": "title"}])).unwrap();
        assert_eq!(
            d,
            json!({"schemas": [USER_URN], "id": "u1", "meta": {"resourceType": "User", "version": "W/\"1\""}, "userName": "bob"})
        );
        let with_ext = run(
            Kind::User,
            &user(),
            json!([{"op": "add", "path": ENTERPRISE_USER_URN, "value": {"department": "D"}}]),
        )
        .unwrap();
        let d = run(
            Kind::User,
            &with_ext,
            json!([{"op": "remove", "path": ENTERPRISE_USER_URN}]),
        )
        .unwrap();
        assert_eq!(d["schemas"], json!([USER_URN]));
        assert!(d.get(ENTERPRISE_USER_URN).is_none());
        let d = run(Kind::User, &with_ext, json!([{"op": "remove", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department"}])).unwrap();
        assert!(d.get(ENTERPRISE_USER_URN).is_none());
        assert_eq!(
            err_type(Kind::User, &user(), json!([{"op": "remove"}])),
            Some("noTarget")
        );
        assert_eq!(
            err_type(
                Kind::User,
                &user(),
                json!([{"op": "remove", "path": "userName"}])
            ),
            Some("mutability")
        );
    }

    #[test]
    fn group_members() {
        let g = json!({"schemas": [GROUP_URN], "id": "g1", "displayName": "G", "members": [{"value": "u1", "type": "User"}, {"value": "u2"}, {"value": "u3"}]});
        let d = run(Kind::Group, &g, json!([{"op": "Remove", "path": "members", "value": [{"value": "u1"}, {"value": "u3"}]}])).unwrap();
        assert_eq!(d["members"], json!([{"value": "u2"}]));
        let d = run(
            Kind::Group,
            &g,
            json!([{"op": "remove", "path": "members[value eq \"u2\"]"}]),
        )
        .unwrap();
        assert_eq!(
            d["members"],
            json!([{"value": "u1", "type": "User"}, {"value": "u3"}])
        );
        let d = run(Kind::Group, &g, json!([{"op": "add", "path": "members", "value": [{"value": "u2"}, {"value": "u4", "$REF": "https://h/Users/u4", "type": "User"}]}])).unwrap();
        assert_eq!(d["members"].as_array().unwrap().len(), 4);
        assert_eq!(
            d["members"][3],
            json!({"value": "u4", "$ref": "https://h/Users/u4", "type": "User"})
        );
        let d = run(
            Kind::Group,
            &g,
            json!([{"op": "remove", "path": "members"}]),
        )
        .unwrap();
        assert!(d.get("members").is_none());
        assert_eq!(
            err_type(
                Kind::Group,
                &g,
                json!([{"op": "remove", "path": "displayName"}])
            ),
            Some("mutability")
        );
        assert_eq!(
            err_type(
                Kind::Group,
                &g,
                json!([{"op": "replace", "path": "members[value eq \"u1\"].value", "value": "u9"}])
            ),
            Some("mutability")
        );
        assert_eq!(
            err_type(
                Kind::Group,
                &g,
                json!([{"op": "remove", "path": "members[value eq \"nobody\"]"}])
            ),
            Some("noTarget")
        );
    }

    #[test]
    fn errors_and_atomicity() {
        let u = user();
        let cases = [
            (
                json!([{"op": "add", "path": "nope", "value": 1}]),
                "invalidPath",
            ),
            (
                json!([{"op": "add", "path": "emails[type eq", "value": 1}]),
                "invalidPath",
            ),
            (
                json!([{"op": "add", "path": "emails[type eq \"work\"].nope", "value": 1}]),
                "invalidPath",
            ),
            (
                json!([{"op": "add", "path": "name[givenName eq \"x\"]", "value": 1}]),
                "invalidPath",
            ),
            (
                json!([{"op": "replace", "path": "id", "value": "x"}]),
                "mutability",
            ),
            (
                json!([{"op": "replace", "path": "meta.version", "value": "x"}]),
                "mutability",
            ),
            (
                json!([{"op": "add", "path": "groups", "value": [{"value": "g"}]}]),
                "mutability",
            ),
            (
                json!([{"op": "add", "path": "nickName", "value": 3}]),
                "invalidValue",
            ),
            (
                json!([{"op": "add", "path": "emails", "value": [{"value": "q", "primary": true}, {"value": "r", "primary": true}]}]),
                "invalidValue",
            ),
            (
                json!([{"op": "add", "path": "nickName", "value": "x".repeat(5000)}]),
                "invalidValue",
            ),
            (
                json!([{"op": "replace", "path": "userName", "value": null}]),
                "invalidValue",
            ),
            (
                json!([{"op": "move", "path": "userName", "value": "x"}]),
                "invalidSyntax",
            ),
            (json!([{"op": "add", "value": {"nope": 1}}]), "invalidPath"),
            (json!([{"op": "add", "value": "x"}]), "invalidValue"),
            (json!([]), "invalidSyntax"),
        ];
        for (o, t) in cases {
            let mut d = u.clone();
            let e = apply(Kind::User, &mut d, &ops(o.clone())).unwrap_err();
            assert_eq!(e.scim_type, Some(t), "{o}");
            assert_eq!(d, u, "document changed on error: {o}");
        }
        let many: Vec<Value> = (0..1001)
            .map(|_| json!({"op": "add", "path": "title", "value": "t"}))
            .collect();
        assert_eq!(
            err_type(Kind::User, &u, Value::Array(many)),
            Some("invalidValue")
        );
        let mut d = u.clone();
        let e = apply(
            Kind::User,
            &mut d,
            &json!({"Operations": [{"op": "add", "path": "title", "value": "t"}]}),
        )
        .unwrap_err();
        assert_eq!(e.scim_type, Some("invalidSyntax"));
        // A later failing operation undoes the earlier ones.
        let mut d = u.clone();
        let r = apply(
            Kind::User,
            &mut d,
            &ops(
                json!([{"op": "add", "path": "title", "value": "t"}, {"op": "add", "path": "nope", "value": 1}]),
            ),
        );
        assert!(r.is_err());
        assert_eq!(d, u);
    }
}
