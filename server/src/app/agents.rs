//! Agents: validation, lifecycle status, and loading an agent into the
//! runtime.

use crate::authz::{Grant, OrgAccess, OrgScope, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::agents::{AgentFields, AgentRow, AgentToolRow};
use crate::db::enums::AgentStatus as DbStatus;
use crate::error::Error;
use crate::providers::ChatMessage;
use crate::runtime::{CodeTool, RunLimits, RunSpec, RuntimeEvent, RuntimeTool};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use uuid::Uuid;
use workspace_api::agents::{
    AgentCreate, AgentDeploymentRef, AgentDetail, AgentListItem, AgentListQuery, AgentParams,
    AgentStatus, AgentSummary, AgentTestRequest, AgentTestResult, AgentToolRef, AgentToolView,
    ConfigValue, RunUsage, ToolCallRecord,
};
use workspace_api::tools::{NamedRef, SuccessResponse};

pub const MAX_TOOLS: usize = 20;
pub const SYSTEM_PROMPT_MAX: usize = 20_000;

pub fn status_view(s: DbStatus) -> AgentStatus {
    match s {
        DbStatus::Created => AgentStatus::Created,
        DbStatus::Configured => AgentStatus::Configured,
        DbStatus::Testing => AgentStatus::Testing,
        DbStatus::Ready => AgentStatus::Ready,
        DbStatus::Deployed => AgentStatus::Deployed,
        DbStatus::Active => AgentStatus::Active,
    }
}

fn params_of(v: &Value) -> Result<AgentParams, Error> {
    serde_json::from_value(v.clone()).map_err(|e| Error::internal(format!("stored params: {e}")))
}

fn summary(r: AgentRow) -> Result<AgentSummary, Error> {
    Ok(AgentSummary {
        params: params_of(&r.params)?,
        id: r.id,
        name: r.name,
        description: r.description,
        agent_type: r.agent_type,
        model_id: r.model_id,
        is_public: r.is_public,
        org_id: r.org_id,
        status: status_view(r.status),
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

fn validate_params(p: &AgentParams) -> Result<(), Error> {
    let bad = |m: &str| Err(Error::invalid("invalid_params", m.to_string()));
    if p.system_prompt.chars().count() > SYSTEM_PROMPT_MAX {
        return bad("the system prompt must be at most 20,000 characters");
    }
    if let Some(t) = p.temperature
        && !(0.0..=1.0).contains(&t)
    {
        return bad("temperature must be 0 to 1");
    }
    if let Some(m) = p.max_tokens
        && !(1..=1_000_000).contains(&m)
    {
        return bad("max_tokens must be 1 to 1,000,000");
    }
    Ok(())
}

fn validate_type(t: &str) -> Result<String, Error> {
    let t = t.trim();
    if t.is_empty() || t.chars().count() > 32 {
        return Err(Error::invalid(
            "invalid_agent_type",
            "agent_type must be 1 to 32 characters",
        ));
    }
    Ok(t.to_string())
}

fn validate_model(cx: &ServerContext, model_id: Uuid) -> Result<(), Error> {
    // Every organization may use every model this server offers.
    if cx.models.get(model_id).is_none() {
        return Err(Error::invalid(
            "model_unavailable",
            "model_id is not a model this server offers",
        ));
    }
    Ok(())
}

/// Checks the tools (visible, config names and types) and returns them as
/// stored.
async fn resolve_tools(
    cx: &ServerContext,
    scope: &impl OrgScope,
    tools: &[AgentToolRef],
) -> Result<Vec<(Uuid, Value)>, Error> {
    if tools.len() > MAX_TOOLS {
        return Err(Error::invalid(
            "invalid_tools",
            format!("at most {MAX_TOOLS} tools"),
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for t in tools {
        if !seen.insert(t.tool_id) {
            return Err(Error::invalid(
                "invalid_tools",
                format!("tool {} is listed twice", t.tool_id),
            ));
        }
        let tool = match cx.datastore.tool_get_visible(scope, t.tool_id).await {
            Ok(row) => crate::app::tools::tool_view(row)?,
            Err(Error::NotFound { .. }) => {
                return Err(Error::invalid(
                    "unknown_tool",
                    format!(
                        "tool {} is not a tool of this organization nor a public one",
                        t.tool_id
                    ),
                ));
            }
            Err(e) => return Err(e),
        };
        let mut names = HashSet::new();
        for c in &t.config {
            let Some(spec) = tool.configuration.iter().find(|s| s.name == c.name) else {
                return Err(Error::invalid(
                    "invalid_tool_config",
                    format!("tool {} has no configuration value {}", tool.name, c.name),
                ));
            };
            if !names.insert(c.name.as_str())
                || !(c.value.is_null() || crate::sandbox::call::value_matches(spec.type_, &c.value))
            {
                return Err(Error::invalid(
                    "invalid_tool_config",
                    format!(
                        "configuration value {} of tool {} is invalid",
                        c.name, tool.name
                    ),
                ));
            }
        }
        out.push((
            t.tool_id,
            serde_json::to_value(&t.config).expect("serialises"),
        ));
    }
    Ok(out)
}

fn configured(params: &AgentParams, has_tools: bool) -> DbStatus {
    if has_tools || !params.system_prompt.trim().is_empty() {
        DbStatus::Configured
    } else {
        DbStatus::Created
    }
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::AgentWrite>,
    body: AgentCreate,
) -> Result<AgentSummary, Error> {
    crate::app::tools::no_nul(&body)?;
    let name = crate::app::tools::valid_name(&body.name)?.to_string();
    let description = crate::app::tools::valid_description(&body.description)?.to_string();
    let agent_type = validate_type(&body.agent_type)?;
    validate_model(cx, body.model_id)?;
    validate_params(&body.params)?;
    let tools = resolve_tools(cx, grant, body.tools.as_deref().unwrap_or(&[])).await?;
    let status = configured(&body.params, !tools.is_empty());
    let row = cx
        .datastore
        .agent_create(
            grant,
            &AgentFields {
                name,
                description,
                agent_type,
                model_id: body.model_id,
                params: serde_json::to_value(&body.params).expect("serialises"),
                is_public: body.is_public.unwrap_or(false),
                tools: Some(tools),
            },
            status,
        )
        .await?;
    summary(row)
}

pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    q: AgentListQuery,
) -> Result<Vec<AgentListItem>, Error> {
    let (limit, offset) = crate::app::tools::page(q.limit, q.offset)?;
    let rows = cx.datastore.agent_list(access, limit, offset).await?;
    rows.into_iter()
        .map(|r| {
            Ok(AgentListItem {
                params: params_of(&r.params)?,
                model: NamedRef {
                    id: r.model_id,
                    name: r.model_name,
                },
                id: r.id,
                name: r.name,
                description: r.description,
                agent_type: r.agent_type,
                is_public: r.is_public,
                org_id: r.org_id,
                status: status_view(r.status),
                deployments_count: r.deployments_count,
                created_at: r.created_at,
                updated_at: r.updated_at,
            })
        })
        .collect()
}

pub async fn get(cx: &ServerContext, access: &OrgAccess, id: Uuid) -> Result<AgentDetail, Error> {
    let r = cx.datastore.agent_get(access, id).await?;
    let tools = cx.datastore.agent_tools(access, id).await?;
    let deployments = cx.datastore.agent_deployments(access, id).await?;
    Ok(AgentDetail {
        params: params_of(&r.params)?,
        model: NamedRef {
            id: r.model_id,
            name: r.model_name,
        },
        id: r.id,
        name: r.name,
        description: r.description,
        agent_type: r.agent_type,
        is_public: r.is_public,
        org_id: r.org_id,
        status: status_view(r.status),
        tools: tools
            .into_iter()
            .map(|t| AgentToolView {
                id: t.tool_id,
                name: t.name,
                category: NamedRef {
                    id: t.category_id,
                    name: t.category_name,
                },
                config: serde_json::from_value::<Vec<ConfigValue>>(t.config).unwrap_or_default(),
            })
            .collect(),
        deployments: deployments
            .into_iter()
            .map(|d| AgentDeploymentRef {
                id: d.id,
                name: d.name,
                description: d.description,
                created_at: d.created_at,
            })
            .collect(),
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

pub async fn update(
    cx: &ServerContext,
    grant: &Grant<on::Agent, perm::AgentWrite>,
    body: workspace_api::agents::AgentUpdate,
) -> Result<AgentSummary, Error> {
    let id = grant.id();
    crate::app::tools::no_nul(&body)?;
    // Everything that needs no lock is checked before the transaction.
    let name = body
        .name
        .as_deref()
        .map(crate::app::tools::valid_name)
        .transpose()?
        .map(str::to_string);
    let description = body
        .description
        .as_deref()
        .map(crate::app::tools::valid_description)
        .transpose()?
        .map(str::to_string);
    let agent_type = body.agent_type.as_deref().map(validate_type).transpose()?;
    if let Some(m) = body.model_id {
        validate_model(cx, m)?;
    }
    if let Some(p) = &body.params {
        validate_params(p)?;
    }
    let tools = match &body.tools {
        Some(t) => Some(resolve_tools(cx, grant, t).await?),
        None => None,
    };
    let had_tools = !cx.datastore.agent_tools(grant, id).await?.is_empty();
    let row = cx
        .datastore
        .agent_update(grant, |current| {
            let params = match &body.params {
                Some(p) => p.clone(),
                None => params_of(&current.params)?,
            };
            let has_tools = tools.as_ref().map_or(had_tools, |t| !t.is_empty());
            let status = match current.status {
                DbStatus::Deployed | DbStatus::Active => current.status,
                _ => configured(&params, has_tools),
            };
            Ok((
                AgentFields {
                    name: name.clone().unwrap_or_else(|| current.name.clone()),
                    description: description
                        .clone()
                        .unwrap_or_else(|| current.description.clone()),
                    agent_type: agent_type
                        .clone()
                        .unwrap_or_else(|| current.agent_type.clone()),
                    model_id: body.model_id.unwrap_or(current.model_id),
                    params: serde_json::to_value(&params).expect("serialises"),
                    is_public: body.is_public.unwrap_or(current.is_public),
                    tools: tools.clone(),
                },
                status,
            ))
        })
        .await?;
    summary(row)
}

pub async fn delete(
    cx: &ServerContext,
    grant: &Grant<on::Agent, perm::AgentDelete>,
) -> Result<SuccessResponse, Error> {
    cx.datastore.agent_delete(grant).await?;
    Ok(SuccessResponse {
        success: true,
        message: "agent deleted".into(),
    })
}

/// Loads an agent of the authorized organization into a runtime spec with `history`.
pub async fn run_spec(
    cx: &ServerContext,
    scope: &impl OrgScope,
    agent: &AgentRow,
    history: Vec<ChatMessage>,
    log: &slog::Logger,
) -> Result<RunSpec, Error> {
    let tools = cx.datastore.agent_tools(scope, agent.id).await?;
    run_spec_with_tools(cx, scope, agent, tools, history, log).await
}

/// [`run_spec`] with the agent's tools already read (a deployment reads
/// them with its rate limit's count).
pub async fn run_spec_with_tools(
    cx: &ServerContext,
    scope: &impl OrgScope,
    agent: &AgentRow,
    agent_tools: Vec<AgentToolRow>,
    history: Vec<ChatMessage>,
    log: &slog::Logger,
) -> Result<RunSpec, Error> {
    let model = cx.models.get(agent.model_id).cloned().ok_or_else(|| {
        Error::invalid(
            "model_unavailable",
            format!(
                "the agent's model {} is no longer offered",
                agent.model_name
            ),
        )
    })?;
    let params = params_of(&agent.params)?;
    let executor: Arc<dyn crate::sandbox::ToolExecutor> = Arc::new(crate::app::tools::executor(cx));
    let mut tools: Vec<Arc<dyn RuntimeTool>> = Vec::new();
    for t in agent_tools {
        let tool =
            crate::app::tools::tool_view(cx.datastore.tool_get_visible(scope, t.tool_id).await?)?;
        let config: BTreeMap<String, Value> = serde_json::from_value::<Vec<ConfigValue>>(t.config)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.value))
            .collect();
        tools.push(Arc::new(CodeTool {
            tool,
            config,
            executor: executor.clone(),
        }));
    }
    let (reasoning, max_tokens) = crate::app::models::reasoning(
        &model,
        params.reasoning_effort,
        params.reasoning_budget_tokens,
        params.max_tokens.and_then(|m| u32::try_from(m).ok()),
    );
    Ok(RunSpec {
        model,
        retry: cx.models.retry.clone(),
        system_prompt: params.system_prompt,
        temperature: params.temperature.map(|t| t as f32),
        max_tokens,
        reasoning,
        history,
        tools,
        limits: RunLimits::default(),
        log: log.new(slog::o!("agent_id" => agent.id.to_string())),
        whole: false,
        usage: None,
    })
}

/// The collected result of a run.
#[derive(Default)]
pub struct Collected {
    pub text: String,
    /// The model's reasoning, apart from the text.
    pub reasoning: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: RunUsage,
    pub error: Option<(String, String)>,
}

pub async fn collect(mut events: tokio::sync::mpsc::Receiver<RuntimeEvent>) -> Collected {
    let mut c = Collected::default();
    while let Some(e) = events.recv().await {
        match e {
            RuntimeEvent::Text(t) => c.text.push_str(&t),
            RuntimeEvent::Reasoning(r) => {
                if c.reasoning.len() + r.len() <= crate::app::answer::REASONING_MAX_BYTES {
                    c.reasoning.push_str(&r);
                }
            }
            RuntimeEvent::ToolStarted(_) => {}
            RuntimeEvent::Route(route) => {
                if route.restart {
                    c.text.clear();
                    c.reasoning.clear();
                }
            }
            RuntimeEvent::ToolFinished(f) => c.tool_calls.push(ToolCallRecord {
                id: f.id,
                name: f.name,
                input: f.input,
                output: f.output,
                error: f.error,
                successful: f.successful,
            }),
            RuntimeEvent::Usage(u) => {
                c.usage.input_tokens += u64::from(u.input_tokens);
                c.usage.output_tokens += u64::from(u.output_tokens);
                c.usage.total_tokens += u64::from(u.total_tokens());
            }
            RuntimeEvent::End => break,
            RuntimeEvent::Error(e) => {
                c.error = Some((e.code, e.message));
                break;
            }
        }
    }
    c
}

pub async fn test(
    cx: &ServerContext,
    grant: &Grant<on::Agent, perm::AgentExecute>,
    body: AgentTestRequest,
) -> Result<AgentTestResult, Error> {
    let id = grant.id();
    let n = body.message.chars().count();
    if body.message.trim().is_empty() || n > 100_000 {
        return Err(Error::invalid(
            "invalid_message",
            "the message must be 1 to 100,000 characters and not blank",
        ));
    }
    let agent = cx.datastore.agent_get(grant, id).await?;
    let mut spec = run_spec(
        cx,
        grant,
        &agent,
        vec![ChatMessage::user(body.message)],
        grant.log(),
    )
    .await?;
    crate::app::usage::meter(
        cx,
        crate::app::usage::member(grant),
        "agent_test",
        &mut spec,
    )
    .await
    .map_err(crate::app::usage::refused_as_forbidden)?;
    let before = [DbStatus::Created, DbStatus::Configured, DbStatus::Ready];
    cx.datastore
        .agent_transition(grant, &before, DbStatus::Testing)
        .await?;
    let result = crate::runtime::run_here(spec, collect).await;
    let (to, from) = if result.error.is_none() {
        (
            DbStatus::Ready,
            [DbStatus::Testing, DbStatus::Configured, DbStatus::Created],
        )
    } else {
        (
            DbStatus::Configured,
            [DbStatus::Testing, DbStatus::Ready, DbStatus::Created],
        )
    };
    let status = cx.datastore.agent_transition(grant, &from, to).await?;
    Ok(AgentTestResult {
        success: result.error.is_none(),
        output: result.text,
        tool_calls: result.tool_calls,
        usage: result.usage,
        error: result.error.map(|(c, m)| format!("{c}: {m}")),
        status: status_view(status),
    })
}
