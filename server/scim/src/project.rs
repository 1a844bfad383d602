//! The `attributes` / `excludedAttributes` projection (RFC 7644 §3.4.2.5).

use serde_json::{Map, Value};

use crate::schema::{Attr, Kind, Resolved, Returned, SchemaDef, resolve};

/// One requested item: an attribute of a schema, whole or some sub-attributes.
struct Item {
    schema: &'static SchemaDef,
    attr: Option<&'static Attr>,
    sub: Option<&'static Attr>,
}

fn parse_list(kind: Kind, list: &str) -> Vec<Item> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|s| match resolve(kind, s)? {
            Resolved::Extension(def) => Some(Item {
                schema: def,
                attr: None,
                sub: None,
            }),
            Resolved::Attr(p) => Some(Item {
                schema: p.schema,
                attr: Some(p.attr),
                sub: p.sub,
            }),
        })
        .collect()
}

fn holder<'a>(doc: &'a Map<String, Value>, schema: &SchemaDef) -> Option<&'a Map<String, Value>> {
    if schema.extension {
        doc.get(schema.urn).and_then(Value::as_object)
    } else {
        Some(doc)
    }
}

fn holder_mut<'a>(
    doc: &'a mut Map<String, Value>,
    schema: &SchemaDef,
) -> Option<&'a mut Map<String, Value>> {
    if schema.extension {
        doc.get_mut(schema.urn).and_then(Value::as_object_mut)
    } else {
        Some(doc)
    }
}

/// Keeps only `subs` of one value (an object) of a complex attribute.
fn pick_subs(v: &Value, subs: &[&str]) -> Option<Value> {
    let o = v.as_object()?;
    let picked: Map<String, Value> = o
        .iter()
        .filter(|(k, _)| subs.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!picked.is_empty()).then_some(Value::Object(picked))
}

fn merge_into(target: &mut Map<String, Value>, key: &str, v: Value) {
    match (target.get_mut(key), v) {
        (Some(Value::Object(old)), Value::Object(new)) => old.extend(new),
        (Some(Value::Array(old)), Value::Array(new)) if old.len() == new.len() => {
            for (o, n) in old.iter_mut().zip(new) {
                if let (Value::Object(o), Value::Object(n)) = (o, n) {
                    o.extend(n);
                }
            }
        }
        (_, v) => {
            target.insert(key.to_owned(), v);
        }
    }
}

fn include(kind: Kind, doc: &Map<String, Value>, items: &[Item]) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["schemas", "id"] {
        if let Some(v) = doc.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    for a in kind
        .core()
        .attrs
        .iter()
        .filter(|a| a.returned == Returned::Always)
    {
        if let Some(v) = doc.get(a.name) {
            out.insert(a.name.to_owned(), v.clone());
        }
    }
    for item in items {
        let Some(src) = holder(doc, item.schema) else {
            continue;
        };
        let Some(attr) = item.attr else {
            if let Some(v) = doc.get(item.schema.urn) {
                out.insert(item.schema.urn.to_owned(), v.clone());
            }
            continue;
        };
        let Some(v) = src.get(attr.name) else {
            continue;
        };
        let picked = match item.sub {
            None => Some(v.clone()),
            Some(sub) => match v {
                Value::Array(items) => {
                    // Keep positions aligned so that several sub-attributes
                    // of the same values can be merged.
                    let vals: Vec<Value> = items
                        .iter()
                        .map(|e| pick_subs(e, &[sub.name]).unwrap_or(Value::Object(Map::new())))
                        .collect();
                    Some(Value::Array(vals))
                }
                v => pick_subs(v, &[sub.name]),
            },
        };
        let Some(picked) = picked else {
            continue;
        };
        let dst = if item.schema.extension {
            let slot = out
                .entry(item.schema.urn.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            match slot.as_object_mut() {
                Some(o) => o,
                None => continue,
            }
        } else {
            &mut out
        };
        if item.sub.is_none() {
            dst.insert(attr.name.to_owned(), picked);
        } else if !matches!(dst.get(attr.name), Some(existing) if item_is_whole(existing, v)) {
            merge_into(dst, attr.name, picked);
        }
    }
    out
}

/// Whether `existing` (already in the output) is the whole source value.
fn item_is_whole(existing: &Value, source: &Value) -> bool {
    existing == source
}

fn exclude(kind: Kind, doc: &Map<String, Value>, items: &[Item]) -> Map<String, Value> {
    let mut out = doc.clone();
    for item in items {
        let Some(attr) = item.attr else {
            out.remove(item.schema.urn);
            continue;
        };
        if attr.returned == Returned::Always
            || item.sub.is_some_and(|s| s.returned == Returned::Always)
        {
            continue;
        }
        let _ = kind;
        let Some(dst) = holder_mut(&mut out, item.schema) else {
            continue;
        };
        match (item.sub, dst.get_mut(attr.name)) {
            (None, _) => {
                dst.remove(attr.name);
            }
            (Some(sub), Some(Value::Array(values))) => {
                for v in values.iter_mut() {
                    if let Some(o) = v.as_object_mut() {
                        o.remove(sub.name);
                    }
                }
            }
            (Some(sub), Some(Value::Object(o))) => {
                o.remove(sub.name);
            }
            _ => {}
        }
    }
    out
}

/// Removes `returned: never` attributes and the empty values projection leaves.
fn clean(kind: Kind, doc: &mut Map<String, Value>) {
    for def in std::iter::once(kind.core()).chain(kind.extensions()) {
        let Some(h) = holder_mut(doc, def) else {
            continue;
        };
        for a in def.attrs {
            if a.returned == Returned::Never {
                h.remove(a.name);
            }
        }
    }
    fn prune(v: &mut Value) -> bool {
        match v {
            Value::Object(o) => {
                o.retain(|_, v| !prune(v));
                o.is_empty()
            }
            Value::Array(a) => {
                a.retain_mut(|v| !prune(v));
                a.is_empty()
            }
            Value::Null => true,
            _ => false,
        }
    }
    doc.retain(|k, v| k == "schemas" || !prune(v));
}

/// Projects a full rendered resource according to the `attributes` and
/// `excludedAttributes` query parameters (comma-separated, case-insensitive,
/// possibly URN-qualified, sub-attributes allowed). `id`, `schemas` and
/// `returned: always` attributes are always kept; unknown names are ignored;
/// when both are given, `attributes` wins.
pub fn project(kind: Kind, doc: &Value, attributes: Option<&str>, excluded: Option<&str>) -> Value {
    let Value::Object(obj) = doc else {
        return doc.clone();
    };
    let attributes = attributes.filter(|a| !a.trim().is_empty());
    let excluded = excluded.filter(|a| !a.trim().is_empty());
    let mut out = match (attributes, excluded) {
        (Some(a), _) => include(kind, obj, &parse_list(kind, a)),
        (None, Some(e)) => exclude(kind, obj, &parse_list(kind, e)),
        (None, None) => obj.clone(),
    };
    clean(kind, &mut out);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ENTERPRISE_USER_URN, GROUP_URN, USER_URN};
    use serde_json::json;

    fn user() -> Value {
        json!({
            "schemas": [USER_URN, ENTERPRISE_USER_URN],
            "id": "u1",
            "userName": "bob",
            "name": {"givenName": "Bob", "familyName": "B"},
            "emails": [{"value": "a@x", "type": "work"}, {"value": "b@x"}],
            "groups": [{"value": "g1", "display": "G"}],
            "meta": {"resourceType": "User", "created": "2020-01-01T00:00:00.000000Z"},
            ENTERPRISE_USER_URN: {"department": "D", "manager": {"value": "m"}},
        })
    }

    #[test]
    fn attributes() {
        let d = user();
        assert_eq!(
            project(Kind::User, &d, Some("USERNAME, nope"), None),
            json!({"schemas": [USER_URN, ENTERPRISE_USER_URN], "id": "u1", "userName": "bob"})
        );
        assert_eq!(
            project(Kind::User, &d, Some("name.familyName,emails.type"), None),
            json!({"schemas": [USER_URN, ENTERPRISE_USER_URN], "id": "u1", "name": {"familyName": "B"}, "emails": [{"type": "work"}]})
        );
        assert_eq!(
            project(Kind::User, &d, Some("emails.value,emails.type"), None)["emails"],
            json!([{"value": "a@x", "type": "work"}, {"value": "b@x"}])
        );
        assert_eq!(
            project(Kind::User, &d, Some("emails,emails.type"), None)["emails"],
            d["emails"]
        );
        assert_eq!(
            project(
                Kind::User,
                &d,
                Some(
                    "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department,meta.created"
                ),
                None
            ),
            json!({"schemas": [USER_URN, ENTERPRISE_USER_URN], "id": "u1", ENTERPRISE_USER_URN: {"department": "D"}, "meta": {"created": "2020-01-01T00:00:00.000000Z"}})
        );
        assert_eq!(
            project(Kind::User, &d, Some(ENTERPRISE_USER_URN), Some("userName"))
                [ENTERPRISE_USER_URN],
            d[ENTERPRISE_USER_URN]
        );
        assert_eq!(
            project(
                Kind::User,
                &d,
                Some("urn:ietf:params:scim:schemas:core:2.0:User:groups"),
                None
            )["groups"],
            d["groups"]
        );
    }

    #[test]
    fn excluded() {
        let d = user();
        let out = project(
            Kind::User,
            &d,
            None,
            Some(
                "emails, id, schemas, name.givenName, urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value",
            ),
        );
        assert_eq!(
            out,
            json!({
                "schemas": [USER_URN, ENTERPRISE_USER_URN],
                "id": "u1",
                "userName": "bob",
                "name": {"familyName": "B"},
                "groups": [{"value": "g1", "display": "G"}],
                "meta": {"resourceType": "User", "created": "2020-01-01T00:00:00.000000Z"},
                ENTERPRISE_USER_URN: {"department": "D"},
            })
        );
        assert_eq!(project(Kind::User, &d, None, None), d);
        assert_eq!(project(Kind::User, &d, Some(""), Some("")), d);
        let g = json!({"schemas": [GROUP_URN], "id": "g", "displayName": "G", "members": [{"value": "u"}]});
        assert_eq!(
            project(Kind::Group, &g, None, Some("members")),
            json!({"schemas": [GROUP_URN], "id": "g", "displayName": "G"})
        );
        assert_eq!(
            project(Kind::Group, &g, Some("members.value"), None),
            json!({"schemas": [GROUP_URN], "id": "g", "members": [{"value": "u"}]})
        );
    }
}
