//! The sliding-window rule of every request rate limit (login, signup, a
//! deployment's requests per minute).
//!
//! The counters are fixed windows in PostgreSQL, one row per bucket and
//! window, shared by every server instance (see
//! [`crate::db::datastore::rate_limits`]). A limit is read over a sliding
//! window: this window's count plus the previous window's, weighted by the
//! share of it the sliding window still covers, the previous window's
//! requests taken as evenly spread. So a burst split across a window
//! boundary counts as one burst, at the cost of one more row read.

use crate::db::datastore::rate_limits::WindowCount;

/// `Some(seconds to wait)` when the request just counted in `count` takes
/// the sliding window of `window_secs` beyond `limit` requests: the wait
/// is until one more request would fit if no other came (at least 1 s, at
/// most two windows).
pub fn over_limit(count: &WindowCount, window_secs: u64, limit: u32) -> Option<u64> {
    let count = Sliding {
        hits: f64::from(count.hits.max(0)),
        previous: f64::from(count.previous.max(0)),
        elapsed_secs: count.elapsed_secs,
        window_secs: window_secs.max(1) as f64,
    };
    let limit = f64::from(limit);
    if count.estimate(0.0, false) <= limit {
        return None;
    }
    // The estimate only falls with time; find the first second at which
    // one more request fits.
    let horizon = (2.0 * count.window_secs).ceil() as u64;
    let wait = (1..=horizon)
        .find(|&s| count.estimate(s as f64, true) <= limit)
        .unwrap_or(horizon);
    Some(wait)
}

struct Sliding {
    hits: f64,
    previous: f64,
    elapsed_secs: f64,
    window_secs: f64,
}

impl Sliding {
    /// The requests in the sliding window ending `after_secs` from now, if
    /// no other request comes (`with_next`: plus one more).
    fn estimate(&self, after_secs: f64, with_next: bool) -> f64 {
        let at = (self.elapsed_secs + after_secs) / self.window_secs;
        let next = if with_next { 1.0 } else { 0.0 };
        if at < 1.0 {
            self.hits + next + self.previous * (1.0 - at)
        } else {
            next + self.hits * (2.0 - at).clamp(0.0, 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::over_limit;
    use crate::db::datastore::rate_limits::WindowCount;

    fn over(hits: i32, previous: i32, elapsed_secs: f64, limit: u32) -> Option<u64> {
        let count = WindowCount {
            hits,
            previous,
            elapsed_secs,
        };
        over_limit(&count, 60, limit)
    }

    #[test]
    fn a_burst_across_a_boundary_counts_as_one() {
        // 3 requests at the end of the last window, 1 just after the
        // boundary: a fixed window would allow it.
        assert!(over(1, 3, 1.0, 3).is_some());
        // Late enough in the window, the old requests have slid out.
        assert_eq!(over(1, 3, 50.0, 3), None);
        // Within the limit in a fresh window.
        assert_eq!(over(3, 0, 5.0, 3), None);
        assert!(over(4, 0, 5.0, 3).is_some());
    }

    #[test]
    fn retry_after_is_when_a_request_fits() {
        // 4 of 3 in this window, nothing before, 30 s in: a request fits
        // once the 4 weigh at most 2, i.e. 30 s into the next window.
        assert_eq!(over(4, 0, 30.0, 3), Some(60));
        // 1 here and 6 in the previous window, 10 s in: the 6 must weigh
        // at most 1, i.e. 50 s into this window, 40 s from now.
        assert_eq!(over(1, 6, 10.0, 3), Some(40));
        // Hammering keeps the wait within two windows.
        let wait = over(1000, 1000, 0.0, 3).unwrap();
        assert!((60..=120).contains(&wait), "{wait}");
    }
}
