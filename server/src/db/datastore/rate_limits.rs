//! Request rate limits shared by every server instance: fixed-window
//! counters in PostgreSQL.

use super::Datastore;
use crate::error::Error;
use chrono::{DateTime, Utc};

/// One counter after its increment.
pub struct Hit {
    pub bucket: String,
    pub hits: i32,
    pub window_end: DateTime<Utc>,
}

impl Datastore {
    /// Counts one request in each bucket (in the current window of
    /// `window_secs`) and returns every bucket's count, in one statement.
    /// Buckets are locked in the given order, so callers that pass them in
    /// a fixed order (specific first, global last) do not deadlock.
    pub async fn rate_limit_hit(
        &self,
        buckets: &[String],
        window_secs: u64,
    ) -> Result<Vec<Hit>, Error> {
        let conn = self.conn().await?;
        let window = window_secs.max(1) as f64;
        let rows = conn
            .query(
                "INSERT INTO rate_limit_counters AS c (bucket, window_start, hits) \
                 SELECT b, to_timestamp(floor(extract(epoch FROM now())::float8 / $2::float8) * $2::float8), 1 \
                 FROM unnest($1::text[]) WITH ORDINALITY AS u(b, n) ORDER BY n \
                 ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1 \
                 RETURNING bucket, hits, window_start + make_interval(secs => $2::float8)",
                &[&buckets, &window],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Hit {
                bucket: r.get(0),
                hits: r.get(1),
                window_end: r.get(2),
            })
            .collect())
    }

    /// Deletes rate-limit windows and failed logins that no longer count.
    /// Returns the number of rows deleted.
    pub async fn expire_counters(&self, login_window_secs: u64) -> Result<u64, Error> {
        let conn = self.conn().await?;
        let window = login_window_secs as f64;
        let counters = conn
            .execute(
                "DELETE FROM rate_limit_counters WHERE window_start < now() - interval '1 hour'",
                &[],
            )
            .await?;
        let failures = conn
            .execute(
                "DELETE FROM login_failures WHERE failed_at <= now() - make_interval(secs => $1)",
                &[&window],
            )
            .await?;
        Ok(counters + failures)
    }
}
