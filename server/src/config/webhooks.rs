//! `[webhooks]`: how webhook deliveries are sent (see `app::webhooks`).

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// How webhook deliveries are sent.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Delivery workers per server instance (0: none in this instance;
    /// another instance's send). `WORKSPACE_WEBHOOK_WORKERS`.
    pub workers: usize,
    /// Lease of a delivery being sent, in seconds: a delivery whose
    /// instance died is sent again once it expired. At least twice
    /// `timeout_secs`, so that a delivery answered in time is marked
    /// before anyone else may take it.
    pub lease_secs: u64,
    /// How often idle workers look for due deliveries, in milliseconds
    /// (new deliveries also wake them at once).
    pub poll_interval_ms: u64,
    /// Connecting to an endpoint, in seconds.
    pub connect_timeout_secs: u64,
    /// One attempt, whole (connecting, sending, the answer's status and
    /// the first bytes of its body), in seconds.
    pub timeout_secs: u64,
    /// Bytes of an answer's body read and kept in the delivery log; the
    /// rest is never read.
    pub max_response_bytes: usize,
    /// Waits before each retry, in seconds: the Standard Webhooks schedule
    /// by default (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight
    /// attempts over about 27 hours). After the last, the delivery fails.
    pub retry_schedule_secs: Vec<u64>,
    /// An endpoint is disabled (and its organization's admins told by
    /// e-mail) after this many deliveries in a row failed for good...
    pub disable_after_failures: i32,
    /// ...or when its deliveries have failed for good, without a success
    /// in between, for this long, in seconds (default 5 days).
    pub disable_after_failing_secs: u64,
    /// How long the secret replaced by a rotation stays valid (deliveries
    /// are signed with both meanwhile), in seconds (default 24 h).
    pub rotation_overlap_secs: u64,
    /// Accept `http://` endpoint URLs (tests, intranets); `https://` only
    /// otherwise. Private and loopback addresses are governed by
    /// `fetch.allow_private_networks`, as for web sources.
    pub allow_http: bool,
    /// Endpoints per organization.
    pub max_endpoints: i64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            workers: 2,
            lease_secs: 60,
            poll_interval_ms: 2000,
            connect_timeout_secs: 5,
            timeout_secs: 15,
            max_response_bytes: 4096,
            retry_schedule_secs: vec![5, 300, 1800, 7200, 18000, 36000, 36000],
            disable_after_failures: 10,
            disable_after_failing_secs: 5 * 24 * 3600,
            rotation_overlap_secs: 24 * 3600,
            allow_http: false,
            max_endpoints: 20,
        }
    }
}

impl WebhooksConfig {
    /// `WORKSPACE_WEBHOOK_WORKERS`.
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = get("WORKSPACE_WEBHOOK_WORKERS").filter(|v| !v.is_empty()) {
            self.workers = v
                .parse()
                .with_context(|| format!("WORKSPACE_WEBHOOK_WORKERS {v:?}"))?;
        }
        Ok(())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.timeout_secs < 1 || self.connect_timeout_secs < 1 {
            bail!("webhooks.timeout_secs and webhooks.connect_timeout_secs must be at least 1");
        }
        if self.lease_secs < 2 * self.timeout_secs {
            bail!("webhooks.lease_secs must be at least twice webhooks.timeout_secs");
        }
        if self.disable_after_failures < 1 || self.max_endpoints < 1 {
            bail!("webhooks.disable_after_failures and webhooks.max_endpoints must be at least 1");
        }
        if self.retry_schedule_secs.len() > 50 || self.max_response_bytes > 1 << 20 {
            bail!(
                "webhooks.retry_schedule_secs has at most 50 entries and \
                 webhooks.max_response_bytes is at most 1 MiB"
            );
        }
        Ok(())
    }

    /// Attempts of a delivery: the first and one per retry.
    pub fn max_attempts(&self) -> i32 {
        self.retry_schedule_secs.len() as i32 + 1
    }
}
