//! Tool categories and tools: validation, visibility, and running a tool
//! in the sandbox.

use crate::authn::Actor;
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::tools::{CategoryRow, ToolFields, ToolFieldsOwned, ToolRow};
use crate::error::Error;
use crate::sandbox::call::{exec_request, parse_default};
use crate::sandbox::{BwrapExecutor, ToolExecutor};
use serde_json::Value;
use std::collections::HashSet;
use uuid::Uuid;
use workspace_api::tools::{
    CategoryCreate, CategoryUpdate, NamedRef, ParamSpec, SuccessResponse, TOOLS_DEFAULT_LIMIT,
    TOOLS_MAX_LIMIT, Tool, ToolCategory, ToolCreate, ToolCreated, ToolListItem, ToolListQuery,
    ToolOutputs, ToolSettings, ToolTestRequest, ToolTestResult, ToolUpdate, ToolUpdated,
};

/// Whose items a list shows: one organization's (plus public tools), or
/// those of every organization where the caller may read tools.
pub enum ListScope {
    Org(Box<Grant<on::Org, perm::ToolRead>>),
    User(Actor),
}

pub const NAME_MAX: usize = 100;
pub const DESCRIPTION_MAX: usize = 2000;
pub const PARAMS_MAX: usize = 50;
pub const CODE_MAX: usize = 100_000;
pub const REQUIREMENTS_MAX: usize = 50;

pub fn page(limit: Option<u32>, offset: Option<u32>) -> Result<(i64, i64), Error> {
    let limit = limit.unwrap_or(TOOLS_DEFAULT_LIMIT);
    if !(1..=TOOLS_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {TOOLS_MAX_LIMIT}"),
        ));
    }
    Ok((i64::from(limit), i64::from(offset.unwrap_or(0))))
}

pub fn valid_name(name: &str) -> Result<&str, Error> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX {
        return Err(Error::invalid(
            "invalid_name",
            format!("the name must be 1 to {NAME_MAX} characters"),
        ));
    }
    Ok(name)
}

pub fn valid_description(d: &str) -> Result<&str, Error> {
    if d.chars().count() > DESCRIPTION_MAX {
        return Err(Error::invalid(
            "invalid_description",
            format!("the description must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(d)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= 64
}

fn validate_params(what: &str, params: &[ParamSpec]) -> Result<(), Error> {
    if params.len() > PARAMS_MAX {
        return Err(Error::invalid(
            "invalid_parameter",
            format!("at most {PARAMS_MAX} {what} parameters"),
        ));
    }
    let mut seen = HashSet::new();
    for p in params {
        if !is_identifier(&p.name) {
            return Err(Error::invalid(
                "invalid_parameter",
                format!("{what} parameter {:?} is not a Python identifier", p.name),
            ));
        }
        if p.description.chars().count() > DESCRIPTION_MAX {
            return Err(Error::invalid(
                "invalid_parameter",
                format!("the description of {what} parameter {} is too long", p.name),
            ));
        }
        if !seen.insert(p.name.as_str()) {
            return Err(Error::invalid(
                "duplicate_parameter",
                format!("two {what} parameters are named {}", p.name),
            ));
        }
        if let Some(d) = &p.default
            && (d.chars().count() > 10_000 || parse_default(p.type_, d).is_none())
        {
            return Err(Error::invalid(
                "invalid_default",
                format!(
                    "the default of {what} parameter {} does not parse as {:?}",
                    p.name, p.type_
                ),
            ));
        }
    }
    Ok(())
}

fn validate_settings(s: &ToolSettings) -> Result<(), Error> {
    let f = &s.function_info;
    if f.code.trim().is_empty() {
        return Err(Error::invalid(
            "empty_code",
            "settings.function_info.code is empty",
        ));
    }
    if f.code.chars().count() > CODE_MAX {
        return Err(Error::invalid(
            "invalid_code",
            format!("the code must be at most {CODE_MAX} characters"),
        ));
    }
    if !is_identifier(&f.name) {
        return Err(Error::invalid(
            "invalid_function",
            "settings.function_info.name must be a Python identifier",
        ));
    }
    valid_description(&f.description)?;
    if s.requirements.len() > REQUIREMENTS_MAX
        || s.requirements.iter().any(|r| {
            let r = r.trim();
            r.is_empty()
                || r.len() > 200
                || !r.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                || !r
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.[]<>=!~, ".contains(c))
        })
    {
        return Err(Error::invalid(
            "invalid_requirement",
            format!(
                "at most {REQUIREMENTS_MAX} package names (letters, digits, - _ . and version specifiers)"
            ),
        ));
    }
    if s.deployment.framework.chars().count() > 64 {
        return Err(Error::invalid(
            "invalid_request",
            "deployment.framework is too long",
        ));
    }
    Ok(())
}

fn validate_tool(
    version: &str,
    logo_url: Option<&str>,
    configuration: &[ParamSpec],
    inputs: &[ParamSpec],
    outputs: &ToolOutputs,
    settings: &ToolSettings,
) -> Result<(), Error> {
    let v = version.trim();
    if v.is_empty() || v.chars().count() > 32 {
        return Err(Error::invalid(
            "invalid_version",
            "the version must be 1 to 32 characters",
        ));
    }
    if let Some(url) = logo_url
        && (url.chars().count() > 2000
            || !(url.starts_with("https://") || url.starts_with("http://")))
    {
        return Err(Error::invalid(
            "invalid_logo_url",
            "logo_url must be an http(s) URL of at most 2,000 characters",
        ));
    }
    validate_params("input", inputs)?;
    validate_params("configuration", configuration)?;
    if let Some(p) = configuration
        .iter()
        .find(|c| inputs.iter().any(|i| i.name == c.name))
    {
        return Err(Error::invalid(
            "duplicate_parameter",
            format!("{} is both an input and a configuration value", p.name),
        ));
    }
    if outputs.type_.chars().count() > 64 || outputs.description.chars().count() > DESCRIPTION_MAX {
        return Err(Error::invalid(
            "invalid_request",
            "outputs.type or outputs.description is too long",
        ));
    }
    validate_settings(settings)
}

/// PostgreSQL's `jsonb` cannot hold NUL characters: refuse them up front.
pub fn no_nul<T: serde::Serialize>(v: &T) -> Result<(), Error> {
    let text = serde_json::to_string(v).unwrap_or_default();
    if text.contains("\\u0000") {
        return Err(Error::invalid(
            "invalid_request",
            "text must not contain NUL characters",
        ));
    }
    Ok(())
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("API types serialise")
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, Error> {
    serde_json::from_value(v.clone()).map_err(|e| Error::internal(format!("stored tool JSON: {e}")))
}

fn category_view(r: CategoryRow) -> ToolCategory {
    ToolCategory {
        id: r.id,
        name: r.name,
        description: r.description,
        org_id: r.org_id,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

pub fn tool_view(r: ToolRow) -> Result<Tool, Error> {
    tool_view_ref(&r)
}

pub fn tool_view_ref(r: &ToolRow) -> Result<Tool, Error> {
    Ok(Tool {
        id: r.id,
        name: r.name.clone(),
        description: r.description.clone(),
        category_id: r.category_id,
        category: NamedRef {
            id: r.category_id,
            name: r.category_name.clone(),
        },
        is_active: r.is_active,
        version: r.version.clone(),
        logo_url: r.logo_url.clone(),
        is_public: r.is_public,
        configuration: parse(&r.configuration)?,
        inputs: parse(&r.inputs)?,
        outputs: parse(&r.outputs)?,
        settings: parse(&r.settings)?,
        org_id: r.org_id,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

fn list_item(r: ToolRow) -> Result<ToolListItem, Error> {
    Ok(ToolListItem {
        id: r.id,
        name: r.name,
        description: r.description,
        category: NamedRef {
            id: r.category_id,
            name: r.category_name,
        },
        is_active: r.is_active,
        version: r.version,
        logo_url: r.logo_url,
        is_public: r.is_public,
        configuration: parse(&r.configuration)?,
        inputs: parse(&r.inputs)?,
        outputs: parse(&r.outputs)?,
        org_id: r.org_id,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

pub async fn list_categories(
    cx: &ServerContext,
    scope: ListScope,
    q: ToolListQuery,
) -> Result<Vec<ToolCategory>, Error> {
    let (limit, offset) = page(q.limit, q.offset)?;
    let rows = match scope {
        ListScope::Org(access) => {
            cx.datastore
                .category_list_org(&access, limit, offset)
                .await?
        }
        ListScope::User(actor) => {
            cx.datastore
                .category_list_user(&actor, limit, offset)
                .await?
        }
    };
    Ok(rows.into_iter().map(category_view).collect())
}

pub async fn create_category(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ToolWrite>,
    body: CategoryCreate,
) -> Result<ToolCategory, Error> {
    let name = valid_name(&body.name)?;
    let description = valid_description(&body.description)?;
    Ok(category_view(
        cx.datastore
            .category_create(grant, name, description)
            .await?,
    ))
}

pub async fn update_category(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ToolWrite>,
    id: Uuid,
    body: CategoryUpdate,
) -> Result<ToolCategory, Error> {
    let name = body.name.as_deref().map(valid_name).transpose()?;
    let description = body
        .description
        .as_deref()
        .map(valid_description)
        .transpose()?;
    Ok(category_view(
        cx.datastore
            .category_update(grant, id, name, description)
            .await?,
    ))
}

pub async fn delete_category(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ToolDelete>,
    id: Uuid,
) -> Result<SuccessResponse, Error> {
    cx.datastore.category_delete(grant, id).await?;
    Ok(SuccessResponse {
        success: true,
        message: "category deleted".into(),
    })
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ToolWrite>,
    body: ToolCreate,
) -> Result<ToolCreated, Error> {
    no_nul(&body)?;
    let name = valid_name(&body.name)?;
    let description = valid_description(&body.description)?;
    validate_tool(
        &body.version,
        body.logo_url.as_deref(),
        &body.configuration,
        &body.inputs,
        &body.outputs,
        &body.settings,
    )?;
    let row = cx
        .datastore
        .tool_create(
            grant,
            &ToolFields {
                category_id: body.category_id,
                name,
                description,
                is_active: body.is_active.unwrap_or(true),
                version: body.version.trim(),
                logo_url: body.logo_url.as_deref(),
                is_public: body.is_public.unwrap_or(false),
                configuration: json(&body.configuration),
                inputs: json(&body.inputs),
                outputs: json(&body.outputs),
                settings: json(&body.settings),
            },
        )
        .await?;
    Ok(ToolCreated {
        id: row.id,
        name: row.name,
        description: row.description,
        category_id: row.category_id,
        is_active: row.is_active,
        version: row.version,
        logo_url: row.logo_url,
        is_public: row.is_public,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

pub async fn list_all(
    cx: &ServerContext,
    scope: ListScope,
    q: ToolListQuery,
) -> Result<Vec<ToolListItem>, Error> {
    let (limit, offset) = page(q.limit, q.offset)?;
    let rows = match scope {
        ListScope::Org(access) => cx.datastore.tool_list_org(&access, limit, offset).await?,
        ListScope::User(actor) => cx.datastore.tool_list_user(&actor, limit, offset).await?,
    };
    rows.into_iter().map(list_item).collect()
}

pub async fn update(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ToolWrite>,
    id: Uuid,
    body: ToolUpdate,
) -> Result<ToolUpdated, Error> {
    no_nul(&body)?;
    let row = cx
        .datastore
        .tool_update(grant, id, |current| {
            let current = tool_view_ref(current)?;
            let name = match &body.name {
                Some(n) => valid_name(n)?.to_string(),
                None => current.name,
            };
            let description = match &body.description {
                Some(d) => valid_description(d)?.to_string(),
                None => current.description,
            };
            let version = body.version.clone().unwrap_or(current.version);
            let logo_url = body.logo_url.clone().or(current.logo_url);
            let configuration = body.configuration.clone().unwrap_or(current.configuration);
            let inputs = body.inputs.clone().unwrap_or(current.inputs);
            let outputs = body.outputs.clone().unwrap_or(current.outputs);
            let settings = body.settings.clone().unwrap_or(current.settings);
            validate_tool(
                &version,
                logo_url.as_deref(),
                &configuration,
                &inputs,
                &outputs,
                &settings,
            )?;
            Ok(ToolFieldsOwned {
                category_id: body.category_id.unwrap_or(current.category_id),
                name,
                description,
                is_active: body.is_active.unwrap_or(current.is_active),
                version: version.trim().to_string(),
                logo_url,
                is_public: body.is_public.unwrap_or(current.is_public),
                configuration: json(&configuration),
                inputs: json(&inputs),
                outputs: json(&outputs),
                settings: json(&settings),
            })
        })
        .await?;
    Ok(ToolUpdated {
        id: row.id,
        name: row.name,
        description: row.description,
        is_active: row.is_active,
        category_id: row.category_id,
        version: row.version,
        logo_url: row.logo_url,
        is_public: row.is_public,
        updated_at: row.updated_at,
    })
}

pub async fn get(cx: &ServerContext, access: &OrgAccess, id: Uuid) -> Result<Tool, Error> {
    tool_view(cx.datastore.tool_get_visible(access, id).await?)
}

pub async fn delete(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ToolDelete>,
    id: Uuid,
) -> Result<SuccessResponse, Error> {
    cx.datastore.tool_delete(grant, id).await?;
    Ok(SuccessResponse {
        success: true,
        message: "tool deleted".into(),
    })
}

/// The sandbox executor of this server's configuration.
pub fn executor(cx: &ServerContext) -> BwrapExecutor {
    let config = &cx.config;
    let data_dir = config
        .database
        .data_dir
        .clone()
        .unwrap_or_else(workspace_embedded_db::data_root);
    let protected = [
        Some(data_dir),
        config.storage.local_dir.clone(),
        config.source.clone(),
    ]
    .into_iter()
    .flatten()
    .collect();
    BwrapExecutor {
        config: config.sandbox.clone(),
        protected,
    }
}

pub async fn test(
    cx: &ServerContext,
    access: &OrgAccess,
    id: Uuid,
    body: ToolTestRequest,
) -> Result<ToolTestResult, Error> {
    let tool = tool_view(cx.datastore.tool_get_visible(access, id).await?)?;
    let request = exec_request(&tool, &body.inputs, &body.configuration.unwrap_or_default())?;
    let outcome = executor(cx).execute(&request).await?;
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    slog::info!(access.log(), "tool test run"; "tool_id" => %id, "duration_ms" => duration_ms,
        "success" => outcome.result.is_ok());
    Ok(match outcome.result {
        Ok(output) => ToolTestResult {
            success: true,
            output: Some(output),
            error: None,
            duration_ms,
        },
        Err(f) => ToolTestResult {
            success: false,
            output: None,
            error: Some(f.to_string()),
            duration_ms,
        },
    })
}
