//! Organizations and accounts that end: deleting an organization (its
//! owner, confirmed by name), deleting one's own account (password
//! re-entered), and exporting one's data first.
//!
//! A deletion has two halves. The request, in one transaction, makes the
//! organization (or account) unusable at once on every instance (see
//! `Datastore::org_deletion_request` and `account_deletion_request`) and
//! queues a durable job in `deletion_jobs`. The job then deletes what it
//! held, in bounded batches, run by the deletion workers of any instance
//! through the job machinery shared with ingestion ([`super::jobs`]:
//! `FOR UPDATE SKIP LOCKED`, a lease renewed by heartbeats, attempts with
//! backoff, handed back at shutdown, taken over after a crash).
//!
//! A job works through its kind's steps in order and records the step it
//! is at; every step is idempotent (a batch deletes what is still there;
//! a stored file already gone is not an error; a grant already revoked is
//! revoked again harmlessly), so an attempt that died anywhere is resumed
//! at its step by another. The steps of an organization:
//!
//! 1. `stop`: ingestion jobs cancelled and answers told to stop again (for
//!    work that requests authorized just before the deletion started).
//! 2. `grants`: each MCP session holding tokens is revoked at its provider
//!    (RFC 7009, through the guarded OAuth client) and deleted, under the
//!    session's refresh lock. A provider that refuses or is unreachable
//!    keeps the session for the next attempt; at the job's last attempt
//!    the session is deleted all the same, counted as unrevoked.
//! 3. `files`: each upload's bytes are deleted from the file store, then
//!    its row.
//! 4. One step per kind of content (`vectors`, `kb_jobs`, ... see
//!    `ORG_BATCHES`), each deleting `deletion.batch_rows` rows per
//!    transaction until none is left.
//! 5. `organization`: its row; its foreign keys cascade to what remains
//!    (roles, memberships, quotas, anything a later table adds).
//! 6. `store`: whatever is left in the file store under `orgs/<id>/`
//!    (an upload that was being written when the organization went).
//!
//! Workers cannot re-create rows of a deleted organization: every tenant
//! table's `organization_id` references `organizations` (a row inserted
//! after the organization's row is gone fails), and what an in-flight
//! request inserts before that goes with the row's cascade.
//!
//! The steps of an account: `grants` (its MCP sessions in every
//! organization), `chat_files` (the uploads of its private chats), its
//! chats' events, messages and chats, `authorship` (the conversation
//! messages organizations keep lose their author), its remaining MCP
//! sessions, then `account`: its row (memberships, tickets and sessions
//! cascade).

use super::jobs::{self, Held};
use crate::authn::Actor;
use crate::authz::{Grant, Owner, on, perm};
use crate::config::DeletionConfig;
use crate::context::ServerContext;
use crate::db::datastore::Datastore;
use crate::db::datastore::deletion::{
    ACCOUNT_BATCHES, ACCOUNT_FIRST_STEP, AccountDeletion, ClaimedDeletion, DeletionJobRow,
    GrantOutcome, JobFailure, ORG_BATCHES, ORG_FIRST_STEP,
};
use crate::db::enums::{DeletionJobKind, DeletionJobState};
use crate::error::Error;
use std::sync::Arc;
use uuid::Uuid;
use workspace_api::orgs::{DeletionState, OrgDeletion};

pub mod export;

// ---- requests ----

fn state(state: DeletionJobState) -> DeletionState {
    match state {
        DeletionJobState::Queued => DeletionState::Queued,
        DeletionJobState::Running => DeletionState::Running,
        DeletionJobState::Done => DeletionState::Done,
        DeletionJobState::Failed => DeletionState::Failed,
    }
}

fn org_view(row: DeletionJobRow) -> OrgDeletion {
    OrgDeletion {
        job_id: row.id,
        organization_id: row.organization_id.unwrap_or_default(),
        organization_name: row.subject_name,
        state: state(row.state),
        step: row.step,
        rows_deleted: row.rows_deleted,
        files_deleted: row.files_deleted,
        grants_revoked: row.grants_revoked,
        grants_unrevoked: row.grants_unrevoked,
        attempts: row.attempts,
        last_error: row.last_error,
        requested_at: row.created_at,
        updated_at: row.updated_at,
        finished_at: row.finished_at,
    }
}

/// `DELETE /api/org/delete` (the caller was authorized as an owner).
pub async fn delete_org(
    cx: &ServerContext,
    access: &Grant<on::Org, Owner<perm::OrganizationAdmin>>,
    confirm_name: &str,
) -> Result<OrgDeletion, Error> {
    let job = cx
        .datastore
        .org_deletion_request(access, confirm_name, cx.config.deletion.max_attempts)
        .await?;
    slog::info!(access.log(), "organization deletion requested"; "job" => job.id.to_string());
    Ok(org_view(job))
}

/// `GET /api/org/deletion_status`: the caller's request only.
pub async fn org_status(
    cx: &ServerContext,
    actor: &Actor,
    org_id: Uuid,
) -> Result<OrgDeletion, Error> {
    cx.datastore
        .org_deletion_status(actor.user_id, org_id)
        .await?
        .map(org_view)
        .ok_or(Error::NotFound {
            what: "organization deletion",
        })
}

/// `POST /api/users/me/delete`: the password checked (with the login
/// lock-out's counting), then the request.
pub async fn delete_account(
    cx: &ServerContext,
    actor: &Actor,
    password: String,
) -> Result<workspace_api::users::AccountDeletion, Error> {
    let user = cx.datastore.user_get(actor.user_id).await?;
    match super::auth::verify_login(cx, &user.email, password).await {
        Ok(id) if id == actor.user_id => {}
        Ok(_) | Err(Error::Unauthenticated { .. }) => {
            return Err(Error::Forbidden {
                code: "invalid_password",
                message: "the password is not the account's".to_string(),
            });
        }
        Err(e) => return Err(e),
    }
    let max_attempts = cx.config.deletion.max_attempts;
    match cx
        .datastore
        .account_deletion_request(actor.user_id, max_attempts)
        .await?
    {
        AccountDeletion::SoleOwner(names) => Err(Error::conflict(
            "sole_owner",
            format!(
                "you are the only owner of {}, which {} other members: transfer the \
                 ownership or remove the members first",
                names
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if names.len() == 1 { "has" } else { "have" }
            ),
        )),
        AccountDeletion::Requested {
            account,
            organizations,
        } => {
            slog::info!(cx.log, "account deletion requested"; "user_id" => actor.user_id.to_string(),
                "job" => account.id.to_string(), "organizations" => organizations.len());
            Ok(workspace_api::users::AccountDeletion {
                job_id: account.id,
                state: state(account.state),
                organizations: organizations.into_iter().map(org_view).collect(),
            })
        }
    }
}

// ---- the workers ----

/// What the deletion workers need.
pub struct Deletion {
    pub datastore: Datastore,
    pub files: Arc<dyn crate::storage::FileStore>,
    pub secrets: crate::secrets::Secrets,
    /// The guarded client's rules for MCP providers' endpoints.
    pub fetch: crate::kb_config::FetchConfig,
    pub config: DeletionConfig,
    /// How the workers run (`NOTIFY deletion_jobs`,
    /// `deletion.poll_interval_ms`, `deletion.lease_secs`, the shutdown).
    pub jobs: jobs::Settings,
    pub log: slog::Logger,
}

/// Starts the deletion workers of this instance.
pub fn start(deletion: Arc<Deletion>) -> Vec<tokio::task::JoinHandle<()>> {
    let workers = deletion.config.workers;
    jobs::start(deletion, workers)
}

impl jobs::Queue for Deletion {
    type Job = ClaimedDeletion;

    fn settings(&self) -> &jobs::Settings {
        &self.jobs
    }

    async fn claim(&self, worker: Uuid, lease_secs: f64) -> Result<Option<ClaimedDeletion>, Error> {
        self.datastore.deletion_job_claim(worker, lease_secs).await
    }

    async fn heartbeat(&self, job: &ClaimedDeletion, lease_secs: f64) -> Result<bool, Error> {
        self.datastore.deletion_job_heartbeat(job, lease_secs).await
    }

    async fn release(&self, job: &ClaimedDeletion) -> Result<bool, Error> {
        self.datastore.deletion_job_release(job).await
    }

    async fn run(&self, job: ClaimedDeletion) {
        let log = self.log.new(slog::o!("job" => job.id.to_string(),
            "kind" => job.kind.as_str(), "subject" => job.subject.to_string()));
        let outcome = jobs::hold(self, &job, self.work(&job, &log), &log).await;
        let error = match outcome {
            Held::Done(Ok(())) => {
                slog::info!(log, "deletion finished"; "attempt" => job.attempts);
                return;
            }
            Held::Done(Err(JobError::LeaseLost)) | Held::LeaseLost | Held::HandedBack => return,
            Held::Done(Err(JobError::Failed(error))) => error,
        };
        let failure = if job.last_attempt() {
            slog::error!(log, "deletion failed for good"; "error" => &error,
                "attempt" => job.attempts);
            JobFailure::Final { error: &error }
        } else {
            slog::warn!(log, "deletion attempt failed; retrying"; "error" => &error,
                "attempt" => job.attempts);
            JobFailure::Retry {
                error: &error,
                backoff_secs: jobs::backoff_secs(self.config.retry_backoff_secs, job.attempts),
            }
        };
        if let Err(e) = self.datastore.deletion_job_fail(&job, failure).await {
            // The lease runs out and the job is taken over.
            slog::warn!(log, "recording a failed deletion attempt failed"; "error" => %e);
        }
    }
}

/// Why an attempt ended early.
enum JobError {
    /// Worth another attempt (a database, store or provider failure).
    Failed(String),
    /// The job is no longer this worker's: stop, write nothing.
    LeaseLost,
}

impl From<Error> for JobError {
    fn from(e: Error) -> Self {
        JobError::Failed(format!("{e}"))
    }
}

/// `Some` or the lease was lost.
fn held<T>(value: Option<T>) -> Result<T, JobError> {
    value.ok_or(JobError::LeaseLost)
}

/// `true` or the lease was lost.
fn still(holds: bool) -> Result<(), JobError> {
    holds.then_some(()).ok_or(JobError::LeaseLost)
}

/// One step of a job.
#[derive(Clone, Copy)]
enum Step {
    /// Ingestion cancelled and answers stopped again.
    Stop,
    /// MCP grants revoked and their sessions deleted.
    Grants,
    /// Uploads deleted from the store, then their rows.
    Files,
    /// One batch statement, repeated until it finds nothing.
    Batch(&'static str),
    /// The organization's or the user's row.
    Subject,
    /// Leftovers under the organization's folder of the store.
    Store,
}

/// The steps of a kind of job, in order, by name.
fn steps(kind: DeletionJobKind) -> Vec<(&'static str, Step)> {
    let mut steps = Vec::new();
    match kind {
        DeletionJobKind::Organization => {
            steps.extend([
                (ORG_FIRST_STEP, Step::Stop),
                ("grants", Step::Grants),
                ("files", Step::Files),
            ]);
            steps.extend(ORG_BATCHES.iter().map(|(n, sql)| (*n, Step::Batch(sql))));
            steps.extend([("organization", Step::Subject), ("store", Step::Store)]);
        }
        DeletionJobKind::Account => {
            steps.extend([
                (ACCOUNT_FIRST_STEP, Step::Grants),
                ("chat_files", Step::Files),
            ]);
            steps.extend(
                ACCOUNT_BATCHES
                    .iter()
                    .map(|(n, sql)| (*n, Step::Batch(sql))),
            );
            steps.push(("account", Step::Subject));
        }
    }
    steps
}

/// MCP grants looked at per query.
const GRANTS_PAGE: i64 = 20;
/// Uploads deleted per batch.
const FILES_BATCH: i64 = 100;

impl Deletion {
    /// Works through the job's steps from the one it is at.
    async fn work(&self, job: &ClaimedDeletion, log: &slog::Logger) -> Result<(), JobError> {
        let steps = steps(job.kind);
        // An unknown step (renamed by a newer version): from the start;
        // every step is idempotent.
        let mut at = steps
            .iter()
            .position(|(name, _)| *name == job.step)
            .unwrap_or(0);
        while let Some((name, step)) = steps.get(at) {
            slog::debug!(log, "deletion step"; "step" => *name);
            let next = steps.get(at + 1).map_or("done", |(n, _)| n);
            match *step {
                Step::Stop => still(self.datastore.deletion_stop_org(job).await?)?,
                Step::Grants => self.grants(job, log).await?,
                Step::Files => self.files(job).await?,
                Step::Batch(sql) => self.batches(job, sql).await?,
                Step::Subject => {
                    // Deleted and moved on in one transaction.
                    still(self.datastore.deletion_subject_row(job, next).await?)?;
                    at += 1;
                    continue;
                }
                Step::Store => self.store_leftovers(job).await?,
            }
            if next != "done" {
                still(self.datastore.deletion_job_advance(job, next).await?)?;
            }
            at += 1;
        }
        still(self.datastore.deletion_job_finish(job).await?)
    }

    async fn batches(&self, job: &ClaimedDeletion, sql: &str) -> Result<(), JobError> {
        let limit = self.config.batch_rows.max(1);
        loop {
            let n = held(self.datastore.deletion_batch(job, sql, limit).await?)?;
            if (n as i64) < limit {
                return Ok(());
            }
        }
    }

    /// Revokes and deletes every grant; a grant whose provider refused
    /// fails the attempt (after the others were done) unless it is the
    /// last.
    async fn grants(&self, job: &ClaimedDeletion, log: &slog::Logger) -> Result<(), JobError> {
        let mut after = Uuid::nil();
        let mut kept = 0;
        loop {
            let grants = self
                .datastore
                .deletion_grants(job, after, GRANTS_PAGE)
                .await?;
            let Some(last) = grants.last() else { break };
            after = last.session_id;
            for grant in &grants {
                let outcome = self
                    .datastore
                    .deletion_revoke_grant(job, grant.session_id, |sealed| {
                        self.revoke(job, grant.session_id, &grant.server_url, sealed, log)
                    })
                    .await?;
                if let GrantOutcome::Kept = held(outcome)? {
                    kept += 1;
                }
            }
        }
        if kept > 0 {
            return Err(JobError::Failed(format!(
                "{kept} MCP grant(s) could not be revoked at their provider yet"
            )));
        }
        Ok(())
    }

    /// Revokes one session's tokens at its provider.
    async fn revoke(
        &self,
        job: &ClaimedDeletion,
        session_id: Uuid,
        server_url: &str,
        sealed: Option<Vec<u8>>,
        log: &slog::Logger,
    ) -> GrantOutcome {
        let Some(sealed) = sealed else {
            return GrantOutcome::Revoked;
        };
        let tokens = self
            .secrets
            .open(&sealed, session_id.as_bytes())
            .ok()
            .and_then(|plain| {
                serde_json::from_slice::<crate::mcp::oauth::StoredTokens>(&plain).ok()
            });
        let Some(tokens) = tokens else {
            // Nothing usable to revoke with: only deleting is left.
            slog::warn!(log, "MCP tokens cannot be opened; deleting them unrevoked";
                "session" => session_id.to_string());
            return GrantOutcome::Unrevoked;
        };
        match crate::mcp::oauth::revoke_at(log, &self.fetch, server_url, &tokens).await {
            Ok(()) => GrantOutcome::Revoked,
            Err(e) if job.last_attempt() => {
                slog::warn!(log, "revoking MCP tokens failed at the last attempt; deleting \
                    them unrevoked"; "session" => session_id.to_string(), "error" => %e);
                GrantOutcome::Unrevoked
            }
            Err(e) => {
                slog::info!(log, "revoking MCP tokens failed; kept for the next attempt";
                    "session" => session_id.to_string(), "error" => %e);
                GrantOutcome::Kept
            }
        }
    }

    /// Deletes the uploads' bytes, then their rows, a batch at a time.
    async fn files(&self, job: &ClaimedDeletion) -> Result<(), JobError> {
        loop {
            let files = self.datastore.deletion_files(job, FILES_BATCH).await?;
            if files.is_empty() {
                return Ok(());
            }
            for (_, key) in &files {
                self.files
                    .remove(key)
                    .await
                    .map_err(|e| JobError::Failed(e.to_string()))?;
            }
            let ids: Vec<Uuid> = files.iter().map(|(id, _)| *id).collect();
            held(self.datastore.deletion_files_forget(job, &ids).await?)?;
            if (files.len() as i64) < FILES_BATCH {
                return Ok(());
            }
        }
    }

    /// Deletes what is left under the organization's folder of the store.
    async fn store_leftovers(&self, job: &ClaimedDeletion) -> Result<(), JobError> {
        let prefix = format!("orgs/{}/", job.subject);
        let batch = FILES_BATCH as usize;
        loop {
            let n = self
                .files
                .remove_prefix(&prefix, batch)
                .await
                .map_err(|e| JobError::Failed(e.to_string()))?;
            if n > 0 {
                still(self.datastore.deletion_count_files(job, n as u64).await?)?;
            }
            if n < batch {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_are_unique_and_end_with_the_subject() {
        for kind in [DeletionJobKind::Organization, DeletionJobKind::Account] {
            let steps = steps(kind);
            let names: std::collections::HashSet<&str> = steps.iter().map(|(n, _)| *n).collect();
            assert_eq!(names.len(), steps.len(), "{kind}: duplicate step names");
            assert!(
                !names.contains("done"),
                "{kind}: `done` is the end, not a step"
            );
            let subject = steps
                .iter()
                .position(|(_, s)| matches!(s, Step::Subject))
                .expect("a subject step");
            // Only the store sweep (which needs no row) comes after it.
            assert!(
                steps[subject + 1..]
                    .iter()
                    .all(|(_, s)| matches!(s, Step::Store))
            );
        }
        assert_eq!(steps(DeletionJobKind::Organization)[0].0, ORG_FIRST_STEP);
        assert_eq!(steps(DeletionJobKind::Account)[0].0, ACCOUNT_FIRST_STEP);
    }
}
