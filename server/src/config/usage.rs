//! `[usage]`: the price table of model calls and how usage is recorded and
//! budgets are checked (see `crate::usage` and `app::usage`).

use anyhow::{Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;

/// How usage is recorded, priced and budgeted.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UsageConfig {
    /// Record model calls and enforce budgets. Off: nothing is recorded
    /// and no budget is checked (the code path before issue #36, kept
    /// for comparisons). `WORKSPACE_USAGE_ENABLED`.
    pub enabled: bool,
    /// USD per million tokens, by model name (the catalog's `name`, or the
    /// embedder's or transcription model's name). A model without a price
    /// costs nothing (its tokens are still counted).
    pub prices: BTreeMap<String, Price>,
    /// How often the recorder writes what it gathered, in milliseconds (one
    /// transaction per batch, off the answer path).
    pub flush_interval_ms: u64,
    /// Output tokens a call reserves against a budget before it starts
    /// when it sets no `max_tokens` (its input is counted as characters /
    /// 4); the reservation is replaced by the real figure at its end.
    pub reserve_output_tokens: u32,
    /// How long an instance trusts what it read about an organization
    /// having budgets at all, in milliseconds (organizations without
    /// budgets cost no database round trip per call). A budget created on
    /// another instance applies here after at most this long; on the
    /// instance that created it, at once. 0: always read.
    pub budget_cache_ms: u64,
}

/// The price of one model: USD per million tokens in and out.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Default for UsageConfig {
    fn default() -> Self {
        UsageConfig {
            enabled: true,
            prices: BTreeMap::new(),
            flush_interval_ms: 100,
            reserve_output_tokens: 256,
            budget_cache_ms: 1000,
        }
    }
}

impl UsageConfig {
    /// `WORKSPACE_USAGE_ENABLED` (`true`/`false`).
    pub(crate) fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(v) = get("WORKSPACE_USAGE_ENABLED").filter(|v| !v.is_empty()) {
            self.enabled = match v.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => true,
                "false" | "0" | "no" | "off" => false,
                _ => bail!("WORKSPACE_USAGE_ENABLED {v:?}: true or false"),
            };
        }
        Ok(())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        for (name, p) in &self.prices {
            if !(p.input.is_finite() && p.output.is_finite() && p.input >= 0.0 && p.output >= 0.0) {
                bail!("usage.prices.{name:?}: input and output must be finite and not negative");
            }
        }
        if self.flush_interval_ms == 0 || self.flush_interval_ms > 10_000 {
            bail!("usage.flush_interval_ms must be between 1 and 10000");
        }
        Ok(())
    }

    /// The cost in micro-dollars of `input` and `output` tokens of `model`
    /// (USD per million tokens is micro-dollars per token), rounded.
    pub fn cost_micros(&self, model: &str, input: u64, output: u64) -> i64 {
        let Some(p) = self.prices.get(model) else {
            return 0;
        };
        let cost = input as f64 * p.input + output as f64 * p.output;
        cost.round().clamp(0.0, i64::MAX as f64) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_micro_dollars() {
        let mut c = UsageConfig::default();
        c.prices.insert(
            "m".into(),
            Price {
                input: 2.5,
                output: 10.0,
            },
        );
        // 1000 in at $2.5/M = 2500 µ$, 100 out at $10/M = 1000 µ$.
        assert_eq!(c.cost_micros("m", 1000, 100), 3500);
        assert_eq!(c.cost_micros("other", 1000, 100), 0);
        assert!(c.validate().is_ok());
    }
}
