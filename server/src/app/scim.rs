//! SCIM 2.0 provisioning per organization (issue #37, RFC 7643/7644):
//! admins turn it on and issue its bearer token (`/api/org/scim`); the
//! organization's identity provider provisions Users and Groups at
//! `/scim/v2` with it. What a resource may hold, filters, PATCH and
//! projections are `workspace-scim`'s (pure); here: the token, the
//! documents' storage (through the datastore, every write one
//! transaction), rendering (`meta`, `groups`, ETags) and what provisioning
//! does to members (see [`crate::db::datastore::scim`]).

use super::sso::ManageGrant;
use crate::authz::ScimGrant;
use crate::context::ServerContext;
use crate::db::datastore::scim::{
    ScimConfigRow, ScimPerson, ScimResourceRow, ScimRules, ScimWrite,
};
use crate::error::{Error, ScimFailure};
use dropshot::Body;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;
use workspace_api::scim::{
    MAX_RESULTS, MEDIA_TYPE, ROLE_MAPPINGS_MAX, ScimConfig, ScimConfigInput, ScimListQuery,
    ScimResourceQuery, ScimRoleMapping, ScimTokenIssued, TOKEN_PREFIX,
};
use workspace_scim::{Kind, ScimError};

/// The base URL of the organization's SCIM service.
fn base_url(cx: &ServerContext) -> String {
    format!("{}/scim/v2", cx.config.mail.link_base())
}

fn config_view(cx: &ServerContext, row: ScimConfigRow) -> ScimConfig {
    ScimConfig {
        organization_id: row.org_id,
        base_url: base_url(cx),
        token_set: row.token_prefix.is_some(),
        token_prefix: row.token_prefix,
        token_created_at: row.token_created_at,
        token_last_used_at: row.token_last_used_at,
        role_mappings: serde_json::from_value(row.role_mappings).unwrap_or_default(),
        default_role: row.default_role,
        users: row.users,
        groups: row.groups,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

/// `GET /api/org/scim`.
pub async fn get(cx: &ServerContext, grant: &ManageGrant) -> Result<ScimConfig, Error> {
    let row = cx.datastore.scim_config(grant).await?;
    row.map(|r| config_view(cx, r)).ok_or(Error::NotFound {
        what: "SCIM provisioning",
    })
}

/// `PUT /api/org/scim`.
pub async fn put(
    cx: &ServerContext,
    grant: &ManageGrant,
    input: ScimConfigInput,
) -> Result<ScimConfig, Error> {
    if input.role_mappings.len() > ROLE_MAPPINGS_MAX
        || input
            .role_mappings
            .iter()
            .any(|m| m.group.is_empty() || m.group.chars().count() > 200)
    {
        return Err(Error::invalid(
            "invalid_request",
            format!("at most {ROLE_MAPPINGS_MAX} role_mappings, each group 1 to 200 characters"),
        ));
    }
    let mut roles: Vec<String> = input.role_mappings.iter().map(|m| m.role.clone()).collect();
    roles.push(input.default_role.clone());
    let missing = cx.datastore.ungivable_roles(grant, &roles).await?;
    if let Some(name) = missing.first() {
        return Err(Error::invalid(
            "invalid_role",
            format!("{name:?} is not a role of the organization that provisioning may give"),
        ));
    }
    let mappings: Vec<ScimRoleMapping> = input.role_mappings;
    let mappings = serde_json::to_value(&mappings).map_err(Error::internal)?;
    let row = cx
        .datastore
        .scim_config_put(grant, &mappings, &input.default_role)
        .await?;
    Ok(config_view(cx, row))
}

/// `POST /api/org/scim/token`.
pub async fn issue_token(
    cx: &ServerContext,
    grant: &ManageGrant,
) -> Result<ScimTokenIssued, Error> {
    let (token, hash) = crate::authn::new_secret(TOKEN_PREFIX);
    let prefix: String = token.chars().take(TOKEN_PREFIX.len() + 8).collect();
    let row = cx.datastore.scim_token_issue(grant, &hash, &prefix).await?;
    Ok(ScimTokenIssued {
        token,
        config: config_view(cx, row),
    })
}

/// `DELETE /api/org/scim`.
pub async fn delete(cx: &ServerContext, grant: &ManageGrant) -> Result<(), Error> {
    if cx.datastore.scim_delete(grant).await? {
        Ok(())
    } else {
        Err(Error::NotFound {
            what: "SCIM provisioning",
        })
    }
}

// ---- The SCIM service ----

/// A SCIM answer: `status`, `application/scim+json`, the body.
fn answer(status: StatusCode, body: &Value) -> Result<Response<Body>, ScimFailure> {
    let text = serde_json::to_vec(body).map_err(Error::internal)?;
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, MEDIA_TYPE)
        .body(Body::from(text))
        .map_err(|e| ScimFailure::Server(Error::internal(e)))
}

/// The answer of a failure: a SCIM error body with its status (a server
/// error's message, never its internals; `Retry-After` when busy).
pub fn failure_answer(cx: &ServerContext, failure: ScimFailure) -> Response<Body> {
    let (status, body, retry) = match failure {
        ScimFailure::Protocol(e) => (e.status, e.body(), None),
        ScimFailure::Server(e) => {
            let retry = match &e {
                Error::Busy {
                    retry_after_secs, ..
                }
                | Error::TooManyRequests {
                    retry_after_secs, ..
                } => Some(*retry_after_secs),
                Error::Unavailable { .. } => Some(1),
                _ => None,
            };
            if let Error::Internal { internal } = &e {
                slog::error!(cx.log, "SCIM request failed"; "error" => internal);
            }
            let http: dropshot::HttpError = e.into();
            let status = http.status_code.as_u16();
            let scim = ScimError::new(status, None, http.external_message);
            (status, scim.body(), retry)
        }
    };
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(http::header::CONTENT_TYPE, MEDIA_TYPE);
    if status == 401 {
        builder = builder.header(http::header::WWW_AUTHENTICATE, "Bearer");
    }
    if let Some(secs) = retry {
        builder = builder.header(http::header::RETRY_AFTER, secs.to_string());
    }
    builder
        .body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The answer to a path under `/scim/v2` that no SCIM operation serves: a
/// SCIM `404` (RFC 7644 §3.12), as SCIM clients expect; other paths keep
/// the API's own `404`.
pub fn unknown_path(path: &str) -> Option<Response<Body>> {
    if !path.starts_with("/scim/v2/") && path != "/scim/v2" {
        return None;
    }
    let error = ScimError::new(404, None, "no SCIM resource or endpoint at this path");
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(http::header::CONTENT_TYPE, MEDIA_TYPE)
        .body(Body::from(error.body().to_string()))
        .ok()
}

/// `POST /scim/v2/.search`: searching several resource types at once is
/// not supported (`501`, RFC 7644 §3.4.3 and §3.12).
pub fn search() -> Result<Response<Body>, ScimFailure> {
    Err(ScimFailure::Protocol(ScimError::new(
        501,
        None,
        "searching several resource types at once is not supported: \
         GET /scim/v2/Users or /scim/v2/Groups with a filter",
    )))
}

/// `401` for a request without a SCIM token of an organization.
pub fn unauthenticated() -> ScimFailure {
    ScimFailure::Protocol(ScimError::new(
        401,
        None,
        "a SCIM bearer token of an organization is required (POST /api/org/scim/token)",
    ))
}

fn not_found(kind: Kind) -> ScimFailure {
    ScimFailure::Protocol(ScimError::new(
        404,
        None,
        format!("{} not found", kind.name()),
    ))
}

fn parse_id(kind: Kind, id: &str) -> Result<Uuid, ScimFailure> {
    Uuid::parse_str(id).map_err(|_| not_found(kind))
}

/// The version an `If-Match` / `If-None-Match` header names (`W/"3"`,
/// `"3"`); `None` for none or `*`; a version that cannot be ours is `-1`.
fn entity_tag(headers: &HeaderMap, name: http::HeaderName) -> Option<i64> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    if value == "*" {
        return None;
    }
    let tag = value.strip_prefix("W/").unwrap_or(value).trim_matches('"');
    Some(tag.parse().unwrap_or(-1))
}

fn etag(version: i64) -> String {
    format!("W/\"{version}\"")
}

/// A stored resource as the client reads it: `schemas`, attributes, `id`,
/// `meta` (type, times, location, version), a User's `groups`.
fn render(kind: Kind, row: &ScimResourceRow, base: &str, groups: &[(Uuid, Uuid, String)]) -> Value {
    let mut doc = row.doc.clone();
    if let Some(map) = doc.as_object_mut() {
        let (created, modified) = map
            .get("meta")
            .map(|m| (m.get("created").cloned(), m.get("lastModified").cloned()))
            .unwrap_or_default();
        let mut meta = serde_json::Map::new();
        meta.insert("resourceType".into(), json!(kind.name()));
        if let Some(created) = created {
            meta.insert("created".into(), created);
        }
        if let Some(modified) = modified {
            meta.insert("lastModified".into(), modified);
        }
        meta.insert(
            "location".into(),
            json!(format!("{base}/{}/{}", kind.endpoint(), row.id)),
        );
        meta.insert("version".into(), json!(etag(row.version)));
        map.insert("meta".into(), Value::Object(meta));
        map.insert("id".into(), json!(row.id.to_string()));
        if kind == Kind::User {
            let mine: Vec<Value> = groups
                .iter()
                .filter(|(user, _, _)| *user == row.id)
                .map(|(_, group, name)| {
                    json!({
                        "value": group.to_string(),
                        "$ref": format!("{base}/Groups/{group}"),
                        "display": name,
                        "type": "direct",
                    })
                })
                .collect();
            if mine.is_empty() {
                map.remove("groups");
            } else {
                map.insert("groups".into(), Value::Array(mine));
            }
        }
    }
    doc
}

/// `attributes` / `excludedAttributes` applied to a rendered resource;
/// `meta` is kept unless excluded by name (its `version` is the `ETag`,
/// which clients such as scim2-client put back into `meta`).
fn projected(kind: Kind, full: &Value, attributes: Option<&str>, excluded: Option<&str>) -> Value {
    let mut doc = workspace_scim::project::project(kind, full, attributes, excluded);
    let meta_excluded = excluded.is_some_and(|list| {
        attributes.is_none()
            && list
                .split(',')
                .any(|a| a.trim().eq_ignore_ascii_case("meta"))
    });
    if !meta_excluded && let (Some(map), Some(meta)) = (doc.as_object_mut(), full.get("meta")) {
        map.entry("meta").or_insert_with(|| meta.clone());
    }
    doc
}

/// A resource's answer (`200`/`201`) with its `ETag` (and `Location`
/// when created).
async fn resource_answer(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    row: &ScimResourceRow,
    status: StatusCode,
    query: Option<&ScimResourceQuery>,
) -> Result<Response<Body>, ScimFailure> {
    let base = base_url(cx);
    let groups = if kind == Kind::User {
        cx.datastore.scim_groups_of(grant, &[row.id]).await?
    } else {
        Vec::new()
    };
    let full = render(kind, row, &base, &groups);
    let doc = match query {
        Some(q) => projected(
            kind,
            &full,
            q.attributes.as_deref(),
            q.excluded_attributes.as_deref(),
        ),
        None => full,
    };
    let mut response = answer(status, &doc)?;
    let headers = response.headers_mut();
    if let Ok(v) = http::HeaderValue::from_str(&etag(row.version)) {
        headers.insert(http::header::ETAG, v);
    }
    if status == StatusCode::CREATED
        && let Ok(v) =
            http::HeaderValue::from_str(&format!("{base}/{}/{}", kind.endpoint(), row.id))
    {
        headers.insert(http::header::LOCATION, v);
    }
    Ok(response)
}

/// The account a User stands for: its primary e-mail address (else its
/// first, else `userName` when it is an address), checked as a signup
/// checks one; names from `name`, else `displayName`, else the address.
fn person_of(doc: &Value) -> Result<Option<ScimPerson>, ScimError> {
    let emails = doc.get("emails").and_then(Value::as_array);
    let address = emails
        .and_then(|list| {
            list.iter()
                .find(|e| e.get("primary").and_then(Value::as_bool) == Some(true))
                .or_else(|| list.first())
        })
        .and_then(|e| e.get("value").and_then(Value::as_str))
        .map(str::to_string)
        .or_else(|| {
            doc.get("userName")
                .and_then(Value::as_str)
                .filter(|u| super::auth::validate_email(u).is_ok())
                .map(str::to_string)
        });
    let Some(address) = address else {
        return Ok(None);
    };
    let email = address.trim().to_string();
    super::auth::validate_email(&email).map_err(|e| {
        ScimError::new(
            400,
            Some("invalidValue"),
            format!("the User's e-mail address is not usable: {e}"),
        )
    })?;
    let name = |field: &str| {
        doc.get("name")
            .and_then(|n| n.get(field))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let display = doc
        .get("displayName")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let local = email.split('@').next().unwrap_or("user").to_string();
    let first = name("givenName")
        .or_else(|| display.clone())
        .unwrap_or_else(|| local.clone());
    let last = name("familyName").unwrap_or_default();
    let clean = |value: String, fallback: &str| {
        super::auth::validate_name("name", &value).unwrap_or_else(|_| fallback.to_string())
    };
    Ok(Some(ScimPerson {
        email_normalized: super::auth::normalize_email(&email),
        email,
        first_name: clean(first, &local),
        last_name: clean(last, ""),
    }))
}

async fn rules(cx: &ServerContext) -> Result<ScimRules, Error> {
    Ok(ScimRules {
        person_of,
        unusable_password_hash: super::sso::unusable_password_hash(cx).await?,
    })
}

/// Reads a request body as JSON (`application/scim+json` or
/// `application/json`).
fn json_body(body: &[u8]) -> Result<Value, ScimFailure> {
    serde_json::from_slice(body).map_err(|e| {
        ScimFailure::Protocol(ScimError::new(
            400,
            Some("invalidSyntax"),
            format!("the body is not JSON: {e}"),
        ))
    })
}

/// `GET /scim/v2/ServiceProviderConfig`.
pub fn service_provider_config(cx: &ServerContext) -> Result<Response<Body>, ScimFailure> {
    let base = base_url(cx);
    answer(
        StatusCode::OK,
        &workspace_scim::schema::service_provider_config(&base, MAX_RESULTS),
    )
}

fn list_answer(resources: Vec<Value>) -> Result<Response<Body>, ScimFailure> {
    let n = resources.len();
    answer(
        StatusCode::OK,
        &json!({
            "schemas": [workspace_scim::LIST_RESPONSE_URN],
            "totalResults": n,
            "startIndex": 1,
            "itemsPerPage": n,
            "Resources": resources,
        }),
    )
}

fn find_by_id(what: &str, resources: Vec<Value>, id: &str) -> Result<Response<Body>, ScimFailure> {
    match resources
        .into_iter()
        .find(|r| r.get("id").and_then(Value::as_str) == Some(id))
    {
        Some(r) => answer(StatusCode::OK, &r),
        None => Err(ScimFailure::Protocol(ScimError::new(
            404,
            None,
            format!("{what} not found"),
        ))),
    }
}

/// `GET /scim/v2/ResourceTypes`.
pub fn resource_types(cx: &ServerContext) -> Result<Response<Body>, ScimFailure> {
    list_answer(workspace_scim::schema::resource_types(&base_url(cx)))
}

/// `GET /scim/v2/ResourceTypes/{id}`.
pub fn resource_type(cx: &ServerContext, id: &str) -> Result<Response<Body>, ScimFailure> {
    find_by_id(
        "resource type",
        workspace_scim::schema::resource_types(&base_url(cx)),
        id,
    )
}

/// `GET /scim/v2/Schemas`.
pub fn schemas(cx: &ServerContext) -> Result<Response<Body>, ScimFailure> {
    list_answer(workspace_scim::schema::schemas(&base_url(cx)))
}

/// `GET /scim/v2/Schemas/{id}`.
pub fn schema(cx: &ServerContext, id: &str) -> Result<Response<Body>, ScimFailure> {
    find_by_id("schema", workspace_scim::schema::schemas(&base_url(cx)), id)
}

/// `GET /scim/v2/Users` and `GET /scim/v2/Groups`.
pub async fn list(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    query: ScimListQuery,
) -> Result<Response<Body>, ScimFailure> {
    let filter = match query.filter.as_deref().map(str::trim) {
        Some(f) if !f.is_empty() => Some(workspace_scim::filter::to_jsonpath(
            &workspace_scim::filter::parse(kind, f)?,
        )),
        _ => None,
    };
    // RFC 7644 §3.4.2.4: below 1 is 1; a negative count is 0.
    let start: i64 = query
        .start_index
        .as_deref()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(1)
        .max(1);
    let count: i64 = query
        .count
        .as_deref()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(i64::from(MAX_RESULTS))
        .clamp(0, i64::from(MAX_RESULTS));
    let (total, rows) = cx
        .datastore
        .scim_list(grant, kind, filter.as_deref(), start - 1, count)
        .await?;
    let base = base_url(cx);
    let groups = if kind == Kind::User {
        let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
        cx.datastore.scim_groups_of(grant, &ids).await?
    } else {
        Vec::new()
    };
    let resources: Vec<Value> = rows
        .iter()
        .map(|row| {
            projected(
                kind,
                &render(kind, row, &base, &groups),
                query.attributes.as_deref(),
                query.excluded_attributes.as_deref(),
            )
        })
        .collect();
    answer(
        StatusCode::OK,
        &json!({
            "schemas": [workspace_scim::LIST_RESPONSE_URN],
            "totalResults": total,
            "startIndex": start,
            "itemsPerPage": resources.len(),
            "Resources": resources,
        }),
    )
}

/// `GET /scim/v2/Users/{id}` and `GET /scim/v2/Groups/{id}`
/// (`304` for a matching `If-None-Match`).
pub async fn read(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    id: &str,
    headers: &HeaderMap,
    query: ScimResourceQuery,
) -> Result<Response<Body>, ScimFailure> {
    let id = parse_id(kind, id)?;
    let row = cx
        .datastore
        .scim_get(grant, kind, id)
        .await?
        .ok_or_else(|| not_found(kind))?;
    if entity_tag(headers, http::header::IF_NONE_MATCH) == Some(row.version) {
        return Response::builder()
            .status(StatusCode::NOT_MODIFIED)
            .header(http::header::ETAG, etag(row.version))
            .body(Body::empty())
            .map_err(|e| ScimFailure::Server(Error::internal(e)));
    }
    resource_answer(cx, grant, kind, &row, StatusCode::OK, Some(&query)).await
}

/// `POST /scim/v2/Users` and `POST /scim/v2/Groups`.
pub async fn create(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    body: &[u8],
) -> Result<Response<Body>, ScimFailure> {
    let doc = workspace_scim::schema::sanitize(kind, json_body(body)?)?;
    let rules = rules(cx).await?;
    let row = cx
        .datastore
        .scim_write(grant, kind, ScimWrite::Create(doc), &rules)
        .await?;
    resource_answer(cx, grant, kind, &row, StatusCode::CREATED, None).await
}

/// `PUT /scim/v2/Users/{id}` and `PUT /scim/v2/Groups/{id}`.
pub async fn replace(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    id: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response<Body>, ScimFailure> {
    let id = parse_id(kind, id)?;
    let doc = workspace_scim::schema::sanitize(kind, json_body(body)?)?;
    let rules = rules(cx).await?;
    let if_match = entity_tag(headers, http::header::IF_MATCH);
    let row = cx
        .datastore
        .scim_write(
            grant,
            kind,
            ScimWrite::Replace { id, if_match, doc },
            &rules,
        )
        .await?;
    resource_answer(cx, grant, kind, &row, StatusCode::OK, None).await
}

/// `PATCH /scim/v2/Users/{id}` and `PATCH /scim/v2/Groups/{id}`.
pub async fn patch(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    id: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response<Body>, ScimFailure> {
    let id = parse_id(kind, id)?;
    let operations = json_body(body)?;
    let rules = rules(cx).await?;
    let if_match = entity_tag(headers, http::header::IF_MATCH);
    let apply = |doc: &mut Value| workspace_scim::patch::apply(kind, doc, &operations);
    let row = cx
        .datastore
        .scim_write(
            grant,
            kind,
            ScimWrite::Patch {
                id,
                if_match,
                apply: &apply,
            },
            &rules,
        )
        .await?;
    resource_answer(cx, grant, kind, &row, StatusCode::OK, None).await
}

/// `DELETE /scim/v2/Users/{id}` and `DELETE /scim/v2/Groups/{id}`: `204`.
pub async fn delete_resource(
    cx: &ServerContext,
    grant: &ScimGrant,
    kind: Kind,
    id: &str,
    headers: &HeaderMap,
) -> Result<Response<Body>, ScimFailure> {
    let id = parse_id(kind, id)?;
    let rules = rules(cx).await?;
    let if_match = entity_tag(headers, http::header::IF_MATCH);
    cx.datastore
        .scim_delete_resource(grant, kind, id, if_match, &rules)
        .await?;
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::empty())
        .map_err(|e| ScimFailure::Server(Error::internal(e)))
}
