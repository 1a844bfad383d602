//! Usage of model calls: what each call records and the recorder that
//! writes it off the answer path (issue #36).
//!
//! Every model call records one [`Record`]: the organization, the member,
//! personal access token or deployment it was for ([`Caller`]), what kind
//! of call it was, the model and provider, the input and output tokens
//! (the provider's figures when it reported them, else counted here as
//! characters / 4: [`estimate_tokens`]; the record says which), the
//! latency, the outcome, and its cost from the configuration's price
//! table (`[usage.prices]`, micro-dollars computed at write time).
//!
//! - An answer of the agent runtime (chat, prompt suggestions,
//!   conversations, agent tests, deployments, the MCP playground) carries a
//!   [`Metered`] in its `RunSpec`; the runtime feeds it each step's input,
//!   text and reported usage, and it records the whole answer (all its
//!   model steps) when the run ends, however it ends (dropped: the client
//!   went away or the run was stopped, `cancelled`).
//! - Transcriptions and embedding batches record with
//!   [`UsageRecorder::record_call`].
//!
//! Recording never waits for the database: records go to the instance's
//! [`UsageRecorder`], a task that writes what gathered every
//! `usage.flush_interval_ms` (100 ms) in one transaction (the rows, and the
//! budget counters' reservations replaced by what the calls used), retries
//! while the database is unavailable, and is flushed at shutdown before
//! the background tasks stop. Budget thresholds crossed by a batch are
//! reported to the callback the recorder was started with.
//!
//! The same writer keeps a deployment's counters (requests, tokens, last
//! use: [`UsageRecorder::count_deployment_use`]), summed per deployment in
//! each batch and added in its transaction: one statement for all the
//! completions of a batch instead of one per completion, and no row lock
//! taken per request on a busy deployment. They are counted whether or not
//! `usage.enabled`, and show up within the flush interval of the answer.

use crate::authz::DeploymentAccess;
use crate::config::UsageConfig;
use crate::db::Datastore;
use crate::providers::Usage;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Tokens counted for `chars` characters of text when the provider reports
/// none: a cheap estimate (about four characters a token in English).
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// Who a model call was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub org_id: Uuid,
    /// The member (none for a deployment key's call).
    pub user_id: Option<Uuid>,
    /// The personal access token the request came with.
    pub token_id: Option<Uuid>,
    /// The deployment whose key the request came with.
    pub deployment_id: Option<Uuid>,
}

/// What a budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Tokens,
    /// Micro-dollars.
    Cost,
}

impl Metric {
    pub fn parse(s: &str) -> Metric {
        if s == "cost" {
            Metric::Cost
        } else {
            Metric::Tokens
        }
    }
}

/// A call's reservation on one budget counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub budget_id: Uuid,
    pub period_start: DateTime<Utc>,
    pub metric: Metric,
    pub amount: i64,
}

/// One model call, as it is written.
#[derive(Clone, Debug)]
pub struct Record {
    pub caller: Caller,
    pub kind: &'static str,
    pub model_id: Option<Uuid>,
    pub model_name: String,
    pub provider: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The provider reported the figures (else they were estimated).
    pub reported: bool,
    pub cost_micros: i64,
    pub latency_ms: i32,
    /// `complete`, `cancelled`, or the error code.
    pub outcome: String,
    pub at: DateTime<Utc>,
    /// The budget reservations the call holds, replaced by what it used.
    pub reservations: Vec<Reservation>,
    /// Whether the model was called at all (a run refused or dropped
    /// before its first step only gives its reservations back).
    pub called: bool,
}

impl Record {
    /// What the call used of a budget of `metric`.
    pub fn used(&self, metric: Metric) -> i64 {
        match metric {
            Metric::Tokens => (self.input_tokens + self.output_tokens).min(i64::MAX as u64) as i64,
            Metric::Cost => self.cost_micros,
        }
    }
}

/// A budget whose threshold was crossed (reported once per period).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThresholdReached {
    pub org_id: Uuid,
    pub budget_id: Uuid,
    pub scope: String,
    pub subject_id: Option<Uuid>,
    pub metric: String,
    pub period: String,
    pub limit: i64,
    pub threshold_percent: i32,
    pub spent: i64,
    pub period_start: DateTime<Utc>,
    pub reset_at: DateTime<Utc>,
}

/// What the recorder does with a crossed threshold.
pub type OnThreshold = Arc<dyn Fn(ThresholdReached) + Send + Sync>;

/// What the requests of one deployment's key added to its counters in a
/// batch (see [`UsageRecorder::count_deployment_use`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeploymentUse {
    pub org_id: Uuid,
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// The latest request's time (the deployment's `last_used_at`).
    pub at: DateTime<Utc>,
}

/// A batch for the writer: the calls' records, and per deployment what
/// its requests add to its counters (in key order: the order its rows
/// are locked in).
#[derive(Default)]
pub struct Batch {
    pub records: Vec<Record>,
    pub deployments: BTreeMap<Uuid, DeploymentUse>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.deployments.is_empty()
    }

    fn len(&self) -> usize {
        self.records.len() + self.deployments.len()
    }

    fn clear(&mut self) {
        self.records.clear();
        self.deployments.clear();
    }

    fn add(&mut self, msg: Msg) -> Option<oneshot::Sender<()>> {
        match msg {
            Msg::Record(r) => self.records.push(*r),
            Msg::Deployment { id, add } => {
                let e = self.deployments.entry(id).or_insert(DeploymentUse {
                    requests: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    ..add
                });
                e.requests = e.requests.saturating_add(add.requests);
                e.input_tokens = e.input_tokens.saturating_add(add.input_tokens);
                e.output_tokens = e.output_tokens.saturating_add(add.output_tokens);
                e.at = e.at.max(add.at);
            }
            Msg::Flush(done) => return Some(done),
        }
        None
    }
}

enum Msg {
    Record(Box<Record>),
    Deployment { id: Uuid, add: DeploymentUse },
    Flush(oneshot::Sender<()>),
}

/// The instance's usage recorder: cheap to clone, never blocks.
#[derive(Clone)]
pub struct UsageRecorder {
    tx: mpsc::UnboundedSender<Msg>,
    config: Arc<UsageConfig>,
}

impl UsageRecorder {
    /// Starts the recorder's writer task.
    pub fn start(
        datastore: Datastore,
        config: UsageConfig,
        on_threshold: OnThreshold,
        log: slog::Logger,
    ) -> (UsageRecorder, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let interval = Duration::from_millis(config.flush_interval_ms.max(1));
        let task = tokio::spawn(writer(datastore, rx, interval, on_threshold, log));
        (
            UsageRecorder {
                tx,
                config: Arc::new(config),
            },
            task,
        )
    }

    pub fn config(&self) -> &UsageConfig {
        &self.config
    }

    /// Hands a record to the writer (nothing with `usage.enabled = false`).
    pub fn record(&self, mut record: Record) {
        if !self.config.enabled {
            return;
        }
        record.cost_micros = self.config.cost_micros(
            &record.model_name,
            record.input_tokens,
            record.output_tokens,
        );
        let _ = self.tx.send(Msg::Record(Box::new(record)));
    }

    /// Adds `requests` admitted requests and the tokens they used to the
    /// counters of the deployment whose key they came with, within the
    /// flush interval (whatever `usage.enabled` says: a deployment's
    /// counters are part of the deployment, not of usage reporting).
    pub fn count_deployment_use(
        &self,
        access: &DeploymentAccess,
        requests: i64,
        input_tokens: i64,
        output_tokens: i64,
    ) {
        let _ = self.tx.send(Msg::Deployment {
            id: access.deployment_id(),
            add: DeploymentUse {
                org_id: access.org_id(),
                requests,
                input_tokens,
                output_tokens,
                at: Utc::now(),
            },
        });
    }

    /// Records a call made outside the agent runtime (a transcription, an
    /// embedding batch), without budget reservations.
    #[allow(clippy::too_many_arguments)]
    pub fn record_call(
        &self,
        caller: Caller,
        kind: &'static str,
        model_name: &str,
        provider: &str,
        (input_tokens, output_tokens, reported): (u64, u64, bool),
        started: Instant,
        outcome: &str,
    ) {
        self.record(Record {
            caller,
            kind,
            model_id: None,
            model_name: model_name.to_string(),
            provider: provider.to_string(),
            input_tokens,
            output_tokens,
            reported,
            cost_micros: 0,
            latency_ms: millis(started),
            outcome: outcome.to_string(),
            at: Utc::now(),
            reservations: Vec::new(),
            called: true,
        });
    }

    /// Resolves once everything handed over so far is written (or the
    /// writer is gone).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

fn millis(started: Instant) -> i32 {
    i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX)
}

/// The writer: gathers records for `interval` after the first one, writes
/// them in one transaction, retries (keeping them) while the database is
/// unavailable.
async fn writer(
    datastore: Datastore,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    interval: Duration,
    on_threshold: OnThreshold,
    log: slog::Logger,
) {
    let mut batch = Batch::default();
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut flush_now = false;
        if let Some(done) = batch.add(first) {
            waiting.push(done);
            flush_now = true;
        }
        if !flush_now {
            let deadline = tokio::time::sleep(interval);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    () = &mut deadline => break,
                    msg = rx.recv() => match msg {
                        Some(msg) => {
                            if let Some(done) = batch.add(msg) {
                                waiting.push(done);
                                break;
                            }
                            if batch.len() >= 2000 {
                                break;
                            }
                        }
                        None => break,
                    },
                }
            }
        }
        let mut backoff = Duration::from_millis(100);
        let mut failures = 0;
        while !batch.is_empty() {
            match datastore.usage_write(&batch).await {
                Ok(crossed) => {
                    batch.clear();
                    for event in crossed {
                        on_threshold(event);
                    }
                }
                // Anything but an unavailable or busy database would fail
                // again: dropped after a few attempts, said at ERROR.
                Err(e)
                    if !matches!(
                        e,
                        crate::error::Error::Unavailable { .. } | crate::error::Error::Busy { .. }
                    ) && failures >= 3 =>
                {
                    slog::error!(log, "writing usage failed; dropping the batch"; "error" => %e,
                        "records" => batch.len());
                    batch.clear();
                }
                Err(e) => {
                    failures += 1;
                    slog::warn!(log, "writing usage failed; retrying"; "error" => %e,
                        "records" => batch.len());
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    // Flush requests wait no longer than the shutdown does.
                    for done in waiting.drain(..) {
                        let _ = done.send(());
                    }
                }
            }
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

/// The metering of one answer of the agent runtime: the model, who it is
/// for, its budget reservations, and what its steps used. Recorded once,
/// by [`Metered::finish`] or, if the run ends otherwise, when dropped
/// (`cancelled`).
pub struct Metered {
    recorder: UsageRecorder,
    caller: Caller,
    kind: &'static str,
    model_id: Option<Uuid>,
    model_name: String,
    provider: String,
    reservations: Vec<Reservation>,
    started: Instant,
    input: u64,
    output: u64,
    estimated: bool,
    step: Option<Step>,
    called: bool,
    done: bool,
}

#[derive(Default)]
struct Step {
    input_chars: usize,
    output_chars: usize,
    usage: Option<Usage>,
}

impl Metered {
    pub fn new(
        recorder: UsageRecorder,
        caller: Caller,
        kind: &'static str,
        model: &crate::providers::ModelEntry,
        reservations: Vec<Reservation>,
    ) -> Metered {
        Metered {
            recorder,
            caller,
            kind,
            model_id: Some(model.id),
            model_name: model.name.clone(),
            provider: model.provider.clone(),
            reservations,
            started: Instant::now(),
            input: 0,
            output: 0,
            estimated: false,
            step: None,
            called: false,
            done: false,
        }
    }

    /// The budgets this call is charged to, without a reservation: for a
    /// call that follows it and is charged where it is (a new chat's
    /// title), checked with it.
    pub fn charges(&self) -> Vec<Reservation> {
        self.reservations
            .iter()
            .map(|r| Reservation { amount: 0, ..*r })
            .collect()
    }

    /// Charges this call's use to `budgets` too (see [`Metered::charges`]).
    pub fn charged_to(mut self, budgets: Vec<Reservation>) -> Metered {
        self.reservations.extend(budgets);
        self
    }

    /// A model step starts with `input_chars` characters of input.
    pub fn step(&mut self, input_chars: usize) {
        self.end_step();
        self.called = true;
        self.step = Some(Step {
            input_chars,
            ..Step::default()
        });
    }

    /// Another deployment or model takes the current step over (a
    /// failover): what the one before produced is charged as its own step
    /// (estimated from its text unless it reported usage before it broke
    /// off), and the new one starts a step with the same input.
    pub fn rerouted(&mut self) {
        // A deployment that failed before producing anything is not
        // charged (providers do not bill a refused request).
        let Some(s) = self
            .step
            .as_ref()
            .filter(|s| s.output_chars > 0 || s.usage.is_some())
        else {
            return;
        };
        let input_chars = s.input_chars;
        self.step(input_chars);
    }

    /// Text the model produced.
    pub fn text(&mut self, chars: usize) {
        if let Some(s) = &mut self.step {
            s.output_chars += chars;
        }
    }

    /// Usage the provider reported for the current step.
    pub fn reported(&mut self, usage: Usage) {
        if let Some(s) = &mut self.step {
            let u = s.usage.get_or_insert_with(Usage::default);
            u.input_tokens = u.input_tokens.saturating_add(usage.input_tokens);
            u.output_tokens = u.output_tokens.saturating_add(usage.output_tokens);
        }
    }

    fn end_step(&mut self) {
        if let Some(s) = self.step.take() {
            match s.usage {
                Some(u) => {
                    self.input += u64::from(u.input_tokens);
                    self.output += u64::from(u.output_tokens);
                }
                None => {
                    self.estimated = true;
                    self.input += estimate_tokens(s.input_chars);
                    self.output += estimate_tokens(s.output_chars);
                }
            }
        }
    }

    /// Meters one model call made outside the agent runtime (a RAG
    /// query): `input_chars` of input, then the stream's text and reported
    /// usage; recorded when the stream finishes, fails or is dropped.
    pub fn wrap(
        mut self,
        input_chars: usize,
        stream: crate::providers::ChatStream,
    ) -> crate::providers::ChatStream {
        use crate::providers::ChatEvent;
        use futures::StreamExt;
        self.step(input_chars);
        futures::stream::unfold(
            (stream, Some(self)),
            |(mut stream, mut metered)| async move {
                let item = stream.next().await;
                match (&item, &mut metered) {
                    (Some(Ok(ChatEvent::Text(t))), Some(m)) => m.text(t.len()),
                    (Some(Ok(ChatEvent::Usage(u))), Some(m)) => m.reported(*u),
                    (Some(Ok(ChatEvent::Route(r))), Some(m))
                        if r.reason != crate::providers::router::RouteReason::First =>
                    {
                        m.rerouted()
                    }
                    (Some(Ok(ChatEvent::Finish(_))) | None, m) => {
                        if let Some(m) = m.take() {
                            m.finish("complete");
                        }
                    }
                    (Some(Err(e)), m) => {
                        if let Some(m) = m.take() {
                            m.finish(e.error_code());
                        }
                    }
                    _ => {}
                }
                item.map(|i| (i, (stream, metered)))
            },
        )
        .boxed()
    }

    /// The wrapper of `providers::ask` that meters its call.
    pub fn asking(
        self,
        request: &crate::providers::ChatRequest,
    ) -> impl FnOnce(
        Result<crate::providers::ChatStream, &crate::providers::ProviderError>,
    ) -> Option<crate::providers::ChatStream>
    + Send {
        let chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        move |started| match started {
            Ok(stream) => Some(self.wrap(chars, stream)),
            Err(e) => {
                self.failed(chars, e.error_code());
                None
            }
        }
    }

    /// Records a call that failed before its stream began.
    pub fn failed(mut self, input_chars: usize, outcome: &str) {
        self.step(input_chars);
        self.finish(outcome);
    }

    /// Records the run with its outcome (`complete`, or an error code). A
    /// run that never called the model records no row but gives its
    /// reservations back.
    pub fn finish(mut self, outcome: &str) {
        self.emit(outcome);
    }

    fn emit(&mut self, outcome: &str) {
        if self.done {
            return;
        }
        self.done = true;
        self.end_step();
        self.recorder.record(Record {
            caller: self.caller,
            kind: self.kind,
            model_id: self.model_id,
            model_name: std::mem::take(&mut self.model_name),
            provider: std::mem::take(&mut self.provider),
            input_tokens: self.input,
            output_tokens: self.output,
            reported: !self.estimated,
            cost_micros: 0,
            latency_ms: millis(self.started),
            outcome: outcome.to_string(),
            at: Utc::now(),
            reservations: std::mem::take(&mut self.reservations),
            called: self.called,
        });
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.emit("cancelled");
    }
}

/// What this instance last read about organizations having budgets at
/// all (see `usage.budget_cache_ms`): an organization without budgets
/// costs its calls no database round trip.
#[derive(Default)]
pub struct BudgetCache {
    known: std::sync::Mutex<std::collections::HashMap<Uuid, (bool, Instant)>>,
}

impl BudgetCache {
    /// What was read within `ttl`, if anything.
    pub fn get(&self, org_id: Uuid, ttl: Duration) -> Option<bool> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known
            .get(&org_id)
            .filter(|(_, at)| at.elapsed() < ttl)
            .map(|(has, _)| *has)
    }

    pub fn set(&self, org_id: Uuid, has: bool) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() > 100_000 {
            known.clear();
        }
        known.insert(org_id, (has, Instant::now()));
    }

    /// Forgets what was read (a budget of the organization changed here).
    pub fn forget(&self, org_id: Uuid) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.remove(&org_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
        assert_eq!(estimate_tokens(9), 3);
    }

    /// A batch sums each deployment's requests and tokens (saturating),
    /// keeps its latest use, and keeps deployments apart, in key order
    /// (the order their rows are locked in).
    #[test]
    fn a_batch_sums_each_deployments_use() {
        let (org, a, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let t0 = Utc::now();
        let t1 = t0 + chrono::Duration::seconds(1);
        let add = |requests, input_tokens, output_tokens, at| DeploymentUse {
            org_id: org,
            requests,
            input_tokens,
            output_tokens,
            at,
        };
        let mut batch = Batch::default();
        assert!(batch.is_empty());
        assert!(
            batch
                .add(Msg::Deployment {
                    id: a,
                    add: add(1, 10, 5, t1),
                })
                .is_none()
        );
        batch.add(Msg::Deployment {
            id: b,
            add: add(1, 0, 0, t0),
        });
        // A stream's tokens, counted apart from its request, stamped earlier.
        batch.add(Msg::Deployment {
            id: a,
            add: add(0, 3, 2, t0),
        });
        batch.add(Msg::Deployment {
            id: a,
            add: add(1, i64::MAX, 0, t0),
        });
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.deployments[&a], add(2, i64::MAX, 7, t1));
        assert_eq!(batch.deployments[&b], add(1, 0, 0, t0));
        let mut ids = vec![a, b];
        ids.sort();
        assert_eq!(batch.deployments.keys().copied().collect::<Vec<_>>(), ids);
        let (done, _wait) = oneshot::channel();
        assert!(batch.add(Msg::Flush(done)).is_some());
        batch.clear();
        assert!(batch.is_empty());
    }
}
