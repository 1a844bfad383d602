//! Failed-login bookkeeping for rate limiting (shared across instances).

use super::Datastore;
use crate::error::Error;
use chrono::{DateTime, Utc};

/// Failures of one e-mail address inside the window.
pub struct RecentFailures {
    pub count: i64,
    pub oldest: Option<DateTime<Utc>>,
}

impl Datastore {
    pub async fn login_failures_recent(
        &self,
        email_normalized: &str,
        window_secs: u64,
    ) -> Result<RecentFailures, Error> {
        let conn = self.conn().await?;
        let window = window_secs as f64;
        let row = conn
            .query_one(
                "SELECT count(*), min(failed_at) FROM login_failures \
                 WHERE email_normalized = $1 \
                   AND failed_at > now() - make_interval(secs => $2)",
                &[&email_normalized, &window],
            )
            .await?;
        Ok(RecentFailures {
            count: row.get(0),
            oldest: row.get(1),
        })
    }

    /// Records a failure and drops this address's failures that left the
    /// window, so the table stays small.
    pub async fn login_failure_record(
        &self,
        email_normalized: &str,
        window_secs: u64,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        let window = window_secs as f64;
        conn.execute(
            "DELETE FROM login_failures WHERE email_normalized = $1 \
               AND failed_at <= now() - make_interval(secs => $2)",
            &[&email_normalized, &window],
        )
        .await?;
        conn.execute(
            "INSERT INTO login_failures (email_normalized) VALUES ($1)",
            &[&email_normalized],
        )
        .await?;
        Ok(())
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
