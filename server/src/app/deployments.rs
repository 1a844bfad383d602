//! Agent deployments: validation, keys, views, and the OpenAI-compatible
//! invocation surface (`/api/agent_deploy/v1`), which runs the agent
//! through the agent runtime.

use crate::app::agents::{Collected, collect, run_spec_with_tools};
use crate::authz::{DeploymentAccess, Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::agents::{AgentRow, AgentToolRow};
use crate::db::datastore::deployments::{DeploymentChanges, DeploymentRow, NewDeployment};
use crate::db::enums::{AgentStatus, DeploymentChannel as DbChannel, DeploymentStatus as DbStatus};
use crate::error::Error;
use crate::providers::ChatMessage;
use base64::Engine;
use chrono::Utc;
use uuid::Uuid;
use workspace_api::deployments::{
    ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChunkChoice, ChunkDelta,
    CompletionChoice, CompletionMessage, CompletionUsage, Deployment, DeploymentChannel,
    DeploymentCreate, DeploymentStatus, DeploymentUpdate, DeploymentUsage, DeploymentWithKey,
    KEY_PREFIX, ORIGINS_MAX, OpenAiHttpError, OpenAiModel, OpenAiModelList, RATE_LIMIT_DEFAULT,
    RATE_LIMIT_MAX,
};
use workspace_api::tools::SuccessResponse;

/// A new key and its SHA-256 (the only form stored).
fn new_key() -> (String, Vec<u8>) {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    let key = format!(
        "{KEY_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = crate::authn::hash_secret(&key);
    (key, hash)
}

/// What identifies a key in views: the prefix and 6 characters.
fn key_prefix(key: &str) -> String {
    key.chars().take(KEY_PREFIX.len() + 6).collect()
}

fn channel_db(c: DeploymentChannel) -> DbChannel {
    match c {
        DeploymentChannel::Widget => DbChannel::Widget,
        DeploymentChannel::Api => DbChannel::Api,
        DeploymentChannel::Sdk => DbChannel::Sdk,
        DeploymentChannel::Iframe => DbChannel::Iframe,
    }
}

fn channel_view(c: DbChannel) -> DeploymentChannel {
    match c {
        DbChannel::Widget => DeploymentChannel::Widget,
        DbChannel::Api => DeploymentChannel::Api,
        DbChannel::Sdk => DeploymentChannel::Sdk,
        DbChannel::Iframe => DeploymentChannel::Iframe,
    }
}

fn check_name(name: &str) -> Result<String, Error> {
    let name = name.trim();
    let n = name.chars().count();
    if n == 0 || n > 100 {
        return Err(Error::invalid(
            "invalid_name",
            "the name must be 1 to 100 characters",
        ));
    }
    Ok(name.to_string())
}

fn check_description(d: &str) -> Result<String, Error> {
    if d.chars().count() > 2000 {
        return Err(Error::invalid(
            "invalid_description",
            "the description is at most 2,000 characters",
        ));
    }
    Ok(d.to_string())
}

/// Normalises origins (`scheme://host[:port]`, lowercase, no path).
fn check_origins(origins: &[String]) -> Result<Vec<String>, Error> {
    if origins.len() > ORIGINS_MAX {
        return Err(Error::invalid(
            "invalid_origins",
            "at most 20 allowed origins",
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for o in origins {
        let bad = || {
            Error::invalid(
                "invalid_origins",
                format!("{o:?} is not a web origin (scheme://host[:port])"),
            )
        };
        let url = reqwest::Url::parse(o).map_err(|_| bad())?;
        if !matches!(url.scheme(), "http" | "https")
            || url.host_str().is_none()
            || !matches!(url.path(), "" | "/")
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
        {
            return Err(bad());
        }
        let origin = url.origin().ascii_serialization();
        if !out.contains(&origin) {
            out.push(origin);
        }
    }
    Ok(out)
}

fn check_rate(r: u32) -> Result<i32, Error> {
    if r == 0 || r > RATE_LIMIT_MAX {
        return Err(Error::invalid(
            "invalid_rate_limit",
            "rate_limit_per_minute is 1 to 100,000",
        ));
    }
    Ok(r as i32)
}

fn check_expiry(at: chrono::DateTime<Utc>) -> Result<chrono::DateTime<Utc>, Error> {
    if at <= Utc::now() {
        return Err(Error::invalid(
            "invalid_expiry",
            "expires_at must be in the future",
        ));
    }
    Ok(at)
}

/// The base URL of the OpenAI-compatible surface, for `embed`.
fn api_base(cx: &ServerContext) -> String {
    let base = cx
        .config
        .files
        .public_base_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", cx.config.bind_address));
    format!("{}/api/agent_deploy/v1", base.trim_end_matches('/'))
}

fn embed(cx: &ServerContext, row: &DeploymentRow) -> String {
    let api = api_base(cx);
    let frontend = cx.config.mail.link_base();
    match row.channel {
        DbChannel::Widget => format!(
            "<script src=\"{frontend}/widget.js\" data-api-base=\"{api}\" \
             data-deployment-id=\"{}\" data-api-key=\"$WORKSPACE_DEPLOYMENT_KEY\" defer></script>",
            row.id
        ),
        DbChannel::Iframe => format!(
            "<iframe src=\"{frontend}/embed/agent?deployment_id={}&api_base={api}\" \
             title=\"{}\" style=\"border:0;width:100%;height:600px\" \
             allow=\"clipboard-write\"></iframe>",
            row.id,
            row.name.replace('"', "&quot;")
        ),
        DbChannel::Api | DbChannel::Sdk => format!(
            "curl {api}/chat/completions -H \"Authorization: Bearer $WORKSPACE_DEPLOYMENT_KEY\" \
             -H 'Content-Type: application/json' \
             -d '{{\"model\":\"agent-{}\",\"messages\":[{{\"role\":\"user\",\"content\":\"Hello\"}}]}}'",
            row.agent_id
        ),
    }
}

fn view(cx: &ServerContext, row: DeploymentRow) -> Deployment {
    Deployment {
        embed: embed(cx, &row),
        id: row.id,
        agent_id: row.agent_id,
        org_id: row.org_id,
        name: row.name,
        description: row.description,
        channel: channel_view(row.channel),
        status: match row.status {
            DbStatus::Active => DeploymentStatus::Active,
            DbStatus::Paused => DeploymentStatus::Paused,
        },
        allowed_origins: row.allowed_origins,
        rate_limit_per_minute: u32::try_from(row.rate_limit_per_minute).unwrap_or(0),
        key_prefix: row.key_prefix,
        expires_at: row.key_expires_at,
        last_used_at: row.last_used_at,
        usage: DeploymentUsage {
            requests: row.request_count,
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
        },
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Agent, perm::AgentWrite>,
    body: DeploymentCreate,
) -> Result<DeploymentWithKey, Error> {
    let agent_id = grant.id();
    let name = check_name(&body.name)?;
    let description = check_description(body.description.as_deref().unwrap_or_default())?;
    let allowed_origins = check_origins(body.allowed_origins.as_deref().unwrap_or_default())?;
    if matches!(
        body.channel,
        DeploymentChannel::Widget | DeploymentChannel::Iframe
    ) && allowed_origins.is_empty()
    {
        return Err(Error::invalid(
            "invalid_origins",
            "widget and iframe deployments need at least one allowed origin",
        ));
    }
    let rate = check_rate(body.rate_limit_per_minute.unwrap_or(RATE_LIMIT_DEFAULT))?;
    let expires = body.expires_at.map(check_expiry).transpose()?;
    let (key, hash) = new_key();
    let row = cx
        .datastore
        .deployment_create(
            grant,
            NewDeployment {
                name,
                description,
                channel: channel_db(body.channel),
                allowed_origins,
                rate_limit_per_minute: rate,
                key_prefix: key_prefix(&key),
                key_hash: hash,
                key_expires_at: expires,
            },
        )
        .await?;
    slog::info!(grant.log(), "deployment created"; "deployment_id" => row.id.to_string(),
        "agent_id" => agent_id.to_string());
    Ok(DeploymentWithKey {
        deployment: view(cx, row),
        api_key: key,
    })
}

pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    agent_id: Uuid,
) -> Result<Vec<Deployment>, Error> {
    Ok(cx
        .datastore
        .deployment_list(access, agent_id)
        .await?
        .into_iter()
        .map(|r| view(cx, r))
        .collect())
}

pub async fn get(cx: &ServerContext, access: &OrgAccess, id: Uuid) -> Result<Deployment, Error> {
    Ok(view(cx, cx.datastore.deployment_get(access, id).await?))
}

pub async fn update(
    cx: &ServerContext,
    grant: &Grant<on::Deployment, perm::AgentWrite>,
    body: DeploymentUpdate,
) -> Result<Deployment, Error> {
    let id = grant.id();
    let current = cx.datastore.deployment_get(grant, id).await?;
    let allowed_origins = body
        .allowed_origins
        .as_deref()
        .map(check_origins)
        .transpose()?;
    if let Some(origins) = &allowed_origins
        && origins.is_empty()
        && matches!(current.channel, DbChannel::Widget | DbChannel::Iframe)
    {
        return Err(Error::invalid(
            "invalid_origins",
            "widget and iframe deployments need at least one allowed origin",
        ));
    }
    if body.clear_expiry == Some(true) && body.expires_at.is_some() {
        return Err(Error::invalid(
            "invalid_expiry",
            "give either expires_at or clear_expiry",
        ));
    }
    let changes = DeploymentChanges {
        name: body.name.as_deref().map(check_name).transpose()?,
        description: body
            .description
            .as_deref()
            .map(check_description)
            .transpose()?,
        allowed_origins,
        rate_limit_per_minute: body.rate_limit_per_minute.map(check_rate).transpose()?,
        status: body.status.map(|s| match s {
            DeploymentStatus::Active => DbStatus::Active,
            DeploymentStatus::Paused => DbStatus::Paused,
        }),
        key_expires_at: if body.clear_expiry == Some(true) {
            Some(None)
        } else {
            body.expires_at.map(check_expiry).transpose()?.map(Some)
        },
    };
    Ok(view(
        cx,
        cx.datastore.deployment_update(grant, changes).await?,
    ))
}

pub async fn delete(
    cx: &ServerContext,
    grant: &Grant<on::Deployment, perm::AgentDelete>,
) -> Result<SuccessResponse, Error> {
    cx.datastore.deployment_delete(grant).await?;
    Ok(SuccessResponse {
        success: true,
        message: "deployment deleted".into(),
    })
}

pub async fn regenerate_key(
    cx: &ServerContext,
    grant: &Grant<on::Deployment, perm::AgentWrite>,
) -> Result<DeploymentWithKey, Error> {
    let id = grant.id();
    let (key, hash) = new_key();
    let row = cx
        .datastore
        .deployment_rekey(grant, &hash, &key_prefix(&key))
        .await?;
    slog::info!(grant.log(), "deployment key regenerated"; "deployment_id" => id.to_string());
    Ok(DeploymentWithKey {
        deployment: view(cx, row),
        api_key: key,
    })
}

// ---- The OpenAI-compatible surface ----

/// A request authenticated by a deployment key.
pub struct KeyCaller {
    /// What the key grants (the datastore's reads take it).
    pub access: DeploymentAccess,
    pub deployment: DeploymentRow,
    /// The request's `Origin`, when it is an allowed one (for CORS).
    pub cors_origin: Option<String>,
    /// The key's agent and its tools, read with the rate limit's count
    /// for a chat completion ([`KeyUse::Completion`]).
    pub agent: Option<(AgentRow, Vec<AgentToolRow>)>,
    /// The agent is `deployed`: this request is among its first, which
    /// make it `active` (the spec's "start receiving requests").
    pub first_use: bool,
}

/// What a deployment key is used for: a chat completion reads its agent
/// in the round trip that counts the request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    Models,
    Completion,
}

fn openai_error(e: Error) -> OpenAiHttpError {
    let http: dropshot::HttpError = e.into();
    http.into()
}

/// Authenticates a deployment key (`Authorization: Bearer` or
/// `X-API-Key`), checks the browser origin and the rate limit, and records
/// the use. The caller's one authorization step for the v1 operations.
pub async fn authenticate_key(
    cx: &ServerContext,
    headers: &http::HeaderMap,
    purpose: KeyUse,
) -> Result<KeyCaller, OpenAiHttpError> {
    let unauthorized = || {
        OpenAiHttpError::new(
            401,
            "invalid_api_key",
            "a valid deployment key is required (Authorization: Bearer wsk_live_…)",
        )
    };
    let origin = headers
        .get(http::header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(|o| o.trim_end_matches('/').to_ascii_lowercase());
    // The key, the rate limit's count and a completion's agent: one round
    // trip.
    let (access, admitted) = cx
        .authorize_deployment_key(headers, origin.as_deref(), purpose == KeyUse::Completion)
        .await
        .map_err(openai_error)?
        .ok_or_else(unauthorized)?;
    let deployment = admitted.deployment;
    let cors_origin = match origin {
        None => None,
        Some(o) if deployment.allowed_origins.contains(&o) => Some(o),
        Some(o) => {
            return Err(OpenAiHttpError::new(
                403,
                "origin_not_allowed",
                format!("origin {o} is not allowed to use this deployment"),
            ));
        }
    };
    // Not counted for an allowed origin: the key was revoked between the
    // statements.
    let count = admitted.hit.ok_or_else(unauthorized)?;
    let agent = admitted.agent;
    let first_use = admitted.agent_status == Some(AgentStatus::Deployed);
    // The limit holds over a sliding minute (see `super::rate_limits`).
    let limit = u32::try_from(deployment.rate_limit_per_minute).unwrap_or(0);
    if let Some(retry_after_secs) = super::rate_limits::over_limit(&count, 60, limit) {
        let mut e = OpenAiHttpError::new(
            429,
            "rate_limited",
            format!(
                "this deployment allows {} requests per minute; retry in {retry_after_secs} s",
                deployment.rate_limit_per_minute
            ),
        );
        e.retry_after = Some(retry_after_secs);
        return Err(e);
    }
    // A chat completion is counted by `chat_completions` (with its
    // tokens, when not streamed).
    if purpose == KeyUse::Models {
        if first_use {
            cx.datastore
                .deployment_activate(&access)
                .await
                .map_err(openai_error)?;
        }
        cx.usage.count_deployment_use(&access, 1, 0, 0);
    }
    Ok(KeyCaller {
        access,
        deployment,
        cors_origin,
        agent,
        first_use,
    })
}

fn model_name(agent_id: Uuid) -> String {
    format!("agent-{agent_id}")
}

fn with_cors(
    mut builder: http::response::Builder,
    origin: &Option<String>,
) -> http::response::Builder {
    if let Some(o) = origin {
        builder = builder
            .header("access-control-allow-origin", o.as_str())
            .header("vary", "Origin");
    }
    builder
}

fn json_response<T: serde::Serialize>(
    value: &T,
    origin: &Option<String>,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let body = serde_json::to_vec(value)
        .map_err(|_| OpenAiHttpError::new(500, "internal_error", "internal error"))?;
    with_cors(http::Response::builder().status(200), origin)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(dropshot::Body::from(body))
        .map_err(|_| OpenAiHttpError::new(500, "internal_error", "internal error"))
}

pub async fn models(
    cx: &ServerContext,
    caller: KeyCaller,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let d = &caller.deployment;
    let _ = cx;
    json_response(
        &OpenAiModelList {
            object: "list".into(),
            data: vec![OpenAiModel {
                id: model_name(d.agent_id),
                object: "model".into(),
                created: d.created_at.timestamp(),
                owned_by: d.org_id.to_string(),
            }],
        },
        &caller.cors_origin,
    )
}

/// What OpenAI refuses, refused as OpenAI does: `400
/// invalid_request_error` naming the parameter, with OpenAI's codes.
fn check_ranges(body: &ChatCompletionRequest) -> Result<(), OpenAiHttpError> {
    let refuse = |param: &str, code: &str, message: String| {
        let mut e = OpenAiHttpError::new(400, code, message);
        e.error.param = Some(param.to_string());
        e
    };
    if let Some(t) = body.temperature {
        if t > 2.0 {
            return Err(refuse(
                "temperature",
                "decimal_above_max_value",
                format!(
                    "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got {t} instead."
                ),
            ));
        }
        if t < 0.0 {
            return Err(refuse(
                "temperature",
                "decimal_below_min_value",
                format!(
                    "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got {t} instead."
                ),
            ));
        }
    }
    for (param, value) in [
        ("max_tokens", body.max_tokens),
        ("max_completion_tokens", body.max_completion_tokens),
    ] {
        if value == Some(0) {
            return Err(refuse(
                param,
                "integer_below_min_value",
                format!(
                    "Invalid '{param}': integer below minimum value. Expected a value >= 1, but got 0 instead."
                ),
            ));
        }
    }
    Ok(())
}

pub async fn chat_completions(
    cx: &ServerContext,
    caller: KeyCaller,
    body: ChatCompletionRequest,
    log: &slog::Logger,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    // The spec's "start receiving requests": a `deployed` agent (as read
    // with the key) is `active` before its first answer.
    if caller.first_use {
        cx.datastore
            .deployment_activate(&caller.access)
            .await
            .map_err(openai_error)?;
    }
    // Counted by the usage writer (see `crate::usage`): a streamed
    // completion now, its tokens when it ends; one not streamed when
    // answered, with its tokens. Every admitted request is, whatever its
    // answer.
    if body.stream == Some(true) {
        cx.usage.count_deployment_use(&caller.access, 1, 0, 0);
        return complete(cx, caller, body, log, &mut None).await;
    }
    let access = caller.access.clone();
    let mut used = None;
    let result = complete(cx, caller, body, log, &mut used).await;
    let used = used.unwrap_or_default();
    cx.usage.count_deployment_use(
        &access,
        1,
        i64::try_from(used.input_tokens).unwrap_or(i64::MAX),
        i64::try_from(used.output_tokens).unwrap_or(i64::MAX),
    );
    result
}

/// Answers a chat completion; a completion not streamed leaves the tokens
/// it used in `used`.
async fn complete(
    cx: &ServerContext,
    mut caller: KeyCaller,
    body: ChatCompletionRequest,
    log: &slog::Logger,
    used: &mut Option<workspace_api::agents::RunUsage>,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let d = &caller.deployment;
    let invalid = |m: &str| OpenAiHttpError::new(400, "invalid_messages", m);
    if body.messages.is_empty() || body.messages.len() > 200 {
        return Err(invalid("messages must hold 1 to 200 messages"));
    }
    let mut system = Vec::new();
    let mut history = Vec::new();
    for m in &body.messages {
        let text = m.content.as_ref().map(|c| c.text()).unwrap_or_default();
        if text.chars().count() > 100_000 {
            return Err(invalid("a message is over 100,000 characters"));
        }
        match m.role.as_str() {
            "system" | "developer" => system.push(text),
            "user" => history.push(ChatMessage::user(text)),
            "assistant" => history.push(ChatMessage::assistant(text)),
            "tool" | "function" => {}
            other => {
                return Err(invalid(&format!("unknown message role {other:?}")));
            }
        }
    }
    check_ranges(&body)?;
    let last_is_user = body.messages.last().is_some_and(|m| m.role == "user");
    if !last_is_user {
        return Err(invalid("the last message must be a user message"));
    }
    let (agent, tools) = match caller.agent.take() {
        Some(read) => read,
        None => {
            let agent = cx
                .datastore
                .agent_get(&caller.access, caller.access.agent_id())
                .await
                .map_err(openai_error)?;
            let tools = cx
                .datastore
                .agent_tools(&caller.access, agent.id)
                .await
                .map_err(openai_error)?;
            (agent, tools)
        }
    };
    let mut spec = run_spec_with_tools(cx, &caller.access, &agent, tools, history, log)
        .await
        .map_err(|e| match e {
            Error::InvalidRequest { message, .. } => {
                OpenAiHttpError::new(503, "agent_unavailable", message)
            }
            other => openai_error(other),
        })?;
    if !system.is_empty() {
        spec.system_prompt = format!("{}\n\n{}", spec.system_prompt, system.join("\n\n"))
            .trim()
            .to_string();
    }
    if let Some(t) = body.temperature {
        spec.temperature = Some(t.clamp(0.0, 1.0) as f32);
    }
    let cap = body.max_completion_tokens.or(body.max_tokens);
    if let Some(cap) = cap {
        spec.max_tokens = Some(spec.max_tokens.map_or(cap, |m| m.min(cap)).max(1));
    }
    // The budgets of the organization and of this deployment's key:
    // `429 budget_exceeded` in OpenAI's shape, with `Retry-After`.
    crate::app::usage::meter(
        cx,
        crate::app::usage::deployment(&caller.access),
        "deployment",
        &mut spec,
    )
    .await
    .map_err(|e| match e {
        Error::TooManyRequests {
            code,
            message,
            retry_after_secs,
        } => {
            let mut e = OpenAiHttpError::new(429, code, message);
            e.retry_after = Some(retry_after_secs);
            e
        }
        other => openai_error(other),
    })?;
    let id = format!("chatcmpl-{}", Uuid::new_v4().simple());
    let created = Utc::now().timestamp();
    let model = model_name(d.agent_id);
    if body.stream == Some(true) {
        return stream(cx, caller, spec, id, created, model, log);
    }
    // Nothing is passed on before the end: the provider may answer each
    // step in one piece.
    spec.whole = true;
    let Collected {
        text,
        reasoning,
        usage,
        error,
        ..
    } = crate::runtime::run_here(spec, collect).await;
    let (input_tokens, output_tokens, total_tokens) =
        (usage.input_tokens, usage.output_tokens, usage.total_tokens);
    *used = Some(usage);
    if let Some((code, message)) = error {
        return Err(OpenAiHttpError::new(502, &code, message));
    }
    json_response(
        &ChatCompletion {
            id,
            object: "chat.completion".into(),
            created,
            model,
            choices: vec![CompletionChoice {
                index: 0,
                message: CompletionMessage {
                    role: "assistant".into(),
                    content: text,
                    reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
                },
                finish_reason: "stop".into(),
            }],
            usage: CompletionUsage {
                prompt_tokens: input_tokens,
                completion_tokens: output_tokens,
                total_tokens,
            },
        },
        &caller.cors_origin,
    )
}

fn chunk(id: &str, created: i64, model: &str, delta: ChunkDelta, finish: Option<&str>) -> String {
    let chunk = ChatCompletionChunk {
        id: id.to_string(),
        object: "chat.completion.chunk".to_string(),
        created,
        model: model.to_string(),
        choices: vec![ChunkChoice {
            index: 0,
            delta,
            finish_reason: finish.map(str::to_string),
        }],
        usage: None,
    };
    sse_data(&chunk)
}

/// One `data:` event.
fn sse_data(value: &impl serde::Serialize) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "{}".to_string());
    format!("data: {json}\n\n")
}

/// Streams OpenAI `chat.completion.chunk`s, then `data: [DONE]` (a direct
/// answer of the pipeline: the run stops when the client goes away; the
/// tokens used are added to the deployment's usage either way).
fn stream(
    cx: &ServerContext,
    caller: KeyCaller,
    spec: crate::runtime::RunSpec,
    id: String,
    created: i64,
    model: String,
    log: &slog::Logger,
) -> Result<http::Response<dropshot::Body>, OpenAiHttpError> {
    let area = CompletionStream {
        usage: cx.usage.clone(),
        access: caller.access.clone(),
        id,
        created,
        model,
    };
    let first = area.chunk(
        ChunkDelta {
            role: Some("assistant".to_string()),
            content: Some(String::new()),
            reasoning_content: None,
        },
        None,
    );
    // A deployment key is no membership: nothing to watch.
    let (mut answer, rx) = crate::app::answer::Answer::direct(cx, area, 64, None, log.clone());
    crate::telemetry::spawn(async move {
        if answer.emit(first).await {
            answer.run(spec).await;
        }
    });
    let builder = with_cors(http::Response::builder().status(200), &caller.cors_origin)
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no");
    crate::sse::raw_response(builder, rx)
        .map_err(|_| OpenAiHttpError::new(500, "internal_error", "internal error"))
}

/// A streamed completion, as the answer pipeline sees it: its events are
/// whole SSE frames of `chat.completion.chunk`s.
struct CompletionStream {
    usage: crate::usage::UsageRecorder,
    access: DeploymentAccess,
    id: String,
    created: i64,
    model: String,
}

impl CompletionStream {
    fn chunk(&self, delta: ChunkDelta, finish: Option<&str>) -> String {
        chunk(&self.id, self.created, &self.model, delta, finish)
    }
}

#[async_trait::async_trait]
impl crate::app::answer::Area for CompletionStream {
    type Event = String;

    fn content(&self, piece: String) -> String {
        self.chunk(
            ChunkDelta {
                role: None,
                content: Some(piece),
                reasoning_content: None,
            },
            None,
        )
    }

    fn reasoning(&self, piece: String) -> Option<String> {
        Some(self.chunk(
            ChunkDelta {
                role: None,
                content: None,
                reasoning_content: Some(piece),
            },
            None,
        ))
    }

    /// Adds the tokens used to the deployment's counters (by the usage
    /// writer).
    async fn store(
        &self,
        _text: &str,
        _reasoning: &str,
        _route: &[workspace_api::chat::AnswerRoute],
        usage: Option<crate::providers::Usage>,
        _outcome: &crate::app::answer::Outcome,
    ) -> Result<(), Error> {
        let usage = usage.unwrap_or_default();
        self.usage.count_deployment_use(
            &self.access,
            0,
            i64::from(usage.input_tokens),
            i64::from(usage.output_tokens),
        );
        Ok(())
    }

    /// The stream does not wait for the usage to be recorded.
    fn store_wait(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// `finish_reason: stop`, the usage chunk and `[DONE]`; or the error
    /// as an OpenAI error object.
    async fn close(
        &self,
        out: &mut crate::app::answer::Out<String>,
        outcome: crate::app::answer::Outcome,
        _stored: crate::app::answer::Stored,
        usage: Option<crate::providers::Usage>,
    ) {
        use crate::app::answer::Outcome;
        match outcome {
            Outcome::Complete => {
                out.emit(self.chunk(ChunkDelta::default(), Some("stop")))
                    .await;
                let usage = usage.unwrap_or_default();
                let last = ChatCompletionChunk {
                    id: self.id.clone(),
                    object: "chat.completion.chunk".to_string(),
                    created: self.created,
                    model: self.model.clone(),
                    choices: Vec::new(),
                    usage: Some(CompletionUsage {
                        prompt_tokens: u64::from(usage.input_tokens),
                        completion_tokens: u64::from(usage.output_tokens),
                        total_tokens: u64::from(usage.total_tokens()),
                    }),
                };
                out.emit(sse_data(&last)).await;
                out.emit("data: [DONE]\n\n".to_string()).await;
            }
            Outcome::Gone => {}
            other => {
                let (code, message) = other.error().unwrap_or_else(|| {
                    ("internal_error".to_string(), "the answer ended".to_string())
                });
                let e = OpenAiHttpError::new(502, &code, message);
                let body = serde_json::json!({"error": e.error});
                out.emit(format!("data: {body}\n\n")).await;
            }
        }
    }
}

/// A CORS preflight answer for the v1 operations.
pub fn preflight(
    headers: &http::HeaderMap,
) -> Result<http::Response<dropshot::Body>, dropshot::HttpError> {
    let mut builder = http::Response::builder().status(204);
    if let Some(origin) = headers
        .get(http::header::ORIGIN)
        .and_then(|v| v.to_str().ok())
    {
        builder = builder
            .header("access-control-allow-origin", origin)
            .header("access-control-allow-methods", "GET, POST, OPTIONS")
            .header(
                "access-control-allow-headers",
                "authorization, x-api-key, content-type",
            )
            .header("access-control-max-age", "600")
            .header("vary", "Origin");
    }
    builder
        .body(dropshot::Body::empty())
        .map_err(|e| dropshot::HttpError::for_internal_error(format!("preflight: {e}")))
}
