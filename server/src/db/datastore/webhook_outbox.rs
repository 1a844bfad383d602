//! The webhook outbox's one entry point: queueing an event in the
//! transaction of the change it reports (see `webhooks` for the endpoints
//! and the deliveries). Apart from `webhooks` so that every module that
//! reports events (the audit log among them) can queue them without
//! importing the endpoints' module, which records audit events itself.

use super::Tx;
use crate::error::Error;
use serde_json::Value;
use uuid::Uuid;

/// Queues an event: `$1` organization, `$2` type, `$3` payload (`data`),
/// `$4` dedupe key (null: none), `$5` the queuing trace's `traceparent`
/// (null: none, see [`crate::telemetry::current_traceparent`]). One statement, so it can be pipelined
/// with the change it reports (see [`enqueue`]).
pub const ENQUEUE_SQL: &str = "\
    WITH targets AS ( \
        SELECT e.id FROM webhook_endpoints e \
        WHERE e.organization_id = $1 AND e.enabled \
          AND EXISTS (SELECT 1 FROM unnest(e.event_types) p \
                      WHERE p = $2 OR (p = '*' AND NOT starts_with($2, 'audit.')) \
                         OR (right(p, 2) = '.*' AND starts_with($2, left(p, -1))))), \
    event AS ( \
        INSERT INTO webhook_events (id, organization_id, event_type, payload, dedupe_key) \
        SELECT gen_random_uuid(), $1, $2, $3::jsonb, $4::text \
        WHERE EXISTS (SELECT 1 FROM targets) \
        ON CONFLICT (organization_id, dedupe_key) DO NOTHING \
        RETURNING id), \
    queued AS ( \
        INSERT INTO webhook_deliveries (id, organization_id, endpoint_id, event_id, event_type, \
            traceparent) \
        SELECT gen_random_uuid(), $1, t.id, event.id, $2, $5::text FROM targets t, event \
        RETURNING 1), \
    woke AS ( \
        SELECT pg_notify('webhook_deliveries', '') FROM (SELECT 1 FROM queued LIMIT 1) q) \
    SELECT (SELECT count(*) FROM queued) AS n, (SELECT count(*) FROM woke) AS woke";

/// Queues the event `event_type` with `data` for the endpoints of `org_id`
/// subscribed to it, in the caller's transaction (delivered only if it
/// commits). `dedupe_key`: queued once per organization and key (an
/// answer stored again after a database outage). Returns the deliveries
/// queued.
///
/// Event types are an open set of dotted names (see
/// `workspace_api::webhooks::EVENT_TYPES`): `audit.<action>` for the audit
/// log, `budget.threshold_reached` for usage budgets, any new one alike.
pub(crate) async fn enqueue(
    tx: &Tx<'_>,
    org_id: Uuid,
    event_type: &str,
    data: &Value,
    dedupe_key: Option<&str>,
) -> Result<i64, Error> {
    let row = tx
        .query_one(
            ENQUEUE_SQL,
            &[
                &org_id,
                &event_type,
                data,
                &dedupe_key,
                &crate::telemetry::current_traceparent(),
            ],
        )
        .await?;
    Ok(row.get("n"))
}
