//! The sandbox request for one call of a tool: its keyword arguments,
//! checked against the tool's declared inputs and configuration and
//! completed with their defaults (shared by `POST /api/tools/test` and the
//! agent runtime).

use super::ExecRequest;
use crate::error::Error;
use serde_json::Value;
use std::collections::BTreeMap;
use workspace_api::tools::{ParamSpec, ParamType, Tool};

/// Whether `value` is a JSON value of the parameter type.
pub fn value_matches(t: ParamType, value: &Value) -> bool {
    match t {
        ParamType::Str => value.is_string(),
        ParamType::Bool => value.is_boolean(),
        ParamType::Int => value.is_i64() || value.is_u64(),
        ParamType::Float => value.is_number(),
        ParamType::List => value.is_array(),
        ParamType::Dict => value.is_object(),
    }
}

/// Parses a textual `default` as its type.
pub fn parse_default(t: ParamType, text: &str) -> Option<Value> {
    match t {
        ParamType::Str => Some(Value::String(text.to_string())),
        ParamType::Bool => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ParamType::Int => text.trim().parse::<i64>().ok().map(Value::from),
        ParamType::Float => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::from),
        ParamType::List => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_array),
        ParamType::Dict => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object),
    }
}

fn invalid_input(message: String) -> Error {
    Error::invalid("invalid_input", message)
}

/// Checks `given` against the specs and fills in defaults: the keyword
/// arguments of a call.
pub fn bind_args(
    specs: &[ParamSpec],
    given: &BTreeMap<String, Value>,
    what: &str,
    args: &mut serde_json::Map<String, Value>,
) -> Result<(), Error> {
    if let Some(unknown) = given.keys().find(|k| !specs.iter().any(|s| &s.name == *k)) {
        return Err(invalid_input(format!(
            "the tool has no {what} named {unknown}"
        )));
    }
    for spec in specs {
        match given.get(&spec.name) {
            Some(v) if !v.is_null() => {
                if !value_matches(spec.type_, v) {
                    return Err(invalid_input(format!(
                        "{what} {} must be of type {:?}",
                        spec.name, spec.type_
                    )));
                }
                args.insert(spec.name.clone(), v.clone());
            }
            _ => match spec
                .default
                .as_deref()
                .and_then(|d| parse_default(spec.type_, d))
            {
                Some(d) => {
                    args.insert(spec.name.clone(), d);
                }
                None if spec.required => {
                    return Err(invalid_input(format!("{what} {} is required", spec.name)));
                }
                None => {
                    args.insert(spec.name.clone(), Value::Null);
                }
            },
        }
    }
    Ok(())
}

/// The sandbox request for a call of `tool` with `inputs` and `config`.
pub fn exec_request(
    tool: &Tool,
    inputs: &BTreeMap<String, Value>,
    config: &BTreeMap<String, Value>,
) -> Result<ExecRequest, Error> {
    if !tool.is_active {
        return Err(Error::invalid("tool_inactive", "the tool is not active"));
    }
    let mut args = serde_json::Map::new();
    bind_args(&tool.inputs, inputs, "input", &mut args)?;
    bind_args(
        &tool.configuration,
        config,
        "configuration value",
        &mut args,
    )?;
    Ok(ExecRequest {
        code: tool.settings.function_info.code.clone(),
        function: tool.settings.function_info.name.clone(),
        args,
        requirements: tool.settings.requirements.clone(),
    })
}
