//! Request rate limits shared by every server instance: counters per
//! fixed window in PostgreSQL, each returned with the previous window's
//! count, which the app layer reads as a sliding window.

use super::Datastore;
use crate::error::Error;

/// A counter after its increment, with the window before it.
pub struct WindowCount {
    /// This window's count, the request just counted included.
    pub hits: i32,
    /// The previous window's count.
    pub previous: i32,
    /// How far into this window the request came, in seconds.
    pub elapsed_secs: f64,
}

/// One bucket's [`WindowCount`].
pub struct Hit {
    pub bucket: String,
    pub count: WindowCount,
}

impl Datastore {
    /// Counts one request in each bucket (in the current window of
    /// `window_secs`) and returns every bucket's count with the previous
    /// window's, in one statement.
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
                "WITH hit AS ( \
                     INSERT INTO rate_limit_counters AS c (bucket, window_start, hits) \
                     SELECT b, to_timestamp(floor(extract(epoch FROM now())::float8 / $2::float8) * $2::float8), 1 \
                     FROM unnest($1::text[]) WITH ORDINALITY AS u(b, n) ORDER BY n \
                     ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1 \
                     RETURNING bucket, hits, window_start) \
                 SELECT hit.bucket, hit.hits, coalesce(p.hits, 0) AS previous, \
                        extract(epoch FROM now() - hit.window_start)::float8 AS elapsed_secs \
                 FROM hit LEFT JOIN rate_limit_counters p \
                   ON p.bucket = hit.bucket \
                  AND p.window_start = hit.window_start - make_interval(secs => $2::float8)",
                &[&buckets, &window],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Hit {
                bucket: r.get("bucket"),
                count: WindowCount {
                    hits: r.get("hits"),
                    previous: r.get("previous"),
                    elapsed_secs: r.get("elapsed_secs"),
                },
            })
            .collect())
    }

    /// Deletes rate-limit windows, model deployments' past minutes and
    /// failed logins that no longer count,
    /// and sessions, refresh tokens and password-reset tokens that no
    /// longer count (see [`super::sessions::expire`]), on one connection.
    /// Returns the number of rows deleted.
    pub async fn expire_counters(
        &self,
        login_window_secs: u64,
        refresh_lifetime_secs: u64,
    ) -> Result<u64, Error> {
        let conn = self.conn().await?;
        let window = login_window_secs as f64;
        let counters = conn
            .execute(
                // Windows are at most an hour, and the previous window
                // still counts while the current one runs.
                "DELETE FROM rate_limit_counters WHERE window_start < now() - interval '2 hours'",
                &[],
            )
            .await?;
        let minutes = conn
            .execute(
                "DELETE FROM model_deployment_minutes WHERE minute < now() - interval '2 minutes'",
                &[],
            )
            .await?;
        let failures = conn
            .execute(
                "DELETE FROM login_failures WHERE failed_at <= now() - make_interval(secs => $1)",
                &[&window],
            )
            .await?;
        let sessions = super::sessions::expire(&conn, refresh_lifetime_secs).await?;
        Ok(counters + minutes + failures + sessions)
    }
}
