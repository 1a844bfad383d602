//! The model catalog.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::error::Error;
use crate::providers::{ModelEntry, Reasoning, ReasoningEffort};
use uuid::Uuid;
use workspace_api::conversations::Model;

/// The models this server offers to the caller's organization, sorted by
/// name (every organization may use every configured model).
pub fn list(cx: &ServerContext, _access: &OrgAccess) -> Vec<Model> {
    cx.models.list().iter().map(entry_view).collect()
}

fn entry_view(m: &ModelEntry) -> Model {
    Model {
        id: m.id,
        name: m.name.clone(),
        provider: m.provider.clone(),
        input: m.capabilities.input.clone(),
        reasoning: m.capabilities.reasoning,
        max_output_tokens: m.capabilities.max_output_tokens,
        context_tokens: m.context_tokens,
    }
}

/// A stored model reference (a conversation session's) as the API shows
/// it: with its capabilities while it is offered, else as a model no
/// longer configured would be (text only, the defaults).
pub fn view(cx: &ServerContext, id: Uuid, name: String, provider: String) -> Model {
    match cx.models.get(id) {
        Some(entry) => entry_view(entry),
        None => {
            let caps = crate::config::capabilities::resolve(&name, None, None, None);
            Model {
                id,
                name,
                provider,
                input: vec![workspace_api::conversations::ModelInput::Text],
                reasoning: workspace_api::conversations::ReasoningMode::None,
                max_output_tokens: caps.max_output_tokens,
                context_tokens: crate::config::DEFAULT_CONTEXT_TOKENS,
            }
        }
    }
}

/// The model of a request: the given one, else the first offered.
pub(crate) fn pick(cx: &ServerContext, id: Option<Uuid>) -> Result<ModelEntry, Error> {
    let model = match id {
        Some(id) => cx.models.get(id),
        None => cx.models.list().first(),
    };
    model.cloned().ok_or_else(|| {
        Error::invalid(
            "model_unavailable",
            "no such model is offered (see GET /api/models/list)",
        )
    })
}

/// Refuses an answer before anything is stored when every deployment of
/// `model` and of its fallbacks is cooling down or disabled: `503
/// providers_unavailable`, with `Retry-After` the seconds until the first
/// cooldown ends. A model that is not routed (one deployment, no
/// fallbacks) is never refused here; the database's trouble is not the
/// answer's (the router then tries every deployment).
pub(crate) async fn check_available(model: &ModelEntry) -> Result<(), Error> {
    match model.routed.unavailable().await {
        Ok(Some(wait)) => Err(Error::Busy {
            code: "providers_unavailable",
            message: format!(
                "every deployment of the model {:?} and of its fallbacks is unavailable; \
                 try again later",
                model.name
            ),
            retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
        }),
        Ok(None) | Err(_) => Ok(()),
    }
}

/// The reasoning to ask of `model` and the answer's `max_tokens`, from the
/// requested effort or budget (a message's settings, else the chat's or
/// the agent's), bounded by the model's table:
///
/// - a model whose `reasoning` is `effort` gets the effort (else the
///   provider's default);
/// - a model whose `reasoning` is `budget` thinks when given a budget of at
///   least [`MIN_THINKING_BUDGET`] tokens, lowered to leave
///   [`MIN_THINKING_BUDGET`] tokens of the model's `max_output_tokens` for
///   the answer, whose `max_tokens` is raised to exceed the budget (the
///   API requires it);
/// - other models take neither (a setting for another kind of model is
///   ignored, so a chat's setting survives a change of model).
///
/// `max_tokens` never passes the model's `max_output_tokens`.
pub fn reasoning(
    model: &ModelEntry,
    effort: Option<workspace_api::chat::ReasoningEffort>,
    budget: Option<u32>,
    max_tokens: Option<u32>,
) -> (Option<Reasoning>, Option<u32>) {
    use workspace_api::chat::ReasoningEffort as E;
    use workspace_api::conversations::ReasoningMode;
    let ceiling = model.capabilities.max_output_tokens;
    let max_tokens = max_tokens.map(|m| m.min(ceiling));
    match model.capabilities.reasoning {
        ReasoningMode::Effort => {
            let effort = effort.map(|e| match e {
                E::Minimal => ReasoningEffort::Minimal,
                E::Low => ReasoningEffort::Low,
                E::Medium => ReasoningEffort::Medium,
                E::High => ReasoningEffort::High,
            });
            (effort.map(Reasoning::Effort), max_tokens)
        }
        ReasoningMode::Budget => match budget {
            Some(b) if b >= MIN_THINKING_BUDGET && ceiling >= 2 * MIN_THINKING_BUDGET => {
                let budget = b.min(ceiling - MIN_THINKING_BUDGET);
                let answer = max_tokens
                    .or(model.max_tokens)
                    .unwrap_or(crate::runtime::context::ANSWER_RESERVE_TOKENS);
                let max = budget.saturating_add(answer).min(ceiling).max(budget + 1);
                (Some(Reasoning::Budget(budget)), Some(max))
            }
            _ => (None, max_tokens),
        },
        ReasoningMode::None | ReasoningMode::Always => (None, max_tokens),
    }
}

/// The smallest thinking budget (Anthropic's minimum), and the least room
/// left for the answer beside a budget.
pub const MIN_THINKING_BUDGET: u32 = 1_024;

/// Every model offered and its deployments' shared health (see
/// `GET /api/system/model-deployments`).
pub async fn deployments(
    cx: &ServerContext,
    _admin: &crate::authz::SystemAdmin,
) -> Result<workspace_api::system::ModelDeploymentsList, Error> {
    use workspace_api::system::{DeploymentState, ModelDeploymentStatus, ModelDeployments};
    let entries = cx.models.list();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let health = cx.datastore.deployment_health(&names).await?;
    let models = entries
        .iter()
        .map(|entry| {
            let routed = &entry.routed;
            let deployments = routed
                .deployments
                .iter()
                .map(|d| {
                    let h = health
                        .iter()
                        .find(|h| h.model == entry.name && h.deployment == d.name)
                        .cloned()
                        .unwrap_or_default();
                    let disabled =
                        h.disabled_fingerprint.as_deref() == Some(d.fingerprint.as_str());
                    let state = if disabled {
                        DeploymentState::Disabled
                    } else if h.cooling_secs.is_some() {
                        DeploymentState::CoolingDown
                    } else {
                        DeploymentState::Healthy
                    };
                    ModelDeploymentStatus {
                        name: d.name.clone(),
                        provider: d.provider.clone(),
                        weight: d.weight,
                        rpm: d.rpm,
                        tpm: d.tpm,
                        prefill: d.prefill,
                        state,
                        cooldown_remaining_secs: h.cooling_secs.filter(|_| !disabled),
                        recent_failures: h.failures,
                        cooldowns: h.cooldowns,
                        last_error_class: h.last_error_class,
                        last_error_secs_ago: h.last_error_secs,
                        disabled_status: h
                            .disabled_status
                            .filter(|_| disabled)
                            .and_then(|s| u16::try_from(s).ok()),
                        minute_requests: h.minute_requests,
                        minute_tokens: h.minute_tokens,
                    }
                })
                .collect();
            let [
                fallbacks,
                context_window_fallbacks,
                content_policy_fallbacks,
            ] = routed.fallback_names.clone();
            ModelDeployments {
                model_id: entry.id,
                model: entry.name.clone(),
                routed: routed.routes(),
                fallbacks,
                context_window_fallbacks,
                content_policy_fallbacks,
                deployments,
            }
        })
        .collect();
    Ok(workspace_api::system::ModelDeploymentsList { models })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::capabilities::resolve;
    use workspace_api::chat::ReasoningEffort as E;

    fn model(name: &str, max_output: Option<u32>) -> ModelEntry {
        ModelEntry::direct(
            name,
            "test",
            200_000,
            resolve(name, None, None, max_output),
            std::sync::Arc::new(crate::providers::offline::OfflineModel {
                chunk_delay: std::time::Duration::ZERO,
            }),
        )
    }

    #[test]
    fn reasoning_is_bounded_by_the_models_table() {
        // An effort model takes the effort, and ignores a budget.
        let gpt = model("gpt-5-mini", None);
        assert_eq!(
            reasoning(&gpt, Some(E::High), Some(4096), Some(500)),
            (Some(Reasoning::Effort(ReasoningEffort::High)), Some(500))
        );
        assert_eq!(reasoning(&gpt, None, Some(4096), None), (None, None));
        // A budget model thinks from 1,024 tokens, with room for the
        // answer above the budget, within its output limit.
        let claude = model("claude-opus-4-1", None);
        assert_eq!(
            reasoning(&claude, Some(E::Low), Some(2048), Some(1000)),
            (Some(Reasoning::Budget(2048)), Some(3048))
        );
        assert_eq!(reasoning(&claude, None, Some(1023), None), (None, None));
        assert_eq!(
            reasoning(&claude, None, Some(0), Some(10)),
            (None, Some(10))
        );
        // A budget past the limit is lowered to leave 1,024 for the answer.
        assert_eq!(
            reasoning(&claude, None, Some(1_000_000), Some(40_000)),
            (Some(Reasoning::Budget(30_976)), Some(32_000))
        );
        // max_tokens never passes max_output_tokens.
        let small = model("claude-3-5-haiku", Some(2000));
        assert_eq!(
            reasoning(&small, None, None, Some(9000)),
            (None, Some(2000))
        );
        // Models that always reason, or never, take neither setting.
        for name in ["deepseek-reasoner", "llama3"] {
            assert_eq!(
                reasoning(&model(name, None), Some(E::High), Some(4096), None),
                (None, None)
            );
        }
    }
}
