//! Types of webhooks (issue #36, `/api/org/webhooks`): an organization's
//! admins subscribe endpoints to events; deliveries are signed as the
//! Standard Webhooks specification says (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature`), retried with backoff, logged
//! and replayable.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The event types the server sends. Subscriptions name types exactly,
/// by prefix (`member.*`, `audit.*`) or all of them (`*`, which leaves out
/// the audit log's `audit.*` events: one per change, they are subscribed
/// to by name or prefix); the set is open: types added later reach the
/// endpoints whose patterns match them.
pub const EVENT_TYPES: &[&str] = &[
    "answer.completed",
    "document.ingested",
    "document.failed",
    "member.joined",
    "member.suspended",
    "member.removed",
    "budget.threshold_reached",
    "audit.*",
    "webhook.test",
];
/// The most event types (or patterns) one endpoint subscribes to.
pub const EVENT_TYPES_MAX: usize = 50;
/// The longest endpoint URL, in bytes.
pub const URL_MAX_BYTES: usize = 2000;
/// The default `limit` of `GET /api/org/webhooks/deliveries`.
pub const DELIVERIES_DEFAULT_LIMIT: u32 = 50;
/// The largest `limit` of `GET /api/org/webhooks/deliveries`.
pub const DELIVERIES_MAX_LIMIT: u32 = 200;

/// Body of `POST /api/org/webhooks/create`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpointCreate {
    /// Where deliveries are POSTed: `https://` (`http://` only where the
    /// server's configuration allows it), at most 2000 bytes, a public
    /// address.
    #[schemars(length(min = 1, max = 2000))]
    pub url: String,
    /// What the endpoint is for; at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub description: Option<String>,
    /// The event types it receives: 1 to 50 names (`member.joined`),
    /// prefixes (`audit.*`) or `*` (every type but the audit log's
    /// `audit.*`, which are subscribed to by name or prefix): dot-separated
    /// segments (at most 9, each 1 to 64 of `a-z`, `0-9`, `_`), optionally
    /// ending in `.*`.
    #[schemars(length(min = 1, max = 50))]
    pub event_types: Vec<String>,
}

/// Body of `PUT /api/org/webhooks/update`: the fields given change.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpointUpdate {
    /// A new target (`https://`; checked by the same guard as at
    /// creation); absent: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2000))]
    pub url: Option<String>,
    /// A new description; absent: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub description: Option<String>,
    /// The new event types (names, prefixes like `audit.*`, or `*`);
    /// absent: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 50))]
    pub event_types: Option<Vec<String>>,
    /// `false` disables the endpoint (its pending deliveries fail);
    /// `true` enables it again and resets its failure count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// A webhook endpoint (never its secret).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookEndpoint {
    pub id: Uuid,
    pub org_id: Uuid,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    /// Why it is disabled: `manual` (an admin) or `failing` (its
    /// deliveries kept failing); null while enabled.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub disabled_reason: Option<String>,
    #[serde(serialize_with = "crate::time::serialize_opt")]
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub disabled_at: Option<DateTime<Utc>>,
    /// Deliveries in a row that failed for good (reset by a success).
    pub consecutive_failures: i32,
    #[serde(serialize_with = "crate::time::serialize_opt")]
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub last_success_at: Option<DateTime<Utc>>,
    /// Until when the secret replaced by the last rotation still signs
    /// (null when none does).
    #[serde(serialize_with = "crate::time::serialize_opt")]
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// An endpoint just created, with its signing secret: the only time the
/// secret is shown.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookEndpointCreated {
    pub endpoint: WebhookEndpoint,
    /// `whsec_` and the base64 of 32 random bytes, as the Standard
    /// Webhooks libraries take it.
    pub secret: String,
}

/// The answer of `POST /api/org/webhooks/rotate_secret`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookSecretRotated {
    pub endpoint: WebhookEndpoint,
    /// The new secret (shown this once).
    pub secret: String,
}

/// The state of a delivery.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WebhookDeliveryStatus {
    /// Waiting for its next attempt.
    Pending,
    /// Being sent.
    Sending,
    /// Answered 2xx.
    Delivered,
    /// Out of attempts, or its endpoint was disabled.
    Failed,
}

/// One delivery of an event to an endpoint: its attempts share one
/// `webhook_id`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookDelivery {
    pub id: Uuid,
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    /// The `webhook-id` header of its attempts (`msg_` and the delivery's
    /// id): receivers drop a repeated one.
    pub webhook_id: String,
    pub status: WebhookDeliveryStatus,
    pub attempts: i32,
    /// When it is tried next (null once delivered or failed).
    #[serde(serialize_with = "crate::time::serialize_opt")]
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::time::serialize_opt")]
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// The last attempt's HTTP status (null when no answer came).
    #[schemars(with = "crate::schema::Nullable<i32>")]
    pub response_status: Option<i32>,
    /// How long the last attempt took, in milliseconds.
    #[schemars(with = "crate::schema::Nullable<i32>")]
    pub latency_ms: Option<i32>,
    /// The first bytes of the last answer's body (at most
    /// `webhooks.max_response_bytes`, 4 KiB by default).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub response_snippet: Option<String>,
    /// Why the last attempt failed.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub last_error: Option<String>,
    #[serde(serialize_with = "crate::time::serialize_opt")]
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub delivered_at: Option<DateTime<Utc>>,
    /// The delivery this one replays.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub replay_of: Option<Uuid>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// A page of the delivery log.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookDeliveryPage {
    pub items: Vec<WebhookDelivery>,
    /// Pass as `cursor` for the next page; null on the last one.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub next_cursor: Option<String>,
}

/// Query of the operations on one endpoint.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookEndpointQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The endpoint.
    pub endpoint_id: Uuid,
}

/// Query of `POST /api/org/webhooks/deliveries/replay`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookDeliveryQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The delivery to send again.
    pub delivery_id: Uuid,
}

/// Query of `GET /api/org/webhooks/deliveries`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct WebhookDeliveriesQuery {
    /// The organization.
    pub org_id: Uuid,
    /// One endpoint's deliveries only.
    #[serde(default)]
    pub endpoint_id: Option<Uuid>,
    /// Deliveries in this state only.
    #[serde(default)]
    pub status: Option<WebhookDeliveryStatus>,
    /// Deliveries of this event type only (exact).
    #[serde(default)]
    pub event_type: Option<String>,
    /// A `next_cursor` of an earlier page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// 1 to 200, default 50.
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}
