//! `[deletion]`: the durable jobs that delete organizations and accounts
//! (see `app::deletion`).

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// How the deletion jobs run.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeletionConfig {
    /// Deletion workers per server instance (0: none in this instance;
    /// another instance's take the jobs). `WORKSPACE_DELETION_WORKERS`.
    pub workers: usize,
    /// Lease of a running job, in seconds; renewed every third of it. A job
    /// whose instance died is taken over once it expires.
    pub lease_secs: u64,
    /// How often idle workers look for jobs, in milliseconds (new jobs also
    /// wake them at once).
    pub poll_interval_ms: u64,
    /// Most rows one batch (one transaction) deletes.
    pub batch_rows: i64,
    /// Attempts of a job before it fails for good (MCP grants whose
    /// provider still refuses their revocation at the last attempt are
    /// deleted unrevoked).
    pub max_attempts: i32,
    /// First retry backoff in seconds; doubles per attempt (at most 10
    /// minutes).
    pub retry_backoff_secs: u64,
}

impl Default for DeletionConfig {
    fn default() -> Self {
        DeletionConfig {
            workers: 1,
            lease_secs: 60,
            poll_interval_ms: 2000,
            batch_rows: 1000,
            max_attempts: 10,
            retry_backoff_secs: 5,
        }
    }
}

impl DeletionConfig {
    /// `WORKSPACE_DELETION_WORKERS`.
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = get("WORKSPACE_DELETION_WORKERS").filter(|v| !v.is_empty()) {
            self.workers = v
                .parse()
                .with_context(|| format!("WORKSPACE_DELETION_WORKERS {v:?}"))?;
        }
        Ok(())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.lease_secs < 3 || self.batch_rows < 1 || self.max_attempts < 1 {
            bail!(
                "deletion.lease_secs must be at least 3, deletion.batch_rows and \
                 deletion.max_attempts at least 1"
            );
        }
        Ok(())
    }
}
