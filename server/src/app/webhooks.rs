//! Webhooks (issue #36): an organization's admins subscribe endpoints to
//! events; every instance's delivery workers send what
//! [`crate::db::datastore::webhook_outbox::enqueue`] queued.
//!
//! **Signing** follows the Standard Webhooks specification: each attempt is
//! a `POST` of the JSON body `{"id", "type", "timestamp", "organization_id",
//! "data"}` with the headers `webhook-id` (`msg_` and the delivery's id,
//! the same for every attempt of a delivery: receivers drop repeats),
//! `webhook-timestamp` (the attempt's time, Unix seconds) and
//! `webhook-signature`: `v1,` and the base64 of HMAC-SHA256, keyed with the
//! endpoint's secret (the bytes after `whsec_`), of `{id}.{timestamp}.{body}`.
//! For `webhooks.rotation_overlap_secs` after a rotation, the signature
//! header carries two signatures (new and old secret), space-separated, so
//! receivers that know either verify.
//!
//! **Delivery** is at least once. A worker claims a due delivery with a
//! lease (`webhooks.lease_secs`), sends one attempt bounded by
//! `webhooks.connect_timeout_secs` and `webhooks.timeout_secs` (at most
//! half the lease), reads at most `webhooks.max_response_bytes` of the
//! answer and records the outcome while it still holds the lease. A 2xx
//! marks the delivery delivered; anything else (another status, a refused
//! or timed-out connection, a redirect, which is never followed) is
//! retried after the next wait of `webhooks.retry_schedule_secs`, and
//! after the last attempt the delivery fails. An instance killed while
//! sending leaves its delivery to another instance once the lease
//! expired; a delivery whose 2xx was recorded is never sent again.
//!
//! **Endpoints that keep failing** are disabled after
//! `webhooks.disable_after_failures` deliveries in a row failed for good,
//! or failures for `webhooks.disable_after_failing_secs`; the
//! organization's admins get an e-mail.
//!
//! **Targets** pass the guard of web sources (`crate::fetch`): `https://`
//! only (unless `webhooks.allow_http`), never a private, loopback or
//! link-local address (unless `fetch.allow_private_networks`; link-local
//! and metadata addresses never), checked when the endpoint is saved and
//! again at every connection (the resolver drops refused addresses, so a
//! name cannot be rebound to an internal one after the check).

use crate::app::jobs;
use crate::authz::{Admin, Grant, on, perm};
use crate::context::ServerContext;
use crate::db::Datastore;
use crate::db::datastore::webhooks::{
    AttemptFailure, AttemptResult, ClaimedDelivery, DeliveryFilter, DeliveryRow, Disabled,
    EndpointChange, EndpointRow, NewEndpoint,
};
use crate::error::Error;
use crate::mailer::{Email, Mailer};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_api::webhooks as api;

/// The prefix of a Standard Webhooks secret.
const SECRET_PREFIX: &str = "whsec_";
/// Random bytes of a new secret (the specification allows 24 to 64).
const SECRET_BYTES: usize = 32;

type Write = Grant<on::Org, Admin<perm::WebhooksWrite>>;
type Read = Grant<on::Org, Admin<perm::WebhooksRead>>;

/// The associated data that binds a sealed secret to its endpoint.
fn secret_ad(endpoint_id: Uuid) -> Vec<u8> {
    format!("webhook_endpoint:{endpoint_id}").into_bytes()
}

/// A new secret: its bytes, and as shown (`whsec_` + base64).
fn new_secret() -> (Vec<u8>, String) {
    let mut bytes = vec![0u8; SECRET_BYTES];
    rand::fill(bytes.as_mut_slice());
    let shown = format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(&bytes)
    );
    (bytes, shown)
}

/// The Standard Webhooks signature of one attempt with one secret:
/// `v1,` + base64(HMAC-SHA256(secret, "{id}.{timestamp}.{body}")).
pub fn sign(secret: &[u8], webhook_id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes keys of any length: this never fails.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(webhook_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// The `webhook-id` of a delivery's attempts.
pub fn webhook_id(delivery_id: Uuid) -> String {
    format!("msg_{}", delivery_id.simple())
}

/// Checks an endpoint URL: syntax and scheme (`400 invalid_url`), then the
/// addresses it names or resolves to (`400 url_not_allowed`), as for web
/// sources. A name that does not resolve yet is accepted: every
/// connection is checked again.
async fn check_url(cx: &ServerContext, raw: &str) -> Result<String, Error> {
    let raw = raw.trim();
    let invalid = |m: &str| Error::invalid("invalid_url", m.to_string());
    if raw.is_empty() || raw.len() > api::URL_MAX_BYTES {
        return Err(invalid("url must be 1 to 2000 bytes"));
    }
    let url = reqwest::Url::parse(raw).map_err(|_| invalid("url is not a valid URL"))?;
    match url.scheme() {
        "https" => {}
        "http" if cx.config.webhooks.allow_http => {}
        _ => return Err(invalid("url must be an https:// URL")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("url must not carry credentials"));
    }
    let allow_private = cx.config.fetch.allow_private_networks;
    let refused = |e: String| Error::invalid("url_not_allowed", e);
    crate::fetch::check_url(&url, allow_private).map_err(|e| refused(e.to_string()))?;
    if let Some(url::Host::Domain(host)) = url.host() {
        let port = url.port_or_known_default().unwrap_or(443);
        let lookup = tokio::net::lookup_host((host, port));
        if let Ok(Ok(addrs)) = tokio::time::timeout(Duration::from_secs(5), lookup).await {
            for addr in addrs {
                if !crate::fetch::allowed(addr.ip(), allow_private) {
                    return Err(refused(format!(
                        "{host} resolves to {}, which is not a public address",
                        addr.ip()
                    )));
                }
            }
        }
    }
    Ok(url.to_string())
}

/// Checks subscriptions (`400 invalid_event_types`): 1 to 50, each `*` or
/// dot-separated segments (at most 9, each 1 to 64 of `a-z 0-9 _`),
/// optionally ending in `.*` (the pattern of the document). Returns them
/// without repeats, in order.
fn check_event_types(types: &[String]) -> Result<Vec<String>, Error> {
    let invalid = |m: String| Error::invalid("invalid_event_types", m);
    if types.is_empty() || types.len() > api::EVENT_TYPES_MAX {
        return Err(invalid(format!(
            "event_types must hold 1 to {} entries",
            api::EVENT_TYPES_MAX
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(types.len());
    for t in types {
        let t = t.as_str();
        let name = t.strip_suffix(".*").unwrap_or(t);
        let valid = t == "*"
            || (name.split('.').count() <= 9
                && name.split('.').all(|seg| {
                    (1..=64).contains(&seg.len())
                        && seg
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                }));
        if !valid {
            return Err(invalid(format!(
                "{t:?} is not an event type (`member.joined`), a prefix (`audit.*`) or `*`"
            )));
        }
        if !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    Ok(out)
}

fn check_description(d: Option<&str>) -> Result<String, Error> {
    let d = d.unwrap_or("").trim();
    if d.chars().count() > 200 {
        return Err(Error::invalid(
            "invalid_description",
            "description is at most 200 characters",
        ));
    }
    Ok(d.to_string())
}

fn endpoint_view(row: EndpointRow) -> api::WebhookEndpoint {
    api::WebhookEndpoint {
        id: row.id,
        org_id: row.org_id,
        url: row.url,
        description: row.description,
        event_types: row.event_types,
        enabled: row.enabled,
        disabled_reason: row.disabled_reason,
        disabled_at: row.disabled_at,
        consecutive_failures: row.consecutive_failures,
        last_success_at: row.last_success_at,
        previous_secret_expires_at: row.previous_secret_expires_at,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn delivery_view(row: DeliveryRow) -> api::WebhookDelivery {
    use api::WebhookDeliveryStatus as S;
    api::WebhookDelivery {
        webhook_id: webhook_id(row.id),
        id: row.id,
        endpoint_id: row.endpoint_id,
        event_id: row.event_id,
        event_type: row.event_type,
        status: match row.status.as_str() {
            "pending" => S::Pending,
            "sending" => S::Sending,
            "delivered" => S::Delivered,
            _ => S::Failed,
        },
        attempts: row.attempts,
        next_attempt_at: row.next_attempt_at,
        last_attempt_at: row.last_attempt_at,
        response_status: row.response_status,
        latency_ms: row.latency_ms,
        response_snippet: row.response_snippet,
        last_error: row.last_error,
        delivered_at: row.delivered_at,
        replay_of: row.replay_of,
        created_at: row.created_at,
    }
}

pub async fn create(
    cx: &ServerContext,
    grant: &Write,
    body: api::WebhookEndpointCreate,
) -> Result<api::WebhookEndpointCreated, Error> {
    let url = check_url(cx, &body.url).await?;
    let event_types = check_event_types(&body.event_types)?;
    let description = check_description(body.description.as_deref())?;
    let id = Uuid::new_v4();
    let (secret, shown) = new_secret();
    let sealed = cx.secrets.seal(&secret, &secret_ad(id));
    let row = cx
        .datastore
        .webhook_endpoint_create(
            grant,
            &NewEndpoint {
                id,
                url: &url,
                description: &description,
                event_types: &event_types,
                sealed_secret: &sealed,
                max_endpoints: cx.config.webhooks.max_endpoints,
            },
        )
        .await?;
    Ok(api::WebhookEndpointCreated {
        endpoint: endpoint_view(row),
        secret: shown,
    })
}

pub async fn list(cx: &ServerContext, grant: &Read) -> Result<Vec<api::WebhookEndpoint>, Error> {
    let rows = cx.datastore.webhook_endpoint_list(grant).await?;
    Ok(rows.into_iter().map(endpoint_view).collect())
}

pub async fn get(
    cx: &ServerContext,
    grant: &Read,
    endpoint_id: Uuid,
) -> Result<api::WebhookEndpoint, Error> {
    let row = cx
        .datastore
        .webhook_endpoint_get(grant.access(), endpoint_id)
        .await?;
    Ok(endpoint_view(row))
}

pub async fn update(
    cx: &ServerContext,
    grant: &Write,
    endpoint_id: Uuid,
    body: api::WebhookEndpointUpdate,
) -> Result<api::WebhookEndpoint, Error> {
    let url = match &body.url {
        Some(u) => Some(check_url(cx, u).await?),
        None => None,
    };
    let event_types = body
        .event_types
        .as_deref()
        .map(check_event_types)
        .transpose()?;
    let description = body
        .description
        .as_deref()
        .map(|d| check_description(Some(d)))
        .transpose()?;
    let row = cx
        .datastore
        .webhook_endpoint_update(
            grant,
            endpoint_id,
            &EndpointChange {
                url: url.as_deref(),
                description: description.as_deref(),
                event_types: event_types.as_deref(),
                enabled: body.enabled,
            },
        )
        .await?;
    Ok(endpoint_view(row))
}

pub async fn delete(cx: &ServerContext, grant: &Write, endpoint_id: Uuid) -> Result<(), Error> {
    cx.datastore
        .webhook_endpoint_delete(grant, endpoint_id)
        .await
}

pub async fn rotate(
    cx: &ServerContext,
    grant: &Write,
    endpoint_id: Uuid,
) -> Result<api::WebhookSecretRotated, Error> {
    let (secret, shown) = new_secret();
    let sealed = cx.secrets.seal(&secret, &secret_ad(endpoint_id));
    let row = cx
        .datastore
        .webhook_endpoint_rotate(
            grant,
            endpoint_id,
            &sealed,
            cx.config.webhooks.rotation_overlap_secs as f64,
        )
        .await?;
    Ok(api::WebhookSecretRotated {
        endpoint: endpoint_view(row),
        secret: shown,
    })
}

pub async fn send_test(
    cx: &ServerContext,
    grant: &Write,
    endpoint_id: Uuid,
) -> Result<api::WebhookDelivery, Error> {
    let data = serde_json::json!({
        "endpoint_id": endpoint_id,
        "message": "a test event sent by an administrator",
        "sent_by": grant.user_id(),
    });
    let row = cx
        .datastore
        .webhook_send_test(grant, endpoint_id, &data)
        .await?;
    Ok(delivery_view(row))
}

pub async fn deliveries(
    cx: &ServerContext,
    grant: &Read,
    query: api::WebhookDeliveriesQuery,
) -> Result<api::WebhookDeliveryPage, Error> {
    let limit = query.limit.unwrap_or(api::DELIVERIES_DEFAULT_LIMIT);
    if !(1..=api::DELIVERIES_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {}", api::DELIVERIES_MAX_LIMIT),
        ));
    }
    let before = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let status = query.status.map(|s| match s {
        api::WebhookDeliveryStatus::Pending => "pending",
        api::WebhookDeliveryStatus::Sending => "sending",
        api::WebhookDeliveryStatus::Delivered => "delivered",
        api::WebhookDeliveryStatus::Failed => "failed",
    });
    let mut rows = cx
        .datastore
        .webhook_deliveries_page(
            grant,
            &DeliveryFilter {
                endpoint_id: query.endpoint_id,
                status,
                event_type: query.event_type.as_deref(),
                before,
                limit: i64::from(limit) + 1,
            },
        )
        .await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(r.created_at, r.id))
    } else {
        None
    };
    Ok(api::WebhookDeliveryPage {
        items: rows.into_iter().map(delivery_view).collect(),
        next_cursor,
    })
}

pub async fn replay(
    cx: &ServerContext,
    grant: &Write,
    delivery_id: Uuid,
) -> Result<api::WebhookDelivery, Error> {
    let row = cx
        .datastore
        .webhook_delivery_replay(grant, delivery_id)
        .await?;
    Ok(delivery_view(row))
}

/// An opaque cursor: URL-safe base64 of the position's time (microseconds
/// since the epoch, big-endian) and id.
fn encode_cursor(at: chrono::DateTime<chrono::Utc>, id: Uuid) -> String {
    let mut bytes = Vec::with_capacity(24);
    bytes.extend_from_slice(&at.timestamp_micros().to_be_bytes());
    bytes.extend_from_slice(id.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn decode_cursor(text: &str) -> Result<(chrono::DateTime<chrono::Utc>, Uuid), Error> {
    let invalid = || {
        Error::invalid(
            "invalid_cursor",
            "cursor is not a `next_cursor` of this list",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|_| invalid())?;
    let (micros, id) = bytes.split_first_chunk::<8>().ok_or_else(invalid)?;
    let id = Uuid::from_slice(id).map_err(|_| invalid())?;
    let at =
        chrono::DateTime::from_timestamp_micros(i64::from_be_bytes(*micros)).ok_or_else(invalid)?;
    Ok((at, id))
}

// ---- Delivery workers ----

/// The delivery workers of one instance (a [`jobs::Queue`]).
pub struct Deliveries {
    pub datastore: Datastore,
    pub secrets: crate::secrets::Secrets,
    pub mailer: Arc<dyn Mailer>,
    pub config: crate::config::WebhooksConfig,
    /// The guarded client: no redirects, the configured timeouts.
    pub http: reqwest::Client,
    /// `fetch.allow_private_networks`.
    pub allow_private: bool,
    pub jobs: jobs::Settings,
    pub log: slog::Logger,
}

/// The HTTP client of deliveries: the SSRF guard of web sources on every
/// connection, no redirects followed, bounded connection and attempt.
pub fn client(
    config: &crate::config::WebhooksConfig,
    allow_private: bool,
) -> reqwest::Result<reqwest::Client> {
    crate::fetch::guarded_builder(allow_private, 0)
        .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
        .timeout(Duration::from_secs(config.timeout_secs))
        .user_agent(concat!("Workspace-Webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Starts this instance's delivery workers.
pub fn start(deliveries: Arc<Deliveries>) -> Vec<tokio::task::JoinHandle<()>> {
    let workers = deliveries.config.workers;
    jobs::start(deliveries, workers)
}

impl jobs::Queue for Deliveries {
    type Job = ClaimedDelivery;

    fn settings(&self) -> &jobs::Settings {
        &self.jobs
    }

    async fn claim(&self, worker: Uuid, lease_secs: f64) -> Result<Option<ClaimedDelivery>, Error> {
        self.datastore
            .webhook_delivery_claim(worker, lease_secs)
            .await
    }

    async fn heartbeat(&self, job: &ClaimedDelivery, lease_secs: f64) -> Result<bool, Error> {
        self.datastore
            .webhook_delivery_heartbeat(job, lease_secs)
            .await
    }

    async fn release(&self, job: &ClaimedDelivery) -> Result<bool, Error> {
        self.datastore.webhook_delivery_release(job).await
    }

    /// One attempt, bounded by the client's timeouts (at most half the
    /// lease), so no heartbeat is needed: the outcome is recorded while
    /// the lease holds.
    async fn run(&self, job: ClaimedDelivery) {
        // The delivery's span joins the trace that queued it (tracing on).
        let span = crate::telemetry::job(job.traceparent.as_deref(), || {
            (
                format!("webhook {}", job.event_type),
                vec![
                    opentelemetry::KeyValue::new(
                        "workspace.webhook.delivery_id",
                        job.id.to_string(),
                    ),
                    opentelemetry::KeyValue::new(
                        "workspace.webhook.event_type",
                        job.event_type.clone(),
                    ),
                    opentelemetry::KeyValue::new(
                        "workspace.organization_id",
                        job.org_id.to_string(),
                    ),
                    opentelemetry::KeyValue::new(
                        "workspace.webhook.attempt",
                        i64::from(job.attempts),
                    ),
                ],
            )
        });
        let attempt = self.attempt(&job);
        let attempted = match &span {
            Some(span) => span.run(attempt).await,
            None => attempt.await,
        };
        if let Err(e) = attempted {
            slog::warn!(self.log, "webhook delivery: recording the attempt failed";
                "delivery" => %job.id, "error" => %e);
        }
    }
}

/// What one attempt got.
struct Outcome {
    status: Option<u16>,
    snippet: Option<String>,
    error: Option<String>,
    latency: Duration,
}

impl Deliveries {
    async fn attempt(&self, job: &ClaimedDelivery) -> Result<(), Error> {
        if !job.endpoint_enabled {
            return self.datastore.webhook_delivery_skip(job).await;
        }
        let ad = secret_ad(job.endpoint_id);
        let mut secrets = Vec::with_capacity(2);
        for sealed in std::iter::once(&job.sealed_secret).chain(job.sealed_previous.as_ref()) {
            match self.secrets.open(sealed, &ad) {
                Ok(secret) => secrets.push(secret),
                Err(e) => {
                    slog::error!(self.log, "webhook delivery: the endpoint's secret does \
                        not open"; "endpoint" => %job.endpoint_id, "error" => %e);
                }
            }
        }
        let outcome = if secrets.is_empty() {
            Outcome {
                status: None,
                snippet: None,
                error: Some("the endpoint's secret cannot be read".into()),
                latency: Duration::ZERO,
            }
        } else {
            self.send(job, &secrets).await
        };
        if let Some(error) = &outcome.error {
            crate::telemetry::fail_current(error);
        }
        let latency_ms = i32::try_from(outcome.latency.as_millis()).unwrap_or(i32::MAX);
        let result = AttemptResult {
            response_status: outcome.status.map(i32::from),
            latency_ms,
            response_snippet: outcome.snippet.as_deref(),
            error: outcome.error.as_deref(),
        };
        if outcome.status.is_some_and(|s| (200..300).contains(&s)) {
            let recorded = self
                .datastore
                .webhook_delivery_succeeded(job, &result)
                .await?;
            if !recorded {
                slog::warn!(self.log, "webhook delivery: delivered after the lease was lost";
                    "delivery" => %job.id);
            }
            return Ok(());
        }
        let failure = match self
            .config
            .retry_schedule_secs
            .get(usize::try_from(job.attempts - 1).unwrap_or(usize::MAX))
        {
            Some(wait) => AttemptFailure::Retry(*wait as f64),
            None => AttemptFailure::Final {
                disable_after: self.config.disable_after_failures,
                disable_after_secs: self.config.disable_after_failing_secs as f64,
            },
        };
        slog::info!(self.log, "webhook delivery: attempt failed";
            "delivery" => %job.id, "attempt" => job.attempts,
            "status" => ?outcome.status, "error" => ?outcome.error);
        if let Some(disabled) = self
            .datastore
            .webhook_delivery_failed(job, &result, failure)
            .await?
        {
            self.tell_admins(job, &disabled).await;
        }
        Ok(())
    }

    /// Sends one attempt, signed with each of `secrets`.
    async fn send(&self, job: &ClaimedDelivery, secrets: &[Vec<u8>]) -> Outcome {
        let id = webhook_id(job.id);
        let body = serde_json::json!({
            "id": job.event_id,
            "type": job.event_type,
            "timestamp": job.event_created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "organization_id": job.org_id,
            "data": job.payload,
        })
        .to_string();
        let timestamp = chrono::Utc::now().timestamp();
        let signature = secrets
            .iter()
            .map(|s| sign(s, &id, timestamp, body.as_bytes()))
            .collect::<Vec<_>>()
            .join(" ");
        let started = Instant::now();
        // The URL was checked when saved; checked again (literal addresses
        // skip the resolver, which checks names).
        let checked = reqwest::Url::parse(&job.url)
            .map_err(|e| e.to_string())
            .and_then(|u| {
                crate::fetch::check_url(&u, self.allow_private)
                    .map(|()| u)
                    .map_err(|e| e.to_string())
            });
        let url = match checked {
            Ok(url) => url,
            Err(e) => {
                return Outcome {
                    status: None,
                    snippet: None,
                    error: Some(e),
                    latency: started.elapsed(),
                };
            }
        };
        let sent = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .headers(crate::telemetry::trace_headers())
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                return Outcome {
                    status: None,
                    snippet: None,
                    error: Some(crate::error::chain(&e)),
                    latency: started.elapsed(),
                };
            }
        };
        let status = response.status().as_u16();
        crate::telemetry::note(opentelemetry::KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        // The status decides; the first bytes of the body are kept for the
        // log, read within what is left of the attempt's time.
        let left = Duration::from_secs(self.config.timeout_secs).saturating_sub(started.elapsed());
        let snippet =
            tokio::time::timeout(left, read_prefix(response, self.config.max_response_bytes))
                .await
                .unwrap_or_default();
        Outcome {
            status: Some(status),
            snippet: Some(snippet),
            error: (!(200..300).contains(&status)).then(|| format!("answered {status}")),
            latency: started.elapsed(),
        }
    }

    /// E-mails the organization's admins that an endpoint was disabled.
    async fn tell_admins(&self, job: &ClaimedDelivery, disabled: &Disabled) {
        slog::warn!(self.log, "webhook endpoint disabled after repeated failures";
            "endpoint" => %job.endpoint_id, "org" => %job.org_id);
        for to in &disabled.admin_emails {
            let email = Email {
                to: to.clone(),
                subject: format!("A webhook endpoint of {} was disabled", disabled.org_name),
                body_text: format!(
                    "The webhook endpoint {url} (id {id}) of the organization {org} was \
                     disabled: its deliveries kept failing.\n\nLook at its delivery log, fix \
                     the receiver, then enable it again (PUT /api/org/webhooks/update with \
                     \"enabled\": true) and replay what it missed.\n",
                    url = disabled.url,
                    id = job.endpoint_id,
                    org = disabled.org_name,
                ),
                kind: "webhook_disabled",
            };
            if let Err(e) = self.mailer.send(&email).await {
                slog::warn!(self.log, "webhook: telling an admin failed"; "error" => %e);
            }
        }
    }
}

/// The first `max` bytes of a body (lossy UTF-8); the rest is not read.
async fn read_prefix(response: reqwest::Response, max: usize) -> String {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < max {
        match stream.next().await {
            Some(Ok(chunk)) => {
                let room = max - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's test vectors.
    #[test]
    fn signs_as_the_specification_says() {
        let secret = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn event_types_are_checked() {
        let ok =
            |v: &[&str]| check_event_types(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            ok(&["member.joined", "audit.*", "*", "audit.*"]).unwrap(),
            ["member.joined", "audit.*", "*"]
        );
        for bad in ["", "Member", "a..b", ".*", "a.*.b", "a b", "x.**"] {
            assert!(ok(&[bad]).is_err(), "{bad}");
        }
        assert!(ok(&[]).is_err());
    }

    #[test]
    fn cursors_round_trip() {
        let at = chrono::Utc::now();
        let id = Uuid::new_v4();
        let (back_at, back_id) = decode_cursor(&encode_cursor(at, id)).unwrap();
        assert_eq!(back_at.timestamp_micros(), at.timestamp_micros());
        assert_eq!(back_id, id);
        assert!(decode_cursor("nope").is_err());
    }
}
