//! Types of the audit log (issue #36): every change of state or access and
//! every security event, one row each, append-only and chained per
//! organization by a hash. Read by the organization's admins
//! (`audit:read`) and by system administrators (everything).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The default `limit` of `GET /api/audit/events`.
pub const LIST_DEFAULT_LIMIT: u32 = 50;
/// The largest `limit` of `GET /api/audit/events`.
pub const LIST_MAX_LIMIT: u32 = 500;
/// The longest `action`, `target_kind` or `target_id` filter.
pub const FILTER_MAX_CHARS: usize = 200;

/// Who acted.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuditActorKind {
    /// A person logged in (`actor_id` is the user).
    User,
    /// A personal access token, a person's or a service account's
    /// (`actor_id` is the token, `actor_user_id` its user).
    Token,
    /// A deployment key (`actor_id` is the deployment).
    DeploymentKey,
    /// The server itself (retention).
    System,
    /// Nobody authenticated (a failed login).
    Anonymous,
}

/// How an event ended.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    Success,
    /// Tried and failed (a wrong password).
    Failure,
    /// Refused by authorization.
    Denied,
}

/// One audit event.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditEvent {
    /// Increasing over the whole log (newer events have larger ids).
    pub id: i64,
    pub occurred_at: DateTime<Utc>,
    /// The organization; `null` for system-level events (logins, personal
    /// tokens, the permission catalog, retention).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub org_id: Option<Uuid>,
    /// The event's place in its organization's chain (the system chain
    /// for `org_id: null`): 1, 2, 3... without gaps.
    pub seq: i64,
    pub actor_kind: AuditActorKind,
    /// The user, token or deployment that acted.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub actor_id: Option<Uuid>,
    /// The user behind the actor (a token's owner).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub actor_user_id: Option<Uuid>,
    /// What happened, `area.verb` (see the README's list of actions).
    pub action: String,
    /// The kind of object the event is about (`role`, `token`, `user`...).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub target_kind: Option<String>,
    /// That object's id (or name).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub target_id: Option<String>,
    pub outcome: AuditOutcome,
    /// The client's address.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub address: Option<String>,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub user_agent: Option<String>,
    /// The request's id (the `x-request-id` of its response).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub request_id: Option<String>,
    /// Names, ids and counts of the change; never a secret.
    pub details: serde_json::Value,
    /// Hex SHA-256 of the previous event's hash, `seq` and this event's
    /// columns (see `GET /api/audit/verify`).
    pub hash: String,
}

/// One page of `GET /api/audit/events`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditPage {
    pub items: Vec<AuditEvent>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub next_cursor: Option<String>,
}

/// Query of `GET /api/audit/events`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditListQuery {
    /// The organization (its admins). Absent: every event, for system
    /// administrators only.
    pub org_id: Option<Uuid>,
    /// Only events by this user, token or deployment (or by the tokens of
    /// this user).
    pub actor_id: Option<Uuid>,
    /// Only this action; ending with `*`, every action starting with what
    /// precedes it (`role.*`).
    #[schemars(length(min = 1, max = 200))]
    pub action: Option<String>,
    /// Only events about this kind of object.
    #[schemars(length(min = 1, max = 200))]
    pub target_kind: Option<String>,
    /// Only events about this object.
    #[schemars(length(min = 1, max = 200))]
    pub target_id: Option<String>,
    /// Only this outcome.
    pub outcome: Option<AuditOutcome>,
    /// Only events at or after this time (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Only events before this time (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// Where the page starts: the `next_cursor` of the page before
    /// (opaque; absent: the newest event).
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{11}$"))]
    pub cursor: Option<String>,
    /// Items per page: 1 to 500, default 50.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

/// Query of `GET /api/audit/export`: the list's filters.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditExportQuery {
    /// The organization (its admins). Absent: every event, for system
    /// administrators only.
    pub org_id: Option<Uuid>,
    /// As in `GET /api/audit/events`.
    pub actor_id: Option<Uuid>,
    /// As in `GET /api/audit/events` (a trailing `*` is a prefix).
    #[schemars(length(min = 1, max = 200))]
    pub action: Option<String>,
    /// Only events about this kind of object.
    #[schemars(length(min = 1, max = 200))]
    pub target_kind: Option<String>,
    /// Only events about this object.
    #[schemars(length(min = 1, max = 200))]
    pub target_id: Option<String>,
    /// Only this outcome.
    pub outcome: Option<AuditOutcome>,
    /// Only events at or after this time (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Only events before this time (RFC 3339).
    pub to: Option<DateTime<Utc>>,
}

/// Query of `GET /api/audit/verify`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditVerifyQuery {
    /// The organization (its admins). Absent: every chain, the system
    /// chain with them, for system administrators only.
    pub org_id: Option<Uuid>,
}

/// What verifying one chain found.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditChainCheck {
    /// The organization; `null` for the system chain.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub org_id: Option<Uuid>,
    /// Events whose hash was recomputed and matched.
    pub checked: i64,
    /// The chain's last `seq`.
    pub head_seq: i64,
    /// Whether the chain is intact.
    pub ok: bool,
    /// The first `seq` found changed or missing.
    #[schemars(with = "crate::schema::Nullable<i64>")]
    pub first_broken_seq: Option<i64>,
    /// Why it is broken.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub reason: Option<String>,
    /// Why it is broken, as a stable code (`null` when intact).
    #[schemars(with = "crate::schema::Nullable<AuditChainProblem>")]
    pub problem: Option<AuditChainProblem>,
    /// The first `seq` whose hash is HMAC-SHA256 under the server's audit
    /// key (the rows before it were hashed with plain SHA-256 by an
    /// earlier version): the newest checkpoint's, else the database's.
    pub keyed_from_seq: i64,
    /// The newest signed checkpoint of the chain the server could read
    /// (its log aside: its checkpoint file, object storage), which the
    /// chain was compared with; `null` when none was found.
    #[schemars(with = "crate::schema::Nullable<AuditCheckpoint>")]
    pub checkpoint: Option<AuditCheckpoint>,
}

/// Why a chain is broken.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuditChainProblem {
    /// A row's hash does not match its columns under the audit key: the
    /// row was changed, or made without the key (appended by hand).
    MacMismatch,
    /// A row's `prev_hash` is not the previous row's hash.
    PrevHashMismatch,
    /// Rows are missing: a gap, the chain stopping short of its head, or
    /// short of its newest checkpoint (rows removed at the end).
    MissingRows,
    /// Rows follow the chain's head (the head was wound back).
    RowsAfterHead,
    /// The head's hash is not the last row's.
    HeadMismatch,
    /// The row a checkpoint vouched for has another hash.
    CheckpointMismatch,
}

/// A signed checkpoint of a chain: at `at`, its row `seq` had `hash`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditCheckpoint {
    pub seq: i64,
    /// Hex.
    pub hash: String,
    pub at: DateTime<Utc>,
    /// The chain's first keyed `seq`, as the checkpoint states it.
    pub keyed_from_seq: i64,
}

/// The answer of `GET /api/audit/verify`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct AuditVerification {
    /// Whether every chain checked is intact.
    pub ok: bool,
    pub chains: Vec<AuditChainCheck>,
}

/// Declares `GET /api/audit/export`'s answer: JSON Lines of `AuditEvent`
/// (dropshot documents a raw `Response<Body>` as `*/*`).
pub(crate) fn patch_document(doc: &mut openapiv3::OpenAPI) {
    use openapiv3::{MediaType, ReferenceOr, Response, StatusCode};
    let Some(ReferenceOr::Item(item)) = doc.paths.paths.get_mut("/api/audit/export") else {
        return;
    };
    let Some(op) = item.get.as_mut() else {
        return;
    };
    let mut response = Response {
        description: "The filtered events, streamed: JSON Lines of `AuditEvent`".to_string(),
        ..Default::default()
    };
    response.content.insert(
        "application/jsonl".to_string(),
        MediaType {
            schema: Some(ReferenceOr::Reference {
                reference: "#/components/schemas/AuditEvent".to_string(),
            }),
            ..Default::default()
        },
    );
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(200), ReferenceOr::Item(response));
}
