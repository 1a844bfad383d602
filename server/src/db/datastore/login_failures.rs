//! Failed-login bookkeeping for rate limiting (shared across instances).
//!
//! Every login attempt is counted *before* its password is verified, under
//! a per-address lock, so that concurrent attempts cannot all pass the
//! check: at most `login_max_failures` passwords are ever verified per
//! address and window. A successful login clears the address's count
//! (its own attempt included); a failed one leaves its attempt counted.

use super::Datastore;
use crate::error::Error;
use chrono::{DateTime, Utc};

/// The outcome of counting an attempt.
pub enum LoginAttempt {
    /// Counted; the password may be verified.
    Counted,
    /// The address is locked out: its failures in the window reached the
    /// limit. `oldest` is the oldest failure still in the window.
    Locked { oldest: Option<DateTime<Utc>> },
}

impl Datastore {
    /// Counts an attempt for the address unless it is locked out, in one
    /// transaction serialised per address (a transaction-level advisory
    /// lock on the address's hash).
    pub async fn login_attempt_begin(
        &self,
        email_normalized: &str,
        max_failures: u32,
        window_secs: u64,
    ) -> Result<LoginAttempt, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let window = window_secs as f64;
        // A fixed key space for "login attempts", then the address's hash.
        tx.execute(
            "SELECT pg_advisory_xact_lock(7262533, hashtext($1))",
            &[&email_normalized],
        )
        .await?;
        let row = tx
            .query_one(
                "SELECT count(*) AS failures, min(failed_at) AS oldest FROM login_failures \
                 WHERE email_normalized = $1 \
                   AND failed_at > now() - make_interval(secs => $2)",
                &[&email_normalized, &window],
            )
            .await?;
        let count: i64 = row.get("failures");
        if count >= i64::from(max_failures) {
            return Ok(LoginAttempt::Locked {
                oldest: row.get("oldest"),
            });
        }
        tx.execute(
            "INSERT INTO login_failures (email_normalized) VALUES ($1)",
            &[&email_normalized],
        )
        .await?;
        tx.commit().await?;
        Ok(LoginAttempt::Counted)
    }

    pub async fn login_failures_clear(&self, email_normalized: &str) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "DELETE FROM login_failures WHERE email_normalized = $1",
            &[&email_normalized],
        )
        .await?;
        Ok(())
    }
}
