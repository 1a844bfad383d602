//! One answer pipeline, shared by every streamed answer: chat, chat's
//! prompt suggestions, conversations, the MCP playground and the
//! OpenAI-compatible deployment endpoint.
//!
//! An answer goes through the same steps whatever area asked for it:
//!
//! 1. **start**: a *kept* answer ([`Answer::begin`]: chat, conversations)
//!    subscribes to stop requests and takes the lease before the client
//!    can know the answer's id, and starts the event writer (each event is
//!    numbered, stored in the stream's events and announced with
//!    `NOTIFY`, then handed to the requesting client, who may resume); a
//!    *direct* answer ([`Answer::direct`]: prompt suggestions, the
//!    playground, deployments) hands its events straight to the client
//!    and ends when the client goes away. The area emits its first events
//!    ([`Answer::emit`]);
//! 2. **generate** ([`Answer::spawn`]): a task of its own runs the model
//!    through the agent runtime and turns its events into the area's
//!    events, saving the text every [`SAVE_INTERVAL`] without holding up
//!    the stream;
//! 3. **end**: the lease ends (interrupted at shutdown, or lost to a
//!    sweeper), a stop request arrives from any instance, the client of a
//!    direct answer goes away, the member it answers is suspended or
//!    removed (their [`MemberWatch`]: the answer fails with
//!    [`MEMBERSHIP_REVOKED`], from any instance), the model ends or fails;
//! 4. **store**: the finished answer is stored by a task of its own that
//!    retries for as long as the database is unavailable (a generated
//!    answer must reach the database); the stream waits
//!    [`Area::store_wait`] for it;
//! 5. **close**: the area emits its closing events (usage, title, the last
//!    event) and notices, and the writer drains.
//!
//! What differs between areas (where answers are stored, which events the
//! wire format has) is an [`Area`].

use crate::app::streams::{
    Emitter, INTERRUPTED, INTERRUPTED_MESSAGE, Lease, LeaseEnd, MEMBERSHIP_REVOKED,
    MEMBERSHIP_REVOKED_MESSAGE, MemberWatch, Numbered,
};
use crate::authz::OrgAccess;
use crate::chat_hub::Notice;
use crate::context::ServerContext;
use crate::db::datastore::chat::STOP_CHANNEL;
use crate::db::datastore::streams::StreamKind;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::providers::Usage;
use crate::providers::router::Route;
pub use crate::runtime::ToolFinished;
use crate::runtime::{RunError, RunSpec, RuntimeEvent, ToolStarted};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use uuid::Uuid;
use workspace_api::chat::AnswerRoute;

/// How often the text of a streaming answer is saved.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long the stream waits for a finished answer to be stored before it
/// closes (storing goes on in the background).
pub const STORE_WAIT: Duration = Duration::from_secs(30);
/// The most reasoning an answer keeps and streams, in bytes: a model's
/// thinking rarely passes a few tens of kilobytes; what a provider sends
/// past this is neither streamed nor stored (the answer goes on).
pub const REASONING_MAX_BYTES: usize = 256 * 1024;
/// The longest pause between two attempts to store an answer.
const STORE_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How an answer ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    Complete,
    /// Stopped by a stop request.
    Stopped,
    /// The model (or the runtime) failed: the error's code and public
    /// message.
    Failed {
        code: String,
        message: String,
    },
    /// The instance stops and its shutdown grace period ended.
    Interrupted,
    /// A sweeper closed the answer (this instance had lost touch with the
    /// database for longer than the lease): nothing more to do.
    Lost,
    /// The client of a direct answer went away.
    Gone,
}

impl Outcome {
    /// The error code an answer that ended this way is stored with.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Outcome::Failed { code, .. } => Some(code),
            Outcome::Interrupted => Some(INTERRUPTED),
            Outcome::Complete | Outcome::Stopped | Outcome::Lost | Outcome::Gone => None,
        }
    }

    /// The error event's code and message for an answer that failed.
    pub fn error(&self) -> Option<(String, String)> {
        match self {
            Outcome::Failed { code, message } => Some((code.clone(), message.clone())),
            Outcome::Interrupted => Some((INTERRUPTED.into(), INTERRUPTED_MESSAGE.into())),
            Outcome::Complete | Outcome::Stopped | Outcome::Lost | Outcome::Gone => None,
        }
    }
}

impl From<LeaseEnd> for Outcome {
    fn from(end: LeaseEnd) -> Outcome {
        match end {
            LeaseEnd::Lost => Outcome::Lost,
            LeaseEnd::Interrupted => Outcome::Interrupted,
        }
    }
}

/// Whether the finished answer reached the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    Yes,
    /// Not within [`STORE_WAIT`]: the database is unavailable, and the
    /// answer is stored when it is back.
    Pending,
    /// Storing failed for good (logged).
    Failed,
}

/// Where an answer's events go.
pub enum Out<E> {
    /// Numbered, stored and announced, then handed to the requesting
    /// client while it keeps up (a kept answer: resumable).
    Kept(Emitter),
    /// Straight to the requesting client (a direct answer).
    Direct(mpsc::Sender<E>),
}

impl<E: Serialize + Send> Out<E> {
    /// Emits an event; false when the client of a direct answer is gone.
    pub async fn emit(&mut self, event: E) -> bool {
        match self {
            Out::Kept(emitter) => {
                emitter.emit(event).await;
                true
            }
            Out::Direct(tx) => tx.send(event).await.is_ok(),
        }
    }
}

/// What an area supplies to the pipeline.
#[async_trait::async_trait]
pub trait Area: Send + Sync + 'static {
    /// The area's stream events (their schema is in the contract).
    type Event: Serialize + Send;

    /// The event of a piece of text.
    fn content(&self, piece: String) -> Self::Event;

    /// The event of a piece of the model's reasoning, when the area's
    /// stream shows it.
    fn reasoning(&self, _piece: String) -> Option<Self::Event> {
        None
    }

    /// The event of a tool call starting, when the area's stream has one.
    fn tool_started(&self, _id: String, _name: String, _input: Value) -> Option<Self::Event> {
        None
    }

    /// The event of a tool call finished, when the area's stream has one.
    fn tool_finished(&self, _finished: ToolFinished) -> Option<Self::Event> {
        None
    }

    /// The events saying which model and deployment answer from here on
    /// (a routed model's `route`, and `restart` when the answer starts
    /// over); `None` for an area whose stream cannot say so, where an
    /// answer that must start over fails instead (its client could not
    /// drop what it was sent).
    fn route(&self, _route: &Route) -> Option<Vec<Self::Event>> {
        None
    }

    /// The stored status of an answer that ended this way (also the
    /// `workspace_streams_total` outcome): by default `complete`,
    /// `stopped` (also when the client went away) or `failed`.
    fn status(&self, outcome: &Outcome) -> &'static str {
        match outcome {
            Outcome::Complete => "complete",
            Outcome::Stopped | Outcome::Gone => "stopped",
            Outcome::Failed { .. } | Outcome::Interrupted | Outcome::Lost => "failed",
        }
    }

    /// Saves the text so far (nothing for an area that keeps no text).
    async fn save_partial(&self, _text: &str) -> Result<(), Error> {
        Ok(())
    }

    /// Stores the finished answer, or what the area records of it (called
    /// again while the database is unavailable; nothing by default).
    async fn store(
        &self,
        _text: &str,
        _reasoning: &str,
        _route: &[AnswerRoute],
        _usage: Option<Usage>,
        _outcome: &Outcome,
    ) -> Result<(), Error> {
        Ok(())
    }

    /// How long the stream waits for [`Area::store`] before it closes.
    fn store_wait(&self) -> Duration {
        STORE_WAIT
    }

    /// Emits the closing events, the last one included, and sends the
    /// area's notices.
    async fn close(
        &self,
        out: &mut Out<Self::Event>,
        outcome: Outcome,
        stored: Stored,
        usage: Option<Usage>,
    );
}

/// An answer that has started: its area, where its events go and, for a
/// kept answer, its event writer, stop subscription and lease.
pub struct Answer<A: Area> {
    area: Arc<A>,
    metrics: Arc<Metrics>,
    log: slog::Logger,
    out: Out<A::Event>,
    kept: Option<Kept>,
    /// The membership of the member the answer is for (none for a
    /// deployment key's answer).
    watch: Option<MemberWatch>,
}

/// What a kept answer holds besides its events.
struct Kept {
    id: Uuid,
    writer: tokio::task::JoinHandle<()>,
    stops: tokio::sync::broadcast::Receiver<Notice>,
    lease: Lease,
}

impl Kept {
    /// Resolves when the lease ends or a stop request arrives.
    async fn ended(&mut self) -> Outcome {
        let me = self.id.to_string();
        tokio::select! {
            biased;
            end = self.lease.ended() => Outcome::from(end),
            _ = stop_requested(&mut self.stops, &me) => Outcome::Stopped,
        }
    }
}

impl<A: Area> Answer<A> {
    /// Starts the kept answer `id` of `area` for the member of `member`:
    /// subscribed to stop requests and to the member's membership notices
    /// and leased before the client can know the id, with its event
    /// writer. The receiver (of `buffer` events) yields the numbered
    /// events to the requesting client while it keeps up.
    pub fn begin(
        cx: &ServerContext,
        area: A,
        (kind, id): (StreamKind, Uuid),
        buffer: usize,
        member: &OrgAccess,
        log: slog::Logger,
    ) -> (Answer<A>, mpsc::Receiver<Numbered>) {
        let watch = MemberWatch::new(&cx.datastore, &cx.chat_hub, member);
        let stops = cx.chat_hub.subscribe(STOP_CHANNEL, &id.to_string());
        let lease = cx.leases.hold(kind, id);
        let (live, rx) = mpsc::channel(buffer);
        let (out, writer) = Emitter::start(
            cx.datastore.clone(),
            kind,
            id,
            live,
            cx.metrics.clone(),
            log.clone(),
        );
        let answer = Answer {
            area: Arc::new(area),
            metrics: cx.metrics.clone(),
            log,
            out: Out::Kept(out),
            kept: Some(Kept {
                id,
                writer,
                stops,
                lease,
            }),
            watch: Some(watch),
        };
        (answer, rx)
    }

    /// Starts a direct answer of `area`: its events go straight to the
    /// receiver (of `buffer` events), and it ends when that is dropped, or
    /// when the membership of `member` (if the answer is a member's) is no
    /// longer active.
    pub fn direct(
        cx: &ServerContext,
        area: A,
        buffer: usize,
        member: Option<&OrgAccess>,
        log: slog::Logger,
    ) -> (Answer<A>, mpsc::Receiver<A::Event>) {
        let (tx, rx) = mpsc::channel(buffer);
        let answer = Answer {
            area: Arc::new(area),
            metrics: cx.metrics.clone(),
            log,
            out: Out::Direct(tx),
            kept: None,
            watch: member.map(|m| MemberWatch::new(&cx.datastore, &cx.chat_hub, m)),
        };
        (answer, rx)
    }

    /// Emits one of the first events (in the channel when the response
    /// goes out, so they leave with its headers).
    pub async fn emit(&mut self, event: A::Event) -> bool {
        self.out.emit(event).await
    }

    /// Generates the answer by a task of its own, which goes on when the
    /// client goes away.
    pub fn spawn(self, spec: RunSpec) {
        // In the request's trace (while tracing is on).
        crate::telemetry::spawn(self.run(spec));
    }

    /// Generates the answer in the calling task (for an area that prepares
    /// the run in a task of its own).
    pub async fn run(self, spec: RunSpec) {
        use std::sync::atomic::Ordering::Relaxed;
        let Answer {
            area,
            metrics,
            log,
            mut out,
            mut kept,
            mut watch,
        } = self;
        metrics.streams_active.fetch_add(1, Relaxed);
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut reasoning_cut = false;
        let mut usage: Option<Usage> = None;
        // Which model and deployment produced which part of the text.
        let mut route_parts: Vec<workspace_api::chat::AnswerRoute> = Vec::new();
        let mut saving: Option<tokio::task::JoinHandle<()>> = None;
        let mut saved_at = Instant::now();
        let mut events = crate::runtime::run(spec);
        // One future for the whole answer: it reads the membership once,
        // then waits for notices.
        let revoked = revoked(watch.as_mut());
        tokio::pin!(revoked);
        let outcome = loop {
            let event = tokio::select! {
                biased;
                end = ended(&mut kept) => break end,
                () = &mut revoked => {
                    slog::info!(log, "ending an answer: the membership is no longer active");
                    break Outcome::Failed {
                        code: MEMBERSHIP_REVOKED.into(),
                        message: MEMBERSHIP_REVOKED_MESSAGE.into(),
                    };
                }
                event = events.recv() => event,
            };
            match event {
                None => {
                    break Outcome::Failed {
                        code: "internal_error".into(),
                        message: "the answer ended unexpectedly".into(),
                    };
                }
                Some(RuntimeEvent::Text(piece)) => {
                    text.push_str(&piece);
                    if !out.emit(area.content(piece)).await {
                        break Outcome::Gone;
                    }
                    save_partial(&area, &text, &mut saving, &mut saved_at, &log);
                }
                Some(RuntimeEvent::Reasoning(piece)) => {
                    if reasoning_cut || reasoning.len() + piece.len() > REASONING_MAX_BYTES {
                        if !reasoning_cut {
                            reasoning_cut = true;
                            slog::info!(log, "the model's reasoning passed the limit; \
                                the rest is neither streamed nor stored";
                                "limit" => REASONING_MAX_BYTES);
                        }
                        continue;
                    }
                    reasoning.push_str(&piece);
                    if let Some(event) = area.reasoning(*piece)
                        && !out.emit(event).await
                    {
                        break Outcome::Gone;
                    }
                }
                Some(RuntimeEvent::ToolStarted(started)) => {
                    let ToolStarted { id, name, input } = *started;
                    if let Some(event) = area.tool_started(id, name, input)
                        && !out.emit(event).await
                    {
                        break Outcome::Gone;
                    }
                }
                Some(RuntimeEvent::ToolFinished(finished)) => {
                    if let Some(event) = area.tool_finished(*finished)
                        && !out.emit(event).await
                    {
                        break Outcome::Gone;
                    }
                }
                Some(RuntimeEvent::Usage(u)) => {
                    let total = usage.get_or_insert_with(Usage::default);
                    total.input_tokens += u.input_tokens;
                    total.output_tokens += u.output_tokens;
                    total.cached_tokens += u.cached_tokens;
                    total.reasoning_tokens += u.reasoning_tokens;
                }
                Some(RuntimeEvent::Route(route)) => {
                    // Each step of a tool loop starts where the last one
                    // went: only a change (or a restart) is said.
                    let same = route_parts.last().is_some_and(|last| {
                        last.model == route.model && last.deployment == route.deployment
                    });
                    if same && !route.restart {
                        continue;
                    }
                    let events = area.route(&route);
                    if route.restart {
                        if events.is_none() {
                            slog::warn!(
                                log,
                                "an answer that must start over on another \
                                deployment cannot here; it fails"
                            );
                            break Outcome::Failed {
                                code: "provider_stream_interrupted".into(),
                                message: "the model provider's answer broke off".into(),
                            };
                        }
                        text.clear();
                        reasoning.clear();
                        reasoning_cut = false;
                    }
                    route_parts.push(AnswerRoute {
                        model: route.model.clone(),
                        deployment: route.deployment.clone(),
                        from: i64::try_from(text.chars().count()).unwrap_or(i64::MAX),
                        reason: route.reason.as_str().to_string(),
                    });
                    let mut gone = false;
                    for event in events.into_iter().flatten() {
                        if !out.emit(event).await {
                            gone = true;
                            break;
                        }
                    }
                    if gone {
                        break Outcome::Gone;
                    }
                }
                Some(RuntimeEvent::End) => break Outcome::Complete,
                Some(RuntimeEvent::Error(e)) => {
                    let RunError { code, message } = *e;
                    slog::warn!(log, "the answer failed"; "error_code" => &code);
                    break Outcome::Failed { code, message };
                }
            }
        };
        // Dropping the runtime's receiver stops a run still going.
        drop(events);
        if let Some(saving) = saving {
            saving.abort();
        }
        metrics.streams_active.fetch_sub(1, Relaxed);
        let status = area.status(&outcome);
        metrics.stream_finished(status);
        if matches!(outcome, Outcome::Lost) {
            slog::warn!(log, "abandoning an answer closed by a sweeper");
            drop(out);
            if let Some(kept) = kept {
                kept.writer.abort();
            }
            return;
        }
        let chars = text.len();
        // Stored by a task of its own, which outlives the stream's wait.
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let store = {
            let area = area.clone();
            let metrics = metrics.clone();
            let log = log.clone();
            let outcome = outcome.clone();
            crate::telemetry::spawn(async move {
                let answer = Produced {
                    text: &text,
                    reasoning: &reasoning,
                    route: &route_parts,
                    usage,
                };
                let result = store_until_stored(&*area, &answer, &outcome, &metrics, &log).await;
                let _ = done_tx.send(result.is_ok());
            })
        };
        let stored = match tokio::time::timeout(area.store_wait(), done_rx).await {
            Ok(Ok(true)) => Stored::Yes,
            Ok(_) => Stored::Failed,
            Err(_elapsed) => Stored::Pending,
        };
        drop(store);
        slog::info!(log, "answer finished"; "status" => status, "chars" => chars,
            "stored" => matches!(stored, Stored::Yes));
        area.close(&mut out, outcome, stored, usage).await;
        drop(out);
        if let Some(kept) = kept {
            let _ = kept.writer.await;
        }
    }
}

/// Resolves when the watched membership is no longer active; never
/// without a watch.
async fn revoked(watch: Option<&mut MemberWatch>) {
    match watch {
        Some(watch) => watch.revoked().await,
        None => std::future::pending().await,
    }
}

/// Resolves when a kept answer's lease ends or a stop request arrives;
/// never for a direct answer.
async fn ended(kept: &mut Option<Kept>) -> Outcome {
    match kept {
        Some(kept) => kept.ended().await,
        None => std::future::pending().await,
    }
}

/// Saves the text so far, at most once per [`SAVE_INTERVAL`] and one save
/// at a time, without holding up the stream (a save that fails, e.g.
/// while the database is down, is simply superseded).
fn save_partial<A: Area>(
    area: &Arc<A>,
    text: &str,
    saving: &mut Option<tokio::task::JoinHandle<()>>,
    saved_at: &mut Instant,
    log: &slog::Logger,
) {
    if saved_at.elapsed() < SAVE_INTERVAL || saving.as_ref().is_some_and(|s| !s.is_finished()) {
        return;
    }
    *saved_at = Instant::now();
    let area = area.clone();
    let text = text.to_string();
    let log = log.clone();
    *saving = Some(crate::telemetry::spawn(async move {
        if let Err(e) = area.save_partial(&text).await {
            slog::debug!(log, "saving the partial answer failed"; "error" => %e);
        }
    }));
}

/// Stores the answer, retrying with backoff (100 ms doubling to 5 s) for
/// as long as the database is unavailable: a generated answer must reach
/// What an answer produced, as it is stored.
#[derive(Clone, Copy)]
struct Produced<'a> {
    text: &'a str,
    reasoning: &'a str,
    /// Which model and deployment produced which part of `text`.
    route: &'a [AnswerRoute],
    usage: Option<Usage>,
}

/// the database. Other errors are logged and end the attempts.
async fn store_until_stored<A: Area>(
    area: &A,
    answer: &Produced<'_>,
    outcome: &Outcome,
    metrics: &Metrics,
    log: &slog::Logger,
) -> Result<(), Error> {
    let Produced {
        text,
        reasoning,
        route,
        usage,
    } = *answer;
    use std::sync::atomic::Ordering::Relaxed;
    let mut backoff = Duration::from_millis(100);
    let mut pending = false;
    let result = loop {
        match area.store(text, reasoning, route, usage, outcome).await {
            Ok(()) => break Ok(()),
            Err(e @ Error::Unavailable { .. }) => {
                if !pending {
                    pending = true;
                    metrics.answers_pending_store.fetch_add(1, Relaxed);
                    slog::warn!(log, "storing the answer failed; retrying until the database is back";
                        "error" => %e);
                }
                metrics.answers_store_retries.fetch_add(1, Relaxed);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(STORE_BACKOFF_MAX);
            }
            Err(e) => {
                slog::error!(log, "storing the answer failed"; "error" => %e);
                break Err(e);
            }
        }
    };
    if pending {
        metrics.answers_pending_store.fetch_sub(1, Relaxed);
        if result.is_ok() {
            slog::info!(log, "answer stored after the database came back");
        }
    }
    result
}

/// Resolves when a stop request for `me` arrives (from any instance).
async fn stop_requested(stops: &mut tokio::sync::broadcast::Receiver<Notice>, me: &str) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match stops.recv().await {
            Ok(n) if n.channel == STOP_CHANNEL && n.payload == me => return,
            Ok(_) | Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}
