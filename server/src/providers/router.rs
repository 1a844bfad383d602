//! Routing an answer among a model's deployments and fallbacks.
//!
//! A configured model is served by one or more deployments (upstreams:
//! keys, regions, providers). [`RoutedModel`] is the [`ChatModel`] every
//! caller uses; when the model has somewhere else to go (several
//! deployments or fallback models) its [`ChatModel::start`] routes:
//!
//! 1. **Plan.** One statement reads the shared health of the model's and
//!    its fallbacks' deployments ([`crate::db::Datastore::deployment_health`]).
//!    The candidates are the model's deployments that are not cooling
//!    down and not disabled for their current configuration, in a
//!    weighted-random order (weight 0 last), then each fallback model's.
//!    A deployment whose cooldown ended is a candidate only for the one
//!    request that takes its probe.
//! 2. **Start.** Each candidate in turn (under its `rpm`/`tpm`, counted
//!    across instances) until one gives the first piece of an answer
//!    within the first-event timeout. A retryable failure (see
//!    [`FailureClass`]) is counted in the shared health (cooling the
//!    deployment down past `allowed_fails`, or at once for `429`, `529` and
//!    refused connections) and the next candidate is tried after a short
//!    jittered pause; a failure the request would meet anywhere (`400`,
//!    `404`, `413`, `422`) ends the answer, except a context-window or
//!    content-policy error when the model lists fallbacks for it; a `401`
//!    or `403` disables the deployment until its configuration changes
//!    (recorded in the audit log) and moves to a deployment with another
//!    key.
//! 3. **Failover inside the stream.** When the stream breaks after part of
//!    the answer, the next candidate continues it: from the partial text,
//!    sent as the assistant's prefix, when the candidate continues one
//!    (`prefill`), else from the beginning, announced by a
//!    [`ChatEvent::Route`] with `restart` so that whoever shows the answer
//!    drops what it had. Each piece is passed on once.
//!
//! A model with one deployment and no fallbacks is not routed: its
//! answers start as before (the same upstream retried `max_retries`
//! times), with no statement and no cooldown (there is nowhere else to
//! go, and cooling the only upstream down would only fail answers sooner).

use super::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, ProviderError, ProviderErrorKind,
    Reasoning, RetryPolicy, Role,
};
use crate::db::Datastore;
use crate::db::datastore::model_deployments::{DeploymentHealth, Failure};
use crate::metrics::Metrics;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// One upstream serving a model.
pub struct Deployment {
    pub name: String,
    /// `openai`, `anthropic`, … or `offline`.
    pub provider: String,
    pub weight: u32,
    pub rpm: Option<u32>,
    pub tpm: Option<u32>,
    /// A broken answer may continue here from its partial text.
    pub prefill: bool,
    /// See [`crate::config::ResolvedDeployment::fingerprint`].
    pub fingerprint: String,
    /// Tells deployments with different keys apart (a hash of the key).
    pub key_id: String,
    pub client: Arc<dyn ChatModel>,
}

/// Why an answer went to the deployment it went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteReason {
    /// The first choice.
    First,
    /// Another deployment of the same model, after a failure.
    Failover,
    /// A fallback model, after every deployment of the model failed.
    Fallback,
    /// A fallback for a request too long for the model's context window.
    ContextWindowFallback,
    /// A fallback for a content-policy refusal.
    ContentPolicyFallback,
}

impl RouteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteReason::First => "first",
            RouteReason::Failover => "failover",
            RouteReason::Fallback => "fallback",
            RouteReason::ContextWindowFallback => "context_window_fallback",
            RouteReason::ContentPolicyFallback => "content_policy_fallback",
        }
    }
}

/// Which model and deployment answer from here on.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub model: String,
    pub deployment: String,
    pub reason: RouteReason,
    /// The answer starts over: what was passed on before is dropped.
    pub restart: bool,
}

/// What a failure says about where to go next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
    /// `429`.
    RateLimited,
    /// `529`, or an `overloaded_error` event.
    Overloaded,
    /// Another `5xx`.
    Server,
    /// No connection.
    Connect,
    /// No response, first piece or next piece in time.
    Timeout,
    /// The stream broke off or could not be read.
    Interrupted,
    /// `401` or `403`: the key.
    Auth,
    /// A request the provider refuses wherever it is sent.
    Rejected,
    /// The request does not fit the model's context window.
    ContextWindow,
    /// The provider refuses the content.
    ContentPolicy,
}

impl FailureClass {
    pub fn of(error: &ProviderError) -> FailureClass {
        match error.kind {
            ProviderErrorKind::RateLimited => FailureClass::RateLimited,
            ProviderErrorKind::Server(529) => FailureClass::Overloaded,
            ProviderErrorKind::Server(_) => FailureClass::Server,
            ProviderErrorKind::Connect => FailureClass::Connect,
            ProviderErrorKind::Timeout => FailureClass::Timeout,
            ProviderErrorKind::Malformed | ProviderErrorKind::Interrupted => {
                FailureClass::Interrupted
            }
            // Not a failure of one deployment: nothing is counted for it.
            ProviderErrorKind::NoneAvailable => FailureClass::Rejected,
            ProviderErrorKind::Rejected(401 | 403) => FailureClass::Auth,
            ProviderErrorKind::Rejected(status) => {
                let detail = error.detail.to_ascii_lowercase();
                let says = |words: &[&str]| words.iter().any(|w| detail.contains(w));
                if says(&[
                    "context_length_exceeded",
                    "context length",
                    "context window",
                    "prompt is too long",
                    "too many tokens",
                    "maximum context",
                ]) || status == 413 && says(&["token"])
                {
                    FailureClass::ContextWindow
                } else if says(&[
                    "content_policy",
                    "content policy",
                    "content_filter",
                    "content management policy",
                    "safety system",
                ]) {
                    FailureClass::ContentPolicy
                } else {
                    FailureClass::Rejected
                }
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::RateLimited => "rate_limited",
            FailureClass::Overloaded => "overloaded",
            FailureClass::Server => "server",
            FailureClass::Connect => "connect",
            FailureClass::Timeout => "timeout",
            FailureClass::Interrupted => "interrupted",
            FailureClass::Auth => "auth",
            FailureClass::Rejected => "rejected",
            FailureClass::ContextWindow => "context_window",
            FailureClass::ContentPolicy => "content_policy",
        }
    }

    /// Another deployment may answer where this one failed.
    fn moves_on(self) -> bool {
        !matches!(
            self,
            FailureClass::Rejected | FailureClass::ContextWindow | FailureClass::ContentPolicy
        )
    }
}

/// The cooldown rules (from `[providers]`).
#[derive(Clone, Debug)]
pub struct RoutePolicy {
    pub allowed_fails: u32,
    pub fail_window: Duration,
    pub cooldown: Duration,
    pub max_cooldown: Duration,
    pub first_event_timeout: Duration,
    /// How long a model's health, as read, serves the next answers of this
    /// instance (see [`RoutedModel::health`]).
    pub health_ttl: Duration,
}

impl RoutePolicy {
    pub fn from_config(config: &crate::config::Config) -> RoutePolicy {
        let p = &config.providers;
        RoutePolicy {
            allowed_fails: p.allowed_fails,
            fail_window: Duration::from_secs(p.fail_window_secs),
            cooldown: Duration::from_secs(p.cooldown_secs),
            max_cooldown: Duration::from_secs(p.max_cooldown_secs.max(p.cooldown_secs)),
            first_event_timeout: Duration::from_secs(p.first_event_timeout_secs),
            health_ttl: Duration::from_millis(p.health_ttl_ms),
        }
    }
}

/// What routing shares: the database (health, counts), the metrics, the
/// rules.
pub struct RouterContext {
    pub datastore: Datastore,
    pub metrics: Arc<Metrics>,
    pub policy: RoutePolicy,
    pub log: slog::Logger,
    /// Raised whenever this instance writes a deployment's health: every
    /// model's kept health is read again after it.
    pub epoch: std::sync::atomic::AtomicU64,
}

/// The fallback lists of a model, resolved to the models.
#[derive(Default)]
struct Fallbacks {
    any: Vec<Weak<RoutedModel>>,
    context_window: Vec<Weak<RoutedModel>>,
    content_policy: Vec<Weak<RoutedModel>>,
}

/// A model's health as read: when, at which epoch, and what.
type KeptHealth = (Instant, u64, Arc<Vec<DeploymentHealth>>);

/// A model as served: its deployments and fallbacks.
pub struct RoutedModel {
    pub name: String,
    pub deployments: Vec<Arc<Deployment>>,
    /// Names of the fallback models (`fallbacks`,
    /// `context_window_fallbacks`, `content_policy_fallbacks`).
    pub fallback_names: [Vec<String>; 3],
    fallbacks: OnceLock<Fallbacks>,
    context: Option<Arc<RouterContext>>,
    /// The health last read for this model and its fallbacks, and when.
    health: std::sync::Mutex<Option<KeptHealth>>,
    /// What the model takes, to skip a fallback that cannot take the
    /// request (an image to a text-only model).
    pub takes_images: bool,
    pub takes_pdfs: bool,
    pub reasoning: workspace_api::conversations::ReasoningMode,
}

impl RoutedModel {
    pub fn new(
        name: String,
        deployments: Vec<Arc<Deployment>>,
        fallback_names: [Vec<String>; 3],
        capabilities: &crate::config::capabilities::Capabilities,
        context: Option<Arc<RouterContext>>,
    ) -> RoutedModel {
        use workspace_api::conversations::ModelInput;
        RoutedModel {
            name,
            deployments,
            fallback_names,
            fallbacks: OnceLock::new(),
            context,
            health: std::sync::Mutex::new(None),
            takes_images: capabilities.input.contains(&ModelInput::Image),
            takes_pdfs: capabilities.input.contains(&ModelInput::Pdf),
            reasoning: capabilities.reasoning,
        }
    }

    /// Resolves the fallback names against every model (once, when the
    /// registry is built).
    pub fn link(&self, models: &HashMap<String, Arc<RoutedModel>>) {
        let resolve = |names: &[String]| {
            names
                .iter()
                .filter_map(|n| models.get(n).map(Arc::downgrade))
                .collect()
        };
        let _ = self.fallbacks.set(Fallbacks {
            any: resolve(&self.fallback_names[0]),
            context_window: resolve(&self.fallback_names[1]),
            content_policy: resolve(&self.fallback_names[2]),
        });
    }

    /// Whether answers are routed (see the module's documentation).
    pub fn routes(&self) -> bool {
        self.context.is_some()
            && (self.deployments.len() > 1 || self.fallback_names.iter().any(|l| !l.is_empty()))
    }

    fn fallbacks(&self, which: FallbackList) -> Vec<Arc<RoutedModel>> {
        let Some(f) = self.fallbacks.get() else {
            return Vec::new();
        };
        let list = match which {
            FallbackList::Any => &f.any,
            FallbackList::ContextWindow => &f.context_window,
            FallbackList::ContentPolicy => &f.content_policy,
        };
        list.iter().filter_map(Weak::upgrade).collect()
    }

    /// Whether the model can take `request` (its attachments).
    fn takes(&self, request: &ChatRequest) -> bool {
        use super::Attachment;
        request.messages.iter().all(|m| {
            m.attachments.iter().all(|a| match a {
                Attachment::Image { .. } => self.takes_images,
                Attachment::Pdf { .. } => self.takes_pdfs,
            })
        })
    }

    /// The shared health of the model's and its fallbacks' deployments:
    /// one statement, whose answer serves this instance's next answers of
    /// the model for `providers.health_ttl_ms` (so a burst of answers, and
    /// an answer's check before it is stored and its start, read it once).
    /// A failure this instance counts forgets it at once; another
    /// instance's is seen within the TTL.
    async fn health(
        &self,
        context: &RouterContext,
        fallbacks: &[Arc<RoutedModel>],
    ) -> Result<Arc<Vec<DeploymentHealth>>, crate::error::Error> {
        use std::sync::atomic::Ordering::Acquire;
        let ttl = context.policy.health_ttl;
        let epoch = context.epoch.load(Acquire);
        if !ttl.is_zero() {
            let kept = self.health.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, read_at, health)) = kept.as_ref()
                && *read_at == epoch
                && at.elapsed() < ttl
            {
                return Ok(health.clone());
            }
        }
        let mut names: Vec<&str> = vec![self.name.as_str()];
        names.extend(fallbacks.iter().map(|m| m.name.as_str()));
        let health = Arc::new(context.datastore.deployment_health(&names).await?);
        if !ttl.is_zero() {
            *self.health.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((Instant::now(), epoch, health.clone()));
        }
        Ok(health)
    }

    /// When every deployment of the model and of its fallbacks is cooling
    /// down or disabled: how long until the first cooldown ends (`None`
    /// for a disabled-only model: `Retry-After` is then the cooldown).
    /// `Ok(None)` when some deployment may answer. One statement; none
    /// for a model that is not routed.
    pub async fn unavailable(&self) -> Result<Option<Duration>, crate::error::Error> {
        let Some(context) = self.context.as_ref().filter(|_| self.routes()) else {
            return Ok(None);
        };
        let fallbacks = self.fallbacks(FallbackList::Any);
        let mut models: Vec<&RoutedModel> = vec![self];
        models.extend(fallbacks.iter().map(|m| m.as_ref()));
        let health = self.health(context, &fallbacks).await?;
        let mut soonest: Option<f64> = None;
        for model in &models {
            for d in &model.deployments {
                match health
                    .iter()
                    .find(|h| h.model == model.name && h.deployment == d.name)
                {
                    None => return Ok(None),
                    Some(h) if disabled(h, d) => {}
                    Some(h) => match h.cooling_secs {
                        None => return Ok(None),
                        Some(secs) => soonest = Some(soonest.map_or(secs, |s| s.min(secs))),
                    },
                }
            }
        }
        Ok(Some(
            soonest
                .map(Duration::from_secs_f64)
                .unwrap_or(context.policy.cooldown),
        ))
    }
}

#[derive(Clone, Copy)]
enum FallbackList {
    Any,
    ContextWindow,
    ContentPolicy,
}

fn disabled(health: &DeploymentHealth, deployment: &Deployment) -> bool {
    health.disabled_fingerprint.as_deref() == Some(deployment.fingerprint.as_str())
}

/// A deployment the answer may go to.
#[derive(Clone)]
struct Candidate {
    model: Arc<str>,
    deployment: Arc<Deployment>,
    reason: RouteReason,
    /// Its cooldown ended: it must take the probe first.
    probe: bool,
    /// It had failures or a cooldown to clear once it answers.
    recovering: bool,
    /// The request must drop reasoning settings and blocks meant for
    /// another model.
    foreign: bool,
}

/// The error when no deployment is left to try.
pub fn providers_unavailable(retry_after: Option<Duration>) -> ProviderError {
    ProviderError {
        kind: ProviderErrorKind::NoneAvailable,
        detail: "every deployment of the model and its fallbacks is cooling down or disabled"
            .into(),
        retry_after,
    }
}

#[async_trait::async_trait]
impl ChatModel for RoutedModel {
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        // Asked directly (not through `start`): the first deployment.
        match self.deployments.first() {
            Some(d) => d.client.stream(request).await,
            None => Err(providers_unavailable(None)),
        }
    }

    fn describe(&self) -> (&str, &str) {
        match self.deployments.first() {
            Some(d) => d.client.describe(),
            None => ("unknown", "unknown"),
        }
    }

    async fn start(
        &self,
        request: &ChatRequest,
        policy: &RetryPolicy,
        log: &slog::Logger,
    ) -> Result<ChatStream, ProviderError> {
        let context = match &self.context {
            Some(context) if self.routes() => context.clone(),
            _ => {
                return match self.deployments.first() {
                    Some(d) => super::start_single(d.client.as_ref(), request, policy, log).await,
                    None => Err(providers_unavailable(None)),
                };
            }
        };
        let candidates = self.plan(&context).await;
        let mut run = Run {
            context,
            policy: policy.clone(),
            log: log.clone(),
            request: request.clone(),
            candidates: candidates.into_iter().collect(),
            tried_keys: Vec::new(),
            fallbacks: [
                self.fallbacks(FallbackList::ContextWindow),
                self.fallbacks(FallbackList::ContentPolicy),
            ],
            current: None,
            failed_before: false,
        };
        let (stream, route) = run.next(None).await?;
        Ok(failover(run, stream, route))
    }
}

impl RoutedModel {
    /// The candidates in order (see the module's documentation). A
    /// database failure leaves every deployment a candidate: routing
    /// without health beats not answering.
    async fn plan(&self, context: &RouterContext) -> Vec<Candidate> {
        let fallbacks = self.fallbacks(FallbackList::Any);
        let health = match self.health(context, &fallbacks).await {
            Ok(h) => h,
            Err(e) => {
                slog::warn!(context.log, "model deployments' health unknown"; "error" => %e);
                Arc::new(Vec::new())
            }
        };
        let mut out = candidates_of(self, &health, RouteReason::First, false);
        for fallback in &fallbacks {
            out.extend(candidates_of(
                fallback,
                &health,
                RouteReason::Fallback,
                true,
            ));
        }
        out
    }
}

/// A model's usable deployments in weighted-random order (see
/// [`weighted_order`]), each marked with what its health asks.
fn candidates_of(
    model: &RoutedModel,
    health: &[DeploymentHealth],
    reason: RouteReason,
    foreign: bool,
) -> Vec<Candidate> {
    let name: Arc<str> = model.name.as_str().into();
    let usable: Vec<(Arc<Deployment>, bool, bool)> = model
        .deployments
        .iter()
        .filter_map(|d| {
            let h = health
                .iter()
                .find(|h| h.model == model.name && h.deployment == d.name);
            match h {
                None => Some((d.clone(), false, false)),
                Some(h) if disabled(h, d) => None,
                Some(h) if h.cooling_secs.is_some() => None,
                Some(h) => Some((d.clone(), h.probe_due, h.probe_due || h.failures > 0)),
            }
        })
        .collect();
    let weights: Vec<u32> = usable.iter().map(|(d, _, _)| d.weight).collect();
    let mut rng = rand::rng();
    weighted_order(&weights, &mut rng)
        .into_iter()
        .map(|i| {
            let (deployment, probe, recovering) = usable[i].clone();
            Candidate {
                model: name.clone(),
                deployment,
                reason,
                probe,
                recovering,
                foreign,
            }
        })
        .collect()
}

/// Indices of `weights` in a weighted-random order without replacement
/// (Efraimidis–Spirakis: each item's key is `u^(1/w)`, largest first), so
/// each item comes first in proportion to its weight; weight 0 items come
/// last, in their order.
pub fn weighted_order(weights: &[u32], rng: &mut impl rand::Rng) -> Vec<usize> {
    let mut keyed: Vec<(f64, usize)> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let key = if w == 0 {
                -1.0 - i as f64
            } else {
                let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
                u.powf(1.0 / f64::from(w))
            };
            (key, i)
        })
        .collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// One routed answer's state: what is left to try and what was tried.
struct Run {
    context: Arc<RouterContext>,
    policy: RetryPolicy,
    log: slog::Logger,
    request: ChatRequest,
    candidates: std::collections::VecDeque<Candidate>,
    /// Keys refused (401/403) in this answer: no other deployment with
    /// the same key is tried.
    tried_keys: Vec<String>,
    /// The model's context-window and content-policy fallbacks.
    fallbacks: [Vec<Arc<RoutedModel>>; 2],
    /// The deployment answering now.
    current: Option<Candidate>,
    /// Some deployment failed this answer already.
    failed_before: bool,
}

/// How an answer broken off continues.
struct Resume {
    /// The text passed on so far.
    text: String,
    /// Whether anything but text was passed on (reasoning, tool calls):
    /// such an answer restarts.
    other: bool,
}

impl Run {
    /// Starts the answer on the next candidate that gives a first event;
    /// `resume` when continuing a broken answer. Returns the stream (its
    /// first event included) and the route it took.
    async fn next(
        &mut self,
        resume: Option<&Resume>,
    ) -> Result<(ChatStream, Route), ProviderError> {
        let mut last: Option<ProviderError> = None;
        let mut pause = self.policy.backoff / 2;
        while let Some(candidate) = self.candidates.pop_front() {
            if self.tried_keys.contains(&candidate.deployment.key_id) {
                continue;
            }
            if candidate.foreign {
                let model = self.lookup(&candidate.model);
                if model.as_ref().is_some_and(|m| !m.takes(&self.request)) {
                    continue;
                }
            }
            let d = &candidate.deployment;
            let store = &self.context.datastore;
            if candidate.probe {
                let hold = self.context.policy.first_event_timeout.as_secs_f64();
                match store
                    .deployment_claim_probe(&candidate.model, &d.name, hold)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => slog::warn!(self.log, "probe not claimed"; "error" => %e),
                }
            }
            if d.rpm.is_some() || d.tpm.is_some() {
                let rpm = d.rpm.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
                let tpm = d.tpm.map(i64::from);
                match store
                    .deployment_count_request(&candidate.model, &d.name, rpm, tpm)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        self.context.metrics.deployment_request(
                            &candidate.model,
                            &d.name,
                            "over_limit",
                        );
                        continue;
                    }
                    Err(e) => slog::warn!(self.log, "deployment limits unknown"; "error" => %e),
                }
            }
            let (request, prefixed) = self.request_for(&candidate, resume);
            let started = Instant::now();
            let attempt = super::attempt(
                d.client.as_ref(),
                &request,
                &self.policy,
                self.context.policy.first_event_timeout,
            )
            .await;
            drop(request);
            match attempt {
                Ok(stream) => {
                    self.context
                        .metrics
                        .deployment_request(&candidate.model, &d.name, "ok");
                    self.context.metrics.deployment_first_event(
                        &candidate.model,
                        &d.name,
                        started.elapsed(),
                    );
                    if candidate.recovering {
                        if let Err(e) = store.deployment_recovered(&candidate.model, &d.name).await
                        {
                            slog::warn!(self.log, "deployment recovery not stored"; "error" => %e);
                        }
                        self.context
                            .epoch
                            .fetch_add(1, std::sync::atomic::Ordering::Release);
                    }
                    let route = Route {
                        model: candidate.model.to_string(),
                        deployment: d.name.clone(),
                        reason: if candidate.reason == RouteReason::First
                            && (self.failed_before || resume.is_some())
                        {
                            RouteReason::Failover
                        } else {
                            candidate.reason
                        },
                        restart: resume.is_some() && !prefixed,
                    };
                    let stream = if prefixed {
                        trim_continuation(stream, resume.map(|r| r.text.as_str()).unwrap_or(""))
                    } else {
                        stream
                    };
                    self.current = Some(candidate);
                    return Ok((stream, route));
                }
                Err(error) => {
                    self.failed_before = true;
                    let class = FailureClass::of(&error);
                    self.context
                        .metrics
                        .deployment_request(&candidate.model, &d.name, "failed");
                    self.failed(&candidate, &error, class).await;
                    slog::info!(self.log, "model deployment failed";
                        "model" => &*candidate.model, "deployment" => &d.name,
                        "class" => class.as_str(), "error" => %error);
                    match class {
                        FailureClass::ContextWindow | FailureClass::ContentPolicy => {
                            let (list, reason) = if class == FailureClass::ContextWindow {
                                (&self.fallbacks[0], RouteReason::ContextWindowFallback)
                            } else {
                                (&self.fallbacks[1], RouteReason::ContentPolicyFallback)
                            };
                            if list.is_empty() || candidate.reason != RouteReason::First {
                                return Err(error);
                            }
                            // Only the fallbacks for this error are left.
                            let mut next = Vec::new();
                            for model in list.clone() {
                                next.extend(candidates_of(&model, &[], reason, true));
                            }
                            self.candidates = next.into();
                            self.fallbacks = [Vec::new(), Vec::new()];
                        }
                        FailureClass::Rejected => return Err(error),
                        FailureClass::Auth => {
                            self.tried_keys.push(d.key_id.clone());
                        }
                        _ => {
                            // A short jittered pause before the next
                            // upstream (none needed when it is another
                            // provider, but cheap next to an answer).
                            let jitter = rand::random_range(0.5..1.0);
                            tokio::time::sleep(pause.mul_f64(jitter)).await;
                            pause = (pause * 2).min(Duration::from_secs(2));
                        }
                    }
                    last = Some(error);
                }
            }
        }
        // Every candidate failed in a way another might not (or none was
        // left): one clear error, with when to try again.
        if let Some(last) = &last {
            slog::warn!(self.log, "every deployment failed"; "last_error" => %last);
        }
        Err(providers_unavailable(Some(self.context.policy.cooldown)))
    }

    /// A fallback model by name (for what it takes).
    fn lookup(&self, name: &str) -> Option<Arc<RoutedModel>> {
        self.fallbacks
            .iter()
            .flatten()
            .find(|m| &*m.name == name)
            .cloned()
    }

    /// The request as sent to `candidate`: reasoning settings and blocks
    /// meant for the model asked for are dropped for another model; when
    /// resuming, the partial text as the assistant's prefix if the
    /// candidate continues one (then `true`), else the request as it was.
    fn request_for(&self, candidate: &Candidate, resume: Option<&Resume>) -> (ChatRequest, bool) {
        let mut request = self.request.clone();
        if candidate.foreign {
            request.reasoning = None;
            for m in &mut request.messages {
                m.reasoning.clear();
            }
        }
        let Some(resume) = resume else {
            return (request, false);
        };
        let prefix = resume.text.trim_end();
        let thinking = matches!(request.reasoning, Some(Reasoning::Budget(_)));
        if !candidate.deployment.prefill || resume.other || prefix.is_empty() || thinking {
            return (request, false);
        }
        request
            .messages
            .push(ChatMessage::new(Role::Assistant, prefix.to_string()));
        request.continue_final = true;
        (request, true)
    }

    /// Adds an answer's tokens to its deployment's minute (for `tpm`).
    async fn count_tokens(&self, tokens: u32) {
        let Some(current) = &self.current else {
            return;
        };
        if current.deployment.tpm.is_none() {
            return;
        }
        if let Err(e) = self
            .context
            .datastore
            .deployment_count_tokens(&current.model, &current.deployment.name, i64::from(tokens))
            .await
        {
            slog::warn!(self.log, "deployment tokens not counted"; "error" => %e);
        }
    }

    /// Counts a failure in the shared health (and the metrics), disabling
    /// the deployment on a refused key.
    async fn failed(&self, candidate: &Candidate, error: &ProviderError, class: FailureClass) {
        let d = &candidate.deployment;
        let metrics = &self.context.metrics;
        metrics.deployment_failure(&candidate.model, &d.name, class.as_str());
        self.context
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        let store = &self.context.datastore;
        let policy = &self.context.policy;
        if class == FailureClass::Auth {
            let status = match error.kind {
                ProviderErrorKind::Rejected(s) => s,
                _ => 401,
            };
            match store
                .deployment_disable(&candidate.model, &d.name, &d.fingerprint, status)
                .await
            {
                Ok(true) => slog::error!(self.log,
                    "model deployment disabled: the provider refused its key; \
                     it stays disabled until its configuration changes";
                    "model" => &*candidate.model, "deployment" => &d.name, "status" => status),
                Ok(false) => {}
                Err(e) => slog::warn!(self.log, "deployment not disabled"; "error" => %e),
            }
            return;
        }
        if !class.moves_on() {
            return;
        }
        let at_once = match class {
            FailureClass::RateLimited => Some(
                error
                    .retry_after
                    .unwrap_or(policy.cooldown)
                    .min(policy.max_cooldown),
            ),
            FailureClass::Overloaded | FailureClass::Connect => Some(policy.cooldown),
            _ if candidate.probe => Some(policy.cooldown),
            _ => None,
        };
        let failure = Failure {
            class: class.as_str(),
            cool_at_once: at_once.map(|d| d.as_secs_f64()),
            allowed_fails: i32::try_from(policy.allowed_fails).unwrap_or(i32::MAX),
            window_secs: policy.fail_window.as_secs_f64(),
            cooldown_secs: policy.cooldown.as_secs_f64(),
            probe: candidate.probe,
        };
        match store
            .deployment_failed(&candidate.model, &d.name, &failure)
            .await
        {
            Ok(Some(secs)) => {
                metrics.deployment_cooldown(&candidate.model, &d.name);
                slog::warn!(self.log, "model deployment cooling down";
                    "model" => &*candidate.model, "deployment" => &d.name,
                    "class" => class.as_str(), "secs" => secs);
            }
            Ok(None) => {}
            Err(e) => slog::warn!(self.log, "deployment failure not stored"; "error" => %e),
        }
    }
}

/// The answer's stream with failover: a [`ChatEvent::Route`] first, the
/// events of the deployment answering, and, when its stream breaks, the
/// next candidate's (see [`Run::next`]).
fn failover(run: Run, first: ChatStream, route: Route) -> ChatStream {
    struct State {
        run: Run,
        stream: ChatStream,
        resume: Resume,
        pending: Option<ChatEvent>,
        done: bool,
    }
    let state = State {
        run,
        stream: first,
        resume: Resume {
            text: String::new(),
            other: false,
        },
        pending: Some(ChatEvent::Route(Box::new(route))),
        done: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        if let Some(event) = s.pending.take() {
            return Some((Ok(event), s));
        }
        if s.done {
            return None;
        }
        match s.stream.next().await {
            None => None,
            Some(Ok(event)) => {
                match &event {
                    ChatEvent::Usage(usage) => s.run.count_tokens(usage.total_tokens()).await,
                    ChatEvent::Text(t) => s.resume.text.push_str(t),
                    ChatEvent::Reasoning(_)
                    | ChatEvent::ReasoningBlock(_)
                    | ChatEvent::ToolCall(_) => s.resume.other = true,
                    _ => {}
                }
                Some((Ok(event), s))
            }
            Some(Err(error)) => {
                let class = FailureClass::of(&error);
                if let Some(current) = s.run.current.clone() {
                    s.run.context.metrics.deployment_request(
                        &current.model,
                        &current.deployment.name,
                        "broke",
                    );
                    s.run.failed(&current, &error, class).await;
                    slog::info!(s.run.log, "model deployment broke off mid-answer";
                        "model" => &*current.model, "deployment" => &current.deployment.name,
                        "class" => class.as_str(), "error" => %error);
                }
                if !class.moves_on() {
                    s.done = true;
                    return Some((Err(error), s));
                }
                s.run.failed_before = true;
                match s.run.next(Some(&s.resume)).await {
                    Ok((stream, route)) => {
                        if route.restart {
                            s.resume = Resume {
                                text: String::new(),
                                other: false,
                            };
                        }
                        s.stream = stream;
                        Some((Ok(ChatEvent::Route(Box::new(route))), s))
                    }
                    // No deployment could continue: one clear error
                    // (`providers_unavailable`), the partial text kept
                    // as the failed answer.
                    Err(unavailable) => {
                        slog::warn!(s.run.log, "no deployment could continue the answer";
                            "error" => %error);
                        s.done = true;
                        Some((Err(unavailable), s))
                    }
                }
            }
        }
    })
    .boxed()
}

/// A continuation's stream with the leading whitespace of its first text
/// dropped when the partial text it continues ended with whitespace (the
/// prefix was sent without it, as Anthropic requires, and the model
/// usually begins by writing it again).
fn trim_continuation(stream: ChatStream, partial: &str) -> ChatStream {
    let mut trimming = partial.ends_with(char::is_whitespace);
    stream
        .filter_map(move |item| {
            let out = match item {
                Ok(ChatEvent::Text(t)) if trimming => {
                    let rest = t.trim_start();
                    if rest.is_empty() {
                        None
                    } else {
                        trimming = false;
                        Some(Ok(ChatEvent::Text(rest.to_string())))
                    }
                }
                other => Some(other),
            };
            futures::future::ready(out)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(kind: ProviderErrorKind, detail: &str) -> ProviderError {
        ProviderError::new(kind, detail)
    }

    #[test]
    fn failures_are_classed_by_status_and_message() {
        use FailureClass as C;
        use ProviderErrorKind as K;
        assert_eq!(C::of(&error(K::RateLimited, "")), C::RateLimited);
        assert_eq!(C::of(&error(K::Server(529), "")), C::Overloaded);
        assert_eq!(C::of(&error(K::Server(502), "")), C::Server);
        assert_eq!(C::of(&error(K::Rejected(401), "")), C::Auth);
        assert_eq!(C::of(&error(K::Rejected(403), "")), C::Auth);
        assert_eq!(
            C::of(&error(K::Rejected(400), "HTTP 400: bad")),
            C::Rejected
        );
        assert_eq!(
            C::of(&error(
                K::Rejected(400),
                "HTTP 400 (context_length_exceeded): This model's maximum context length is 8192 tokens"
            )),
            C::ContextWindow
        );
        assert_eq!(
            C::of(&error(
                K::Rejected(400),
                "HTTP 400: prompt is too long: 250000 tokens > 200000 maximum"
            )),
            C::ContextWindow
        );
        assert_eq!(
            C::of(&error(
                K::Rejected(400),
                "HTTP 400 (content_policy_violation): no"
            )),
            C::ContentPolicy
        );
        assert!(!C::Rejected.moves_on());
        assert!(C::Auth.moves_on());
        assert!(C::Interrupted.moves_on());
    }

    /// Over many draws, each weight leads in proportion to it, and weight
    /// 0 always comes last.
    #[test]
    fn weighted_order_follows_the_weights() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut first = [0u32; 3];
        for _ in 0..10_000 {
            let order = weighted_order(&[3, 1, 0], &mut rng);
            assert_eq!(order.len(), 3);
            assert_eq!(order[2], 2);
            first[order[0]] += 1;
        }
        assert_eq!(first[2], 0);
        let share = f64::from(first[0]) / 10_000.0;
        assert!((0.72..0.78).contains(&share), "{share}");
    }

    #[tokio::test]
    async fn a_continuation_does_not_repeat_the_whitespace_it_follows() {
        let events = vec![
            Ok(ChatEvent::Text(" ".into())),
            Ok(ChatEvent::Text(" world".into())),
            Ok(ChatEvent::Text(" again".into())),
        ];
        let stream = futures::stream::iter(events).boxed();
        let texts: Vec<String> = trim_continuation(stream, "Hello ")
            .filter_map(|e| async move {
                match e {
                    Ok(ChatEvent::Text(t)) => Some(t),
                    _ => None,
                }
            })
            .collect()
            .await;
        assert_eq!(texts, vec!["world", " again"]);
    }
}
