//! What the server knows about the database's availability: a circuit
//! breaker in front of new connections.
//!
//! When connecting fails (or a statement fails because its connection
//! went away), the database is marked down and new connection attempts
//! wait for an exponential, capped, jittered backoff: meanwhile requests
//! fail fast with `503 database_unavailable` instead of each trying to
//! connect (a stopped PostgreSQL otherwise saw thousands of attempts per
//! second). After the backoff one request is let through as a probe; its
//! success closes the breaker.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Reconnection backoff settings.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The wait after `failures` consecutive failures (1-based): `initial`
    /// doubled each time, capped at `max`, then jittered to 50-100 %.
    pub fn delay(&self, failures: u32, jitter: f64) -> Duration {
        let exp = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        let base = self.initial.saturating_mul(exp).min(self.max);
        base.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

#[derive(Default)]
struct State {
    /// Consecutive failures; 0 while the database is up.
    failures: u32,
    /// While down: no connection attempt before this instant.
    retry_at: Option<Instant>,
    /// When the current outage was first noticed.
    down_since: Option<Instant>,
}

pub struct DbHealth {
    backoff: Backoff,
    state: Mutex<State>,
    /// Connection attempts refused by the breaker (failed fast).
    pub fast_failures: AtomicU64,
    /// Statements or connections that failed because the database was
    /// unreachable.
    pub connection_errors: AtomicU64,
    /// Other database errors.
    pub statement_errors: AtomicU64,
    /// Requests refused `503 server_busy` because every pooled connection
    /// stayed in use for the pool's whole wait (the database was fine).
    pub pool_exhausted: AtomicU64,
}

impl DbHealth {
    pub fn new(backoff: Backoff) -> DbHealth {
        DbHealth {
            backoff,
            state: Mutex::new(State::default()),
            fast_failures: AtomicU64::new(0),
            connection_errors: AtomicU64::new(0),
            statement_errors: AtomicU64::new(0),
            pool_exhausted: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state invalid.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a connection attempt may be made now. While the database is
    /// down, one caller per backoff interval is admitted (as a probe, which
    /// also reserves the next interval); the others get `false`.
    pub fn admit(&self, now: Instant) -> bool {
        let mut state = self.state();
        match state.retry_at {
            None => true,
            Some(at) if now < at => {
                drop(state);
                self.fast_failures.fetch_add(1, Ordering::Relaxed);
                false
            }
            Some(_) => {
                let wait = self.backoff.delay(state.failures.max(1), rand::random());
                state.retry_at = Some(now + wait);
                true
            }
        }
    }

    /// A connection attempt or statement failed because the database was
    /// unreachable.
    pub fn failed(&self, now: Instant) {
        self.connection_errors.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state();
        state.failures = state.failures.saturating_add(1);
        state.down_since.get_or_insert(now);
        let wait = self.backoff.delay(state.failures, rand::random());
        state.retry_at = Some(now + wait);
    }

    /// A connection was obtained: the database is up. Returns how long it
    /// was down, when it was.
    pub fn succeeded(&self, now: Instant) -> Option<Duration> {
        let mut state = self.state();
        if state.failures == 0 && state.retry_at.is_none() {
            return None;
        }
        let since = state.down_since.take();
        *state = State::default();
        since.map(|s| now.saturating_duration_since(s))
    }

    /// Records the outcome of a statement.
    pub fn observe(&self, error: &tokio_postgres::Error) {
        if crate::error::is_connection_error(error) {
            self.failed(Instant::now());
        } else {
            self.statement_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the breaker is open (the database is believed down).
    pub fn is_down(&self) -> bool {
        self.state().failures > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health() -> DbHealth {
        DbHealth::new(Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(2),
        })
    }

    #[test]
    fn backoff_doubles_and_is_capped_and_jittered() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(2),
        };
        assert_eq!(b.delay(1, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay(2, 1.0), Duration::from_millis(200));
        assert_eq!(b.delay(4, 1.0), Duration::from_millis(800));
        assert_eq!(b.delay(10, 1.0), Duration::from_secs(2));
        assert_eq!(b.delay(100, 1.0), Duration::from_secs(2));
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(50));
    }

    #[test]
    fn while_down_only_one_attempt_per_interval() {
        let h = health();
        let t0 = Instant::now();
        assert!(h.admit(t0));
        h.failed(t0);
        assert!(h.is_down());
        // 1,000 callers within the first backoff: none reaches the pool.
        let admitted = (0..1000)
            .filter(|i| h.admit(t0 + Duration::from_micros(*i)))
            .count();
        assert_eq!(admitted, 0);
        // After the backoff, exactly one probe goes through.
        let later = t0 + Duration::from_millis(101);
        let admitted = (0..1000).filter(|_| h.admit(later)).count();
        assert_eq!(admitted, 1);
        // The probe fails: the next interval is longer.
        h.failed(later);
        assert!(!h.admit(later + Duration::from_millis(99)));
        // Over a 10 s outage at most ~ 10 s / 1 s (jitter >= 50 % of the
        // 2 s cap) + the doublings before it attempts are made.
        let h = health();
        let mut t = t0;
        h.failed(t);
        let mut attempts = 0;
        while t < t0 + Duration::from_secs(10) {
            if h.admit(t) {
                attempts += 1;
                h.failed(t);
            }
            t += Duration::from_millis(1);
        }
        assert!(attempts <= 20, "{attempts} attempts");
        // Success closes the breaker.
        assert!(h.succeeded(t).is_some());
        assert!(!h.is_down());
        assert!((0..10).all(|_| h.admit(t)));
    }
}
