//! `[audit]`: the audit log's retention, maintenance and signed
//! checkpoints (see `db::datastore::audit`, `app::audit` and
//! `migrations/V38__audit_log.sql`).

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// How long audit events are kept.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Days events are kept at least; absent: forever (the default).
    /// Retention drops whole months only: a month's partition goes once
    /// its last day is older than this. `WORKSPACE_AUDIT_RETENTION_DAYS`.
    pub retention_days: Option<u32>,
    /// How often each instance runs the maintenance (partitions of the
    /// coming months, retention), in seconds; one instance at a time does
    /// the work.
    pub maintenance_interval_secs: u64,
    /// How often each instance publishes a signed checkpoint of every
    /// chain that grew (the chain verified from its last checkpoint first),
    /// in seconds: rows removed or added within this window, before a
    /// checkpoint states them, are found by the chain's keys only.
    /// `WORKSPACE_AUDIT_CHECKPOINT_INTERVAL_SECS`.
    pub checkpoint_interval_secs: u64,
    /// The checkpoint file (JSON Lines, appended, mode 0600); absent:
    /// `audit-checkpoints.jsonl` beside the key file, or in the data
    /// directory when the keys are configured without a file.
    /// `WORKSPACE_AUDIT_CHECKPOINT_FILE`.
    pub checkpoint_file: Option<std::path::PathBuf>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            retention_days: None,
            maintenance_interval_secs: 3600,
            checkpoint_interval_secs: 60,
            checkpoint_file: None,
        }
    }
}

impl AuditConfig {
    /// `WORKSPACE_AUDIT_RETENTION_DAYS`,
    /// `WORKSPACE_AUDIT_CHECKPOINT_INTERVAL_SECS`,
    /// `WORKSPACE_AUDIT_CHECKPOINT_FILE`.
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = get("WORKSPACE_AUDIT_RETENTION_DAYS").filter(|v| !v.is_empty()) {
            self.retention_days = Some(
                v.parse()
                    .with_context(|| format!("WORKSPACE_AUDIT_RETENTION_DAYS {v:?}"))?,
            );
        }
        if let Some(v) = get("WORKSPACE_AUDIT_CHECKPOINT_INTERVAL_SECS").filter(|v| !v.is_empty()) {
            self.checkpoint_interval_secs = v
                .parse()
                .with_context(|| format!("WORKSPACE_AUDIT_CHECKPOINT_INTERVAL_SECS {v:?}"))?;
        }
        if let Some(v) = get("WORKSPACE_AUDIT_CHECKPOINT_FILE").filter(|v| !v.is_empty()) {
            self.checkpoint_file = Some(v.into());
        }
        Ok(())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.retention_days == Some(0) || self.maintenance_interval_secs == 0 {
            bail!("audit.retention_days and audit.maintenance_interval_secs must be at least 1");
        }
        if self.checkpoint_interval_secs == 0 {
            bail!("audit.checkpoint_interval_secs must be at least 1");
        }
        Ok(())
    }
}
