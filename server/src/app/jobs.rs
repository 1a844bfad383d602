//! The machinery of durable background jobs, shared by every kind of job
//! (knowledge-base ingestion, `kb_ingest`; deletion of organizations and
//! accounts, `deletion`): workers on every server instance claim a due job
//! from its table with `FOR UPDATE SKIP LOCKED` and a lease
//! (`locked_until`), renew the lease every third of it while they work,
//! and write through statements that first check they still hold it. A
//! job whose worker died is claimable again once its lease expired.
//!
//! Workers wake on their table's `NOTIFY` channel (sent in the
//! transactions that queue jobs) and otherwise look every poll interval.
//! A server that stops claims no new job, lets the jobs in progress
//! finish for `http.shutdown_grace_secs`, then hands the rest back to the
//! queue (due at once, the attempt not counted).
//!
//! A kind of job is a [`Queue`]: its table's claim, heartbeat and release,
//! and what running one job means (which uses [`hold`] for the lease).

use crate::chat_hub::Hub;
use crate::context::ShutdownPhase;
use crate::error::Error;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Longest retry backoff.
pub const BACKOFF_MAX_SECS: f64 = 600.0;

/// How the workers of one kind of job run.
pub struct Settings {
    /// The `NOTIFY` channel that wakes idle workers.
    pub channel: &'static str,
    /// How often idle workers look for due jobs.
    pub poll: Duration,
    /// The lease of a running job, in seconds (renewed every third).
    pub lease_secs: f64,
    pub hub: Arc<Hub>,
    /// The server's shutdown: workers claim no job once it drains, and
    /// hand theirs back when its grace period ends.
    pub shutdown: tokio::sync::watch::Receiver<ShutdownPhase>,
    pub log: slog::Logger,
}

/// A table of durable jobs and how to run one.
pub trait Queue: Send + Sync + 'static {
    /// A job this worker holds (its lease).
    type Job: Send + Sync + 'static;

    fn settings(&self) -> &Settings;

    /// Claims the next due job (queued and due, or running with an expired
    /// lease) for `worker`, with a lease of `lease_secs`.
    fn claim(
        &self,
        worker: Uuid,
        lease_secs: f64,
    ) -> impl Future<Output = Result<Option<Self::Job>, Error>> + Send;

    /// Renews the lease; `false` when the job is no longer this worker's
    /// (taken over, cancelled or deleted).
    fn heartbeat(
        &self,
        job: &Self::Job,
        lease_secs: f64,
    ) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Hands a claimed job back (its instance stops): queued and due at
    /// once, the attempt not counted.
    fn release(&self, job: &Self::Job) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Runs one claimed job (with [`hold`] around its work).
    fn run(&self, job: Self::Job) -> impl Future<Output = ()> + Send;
}

/// Starts `workers` workers of `queue` on this instance.
pub fn start<Q: Queue>(queue: Arc<Q>, workers: usize) -> Vec<tokio::task::JoinHandle<()>> {
    (0..workers)
        .map(|_| tokio::spawn(worker(queue.clone(), Uuid::new_v4())))
        .collect()
}

/// Claims and runs jobs until the server drains (see [`ShutdownPhase`]).
async fn worker<Q: Queue>(queue: Arc<Q>, id: Uuid) {
    let settings = queue.settings();
    let mut wake = settings.hub.subscribe(settings.channel, "");
    let mut shutdown = settings.shutdown.clone();
    let poll = settings.poll.max(Duration::from_millis(10));
    while *shutdown.borrow_and_update() == ShutdownPhase::Serving {
        let idle = match queue.claim(id, settings.lease_secs).await {
            Ok(Some(job)) => {
                queue.run(job).await;
                continue;
            }
            Ok(None) => poll,
            Err(e) => {
                slog::debug!(settings.log, "worker: claiming failed"; "error" => %e);
                poll
            }
        };
        tokio::select! {
            _ = wake.recv() => {}
            _ = tokio::time::sleep(idle) => {}
            changed = shutdown.changed() => if changed.is_err() {
                return;
            },
        }
    }
}

/// Resolves when the server's shutdown grace period ended; never while
/// the server serves or drains.
async fn grace_over(shutdown: &tokio::sync::watch::Receiver<ShutdownPhase>) {
    let mut shutdown = shutdown.clone();
    if shutdown
        .wait_for(|phase| *phase == ShutdownPhase::GraceOver)
        .await
        .is_err()
    {
        std::future::pending::<()>().await;
    }
}

/// How [`hold`] ended.
pub enum Held<T> {
    /// The work ended (successfully or not) while the lease was held.
    Done(T),
    /// The job is no longer this worker's: the work was dropped where it
    /// was; nothing more may be written.
    LeaseLost,
    /// The server's grace period ended: the job was handed back.
    HandedBack,
}

/// Runs `work` on a claimed job while renewing its lease every third of
/// the lease; stops working on it as soon as the lease is lost, and hands
/// it back to the queue when the server's shutdown grace period ends.
pub async fn hold<Q: Queue, T>(
    queue: &Q,
    job: &Q::Job,
    work: impl Future<Output = T>,
    log: &slog::Logger,
) -> Held<T> {
    let settings = queue.settings();
    let lease = settings.lease_secs;
    let heartbeat = async {
        let mut every = tokio::time::interval(Duration::from_secs_f64(lease / 3.0));
        every.tick().await;
        loop {
            every.tick().await;
            match queue.heartbeat(job, lease).await {
                Ok(true) => {}
                Ok(false) => return,
                // The database is away: keep trying until the lease runs out.
                Err(e) => slog::debug!(log, "worker: heartbeat failed"; "error" => %e),
            }
        }
    };
    tokio::select! {
        result = work => Held::Done(result),
        () = heartbeat => {
            slog::info!(log, "worker: lost the job's lease; leaving it");
            Held::LeaseLost
        }
        () = grace_over(&settings.shutdown) => {
            // Not the job's fault: another instance takes it at once, and
            // the attempt does not count.
            match queue.release(job).await {
                Ok(_) => slog::info!(log, "worker: handed the job back at shutdown"),
                Err(e) => slog::warn!(log, "worker: handing the job back at shutdown \
                    failed; it is taken over when its lease expires"; "error" => %e),
            }
            Held::HandedBack
        }
    }
}

/// The backoff before attempt `attempt + 1`: `base_secs` doubling per
/// attempt, at most [`BACKOFF_MAX_SECS`].
pub fn backoff_secs(base_secs: u64, attempt: i32) -> f64 {
    ((base_secs.max(1) as f64) * 2f64.powi(attempt.saturating_sub(1).min(20))).min(BACKOFF_MAX_SECS)
}

#[cfg(test)]
mod tests {
    use super::backoff_secs;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff_secs(2, 1), 2.0);
        assert_eq!(backoff_secs(2, 2), 4.0);
        assert_eq!(backoff_secs(2, 4), 16.0);
        assert_eq!(backoff_secs(2, 40), 600.0);
        assert_eq!(backoff_secs(0, 1), 1.0);
    }
}
