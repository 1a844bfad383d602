//! SCIM provisioning (migration V44): an organization's SCIM settings and
//! token (managed by its admins, through their grant), and the Users and
//! Groups its identity provider provisions (through the [`ScimGrant`] its
//! token gives), each one JSON document.
//!
//! Every write of a resource and its effect on the organization's members
//! is one transaction: a User is linked to the account of its e-mail
//! address (made just in time when there is none), its `active` is the
//! membership's status (`false`: suspended, at once), and the role its
//! Groups map to is the membership's role (an owner keeps theirs).

use super::{Datastore, Tx, audit};
use crate::audit::Event;
use crate::authz::{Admin, Grant, ScimGrant, on, perm};
use crate::db::row::db_row;
use crate::error::{Error, ScimFailure};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;
use workspace_scim::{Kind, ScimError};

/// The grant of the admins' operations.
type ManageGrant = Grant<on::Org, Admin<perm::OrganizationAdmin>>;

db_row! {
    /// An organization's SCIM settings (never the token's hash).
    pub struct ScimConfigRow {
        pub org_id: Uuid = "s.organization_id",
        pub token_prefix: Option<String> = "s.token_prefix",
        pub token_created_at: Option<DateTime<Utc>> = "s.token_created_at",
        pub token_last_used_at: Option<DateTime<Utc>> = "s.token_last_used_at",
        pub role_mappings: Value = "s.role_mappings",
        pub default_role: String = "s.default_role",
        pub users: i64 = "(SELECT count(*) FROM scim_resources r \
             WHERE r.organization_id = s.organization_id AND r.kind = 'User')",
        pub groups: i64 = "(SELECT count(*) FROM scim_resources r \
             WHERE r.organization_id = s.organization_id AND r.kind = 'Group')",
        pub created_at: DateTime<Utc> = "s.created_at",
        pub updated_at: DateTime<Utc> = "s.updated_at",
    }
}

db_row! {
    /// A provisioned resource: its document (attributes, `id`, `meta`
    /// times) and version.
    pub struct ScimResourceRow {
        pub id: Uuid = "r.id",
        pub doc: Value = "r.doc",
        pub version: i64 = "r.version",
        pub user_id: Option<Uuid> = "r.user_id",
    }
}

/// The account a User stands for, as its attributes give it.
pub struct ScimPerson {
    /// Checked as a signup checks it, then normalized.
    pub email: String,
    pub email_normalized: String,
    pub first_name: String,
    pub last_name: String,
}

/// What the caller's rules read from a User's document.
pub struct ScimRules {
    /// The account a User stands for (`None`: no e-mail address yet).
    pub person_of: fn(&Value) -> Result<Option<ScimPerson>, ScimError>,
    /// An argon2 hash of a secret nobody knows, for accounts made now.
    pub unusable_password_hash: String,
}

/// A write of a resource.
pub enum ScimWrite<'a> {
    /// `POST`: the sanitized attributes.
    Create(Value),
    /// `PUT`: the sanitized attributes replace the stored ones.
    Replace {
        id: Uuid,
        if_match: Option<i64>,
        doc: Value,
    },
    /// `PATCH`: the operations, applied to the stored attributes.
    Patch {
        id: Uuid,
        if_match: Option<i64>,
        apply: &'a (dyn Fn(&mut Value) -> Result<(), ScimError> + Sync),
    },
}

/// The time format of `meta.created` / `meta.lastModified` in documents
/// (RFC 3339, UTC, microseconds: ordered as text).
const NOW_TEXT: &str = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

const CONFIG_SQL: &str = "SELECT {cols} FROM scim_configs s WHERE s.organization_id = $1";

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::User => "User",
        Kind::Group => "Group",
    }
}

fn not_found(kind: Kind) -> ScimFailure {
    ScimFailure::Protocol(ScimError::new(
        404,
        None,
        format!("{} not found", kind_name(kind)),
    ))
}

fn unique_violation(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// The stored attributes of a document: without `id` and `meta`.
fn attributes_of(doc: &Value) -> Value {
    let mut doc = doc.clone();
    if let Some(map) = doc.as_object_mut() {
        map.remove("id");
        map.remove("meta");
    }
    doc
}

/// The ids of a Group document's members.
fn member_ids(doc: &Value) -> Vec<Uuid> {
    doc.get("members")
        .and_then(Value::as_array)
        .map(|members| {
            members
                .iter()
                .filter_map(|m| m.get("value").and_then(Value::as_str))
                .filter_map(|v| Uuid::parse_str(v).ok())
                .collect()
        })
        .unwrap_or_default()
}

impl Datastore {
    /// The organization's SCIM settings.
    pub async fn scim_config(&self, grant: &ManageGrant) -> Result<Option<ScimConfigRow>, Error> {
        let conn = self.quick().await?;
        let sql = CONFIG_SQL.replace("{cols}", ScimConfigRow::COLUMNS);
        let row = conn.query_opt(&sql, &[&grant.org_id()]).await?;
        Ok(row.as_ref().map(ScimConfigRow::from_row))
    }

    /// Sets the organization's group-to-role mappings (turning SCIM on if
    /// it was off), and gives every provisioned member the role they map
    /// to now, in one transaction.
    pub async fn scim_config_put(
        &self,
        grant: &ManageGrant,
        role_mappings: &Value,
        default_role: &str,
    ) -> Result<ScimConfigRow, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO scim_configs AS s (organization_id, role_mappings, default_role) \
             VALUES ($1, $2, $3) \
             ON CONFLICT (organization_id) DO UPDATE SET role_mappings = EXCLUDED.role_mappings, \
                 default_role = EXCLUDED.default_role, updated_at = now()",
            &[&org_id, &role_mappings, &default_role],
        )
        .await?;
        let users: Vec<Uuid> = tx
            .query(
                "SELECT id FROM scim_resources WHERE organization_id = $1 AND kind = 'User' \
                 AND user_id IS NOT NULL ORDER BY id",
                &[&org_id],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for id in users {
            set_role(&tx, org_id, id, grant.origin()).await?;
        }
        let event = Event::org(org_id, "scim.configured").details(serde_json::json!({
            "role_mappings": role_mappings,
            "default_role": default_role,
        }));
        audit::record(&tx, grant.origin(), &event).await?;
        let sql = CONFIG_SQL.replace("{cols}", ScimConfigRow::COLUMNS);
        let row = tx.query_one(&sql, &[&org_id]).await?;
        tx.commit().await?;
        Ok(ScimConfigRow::from_row(&row))
    }

    /// Issues the organization's SCIM token (its hash and first
    /// characters; the previous one stops working), turning SCIM on with
    /// the default mappings if it was off.
    pub async fn scim_token_issue(
        &self,
        grant: &ManageGrant,
        hash: &[u8],
        prefix: &str,
    ) -> Result<ScimConfigRow, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO scim_configs AS s (organization_id, token_hash, token_prefix, \
                 token_created_at) VALUES ($1, $2, $3, now()) \
             ON CONFLICT (organization_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, \
                 token_prefix = EXCLUDED.token_prefix, token_created_at = now(), \
                 token_last_used_at = NULL, updated_at = now()",
            &[&org_id, &hash, &prefix],
        )
        .await?;
        let event = Event::org(org_id, "scim.token_issued")
            .details(serde_json::json!({ "token_prefix": prefix }));
        audit::record(&tx, grant.origin(), &event).await?;
        let sql = CONFIG_SQL.replace("{cols}", ScimConfigRow::COLUMNS);
        let row = tx.query_one(&sql, &[&org_id]).await?;
        tx.commit().await?;
        Ok(ScimConfigRow::from_row(&row))
    }

    /// Turns SCIM off: the token and the provisioned resources go; the
    /// members they made stay as they are. `false` when it was off.
    pub async fn scim_delete(&self, grant: &ManageGrant) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM scim_configs WHERE organization_id = $1",
                &[&grant.org_id()],
            )
            .await?;
        if n == 0 {
            return Ok(false);
        }
        let event = Event::org(grant.org_id(), "scim.removed");
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The organization whose SCIM token has this hash (its last use
    /// noted, at most once a minute).
    pub async fn scim_authenticate(&self, token_hash: &[u8]) -> Result<Option<Uuid>, Error> {
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                "WITH c AS (SELECT organization_id, token_last_used_at FROM scim_configs \
                     WHERE token_hash = $1), \
                 u AS (UPDATE scim_configs s SET token_last_used_at = now() FROM c \
                     WHERE s.organization_id = c.organization_id \
                       AND (c.token_last_used_at IS NULL \
                            OR c.token_last_used_at < now() - interval '1 minute')) \
                 SELECT organization_id FROM c",
                &[&token_hash],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// One provisioned resource.
    pub async fn scim_get(
        &self,
        grant: &ScimGrant,
        kind: Kind,
        id: Uuid,
    ) -> Result<Option<ScimResourceRow>, Error> {
        let conn = self.quick().await?;
        let sql = format!(
            "SELECT {} FROM scim_resources r \
             WHERE r.organization_id = $1 AND r.kind = $2 AND r.id = $3",
            ScimResourceRow::COLUMNS
        );
        let row = conn
            .query_opt(&sql, &[&grant.org_id(), &kind_name(kind), &id])
            .await?;
        Ok(row.as_ref().map(ScimResourceRow::from_row))
    }

    /// A page of the organization's resources of a kind matching a filter
    /// (a `jsonpath` predicate over the documents), oldest first, and how
    /// many match. A predicate PostgreSQL refuses is `400 invalidFilter`.
    pub async fn scim_list(
        &self,
        grant: &ScimGrant,
        kind: Kind,
        filter: Option<&str>,
        offset: i64,
        limit: i64,
    ) -> Result<(i64, Vec<ScimResourceRow>), ScimFailure> {
        let conn = self.conn().await?;
        let page_sql = format!(
            "SELECT {} FROM scim_resources r \
             WHERE r.organization_id = $1 AND r.kind = $2 \
               AND ($3::text IS NULL OR r.doc @@ $3::text::jsonpath) \
             ORDER BY r.created_at, r.id OFFSET $4 LIMIT $5",
            ScimResourceRow::COLUMNS
        );
        let count_sql = "SELECT count(*) FROM scim_resources r \
             WHERE r.organization_id = $1 AND r.kind = $2 \
               AND ($3::text IS NULL OR r.doc @@ $3::text::jsonpath)";
        let org_id = grant.org_id();
        let kind = kind_name(kind);
        let count_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&org_id, &kind, &filter];
        let page_params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&org_id, &kind, &filter, &offset, &limit];
        let (count, page) = tokio::join!(
            conn.query_one(count_sql, &count_params),
            conn.query(&page_sql, &page_params),
        );
        let refused = |e: &tokio_postgres::Error| {
            e.code().is_some_and(|c| {
                c.code().starts_with("42") || c.code().starts_with("22") || c.code() == "2203A"
            })
        };
        match (count, page) {
            (Ok(count), Ok(page)) => Ok((
                count.get(0),
                page.iter().map(ScimResourceRow::from_row).collect(),
            )),
            (Err(e), _) | (_, Err(e)) if refused(&e) => Err(ScimFailure::Protocol(ScimError::new(
                400,
                Some("invalidFilter"),
                "the filter cannot be evaluated",
            ))),
            (Err(e), _) | (_, Err(e)) => Err(e.into()),
        }
    }

    /// The Groups each of these Users is a member of: (user, group,
    /// group's displayName).
    pub async fn scim_groups_of(
        &self,
        grant: &ScimGrant,
        users: &[Uuid],
    ) -> Result<Vec<(Uuid, Uuid, String)>, Error> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.quick().await?;
        let rows = conn
            .query(
                "SELECT u, g.id, coalesce(g.doc ->> 'displayName', '') FROM unnest($2::uuid[]) u \
                 JOIN scim_resources g ON g.organization_id = $1 AND g.kind = 'Group' \
                  AND g.doc -> 'members' @> jsonb_build_array(jsonb_build_object('value', u::text)) \
                 ORDER BY g.created_at, g.id",
                &[&grant.org_id(), &users],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    /// Creates, replaces or patches a resource and applies what it means
    /// to the organization's members, in one transaction. `412` when
    /// `if_match` names another version, `409 uniqueness` for a taken
    /// `userName` or an address of an account outside the organization.
    pub async fn scim_write(
        &self,
        grant: &ScimGrant,
        kind: Kind,
        write: ScimWrite<'_>,
        rules: &ScimRules,
    ) -> Result<ScimResourceRow, ScimFailure> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let (id, before, doc, created) = match write {
            ScimWrite::Create(doc) => (Uuid::new_v4(), None, doc, true),
            ScimWrite::Replace { id, if_match, doc } => {
                let stored = locked(&tx, org_id, kind, id, if_match).await?;
                (id, Some(stored), doc, false)
            }
            ScimWrite::Patch {
                id,
                if_match,
                apply,
            } => {
                let stored = locked(&tx, org_id, kind, id, if_match).await?;
                let mut doc = attributes_of(&stored.doc);
                apply(&mut doc)?;
                (id, Some(stored), doc, false)
            }
        };
        let user_name_lower = match kind {
            Kind::User => Some(
                doc.get("userName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_lowercase(),
            ),
            Kind::Group => None,
        };
        let mut affected: Vec<Uuid> = Vec::new();
        if kind == Kind::Group {
            let members = member_ids(&doc);
            let values = doc
                .get("members")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let known: i64 = tx
                .query_one(
                    "SELECT count(*) FROM scim_resources \
                     WHERE organization_id = $1 AND id = ANY($2) AND id <> $3",
                    &[&org_id, &members, &id],
                )
                .await?
                .get(0);
            let mut distinct = members.clone();
            distinct.sort();
            distinct.dedup();
            if members.len() != values || known != distinct.len() as i64 {
                return Err(ScimFailure::Protocol(ScimError::new(
                    400,
                    Some("invalidValue"),
                    "every member must be the id of a User or another Group of this \
                     organization's provisioned resources",
                )));
            }
            affected.extend(distinct);
            if let Some(before) = &before {
                affected.extend(member_ids(&before.doc));
            }
        } else {
            affected.push(id);
        }
        let doc_sql = format!(
            "$2::jsonb || jsonb_build_object('id', $1::uuid::text, 'meta', jsonb_build_object(\
             'created', coalesce(r.doc -> 'meta' -> 'created', to_jsonb({NOW_TEXT})), \
             'lastModified', to_jsonb({NOW_TEXT})))"
        );
        let written = if created {
            tx.query_one(
                &format!(
                    "INSERT INTO scim_resources AS r (id, organization_id, kind, doc, \
                         user_name_lower) \
                     VALUES ($1::uuid, $3, $4, $2::jsonb || jsonb_build_object('id', $1::uuid::text, \
                         'meta', jsonb_build_object('created', {NOW_TEXT}, \
                         'lastModified', {NOW_TEXT})), $5) \
                     RETURNING {}",
                    ScimResourceRow::COLUMNS
                ),
                &[&id, &doc, &org_id, &kind_name(kind), &user_name_lower],
            )
            .await
        } else {
            tx.query_one(
                &format!(
                    "UPDATE scim_resources r SET doc = {doc_sql}, version = r.version + 1, \
                         user_name_lower = $5, updated_at = now() \
                     WHERE r.id = $1 AND r.organization_id = $3 AND r.kind = $4 \
                     RETURNING {}",
                    ScimResourceRow::COLUMNS
                ),
                &[&id, &doc, &org_id, &kind_name(kind), &user_name_lower],
            )
            .await
        };
        let written = match written {
            Ok(row) => ScimResourceRow::from_row(&row),
            Err(e) if unique_violation(&e) => {
                return Err(ScimFailure::Protocol(ScimError::new(
                    409,
                    Some("uniqueness"),
                    "another User of the organization has this userName",
                )));
            }
            Err(e) => return Err(e.into()),
        };
        affected.sort();
        affected.dedup();
        for user in affected {
            settle_user(&tx, grant, user, rules).await?;
        }
        let written = tx
            .query_one(
                &format!(
                    "SELECT {} FROM scim_resources r WHERE r.id = $1",
                    ScimResourceRow::COLUMNS
                ),
                &[&written.id],
            )
            .await?;
        tx.commit().await?;
        Ok(ScimResourceRow::from_row(&written))
    }

    /// Deletes a resource. A User's membership is suspended at once (an
    /// owner's is kept) and it leaves its Groups; a Group's members get
    /// the role they map to without it.
    pub async fn scim_delete_resource(
        &self,
        grant: &ScimGrant,
        kind: Kind,
        id: Uuid,
        if_match: Option<i64>,
        rules: &ScimRules,
    ) -> Result<(), ScimFailure> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let stored = locked(&tx, org_id, kind, id, if_match).await?;
        tx.execute("DELETE FROM scim_resources WHERE id = $1", &[&id])
            .await?;
        match kind {
            Kind::User => {
                tx.execute(
                    &format!(
                        "UPDATE scim_resources g SET doc = jsonb_set(jsonb_set(g.doc, '{{members}}', \
                             coalesce((SELECT jsonb_agg(m) FROM jsonb_array_elements(g.doc -> 'members') m \
                                       WHERE m ->> 'value' <> $2::uuid::text), '[]'::jsonb)), \
                             '{{meta,lastModified}}', to_jsonb({NOW_TEXT})), \
                           version = g.version + 1, updated_at = now() \
                         WHERE g.organization_id = $1 AND g.kind = 'Group' \
                           AND g.doc -> 'members' @> \
                               jsonb_build_array(jsonb_build_object('value', $2::uuid::text))"
                    ),
                    &[&org_id, &id],
                )
                .await?;
                if let Some(user_id) = stored.user_id {
                    set_status(&tx, grant, user_id, false).await?;
                }
            }
            Kind::Group => {
                let mut members = member_ids(&stored.doc);
                members.sort();
                members.dedup();
                for user in members {
                    settle_user(&tx, grant, user, rules).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }
}

/// A resource locked for a write, checked against `If-Match`.
async fn locked(
    tx: &Tx<'_>,
    org_id: Uuid,
    kind: Kind,
    id: Uuid,
    if_match: Option<i64>,
) -> Result<ScimResourceRow, ScimFailure> {
    let row = tx
        .query_opt(
            &format!(
                "SELECT {} FROM scim_resources r \
                 WHERE r.organization_id = $1 AND r.kind = $2 AND r.id = $3 FOR UPDATE",
                ScimResourceRow::COLUMNS
            ),
            &[&org_id, &kind_name(kind), &id],
        )
        .await?
        .map(|r| ScimResourceRow::from_row(&r))
        .ok_or_else(|| not_found(kind))?;
    if let Some(expected) = if_match
        && expected != row.version
    {
        return Err(ScimFailure::Protocol(ScimError::new(
            412,
            None,
            "the resource changed since that version (If-Match)",
        )));
    }
    Ok(row)
}

/// Applies a provisioned User (a User or Group write touched it) to the
/// organization's members: links it to its account (made now when its
/// address has none), sets the membership's status from `active` and its
/// role from its Groups. An id that is not a User (a nested Group) or no
/// longer exists is skipped.
async fn settle_user(
    tx: &Tx<'_>,
    grant: &ScimGrant,
    id: Uuid,
    rules: &ScimRules,
) -> Result<(), ScimFailure> {
    let org_id = grant.org_id();
    let Some(row) = tx
        .query_opt(
            &format!(
                "SELECT {} FROM scim_resources r \
                 WHERE r.organization_id = $1 AND r.kind = 'User' AND r.id = $2",
                ScimResourceRow::COLUMNS
            ),
            &[&org_id, &id],
        )
        .await?
        .map(|r| ScimResourceRow::from_row(&r))
    else {
        return Ok(());
    };
    let user_id = match row.user_id {
        Some(user_id) => user_id,
        None => {
            let Some(person) = (rules.person_of)(&row.doc)? else {
                // No address yet: nobody to provision.
                return Ok(());
            };
            let user_id = link_account(tx, grant, &person, &rules.unusable_password_hash).await?;
            let linked = tx
                .execute(
                    "UPDATE scim_resources SET user_id = $2 WHERE id = $1",
                    &[&id, &user_id],
                )
                .await;
            match linked {
                Ok(_) => {}
                Err(e) if unique_violation(&e) => {
                    return Err(ScimFailure::Protocol(ScimError::new(
                        409,
                        Some("uniqueness"),
                        "another User of the organization stands for the account of this \
                         e-mail address",
                    )));
                }
                Err(e) => return Err(e.into()),
            }
            user_id
        }
    };
    let active = row
        .doc
        .get("active")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let status: Option<(String, bool)> = tx
        .query_opt(
            "SELECT m.status::text, r.is_system_role AND r.name = 'owner' FROM memberships m \
             JOIN roles r ON r.id = m.role_id \
             WHERE m.user_id = $1 AND m.organization_id = $2 FOR UPDATE OF m",
            &[&user_id, &org_id],
        )
        .await?
        .map(|r| (r.get(0), r.get(1)));
    match status {
        None => {
            let role_id = role_for(tx, org_id, id).await?;
            tx.execute(
                "INSERT INTO memberships (organization_id, user_id, role_id, status) \
                 VALUES ($1, $2, $3, $4)",
                &[
                    &org_id,
                    &user_id,
                    &role_id,
                    &if active { "active" } else { "suspended" },
                ],
            )
            .await?;
            let event = Event::org(org_id, "member.joined")
                .target("user", user_id)
                .details(serde_json::json!({ "via": "scim", "active": active }));
            audit::record(tx, grant.origin(), &event).await?;
        }
        Some((_, true)) if !active => {
            return Err(ScimFailure::Protocol(ScimError::new(
                400,
                Some("mutability"),
                "an owner of the organization cannot be deactivated by provisioning: \
                 transfer the ownership first",
            )));
        }
        Some((_, true)) => {}
        Some(_) => {
            set_status(tx, grant, user_id, active).await?;
            set_role(tx, org_id, id, grant.origin()).await?;
        }
    }
    Ok(())
}

/// The account of a provisioned person's address: the organization's
/// member (or invitee) with it, or a new account (with its personal
/// organization, as a signup makes it). An address of an account outside
/// the organization is `409 uniqueness`: provisioning never takes over an
/// account (invite it instead).
async fn link_account(
    tx: &Tx<'_>,
    grant: &ScimGrant,
    person: &ScimPerson,
    unusable_password_hash: &str,
) -> Result<Uuid, ScimFailure> {
    let org_id = grant.org_id();
    let existing: Option<(Uuid, bool)> = tx
        .query_opt(
            "SELECT u.id, EXISTS (SELECT 1 FROM memberships m \
                 WHERE m.user_id = u.id AND m.organization_id = $2) \
             FROM users u WHERE u.email_normalized = $1 FOR UPDATE OF u",
            &[&person.email_normalized, &org_id],
        )
        .await?
        .map(|r| (r.get(0), r.get(1)));
    match existing {
        Some((user_id, true)) => {
            tx.execute(
                "UPDATE users SET password_hash = $2 WHERE id = $1 AND password_hash IS NULL",
                &[&user_id, &unusable_password_hash],
            )
            .await?;
            Ok(user_id)
        }
        Some((_, false)) => Err(ScimFailure::Protocol(ScimError::new(
            409,
            Some("uniqueness"),
            "an account with this e-mail address exists outside the organization: \
             invite it to the organization first",
        ))),
        None => {
            let user_id = Uuid::new_v4();
            let made = tx
                .execute(
                    "INSERT INTO users (id, email, email_normalized, first_name, last_name, \
                         password_hash) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (email_normalized) DO NOTHING",
                    &[
                        &user_id,
                        &person.email,
                        &person.email_normalized,
                        &person.first_name,
                        &person.last_name,
                        &unusable_password_hash,
                    ],
                )
                .await?;
            if made == 0 {
                return Err(ScimFailure::Protocol(ScimError::new(
                    409,
                    Some("uniqueness"),
                    "an account with this e-mail address was made at the same moment: retry",
                )));
            }
            let name = format!("{} {}'s organization", person.first_name, person.last_name);
            let slug_base = person.email_normalized.split('@').next().unwrap_or("org");
            super::organizations::insert_with_system_roles(tx, &name, slug_base, user_id, true)
                .await?;
            let event = Event::system("user.signup")
                .target("user", user_id)
                .details(serde_json::json!({ "scim_organization_id": org_id }));
            audit::record(tx, grant.origin(), &event).await?;
            Ok(user_id)
        }
    }
}

/// Sets a provisioned member's status (`active` or `suspended`; an
/// owner's and an invitee's unchanged by deactivation), audited when it
/// changes.
async fn set_status(
    tx: &Tx<'_>,
    grant: &ScimGrant,
    user_id: Uuid,
    active: bool,
) -> Result<(), Error> {
    let org_id = grant.org_id();
    let (to, from): (&str, &[&str]) = if active {
        ("active", &["suspended", "invited"])
    } else {
        ("suspended", &["active"])
    };
    let from: Vec<&str> = from.to_vec();
    let changed = tx
        .execute(
            "UPDATE memberships m SET status = $3, updated_at = now() \
             WHERE m.user_id = $1 AND m.organization_id = $2 AND m.status = ANY($4) \
               AND NOT EXISTS (SELECT 1 FROM roles r WHERE r.id = m.role_id \
                               AND r.is_system_role AND r.name = 'owner')",
            &[&user_id, &org_id, &to, &from],
        )
        .await?;
    if changed == 1 {
        let action = if active {
            "member.reactivated"
        } else {
            "member.suspended"
        };
        let event = Event::org(org_id, action)
            .target("user", user_id)
            .details(serde_json::json!({ "via": "scim" }));
        audit::record(tx, grant.origin(), &event).await?;
    }
    Ok(())
}

/// The role a provisioned User's Groups map to (the first mapping naming
/// one of them, else the default; a mapped role that no longer exists
/// falls back to `member`).
async fn role_for(tx: &Tx<'_>, org_id: Uuid, scim_user: Uuid) -> Result<Uuid, Error> {
    let row = tx
        .query_one(
            "WITH cfg AS (SELECT role_mappings, default_role FROM scim_configs \
                 WHERE organization_id = $1), \
             mine AS (SELECT g.doc ->> 'displayName' AS name FROM scim_resources g \
                 WHERE g.organization_id = $1 AND g.kind = 'Group' \
                   AND g.doc -> 'members' @> \
                       jsonb_build_array(jsonb_build_object('value', $2::uuid::text))), \
             wanted AS ( \
                 SELECT m.v ->> 'role' AS role, m.ord FROM cfg, \
                     jsonb_array_elements(cfg.role_mappings) WITH ORDINALITY AS m(v, ord) \
                 WHERE m.v ->> 'group' IN (SELECT name FROM mine) \
                 UNION ALL SELECT default_role, 1000000 FROM cfg \
                 UNION ALL SELECT 'member', 1000001) \
             SELECT r.id FROM wanted w JOIN roles r ON r.organization_id = $1 AND r.name = w.role \
                 AND NOT (r.is_system_role AND r.name = 'owner') \
             ORDER BY w.ord LIMIT 1",
            &[&org_id, &scim_user],
        )
        .await?;
    Ok(row.get(0))
}

/// Gives a provisioned, linked User's membership the role its Groups map
/// to (an owner keeps theirs), audited when it changes.
async fn set_role(
    tx: &Tx<'_>,
    org_id: Uuid,
    scim_user: Uuid,
    origin: &crate::audit::Origin,
) -> Result<(), Error> {
    let role_id = role_for(tx, org_id, scim_user).await?;
    let changed = tx
        .query_opt(
            "UPDATE memberships m SET role_id = $3, updated_at = now() \
             FROM scim_resources s \
             WHERE s.id = $2 AND s.organization_id = $1 AND m.user_id = s.user_id \
               AND m.organization_id = $1 AND m.role_id <> $3 \
               AND NOT EXISTS (SELECT 1 FROM roles r WHERE r.id = m.role_id \
                               AND r.is_system_role AND r.name = 'owner') \
             RETURNING m.user_id, (SELECT name FROM roles WHERE id = $3)",
            &[&org_id, &scim_user, &role_id],
        )
        .await?;
    if let Some(row) = changed {
        let user_id: Uuid = row.get(0);
        let role: String = row.get(1);
        let event = Event::org(org_id, "member.role_changed")
            .target("user", user_id)
            .details(serde_json::json!({ "role": role, "via": "scim" }));
        audit::record(tx, origin, &event).await?;
    }
    Ok(())
}
