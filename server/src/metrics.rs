//! Counters and histograms, rendered in the Prometheus text format by
//! [`render`] (served on `metrics.bind_address`, see `lib.rs`).
//!
//! Recorded: every API request (per operation and status: a count and a
//! latency histogram), database connection pool usage, database errors,
//! the password-hashing queue, and streamed answers.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default, Clone)]
struct Histogram {
    /// Non-cumulative counts per bucket; the last is `+Inf`.
    buckets: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i] += 1;
        self.sum += secs;
        self.count += 1;
    }
}

#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), Histogram>>,
    /// Streamed answers now relaying.
    pub streams_active: AtomicI64,
    /// Streamed answers by outcome.
    streams: Mutex<BTreeMap<&'static str, u64>>,
    /// Answers delivered whose storing had to be retried, and those still
    /// waiting to be stored.
    pub answers_store_retries: AtomicU64,
    pub answers_pending_store: AtomicI64,
    /// Requesting clients detached from their answer because they read
    /// slower than the answer was generated (the server's choice; they
    /// resume from the stored events). Clients that left are not counted.
    pub slow_readers_detached: AtomicU64,
    /// Stream events stored by the shared event writer
    /// (`app::streams`), and the statements it issued for them (batched
    /// across answers; retries and per-answer fallbacks included).
    pub stream_events_stored: AtomicU64,
    pub stream_event_statements: AtomicU64,
    /// Requests refused `503 server_busy` since the last warning about
    /// them, and when that warning was (see [`Metrics::refused_busy`]).
    busy_refused: AtomicU64,
    busy_warned: Mutex<Option<std::time::Instant>>,
    /// Images decoded and prepared for a model (each upload once: later
    /// turns send the kept rendition), and the time they took.
    pub images_prepared: AtomicU64,
    pub images_prepare_micros: AtomicU64,
    /// Per model deployment (model, deployment): its counts.
    deployments: Mutex<BTreeMap<(String, String), DeploymentCounts>>,
}

/// What one model deployment was asked and how it did.
#[derive(Default, Clone)]
struct DeploymentCounts {
    /// Tries by outcome: `ok` (its first piece arrived), `failed` (before
    /// it), `broke` (after it), `over_limit` (skipped: its rpm or tpm).
    requests: BTreeMap<&'static str, u64>,
    /// Failures by class (`router::FailureClass`).
    failures: BTreeMap<&'static str, u64>,
    /// Cooldowns this instance started.
    cooldowns: u64,
    /// Time to the first piece of an answer.
    first_event: Histogram,
}

/// How often refusals for lack of capacity are said in the log.
pub const BUSY_WARNING_INTERVAL: Duration = Duration::from_secs(10);

impl Metrics {
    pub fn request(&self, operation: &str, status: u16, latency: Duration) {
        let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        requests
            .entry((operation.to_string(), status))
            .or_default()
            .observe(latency.as_secs_f64());
    }

    /// Counts a request refused `503 server_busy`; returns how many were
    /// refused since the last warning when a warning is due now (at most
    /// one per [`BUSY_WARNING_INTERVAL`]), so an overload is said once per
    /// interval, not once per request.
    pub fn refused_busy(&self, now: std::time::Instant) -> Option<u64> {
        self.busy_refused.fetch_add(1, Ordering::Relaxed);
        let mut warned = self.busy_warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.is_some_and(|at| now.duration_since(at) < BUSY_WARNING_INTERVAL) {
            return None;
        }
        *warned = Some(now);
        Some(self.busy_refused.swap(0, Ordering::Relaxed))
    }

    /// An image decoded and prepared for a model, in `took`.
    pub fn image_prepared(&self, took: Duration) {
        self.images_prepared.fetch_add(1, Ordering::Relaxed);
        self.images_prepare_micros.fetch_add(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    fn deployment<R>(
        &self,
        model: &str,
        deployment: &str,
        f: impl FnOnce(&mut DeploymentCounts) -> R,
    ) -> R {
        let mut all = self.deployments.lock().unwrap_or_else(|p| p.into_inner());
        f(all
            .entry((model.to_string(), deployment.to_string()))
            .or_default())
    }

    /// A try of a model deployment and how it went (`ok`, `failed`,
    /// `broke`, `over_limit`).
    pub fn deployment_request(&self, model: &str, deployment: &str, outcome: &'static str) {
        self.deployment(model, deployment, |d| {
            *d.requests.entry(outcome).or_default() += 1
        });
    }

    /// A failure of a model deployment, by class.
    pub fn deployment_failure(&self, model: &str, deployment: &str, class: &'static str) {
        self.deployment(model, deployment, |d| {
            *d.failures.entry(class).or_default() += 1
        });
    }

    /// A cooldown of a model deployment started by this instance.
    pub fn deployment_cooldown(&self, model: &str, deployment: &str) {
        self.deployment(model, deployment, |d| d.cooldowns += 1);
    }

    /// The time a model deployment took to the first piece of an answer.
    pub fn deployment_first_event(&self, model: &str, deployment: &str, took: Duration) {
        self.deployment(model, deployment, |d| {
            d.first_event.observe(took.as_secs_f64())
        });
    }

    pub fn stream_finished(&self, outcome: &'static str) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        *streams.entry(outcome).or_default() += 1;
    }
}

/// The values that live elsewhere (pool, database health, hashing queue).
pub struct Gauges {
    pub pool_size: usize,
    pub pool_max_size: usize,
    pub pool_available: usize,
    pub pool_waiting: usize,
    pub shared_open: usize,
    pub shared_max: usize,
    pub db_connection_errors: u64,
    pub db_statement_errors: u64,
    pub db_fast_failures: u64,
    pub db_pool_exhausted: u64,
    pub db_down: bool,
    pub hash_running: usize,
    pub hash_waiting: usize,
    pub hash_rejected: u64,
    /// Each background task's name and whether it still runs.
    pub tasks: Vec<(String, bool)>,
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// What `/metrics` reads: the server's metrics and the live gauges.
#[derive(Clone)]
pub struct Source {
    pub metrics: std::sync::Arc<Metrics>,
    pub datastore: crate::db::Datastore,
    pub hashing: std::sync::Arc<crate::hashing::PasswordHashing>,
    pub tasks: std::sync::Arc<crate::tasks::BackgroundTasks>,
}

impl Source {
    /// The current values of every metric, in the Prometheus text format.
    pub fn render(&self) -> String {
        let pool = self.datastore.pool_status();
        let health = self.datastore.health();
        let (shared_open, shared_max) = self.datastore.shared_connections();
        render(
            &self.metrics,
            &Gauges {
                pool_size: pool.size,
                pool_max_size: pool.max_size,
                pool_available: pool.available,
                pool_waiting: pool.waiting,
                shared_open,
                shared_max,
                db_connection_errors: health.connection_errors.load(Ordering::Relaxed),
                db_statement_errors: health.statement_errors.load(Ordering::Relaxed),
                db_fast_failures: health.fast_failures.load(Ordering::Relaxed),
                db_pool_exhausted: health.pool_exhausted.load(Ordering::Relaxed),
                db_down: health.is_down(),
                hash_running: self.hashing.running(),
                hash_waiting: self.hashing.waiting(),
                hash_rejected: self.hashing.rejected(),
                tasks: self.tasks.states(),
            },
        )
    }
}

/// The Prometheus text exposition (format 0.0.4).
/// The model deployments' series (per model and deployment).
fn render_deployments(metrics: &Metrics, out: &mut String) {
    let all = metrics
        .deployments
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let labels = |model: &str, deployment: &str| {
        format!(
            "model=\"{}\",deployment=\"{}\"",
            escape(model),
            escape(deployment)
        )
    };
    out.push_str(
        "# HELP workspace_model_deployment_requests_total Tries of each model deployment by \
         outcome (ok: its first piece arrived; failed: before it; broke: after it; over_limit: \
         skipped for its rpm or tpm).\n# TYPE workspace_model_deployment_requests_total counter\n",
    );
    for ((model, deployment), d) in &all {
        for (outcome, n) in &d.requests {
            let _ = writeln!(
                out,
                "workspace_model_deployment_requests_total{{{},outcome=\"{outcome}\"}} {n}",
                labels(model, deployment)
            );
        }
    }
    out.push_str(
        "# HELP workspace_model_deployment_failures_total Failures of each model deployment by \
         class.\n# TYPE workspace_model_deployment_failures_total counter\n",
    );
    for ((model, deployment), d) in &all {
        for (class, n) in &d.failures {
            let _ = writeln!(
                out,
                "workspace_model_deployment_failures_total{{{},class=\"{class}\"}} {n}",
                labels(model, deployment)
            );
        }
    }
    out.push_str(
        "# HELP workspace_model_deployment_cooldowns_total Cooldowns of each model deployment \
         this instance started.\n# TYPE workspace_model_deployment_cooldowns_total counter\n",
    );
    for ((model, deployment), d) in &all {
        let _ = writeln!(
            out,
            "workspace_model_deployment_cooldowns_total{{{}}} {}",
            labels(model, deployment),
            d.cooldowns
        );
    }
    out.push_str(
        "# HELP workspace_model_deployment_first_event_seconds Time from a try of a model \
         deployment to the first piece of its answer.\n\
         # TYPE workspace_model_deployment_first_event_seconds histogram\n",
    );
    for ((model, deployment), d) in &all {
        let labels = labels(model, deployment);
        let h = &d.first_event;
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += h.buckets[i];
            let _ = writeln!(
                out,
                "workspace_model_deployment_first_event_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "workspace_model_deployment_first_event_seconds_bucket{{{labels},le=\"+Inf\"}} {}\n\
             workspace_model_deployment_first_event_seconds_sum{{{labels}}} {}\n\
             workspace_model_deployment_first_event_seconds_count{{{labels}}} {}",
            h.count, h.sum, h.count
        );
    }
}

pub fn render(metrics: &Metrics, g: &Gauges) -> String {
    let mut out = String::new();
    let requests = metrics
        .requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    out.push_str("# HELP workspace_http_requests_total API requests by operation and status.\n");
    out.push_str("# TYPE workspace_http_requests_total counter\n");
    for ((op, status), h) in &requests {
        let _ = writeln!(
            out,
            "workspace_http_requests_total{{operation=\"{}\",status=\"{status}\"}} {}",
            escape(op),
            h.count
        );
    }
    out.push_str(
        "# HELP workspace_http_request_duration_seconds API request latency (to the response \
         head) by operation and status.\n",
    );
    out.push_str("# TYPE workspace_http_request_duration_seconds histogram\n");
    for ((op, status), h) in &requests {
        let labels = format!("operation=\"{}\",status=\"{status}\"", escape(op));
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += h.buckets[i];
            let _ = writeln!(
                out,
                "workspace_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "workspace_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(
            out,
            "workspace_http_request_duration_seconds_sum{{{labels}}} {}",
            h.sum
        );
        let _ = writeln!(
            out,
            "workspace_http_request_duration_seconds_count{{{labels}}} {}",
            h.count
        );
    }
    render_deployments(metrics, &mut out);
    let gauge = |out: &mut String, name: &str, help: &str, kind: &str, value: String| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    gauge(
        &mut out,
        "workspace_db_pool_connections",
        "Open pooled database connections.",
        "gauge",
        g.pool_size.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_pool_max_connections",
        "Configured pool size.",
        "gauge",
        g.pool_max_size.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_pool_idle_connections",
        "Idle pooled connections.",
        "gauge",
        g.pool_available.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_shared_connections",
        "Open shared, pipelined database connections (the authorization lookups).",
        "gauge",
        g.shared_open.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_shared_max_connections",
        "Configured shared, pipelined connections.",
        "gauge",
        g.shared_max.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_pool_waiting",
        "Requests waiting for a pooled connection.",
        "gauge",
        g.pool_waiting.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_connection_errors_total",
        "Connections or statements that failed because the database was unreachable.",
        "counter",
        g.db_connection_errors.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_pool_exhausted_total",
        "Requests answered 503 server_busy because every pooled connection stayed in use \
         for the pool's whole wait.",
        "counter",
        g.db_pool_exhausted.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_statement_errors_total",
        "Statements that failed otherwise.",
        "counter",
        g.db_statement_errors.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_fast_failures_total",
        "Requests answered 503 without a connection attempt while the database was down.",
        "counter",
        g.db_fast_failures.to_string(),
    );
    gauge(
        &mut out,
        "workspace_db_down",
        "1 while the database is believed unreachable.",
        "gauge",
        u8::from(g.db_down).to_string(),
    );
    gauge(
        &mut out,
        "workspace_password_hash_running",
        "Password hashes being computed.",
        "gauge",
        g.hash_running.to_string(),
    );
    gauge(
        &mut out,
        "workspace_password_hash_queue_depth",
        "Requests waiting to hash a password.",
        "gauge",
        g.hash_waiting.to_string(),
    );
    gauge(
        &mut out,
        "workspace_password_hash_rejected_total",
        "Requests refused (503) because the hashing queue was full.",
        "counter",
        g.hash_rejected.to_string(),
    );
    gauge(
        &mut out,
        "workspace_streams_active",
        "Streamed answers being relayed.",
        "gauge",
        metrics.streams_active.load(Ordering::Relaxed).to_string(),
    );
    out.push_str(
        "# HELP workspace_background_task_running Whether each background task still runs (0: it ended).\n",
    );
    out.push_str("# TYPE workspace_background_task_running gauge\n");
    for (task, running) in &g.tasks {
        let _ = writeln!(
            out,
            "workspace_background_task_running{{task=\"{}\"}} {}",
            escape(task),
            u8::from(*running)
        );
    }
    out.push_str("# HELP workspace_streams_total Streamed answers by outcome.\n");
    out.push_str("# TYPE workspace_streams_total counter\n");
    for (outcome, n) in metrics
        .streams
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        let _ = writeln!(out, "workspace_streams_total{{outcome=\"{outcome}\"}} {n}");
    }
    gauge(
        &mut out,
        "workspace_stream_slow_readers_detached_total",
        "Clients detached from a streamed answer for reading slower than it was generated.",
        "counter",
        metrics
            .slow_readers_detached
            .load(Ordering::Relaxed)
            .to_string(),
    );
    gauge(
        &mut out,
        "workspace_stream_events_stored_total",
        "Stream events stored by the shared event writer.",
        "counter",
        metrics
            .stream_events_stored
            .load(Ordering::Relaxed)
            .to_string(),
    );
    gauge(
        &mut out,
        "workspace_stream_event_statements_total",
        "Statements the shared stream event writer issued (many answers' events each).",
        "counter",
        metrics
            .stream_event_statements
            .load(Ordering::Relaxed)
            .to_string(),
    );
    gauge(
        &mut out,
        "workspace_answers_store_retries_total",
        "Retried writes of delivered answers.",
        "counter",
        metrics
            .answers_store_retries
            .load(Ordering::Relaxed)
            .to_string(),
    );
    gauge(
        &mut out,
        "workspace_images_prepared_total",
        "Images decoded and prepared for a model (once per upload).",
        "counter",
        metrics.images_prepared.load(Ordering::Relaxed).to_string(),
    );
    gauge(
        &mut out,
        "workspace_images_prepare_seconds_total",
        "Time spent preparing images for models.",
        "counter",
        format!(
            "{:.6}",
            metrics.images_prepare_micros.load(Ordering::Relaxed) as f64 / 1e6
        ),
    );
    gauge(
        &mut out,
        "workspace_answers_pending_store",
        "Delivered answers not yet stored (waiting for the database).",
        "gauge",
        metrics
            .answers_pending_store
            .load(Ordering::Relaxed)
            .to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.request("auth_login", 200, Duration::from_millis(3));
        m.request("auth_login", 200, Duration::from_millis(300));
        m.request("auth_login", 503, Duration::from_millis(1));
        let g = Gauges {
            pool_size: 1,
            pool_max_size: 8,
            pool_available: 1,
            pool_waiting: 0,
            shared_open: 1,
            shared_max: 2,
            db_connection_errors: 0,
            db_statement_errors: 0,
            db_fast_failures: 0,
            db_pool_exhausted: 0,
            db_down: false,
            hash_running: 0,
            hash_waiting: 0,
            hash_rejected: 0,
            tasks: vec![("sweeper".into(), true), ("janitor".into(), false)],
        };
        let text = render(&m, &g);
        assert!(text.contains("workspace_background_task_running{task=\"sweeper\"} 1"));
        assert!(text.contains("workspace_background_task_running{task=\"janitor\"} 0"));
        assert!(
            text.contains(
                "workspace_http_requests_total{operation=\"auth_login\",status=\"200\"} 2"
            )
        );
        assert!(text.contains(
            "workspace_http_request_duration_seconds_bucket{operation=\"auth_login\",status=\"200\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "workspace_http_request_duration_seconds_bucket{operation=\"auth_login\",status=\"200\",le=\"0.5\"} 2"
        ));
        assert!(text.contains("workspace_db_pool_max_connections 8"));
    }
}

#[cfg(test)]
mod busy_tests {
    use super::*;

    #[test]
    fn refusals_are_said_once_per_interval_with_their_count() {
        let m = Metrics::default();
        let t0 = std::time::Instant::now();
        assert_eq!(m.refused_busy(t0), Some(1), "the first is said at once");
        assert_eq!(m.refused_busy(t0 + Duration::from_secs(1)), None);
        assert_eq!(m.refused_busy(t0 + Duration::from_secs(2)), None);
        assert_eq!(
            m.refused_busy(t0 + BUSY_WARNING_INTERVAL + Duration::from_secs(1)),
            Some(3),
            "the next warning counts the quiet ones"
        );
    }
}
