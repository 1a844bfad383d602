//! `[audit]`: the audit log's retention and maintenance (see
//! `db::datastore::audit` and `migrations/V38__audit_log.sql`).

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
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            retention_days: None,
            maintenance_interval_secs: 3600,
        }
    }
}

impl AuditConfig {
    /// `WORKSPACE_AUDIT_RETENTION_DAYS`.
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = get("WORKSPACE_AUDIT_RETENTION_DAYS").filter(|v| !v.is_empty()) {
            self.retention_days = Some(
                v.parse()
                    .with_context(|| format!("WORKSPACE_AUDIT_RETENTION_DAYS {v:?}"))?,
            );
        }
        Ok(())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.retention_days == Some(0) || self.maintenance_interval_secs == 0 {
            bail!("audit.retention_days and audit.maintenance_interval_secs must be at least 1");
        }
        Ok(())
    }
}
