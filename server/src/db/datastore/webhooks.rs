//! Webhook endpoints, the event outbox and its deliveries (migration V40).
//!
//! **Queueing.** [`super::webhook_outbox::enqueue`] runs in the transaction of the change an event
//! reports (one statement): it stores the event once and one delivery per
//! enabled endpoint of the organization whose subscriptions match its
//! type, and wakes the workers of every instance (`NOTIFY
//! webhook_deliveries`, sent at commit); when no endpoint matches, it
//! writes nothing. A subscription matches a type exactly, by prefix
//! (`audit.*` matches `audit.role.created`) or always (`*`), except the
//! audit log's `audit.<action>` events, which `*` leaves out.
//!
//! **Sending.** A worker claims one due delivery with `FOR UPDATE SKIP
//! LOCKED` and a lease: `status = 'sending'` and `next_attempt_at` (also
//! the lease's end, `locked_until`) in the future. An instance that dies
//! while sending leaves the delivery claimable again once the lease ran
//! out. Every write of a worker checks it still holds the lease
//! (`locked_by`, `status = 'sending'`), so a worker that lost it changes
//! nothing.
//!
//! Deliveries are not requests: their authority is the claimed row,
//! whose organization filters every statement here.

use super::{Datastore, Tx, audit};
use crate::audit::Event;
use crate::authz::{Admin, Grant, on, perm};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// The NOTIFY channel that wakes idle delivery workers.
pub const WEBHOOKS_CHANNEL: &str = "webhook_deliveries";

db_row! {
    /// An endpoint as its admins see it.
    pub struct EndpointRow {
        pub id: Uuid = "e.id",
        pub org_id: Uuid = "e.organization_id",
        pub url: String = "e.url",
        pub description: String = "e.description",
        pub event_types: Vec<String> = "e.event_types",
        pub enabled: bool = "e.enabled",
        pub disabled_reason: Option<String> = "e.disabled_reason",
        pub disabled_at: Option<DateTime<Utc>> = "e.disabled_at",
        pub consecutive_failures: i32 = "e.consecutive_failures",
        pub last_success_at: Option<DateTime<Utc>> = "e.last_success_at",
        pub previous_secret_expires_at: Option<DateTime<Utc>> =
            "CASE WHEN e.previous_expires_at > now() THEN e.previous_expires_at END",
        pub created_at: DateTime<Utc> = "e.created_at",
        pub updated_at: DateTime<Utc> = "e.updated_at",
    }
}

db_row! {
    /// A delivery in the log.
    pub struct DeliveryRow {
        pub id: Uuid = "d.id",
        pub endpoint_id: Uuid = "d.endpoint_id",
        pub event_id: Uuid = "d.event_id",
        pub event_type: String = "d.event_type",
        pub status: String = "d.status",
        pub attempts: i32 = "d.attempts",
        pub next_attempt_at: Option<DateTime<Utc>> =
            "CASE WHEN d.status IN ('pending', 'sending') THEN d.next_attempt_at END",
        pub last_attempt_at: Option<DateTime<Utc>> = "d.last_attempt_at",
        pub response_status: Option<i32> = "d.response_status",
        pub latency_ms: Option<i32> = "d.latency_ms",
        pub response_snippet: Option<String> = "d.response_snippet",
        pub last_error: Option<String> = "d.last_error",
        pub delivered_at: Option<DateTime<Utc>> = "d.delivered_at",
        pub replay_of: Option<Uuid> = "d.replay_of",
        pub created_at: DateTime<Utc> = "d.created_at",
    }
}

/// A new endpoint.
pub struct NewEndpoint<'a> {
    pub id: Uuid,
    pub url: &'a str,
    pub description: &'a str,
    pub event_types: &'a [String],
    /// Sealed with `webhook_endpoint:<id>` as associated data.
    pub sealed_secret: &'a [u8],
    pub max_endpoints: i64,
}

/// What an update changes (`None`: unchanged).
#[derive(Default)]
pub struct EndpointChange<'a> {
    pub url: Option<&'a str>,
    pub description: Option<&'a str>,
    pub event_types: Option<&'a [String]>,
    pub enabled: Option<bool>,
}

/// Filters and position of a page of the delivery log.
pub struct DeliveryFilter<'a> {
    pub endpoint_id: Option<Uuid>,
    pub status: Option<&'a str>,
    pub event_type: Option<&'a str>,
    /// Strictly older than this (`created_at`, `id`) position.
    pub before: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

/// A delivery this worker holds, with what sending it needs.
#[derive(Clone, Debug)]
pub struct ClaimedDelivery {
    pub id: Uuid,
    pub org_id: Uuid,
    pub endpoint_id: Uuid,
    /// This attempt's number, from 1.
    pub attempts: i32,
    pub url: String,
    pub endpoint_enabled: bool,
    pub sealed_secret: Vec<u8>,
    /// The secret before the last rotation, while it is still valid.
    pub sealed_previous: Option<Vec<u8>>,
    pub event_id: Uuid,
    pub event_type: String,
    pub payload: Value,
    pub event_created_at: DateTime<Utc>,
    pub worker: Uuid,
    /// The `traceparent` of the trace that queued it (tracing on).
    pub traceparent: Option<String>,
}

/// What an attempt got.
pub struct AttemptResult<'a> {
    pub response_status: Option<i32>,
    pub latency_ms: i32,
    pub response_snippet: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// What a failed attempt leads to.
pub enum AttemptFailure {
    /// Tried again after this many seconds.
    Retry(f64),
    /// Failed for good: counts towards disabling the endpoint, which
    /// happens at `disable_after` failures in a row, or failures for
    /// `disable_after_secs`.
    Final {
        disable_after: i32,
        disable_after_secs: f64,
    },
}

/// An endpoint just disabled for failing, and whom to tell.
pub struct Disabled {
    pub url: String,
    pub org_name: String,
    pub admin_emails: Vec<String>,
}

/// The lease check of a worker's writes.
const HOLDS_LEASE: &str = "d.id = $1 AND d.locked_by = $2 AND d.status = 'sending'";

impl Datastore {
    /// Creates an endpoint, unless the organization has `max_endpoints`
    /// (`409 too_many_webhooks`).
    pub async fn webhook_endpoint_create(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksWrite>>,
        new: &NewEndpoint<'_>,
    ) -> Result<EndpointRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "WITH e AS ( \
                         INSERT INTO webhook_endpoints (id, organization_id, url, description, \
                             event_types, sealed_secret, created_by) \
                         SELECT $1::uuid, $2::uuid, $3::text, $4::text, $5::text[], \
                             $6::bytea, $7::uuid \
                         WHERE (SELECT count(*) FROM webhook_endpoints \
                                WHERE organization_id = $2) < $8 \
                         RETURNING *) \
                     SELECT {} FROM e",
                    EndpointRow::COLUMNS
                ),
                &[
                    &new.id,
                    &grant.org_id(),
                    &new.url,
                    &new.description,
                    &new.event_types,
                    &new.sealed_secret,
                    &grant.user_id(),
                    &new.max_endpoints,
                ],
            )
            .await?;
        let row = row.ok_or_else(|| {
            Error::conflict(
                "too_many_webhooks",
                format!(
                    "an organization has at most {} webhook endpoints",
                    new.max_endpoints
                ),
            )
        })?;
        let row = EndpointRow::from_row(&row);
        let event = Event::org(grant.org_id(), "webhook.create")
            .target("webhook", row.id)
            .details(serde_json::json!({"url": row.url, "event_types": row.event_types}));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// The organization's endpoints, oldest first.
    pub async fn webhook_endpoint_list(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksRead>>,
    ) -> Result<Vec<EndpointRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM webhook_endpoints e WHERE e.organization_id = $1 \
                     ORDER BY e.created_at, e.id",
                    EndpointRow::COLUMNS
                ),
                &[&grant.org_id()],
            )
            .await?;
        Ok(rows.iter().map(EndpointRow::from_row).collect())
    }

    /// One of the organization's endpoints (`404` for any other id).
    pub async fn webhook_endpoint_get(
        &self,
        access: &crate::authz::OrgAccess,
        endpoint_id: Uuid,
    ) -> Result<EndpointRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {} FROM webhook_endpoints e \
                     WHERE e.organization_id = $1 AND e.id = $2",
                    EndpointRow::COLUMNS
                ),
                &[&access.org_id(), &endpoint_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "webhook" })?;
        Ok(EndpointRow::from_row(&row))
    }

    /// Changes an endpoint. Disabling it fails its pending deliveries;
    /// enabling it resets its failure count.
    pub async fn webhook_endpoint_update(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksWrite>>,
        endpoint_id: Uuid,
        change: &EndpointChange<'_>,
    ) -> Result<EndpointRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE webhook_endpoints e SET url = coalesce($3, e.url), \
                         description = coalesce($4, e.description), \
                         event_types = coalesce($5, e.event_types), \
                         enabled = coalesce($6, e.enabled), \
                         disabled_reason = CASE WHEN $6 IS NULL THEN e.disabled_reason \
                             WHEN $6 THEN NULL ELSE coalesce(e.disabled_reason, 'manual') END, \
                         disabled_at = CASE WHEN $6 IS NULL THEN e.disabled_at \
                             WHEN $6 THEN NULL ELSE coalesce(e.disabled_at, now()) END, \
                         consecutive_failures = CASE WHEN $6 AND NOT e.enabled THEN 0 \
                             ELSE e.consecutive_failures END, \
                         failing_since = CASE WHEN $6 AND NOT e.enabled THEN NULL \
                             ELSE e.failing_since END, \
                         updated_at = now() \
                     WHERE e.organization_id = $1 AND e.id = $2 \
                     RETURNING {}",
                    EndpointRow::COLUMNS
                ),
                &[
                    &grant.org_id(),
                    &endpoint_id,
                    &change.url,
                    &change.description,
                    &change.event_types,
                    &change.enabled,
                ],
            )
            .await?
            .ok_or(Error::NotFound { what: "webhook" })?;
        if change.enabled == Some(false) {
            fail_pending(
                &tx,
                grant.org_id(),
                endpoint_id,
                "the endpoint was disabled",
            )
            .await?;
        }
        let event = Event::org(grant.org_id(), "webhook.update")
            .target("webhook", endpoint_id)
            .details(serde_json::json!({
                "url": change.url,
                "description": change.description,
                "event_types": change.event_types,
                "enabled": change.enabled,
            }));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(EndpointRow::from_row(&row))
    }

    /// Deletes an endpoint with its deliveries.
    pub async fn webhook_endpoint_delete(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksWrite>>,
        endpoint_id: Uuid,
    ) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM webhook_endpoints WHERE organization_id = $1 AND id = $2",
                &[&grant.org_id(), &endpoint_id],
            )
            .await?;
        if n == 0 {
            return Err(Error::NotFound { what: "webhook" });
        }
        let event = Event::org(grant.org_id(), "webhook.delete").target("webhook", endpoint_id);
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces an endpoint's secret with `sealed`; the one it replaces
    /// keeps signing for `overlap_secs`.
    pub async fn webhook_endpoint_rotate(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksWrite>>,
        endpoint_id: Uuid,
        sealed: &[u8],
        overlap_secs: f64,
    ) -> Result<EndpointRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "UPDATE webhook_endpoints e SET sealed_previous = e.sealed_secret, \
                         sealed_secret = $3, \
                         previous_expires_at = now() + make_interval(secs => $4), \
                         updated_at = now() \
                     WHERE e.organization_id = $1 AND e.id = $2 \
                     RETURNING {}",
                    EndpointRow::COLUMNS
                ),
                &[&grant.org_id(), &endpoint_id, &sealed, &overlap_secs],
            )
            .await?
            .ok_or(Error::NotFound { what: "webhook" })?;
        let event = Event::org(grant.org_id(), "webhook.rotate_secret")
            .target("webhook", endpoint_id)
            .details(serde_json::json!({"previous_valid_secs": overlap_secs}));
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(EndpointRow::from_row(&row))
    }

    /// Queues a `webhook.test` event for one endpoint (whatever it
    /// subscribes to, enabled or not: a disabled one's delivery fails).
    pub async fn webhook_send_test(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksWrite>>,
        endpoint_id: Uuid,
        data: &Value,
    ) -> Result<DeliveryRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "WITH target AS ( \
                         SELECT id FROM webhook_endpoints WHERE organization_id = $1 AND id = $2), \
                     event AS ( \
                         INSERT INTO webhook_events (id, organization_id, event_type, payload) \
                         SELECT gen_random_uuid(), $1, 'webhook.test', $3::jsonb FROM target \
                         RETURNING id), \
                     d AS ( \
                         INSERT INTO webhook_deliveries (id, organization_id, endpoint_id, \
                             event_id, event_type, traceparent) \
                         SELECT gen_random_uuid(), $1, $2, event.id, 'webhook.test', $4::text \
                         FROM event \
                         RETURNING *) \
                     SELECT {} FROM d",
                    DeliveryRow::COLUMNS
                ),
                &[
                    &grant.org_id(),
                    &endpoint_id,
                    data,
                    &crate::telemetry::current_traceparent(),
                ],
            )
            .await?
            .ok_or(Error::NotFound { what: "webhook" })?;
        tx.execute("NOTIFY webhook_deliveries", &[]).await?;
        tx.commit().await?;
        Ok(DeliveryRow::from_row(&row))
    }

    /// A page of the organization's delivery log, newest first.
    pub async fn webhook_deliveries_page(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksRead>>,
        filter: &DeliveryFilter<'_>,
    ) -> Result<Vec<DeliveryRow>, Error> {
        let conn = self.conn().await?;
        let (before_at, before_id) = filter.before.unzip();
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM webhook_deliveries d \
                     WHERE d.organization_id = $1 \
                       AND ($2::uuid IS NULL OR d.endpoint_id = $2) \
                       AND ($3::text IS NULL OR d.status = $3) \
                       AND ($4::text IS NULL OR d.event_type = $4) \
                       AND ($5::timestamptz IS NULL OR (d.created_at, d.id) < ($5, $6)) \
                     ORDER BY d.created_at DESC, d.id DESC LIMIT $7",
                    DeliveryRow::COLUMNS
                ),
                &[
                    &grant.org_id(),
                    &filter.endpoint_id,
                    &filter.status,
                    &filter.event_type,
                    &before_at,
                    &before_id,
                    &filter.limit,
                ],
            )
            .await?;
        Ok(rows.iter().map(DeliveryRow::from_row).collect())
    }

    /// Queues a delivery again, as a new delivery of the same event to the
    /// same endpoint (a new `webhook-id`, so receivers that dropped the
    /// first as a repeat take it).
    pub async fn webhook_delivery_replay(
        &self,
        grant: &Grant<on::Org, Admin<perm::WebhooksWrite>>,
        delivery_id: Uuid,
    ) -> Result<DeliveryRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "WITH d AS ( \
                         INSERT INTO webhook_deliveries (id, organization_id, endpoint_id, \
                             event_id, event_type, replay_of, traceparent) \
                         SELECT gen_random_uuid(), o.organization_id, o.endpoint_id, \
                             o.event_id, o.event_type, o.id, $3::text \
                         FROM webhook_deliveries o \
                         WHERE o.organization_id = $1 AND o.id = $2 \
                         RETURNING *) \
                     SELECT {} FROM d",
                    DeliveryRow::COLUMNS
                ),
                &[
                    &grant.org_id(),
                    &delivery_id,
                    &crate::telemetry::current_traceparent(),
                ],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "webhook delivery",
            })?;
        tx.execute("NOTIFY webhook_deliveries", &[]).await?;
        tx.commit().await?;
        Ok(DeliveryRow::from_row(&row))
    }

    /// Claims the next due delivery (pending and due, or sending with an
    /// expired lease) for `worker`, with a lease of `lease_secs`.
    pub async fn webhook_delivery_claim(
        &self,
        worker: Uuid,
        lease_secs: f64,
    ) -> Result<Option<ClaimedDelivery>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "WITH next AS ( \
                     SELECT id FROM webhook_deliveries \
                     WHERE status IN ('pending', 'sending') AND next_attempt_at <= now() \
                     ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 UPDATE webhook_deliveries d SET status = 'sending', \
                     attempts = d.attempts + 1, locked_by = $1, \
                     locked_until = now() + make_interval(secs => $2), \
                     next_attempt_at = now() + make_interval(secs => $2), \
                     last_attempt_at = now(), updated_at = now() \
                 FROM next, webhook_endpoints e, webhook_events ev \
                 WHERE d.id = next.id AND e.id = d.endpoint_id AND ev.id = d.event_id \
                 RETURNING d.id, d.organization_id, d.endpoint_id, d.attempts, e.url, \
                     e.enabled, e.sealed_secret, \
                     CASE WHEN e.previous_expires_at > now() THEN e.sealed_previous END \
                         AS sealed_previous, \
                     ev.id AS event_id, ev.event_type, ev.payload, \
                     ev.created_at AS event_created_at, d.traceparent",
                &[&worker, &lease_secs],
            )
            .await?;
        Ok(row.map(|r| ClaimedDelivery {
            id: r.get("id"),
            org_id: r.get("organization_id"),
            endpoint_id: r.get("endpoint_id"),
            attempts: r.get("attempts"),
            url: r.get("url"),
            endpoint_enabled: r.get("enabled"),
            sealed_secret: r.get("sealed_secret"),
            sealed_previous: r.get("sealed_previous"),
            event_id: r.get("event_id"),
            event_type: r.get("event_type"),
            payload: r.get("payload"),
            event_created_at: r.get("event_created_at"),
            traceparent: r.get("traceparent"),
            worker,
        }))
    }

    /// Renews a claimed delivery's lease; `false` when it is no longer
    /// this worker's.
    pub async fn webhook_delivery_heartbeat(
        &self,
        d: &ClaimedDelivery,
        lease_secs: f64,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                &format!(
                    "UPDATE webhook_deliveries d \
                     SET locked_until = now() + make_interval(secs => $3), \
                         next_attempt_at = now() + make_interval(secs => $3) \
                     WHERE {HOLDS_LEASE}"
                ),
                &[&d.id, &d.worker, &lease_secs],
            )
            .await?;
        Ok(n == 1)
    }

    /// Hands a claimed delivery back unsent (its instance stops): due at
    /// once, the attempt not counted.
    pub async fn webhook_delivery_release(&self, d: &ClaimedDelivery) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                &format!(
                    "UPDATE webhook_deliveries d SET status = 'pending', \
                         attempts = greatest(d.attempts - 1, 0), locked_by = NULL, \
                         locked_until = NULL, next_attempt_at = now(), updated_at = now() \
                     WHERE {HOLDS_LEASE}"
                ),
                &[&d.id, &d.worker],
            )
            .await?;
        Ok(n == 1)
    }

    /// Records a 2xx: the delivery is delivered, the endpoint's failure
    /// count reset. `false` when the lease was lost (nothing written).
    pub async fn webhook_delivery_succeeded(
        &self,
        d: &ClaimedDelivery,
        result: &AttemptResult<'_>,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                &format!(
                    "UPDATE webhook_deliveries d SET status = 'delivered', \
                         delivered_at = now(), locked_by = NULL, locked_until = NULL, \
                         response_status = $3, latency_ms = $4, response_snippet = $5, \
                         last_error = NULL, updated_at = now() \
                     WHERE {HOLDS_LEASE}"
                ),
                &[
                    &d.id,
                    &d.worker,
                    &result.response_status,
                    &result.latency_ms,
                    &result.response_snippet,
                ],
            )
            .await?;
        if n == 0 {
            return Ok(false);
        }
        tx.execute(
            "UPDATE webhook_endpoints SET consecutive_failures = 0, failing_since = NULL, \
                 last_success_at = now() \
             WHERE organization_id = $1 AND id = $2",
            &[&d.org_id, &d.endpoint_id],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records a failed attempt: pending again after a backoff, or failed
    /// for good, which may disable the endpoint (then its other pending
    /// deliveries fail too, and the answer says whom to tell). Nothing is
    /// written when the lease was lost.
    pub async fn webhook_delivery_failed(
        &self,
        d: &ClaimedDelivery,
        result: &AttemptResult<'_>,
        failure: AttemptFailure,
    ) -> Result<Option<Disabled>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let (status, backoff) = match failure {
            AttemptFailure::Retry(secs) => ("pending", secs),
            AttemptFailure::Final { .. } => ("failed", 0.0),
        };
        let n = tx
            .execute(
                &format!(
                    "UPDATE webhook_deliveries d SET status = $3, locked_by = NULL, \
                         locked_until = NULL, next_attempt_at = now() + make_interval(secs => $4), \
                         response_status = $5, latency_ms = $6, response_snippet = $7, \
                         last_error = $8, updated_at = now() \
                     WHERE {HOLDS_LEASE}"
                ),
                &[
                    &d.id,
                    &d.worker,
                    &status,
                    &backoff,
                    &result.response_status,
                    &result.latency_ms,
                    &result.response_snippet,
                    &result.error,
                ],
            )
            .await?;
        if n == 0 {
            return Ok(None);
        }
        let AttemptFailure::Final {
            disable_after,
            disable_after_secs,
        } = failure
        else {
            tx.commit().await?;
            return Ok(None);
        };
        let endpoint = tx
            .query_opt(
                "UPDATE webhook_endpoints e SET \
                     consecutive_failures = e.consecutive_failures + 1, \
                     failing_since = coalesce(e.failing_since, now()), \
                     enabled = NOT (e.consecutive_failures + 1 >= $3 \
                         OR coalesce(e.failing_since, now()) \
                            <= now() - make_interval(secs => $4)), \
                     disabled_reason = CASE WHEN e.consecutive_failures + 1 >= $3 \
                         OR coalesce(e.failing_since, now()) \
                            <= now() - make_interval(secs => $4) \
                         THEN 'failing' END, \
                     disabled_at = CASE WHEN e.consecutive_failures + 1 >= $3 \
                         OR coalesce(e.failing_since, now()) \
                            <= now() - make_interval(secs => $4) \
                         THEN now() END, \
                     updated_at = now() \
                 WHERE e.organization_id = $1 AND e.id = $2 AND e.enabled \
                 RETURNING e.enabled, e.url",
                &[
                    &d.org_id,
                    &d.endpoint_id,
                    &disable_after,
                    &disable_after_secs,
                ],
            )
            .await?;
        let disabled = match endpoint {
            Some(row) if !row.get::<_, bool>("enabled") => {
                fail_pending(
                    &tx,
                    d.org_id,
                    d.endpoint_id,
                    "the endpoint was disabled after repeated failures",
                )
                .await?;
                let admins = tx
                    .query(
                        "SELECT u.email, o.name FROM memberships m \
                         JOIN roles r ON r.id = m.role_id \
                             AND r.organization_id = m.organization_id \
                         JOIN users u ON u.id = m.user_id \
                         JOIN organizations o ON o.id = m.organization_id \
                         WHERE m.organization_id = $1 AND m.status = 'active' \
                           AND r.hierarchy_level >= $2 AND u.email IS NOT NULL \
                         ORDER BY u.email",
                        &[&d.org_id, &crate::authz::ADMIN_LEVEL],
                    )
                    .await?;
                Some(Disabled {
                    url: row.get("url"),
                    org_name: admins.first().map(|r| r.get("name")).unwrap_or_default(),
                    admin_emails: admins.iter().map(|r| r.get("email")).collect(),
                })
            }
            _ => None,
        };
        tx.commit().await?;
        Ok(disabled)
    }

    /// Fails a claimed delivery whose endpoint is disabled, without
    /// counting it against the endpoint.
    pub async fn webhook_delivery_skip(&self, d: &ClaimedDelivery) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            &format!(
                "UPDATE webhook_deliveries d SET status = 'failed', locked_by = NULL, \
                     locked_until = NULL, last_error = 'the endpoint is disabled', \
                     attempts = greatest(d.attempts - 1, 0), updated_at = now() \
                 WHERE {HOLDS_LEASE}"
            ),
            &[&d.id, &d.worker],
        )
        .await?;
        Ok(())
    }
}

/// Fails the pending deliveries of an endpoint (it was disabled).
async fn fail_pending(
    tx: &Tx<'_>,
    org_id: Uuid,
    endpoint_id: Uuid,
    why: &str,
) -> Result<(), Error> {
    tx.execute(
        "UPDATE webhook_deliveries SET status = 'failed', last_error = $3, \
             updated_at = now() \
         WHERE organization_id = $1 AND endpoint_id = $2 AND status = 'pending'",
        &[&org_id, &endpoint_id, &why],
    )
    .await?;
    Ok(())
}
