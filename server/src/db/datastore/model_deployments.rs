//! The health of model deployments and their per-minute counts, shared by
//! every instance (see migration V48 for the rules the statements keep).
//! Not tenant data: deployments belong to the server's configuration.

use super::Datastore;
use crate::audit::{Event, Origin};
use crate::error::Error;

/// What the database knows of one deployment (a row of
/// `model_deployment_health` joined with its current minute).
#[derive(Clone, Debug, Default)]
pub struct DeploymentHealth {
    pub model: String,
    pub deployment: String,
    /// Failures in the current window.
    pub failures: i32,
    /// Seconds until its cooldown (or a probe's hold) ends; `None` when it
    /// is not cooling down.
    pub cooling_secs: Option<f64>,
    /// A cooldown that has ended but was not yet cleared by an answer:
    /// the next request must take the probe.
    pub probe_due: bool,
    pub cooldowns: i64,
    pub last_error_class: Option<String>,
    /// Seconds since the last failure.
    pub last_error_secs: Option<f64>,
    /// The configuration fingerprint a 401 or 403 disabled, and the status.
    pub disabled_fingerprint: Option<String>,
    pub disabled_status: Option<i32>,
    /// Requests and tokens counted in the current minute.
    pub minute_requests: i32,
    pub minute_tokens: i64,
}

/// How a failure is counted (see [`Datastore::deployment_failed`]).
pub struct Failure<'a> {
    pub class: &'a str,
    /// Cool down at once, for this long (a 429's `Retry-After`, a 529, a
    /// refused connection, a failed probe).
    pub cool_at_once: Option<f64>,
    pub allowed_fails: i32,
    pub window_secs: f64,
    pub cooldown_secs: f64,
    /// The failure is a probe's: the hold it took is no cooldown, so
    /// the cooldown it starts is a new one.
    pub probe: bool,
}

impl Datastore {
    /// The health of every deployment of `models` that has a row, in one
    /// statement on the shared connection.
    pub async fn deployment_health(&self, models: &[&str]) -> Result<Vec<DeploymentHealth>, Error> {
        let conn = self.quick().await?;
        let rows = conn
            .query(
                "WITH h AS (SELECT * FROM model_deployment_health WHERE model = ANY($1::text[])), \
                      m AS (SELECT model, deployment, requests, tokens \
                            FROM model_deployment_minutes \
                            WHERE model = ANY($1::text[]) AND minute = date_trunc('minute', now())) \
                 SELECT coalesce(h.model, m.model) AS model, \
                        coalesce(h.deployment, m.deployment) AS deployment, \
                        coalesce(h.failures, 0) AS failures, \
                        CASE WHEN h.cooldown_until > now() \
                             THEN extract(epoch FROM h.cooldown_until - now())::float8 END \
                            AS cooling_secs, \
                        coalesce(h.cooldown_until <= now(), false) AS probe_due, \
                        coalesce(h.cooldowns, 0) AS cooldowns, h.last_error_class, \
                        extract(epoch FROM now() - h.last_error_at)::float8 AS last_error_secs, \
                        h.disabled_fingerprint, h.disabled_status, \
                        coalesce(m.requests, 0) AS minute_requests, \
                        coalesce(m.tokens, 0) AS minute_tokens \
                 FROM h FULL JOIN m ON m.model = h.model AND m.deployment = h.deployment",
                &[&models],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| DeploymentHealth {
                model: r.get("model"),
                deployment: r.get("deployment"),
                failures: r.get("failures"),
                cooling_secs: r.get("cooling_secs"),
                probe_due: r.get("probe_due"),
                cooldowns: r.get("cooldowns"),
                last_error_class: r.get("last_error_class"),
                last_error_secs: r.get("last_error_secs"),
                disabled_fingerprint: r.get("disabled_fingerprint"),
                disabled_status: r.get("disabled_status"),
                minute_requests: r.get("minute_requests"),
                minute_tokens: r.get("minute_tokens"),
            })
            .collect())
    }

    /// Takes the probe of a deployment whose cooldown ended: holds it for
    /// `hold_secs` more so that no other request (of any instance) tries
    /// it meanwhile. False when another request took it first.
    pub async fn deployment_claim_probe(
        &self,
        model: &str,
        deployment: &str,
        hold_secs: f64,
    ) -> Result<bool, Error> {
        let conn = self.quick().await?;
        let rows = conn
            .query(
                "UPDATE model_deployment_health \
                 SET cooldown_until = now() + make_interval(secs => $3::float8) \
                 WHERE model = $1 AND deployment = $2 AND cooldown_until <= now() \
                 RETURNING 1 AS claimed",
                &[&model, &deployment, &hold_secs],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Counts a request sent to a deployment in the current minute, unless
    /// the minute already reached `rpm` requests or `tpm` tokens: false
    /// then (and nothing is counted).
    pub async fn deployment_count_request(
        &self,
        model: &str,
        deployment: &str,
        rpm: Option<i32>,
        tpm: Option<i64>,
    ) -> Result<bool, Error> {
        let conn = self.quick().await?;
        let rows = conn
            .query(
                "INSERT INTO model_deployment_minutes AS m (model, deployment, minute, requests) \
                 VALUES ($1, $2, date_trunc('minute', now()), 1) \
                 ON CONFLICT (model, deployment, minute) DO UPDATE \
                 SET requests = m.requests + 1 \
                 WHERE ($3::integer IS NULL OR m.requests < $3) \
                   AND ($4::bigint IS NULL OR m.tokens < $4) \
                 RETURNING m.requests",
                &[&model, &deployment, &rpm, &tpm],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Adds the tokens an answer used to its deployment's current minute.
    pub async fn deployment_count_tokens(
        &self,
        model: &str,
        deployment: &str,
        tokens: i64,
    ) -> Result<(), Error> {
        let conn = self.quick().await?;
        conn.execute(
            "INSERT INTO model_deployment_minutes AS m (model, deployment, minute, requests, tokens) \
             VALUES ($1, $2, date_trunc('minute', now()), 0, $3) \
             ON CONFLICT (model, deployment, minute) DO UPDATE SET tokens = m.tokens + $3",
            &[&model, &deployment, &tokens],
        )
        .await?;
        Ok(())
    }

    /// Counts a failure of a deployment (the window restarting when it is
    /// older than `window_secs`) and starts its cooldown when the failures
    /// reach `allowed_fails`, or at once when asked. Returns the seconds
    /// the deployment now cools down for, if it does and did not before.
    pub async fn deployment_failed(
        &self,
        model: &str,
        deployment: &str,
        failure: &Failure<'_>,
    ) -> Result<Option<f64>, Error> {
        let conn = self.quick().await?;
        let rows = conn
            .query(
                "WITH old AS ( \
                     SELECT cooldown_until > now() AS cooling FROM model_deployment_health \
                     WHERE model = $1 AND deployment = $2), \
                 counted AS ( \
                     INSERT INTO model_deployment_health AS h \
                         (model, deployment, failures, window_started_at, cooldown_until, \
                          cooldowns, last_error_class, last_error_at) \
                     VALUES ($1, $2, 1, now(), \
                             CASE WHEN $4::float8 IS NOT NULL OR $5 <= 1 \
                                  THEN now() + make_interval(secs => coalesce($4, $7)) END, \
                             CASE WHEN $4::float8 IS NOT NULL OR $5 <= 1 THEN 1 ELSE 0 END, \
                             $3, now()) \
                     ON CONFLICT (model, deployment) DO UPDATE SET \
                         failures = CASE WHEN h.window_started_at > now() - make_interval(secs => $6) \
                                         THEN h.failures + 1 ELSE 1 END, \
                         window_started_at = CASE WHEN h.window_started_at > now() - make_interval(secs => $6) \
                                                  THEN h.window_started_at ELSE now() END, \
                         cooldown_until = CASE \
                             WHEN $4::float8 IS NOT NULL \
                               OR (CASE WHEN h.window_started_at > now() - make_interval(secs => $6) \
                                        THEN h.failures + 1 ELSE 1 END) >= $5 \
                             THEN greatest(h.cooldown_until, now() + make_interval(secs => coalesce($4, $7))) \
                             ELSE h.cooldown_until END, \
                         cooldowns = h.cooldowns + CASE \
                             WHEN coalesce(h.cooldown_until > now(), false) AND NOT $8 THEN 0 \
                             WHEN $4::float8 IS NOT NULL \
                               OR (CASE WHEN h.window_started_at > now() - make_interval(secs => $6) \
                                        THEN h.failures + 1 ELSE 1 END) >= $5 \
                             THEN 1 ELSE 0 END, \
                         last_error_class = $3, last_error_at = now() \
                     RETURNING CASE WHEN h.cooldown_until > now() \
                                    THEN extract(epoch FROM h.cooldown_until - now())::float8 END \
                               AS cooling_secs) \
                 SELECT counted.cooling_secs, \
                        coalesce((SELECT cooling FROM old), false) AND NOT $8 AS was_cooling \
                 FROM counted",
                &[
                    &model,
                    &deployment,
                    &failure.class,
                    &failure.cool_at_once,
                    &failure.allowed_fails,
                    &failure.window_secs,
                    &failure.cooldown_secs,
                    &failure.probe,
                ],
            )
            .await?;
        Ok(rows.first().and_then(|r| {
            let secs: Option<f64> = r.get("cooling_secs");
            let was: bool = r.get("was_cooling");
            secs.filter(|_| !was)
        }))
    }

    /// Clears a deployment's failures and cooldown after it answered (only
    /// called when it had some).
    pub async fn deployment_recovered(&self, model: &str, deployment: &str) -> Result<(), Error> {
        let conn = self.quick().await?;
        conn.execute(
            "UPDATE model_deployment_health SET failures = 0, cooldown_until = NULL \
             WHERE model = $1 AND deployment = $2 \
               AND (failures > 0 OR cooldown_until IS NOT NULL)",
            &[&model, &deployment],
        )
        .await?;
        Ok(())
    }

    /// Disables a deployment whose provider refused its key (`status` 401
    /// or 403) until its configuration's fingerprint changes, recording
    /// `model_deployment.disable` on the system audit chain the first time
    /// (not once per request or instance). True when it was newly
    /// disabled.
    pub async fn deployment_disable(
        &self,
        model: &str,
        deployment: &str,
        fingerprint: &str,
        status: u16,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let status = i32::from(status);
        let rows = tx
            .query(
                "INSERT INTO model_deployment_health AS h \
                     (model, deployment, disabled_fingerprint, disabled_status, disabled_at, \
                      last_error_class, last_error_at) \
                 VALUES ($1, $2, $3, $4, now(), 'auth', now()) \
                 ON CONFLICT (model, deployment) DO UPDATE SET \
                     disabled_fingerprint = $3, disabled_status = $4, \
                     disabled_at = CASE WHEN h.disabled_fingerprint IS DISTINCT FROM $3 \
                                        THEN now() ELSE h.disabled_at END, \
                     last_error_class = 'auth', last_error_at = now() \
                 RETURNING (disabled_at = now()) AS newly",
                &[&model, &deployment, &fingerprint, &status],
            )
            .await?;
        let newly = rows.first().is_some_and(|r| r.get::<_, bool>("newly"));
        if newly {
            let event = Event::system("model_deployment.disable")
                .target("model_deployment", format!("{model}/{deployment}"))
                .details(serde_json::json!({
                    "model": model,
                    "deployment": deployment,
                    "status": status,
                    "reason": "the provider refused the deployment's key; \
                               it stays disabled until its configuration changes",
                }));
            super::audit::record(&tx, &Origin::system(), &event).await?;
        }
        tx.commit().await?;
        Ok(newly)
    }
}
