//! Patches the document dropshot generates with what the API trait cannot
//! express. The facts come from [`crate::operations`]; this module only
//! writes them into the document.

use crate::operations::{CHAT_EXPORT_OPERATIONS, CHAT_STREAM_EVENTS, CHAT_STREAMING_OPERATIONS};
use crate::operations::{
    DEPLOYMENT_KEY_OPERATIONS, PUBLIC_OPERATIONS, QUERY_DEFAULTS, SCIM_ANSWERS, SCIM_BODIES,
    SCIM_OPERATIONS, STREAM_EVENTS, STREAMED_JSON_OPERATIONS, STREAMING_OPERATIONS, error_statuses,
};
use openapiv3::{
    AnySchema, Discriminator, Header, HeaderStyle, MediaType, OpenAPI, Operation, Parameter,
    ParameterSchemaOrContent, ReferenceOr, Response, Schema, SchemaKind, SecurityRequirement,
    SecurityScheme, Server, StatusCode, Type,
};

/// The address the server listens on by default (`bind_address`).
const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

fn schema_ref(name: &str) -> ReferenceOr<Schema> {
    ReferenceOr::Reference {
        reference: format!("#/components/schemas/{name}"),
    }
}

/// Adds the schema of `T` (and of the types it refers to) to the document's
/// components, generated like dropshot generates its own.
fn add_schema<T: schemars::JsonSchema>(doc: &mut OpenAPI) {
    let mut generator = schemars::r#gen::SchemaSettings::openapi3().into_generator();
    let root = generator.subschema_for::<T>();
    let mut schemas: Vec<(String, schemars::schema::Schema)> =
        generator.take_definitions().into_iter().collect();
    if let schemars::schema::Schema::Object(o) = &root
        && o.reference.is_none()
    {
        schemas.push((T::schema_name(), root));
    }
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, schema) in schemas {
        let mut value = serde_json::to_value(&schema).expect("a schemars schema serialises");
        any_value_schemas(&mut value);
        nullable_reference_schemas(&mut value);
        let schema: Schema = serde_json::from_value(value.clone()).unwrap_or_else(|e| {
            panic!("the schema of {name} is not an OpenAPI 3.0 schema ({e}): {value}")
        });
        components
            .schemas
            .entry(name)
            .or_insert(ReferenceOr::Item(schema));
    }
}

/// Schemars writes a nullable reference (an `Option<T>` field of a named
/// type) as `{"$ref", "nullable": true}`, whose `nullable` OpenAPI 3.0
/// ignores beside `$ref`; dropshot writes `{"allOf": [{"$ref"}],
/// "nullable": true}`, as this does.
fn nullable_reference_schemas(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            // A reference is a string; an object under `$ref` is a
            // property named `$ref` (SCIM's), not a reference.
            if map.len() > 1
                && map.get("$ref").is_some_and(Value::is_string)
                && let Some(reference) = map.remove("$ref")
            {
                map.insert(
                    "allOf".to_string(),
                    Value::Array(vec![serde_json::json!({ "$ref": reference })]),
                );
            }
            map.values_mut().for_each(nullable_reference_schemas);
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_reference_schemas),
        _ => {}
    }
}

/// Schemars writes the schema of any JSON value (`serde_json::Value`) as
/// `true`, which OpenAPI 3.0 spells `{}` (as dropshot does).
fn any_value_schemas(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "properties" {
                    if let Value::Object(props) = v {
                        for p in props.values_mut() {
                            if *p == Value::Bool(true) {
                                *p = Value::Object(Default::default());
                            }
                        }
                    }
                } else if key == "items" && *v == Value::Bool(true) {
                    *v = Value::Object(Default::default());
                }
                any_value_schemas(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(any_value_schemas),
        _ => {}
    }
}

/// Turns the `oneOf` of an internally tagged enum (each variant an inline
/// object whose `tag` property is a one-value string enum) into named
/// variant schemas `<Name><Variant>` with a discriminator on `tag`, so code
/// generators can narrow on it.
fn name_tagged_variants(doc: &mut OpenAPI, name: &str, tag: &str) {
    let components = doc.components.as_mut().expect("components exist");
    let Some(ReferenceOr::Item(schema)) = components.schemas.get_mut(name) else {
        panic!("{name} is an inline schema");
    };
    let SchemaKind::OneOf { one_of } = &mut schema.schema_kind else {
        panic!("{name} is a oneOf");
    };
    let mut mapping: Vec<(String, String, Schema)> = Vec::new();
    for variant in one_of.iter_mut() {
        let ReferenceOr::Item(item) = variant else {
            continue;
        };
        let SchemaKind::Type(Type::Object(object)) = &item.schema_kind else {
            panic!("a variant of {name} is an object");
        };
        let Some(ReferenceOr::Item(tag_schema)) = object.properties.get(tag) else {
            panic!("a variant of {name} has a `{tag}` property");
        };
        let SchemaKind::Type(Type::String(tag_type)) = &tag_schema.schema_kind else {
            panic!("`{tag}` of {name} is a string");
        };
        let [Some(value)] = tag_type.enumeration.as_slice() else {
            panic!("`{tag}` of {name} has one value");
        };
        let value = value.clone();
        let mut pascal = String::new();
        for part in value.split('_') {
            let mut chars = part.chars();
            if let Some(first) = chars.next() {
                pascal.extend(first.to_uppercase());
                pascal.push_str(chars.as_str());
            }
        }
        let variant_name = format!("{name}{pascal}");
        let ReferenceOr::Item(item) = std::mem::replace(variant, schema_ref(&variant_name)) else {
            unreachable!()
        };
        mapping.push((value, variant_name, item));
    }
    schema.schema_data.discriminator = Some(Discriminator {
        property_name: tag.to_string(),
        mapping: mapping
            .iter()
            .map(|(value, variant, _)| (value.clone(), format!("#/components/schemas/{variant}")))
            .collect(),
        extensions: Default::default(),
    });
    for (_, variant, item) in mapping {
        components.schemas.insert(variant, ReferenceOr::Item(item));
    }
}

/// OpenAPI 3.0 requires `type` beside `nullable`. Schemars writes a nullable
/// reference as `{nullable: true, allOf: [$ref]}`; give it the referenced
/// schema's type (progenitor still reads it as `Option<T>`).
fn type_nullable_references(doc: &mut OpenAPI) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let types: std::collections::HashMap<String, &'static str> = components
        .schemas
        .iter()
        .filter_map(|(name, schema)| {
            let typ = match &schema.as_item()?.schema_kind {
                SchemaKind::Type(Type::Object(_)) | SchemaKind::OneOf { .. } => "object",
                SchemaKind::Type(Type::String(_)) => "string",
                _ => return None,
            };
            Some((format!("#/components/schemas/{name}"), typ))
        })
        .collect();
    fn visit(schema: &mut Schema, types: &std::collections::HashMap<String, &'static str>) {
        match &mut schema.schema_kind {
            SchemaKind::AllOf { all_of } if schema.schema_data.nullable => {
                if let [ReferenceOr::Reference { reference }] = all_of.as_slice()
                    && let Some(typ) = types.get(reference)
                {
                    schema.schema_kind = SchemaKind::Any(AnySchema {
                        typ: Some(typ.to_string()),
                        all_of: all_of.clone(),
                        ..Default::default()
                    });
                }
            }
            SchemaKind::Type(Type::Object(object)) => {
                for property in object.properties.values_mut() {
                    if let ReferenceOr::Item(property) = property {
                        visit(property, types);
                    }
                }
            }
            SchemaKind::Type(Type::Array(array)) => {
                if let Some(ReferenceOr::Item(items)) = &mut array.items {
                    visit(items, types);
                }
            }
            SchemaKind::OneOf { one_of: list }
            | SchemaKind::AnyOf { any_of: list }
            | SchemaKind::AllOf { all_of: list } => {
                for item in list.iter_mut() {
                    if let ReferenceOr::Item(item) = item {
                        visit(item, types);
                    }
                }
            }
            _ => {}
        }
    }
    for schema in components.schemas.values_mut() {
        if let ReferenceOr::Item(schema) = schema {
            visit(schema, &types);
        }
    }
}

/// Query parameters: a parameter is absent or has a value (`null` cannot
/// be sent in a query string, so `nullable` from `Option<T>` fields says
/// nothing), and optional ones get their [`QUERY_DEFAULTS`].
fn patch_query_parameters(id: &str, op: &mut Operation) {
    for parameter in &mut op.parameters {
        if let ReferenceOr::Item(Parameter::Query { parameter_data, .. }) = parameter
            && let ParameterSchemaOrContent::Schema(ReferenceOr::Item(schema)) =
                &mut parameter_data.format
        {
            schema.schema_data.nullable = false;
            if let Some((_, _, value)) = QUERY_DEFAULTS
                .iter()
                .find(|(op_id, name, _)| *op_id == id && *name == parameter_data.name)
            {
                schema.schema_data.default = Some((*value).into());
            }
        }
    }
}

fn header_ref(name: &str) -> ReferenceOr<Header> {
    ReferenceOr::Reference {
        reference: format!("#/components/headers/{name}"),
    }
}

fn header(description: &str, schema: Type) -> ReferenceOr<Header> {
    ReferenceOr::Item(Header {
        description: Some(description.to_string()),
        style: HeaderStyle::Simple,
        required: true,
        deprecated: None,
        format: ParameterSchemaOrContent::Schema(ReferenceOr::Item(Schema {
            schema_data: Default::default(),
            schema_kind: SchemaKind::Type(schema),
        })),
        example: None,
        examples: Default::default(),
        extensions: Default::default(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad request",
        401 => "Not authenticated",
        403 => "Forbidden",
        402 => "Payment required",
        404 => "Not found",
        408 => "Request timeout",
        409 => "Conflict",
        410 => "Gone",
        412 => "Precondition failed",
        413 => "Payload too large",
        415 => "Unsupported media type",
        422 => "Unprocessable",
        429 => "Too many requests",
        500 => "Internal error",
        501 => "Not implemented",
        502 => "The model provider failed",
        503 => "Service unavailable",
        _ => panic!("no reason phrase for {status}: add one"),
    }
}

/// The success responses of the OpenAI-compatible operations and of their
/// CORS preflights (their handlers build raw responses).
fn patch_deployment_responses(id: &str, op: &mut Operation) {
    let json = |schema: &str| MediaType {
        schema: Some(schema_ref(schema)),
        ..Default::default()
    };
    let mut response = match id {
        "deployments_chat_completions" => {
            let mut r = Response {
                description: "`stream: false`: a `chat.completion` object. `stream: true`: \
                    Server-Sent Events, each `data: <ChatCompletionChunk JSON>` (OpenAI's \
                    `chat.completion.chunk`), ending with `data: [DONE]`."
                    .to_string(),
                ..Default::default()
            };
            r.content
                .insert("application/json".to_string(), json("ChatCompletion"));
            r.content
                .insert("text/event-stream".to_string(), json("ChatCompletionChunk"));
            r
        }
        "deployments_models" => {
            let mut r = Response {
                description: "The deployment's model.".to_string(),
                ..Default::default()
            };
            r.content
                .insert("application/json".to_string(), json("OpenAiModelList"));
            r
        }
        "deployments_chat_completions_preflight" | "deployments_models_preflight" => Response {
            description: "The preflight is answered, allowing the request's `Origin`.".to_string(),
            ..Default::default()
        },
        _ => return,
    };
    let status = if id.ends_with("_preflight") { 204 } else { 200 };
    response.extensions = Default::default();
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(status), ReferenceOr::Item(response));
}

/// The `200` of the operations whose handlers stream one JSON document
/// ([`STREAMED_JSON_OPERATIONS`]).
fn patch_streamed_json(id: &str, op: &mut Operation) {
    let Some((_, schema)) = STREAMED_JSON_OPERATIONS.iter().find(|(o, _)| *o == id) else {
        return;
    };
    let mut response = Response {
        description: format!("One `{schema}` JSON document, streamed as it is read."),
        ..Default::default()
    };
    response.content.insert(
        "application/json".to_string(),
        MediaType {
            schema: Some(schema_ref(schema)),
            ..Default::default()
        },
    );
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(200), ReferenceOr::Item(response));
}

/// The `200` of the chat exports ([`CHAT_EXPORT_OPERATIONS`]): a
/// `ChatExportDocument`, or Markdown text.
fn patch_chat_export(id: &str, op: &mut Operation) {
    if !CHAT_EXPORT_OPERATIONS.contains(&id) {
        return;
    }
    let mut response = Response {
        description: "With `format=json` (the default) one `ChatExportDocument` JSON \
                      document, with `format=markdown` Markdown text; streamed as it is \
                      read, with `Content-Disposition: attachment`."
            .to_string(),
        ..Default::default()
    };
    response.content.insert(
        "application/json".to_string(),
        MediaType {
            schema: Some(schema_ref("ChatExportDocument")),
            ..Default::default()
        },
    );
    response.content.insert(
        "text/markdown".to_string(),
        MediaType {
            schema: Some(ReferenceOr::Item(Schema {
                schema_data: Default::default(),
                schema_kind: SchemaKind::Type(Type::String(Default::default())),
            })),
            ..Default::default()
        },
    );
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(200), ReferenceOr::Item(response));
}

/// A SCIM operation's body and success answer (`application/scim+json`,
/// see [`SCIM_BODIES`] and [`SCIM_ANSWERS`]).
fn patch_scim(id: &str, op: &mut Operation) {
    if id == "scim_search" {
        // Always `501` (declared with the errors).
        op.responses.default = None;
        return;
    }
    let Some((_, status, schema)) = SCIM_ANSWERS.iter().find(|(o, _, _)| *o == id) else {
        return;
    };
    let scim_json = |schema: &str| MediaType {
        schema: Some(schema_ref(schema)),
        ..Default::default()
    };
    if let Some((_, body_schema)) = SCIM_BODIES.iter().find(|(o, _)| *o == id)
        && let Some(ReferenceOr::Item(body)) = op.request_body.as_mut()
    {
        body.content.clear();
        body.content
            .insert("application/scim+json".to_string(), scim_json(body_schema));
        body.content
            .insert("application/json".to_string(), scim_json(body_schema));
        body.required = true;
    }
    let mut response = Response {
        description: match status {
            201 => "Created: the resource, with its `ETag` and `Location`.".to_string(),
            204 => "Deleted.".to_string(),
            _ => "The answer (`application/scim+json`).".to_string(),
        },
        ..Default::default()
    };
    if let Some(schema) = schema {
        response
            .content
            .insert("application/scim+json".to_string(), scim_json(schema));
    }
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(*status), ReferenceOr::Item(response));
    if matches!(id, "scim_users_get" | "scim_groups_get") {
        op.responses.responses.insert(
            StatusCode::Code(304),
            ReferenceOr::Item(Response {
                description: "Not modified: `If-None-Match` names the current version.".to_string(),
                ..Default::default()
            }),
        );
    }
}

/// A SCIM error answer: a `ScimError` (`application/scim+json`).
fn scim_error_response(status: u16, scim_types: &[&str]) -> ReferenceOr<Response> {
    let types = if scim_types.is_empty() {
        String::new()
    } else {
        format!(
            " `scimType`: {}.",
            scim_types
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut response = Response {
        description: format!("{}.{types}", reason(status)),
        ..Default::default()
    };
    response.content.insert(
        "application/scim+json".to_string(),
        MediaType {
            schema: Some(schema_ref("ScimError")),
            ..Default::default()
        },
    );
    if status == 401 {
        response.headers.insert(
            "WWW-Authenticate".to_string(),
            header_ref("WwwAuthenticate"),
        );
    }
    ReferenceOr::Item(response)
}

fn error_response(status: u16, codes: &[&str], schema: &str) -> ReferenceOr<Response> {
    let codes = codes
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = Response {
        description: format!("{}. `error_code`: {codes}.", reason(status)),
        ..Default::default()
    };
    response.content.insert(
        "application/json".to_string(),
        MediaType {
            schema: Some(schema_ref(schema)),
            ..Default::default()
        },
    );
    match status {
        401 => {
            response.headers.insert(
                "WWW-Authenticate".to_string(),
                header_ref("WwwAuthenticate"),
            );
        }
        429 => {
            response
                .headers
                .insert("Retry-After".to_string(), header_ref("RetryAfter"));
        }
        // Sent with `server_busy`, not with the other `503` codes.
        503 => {
            response
                .headers
                .insert("Retry-After".to_string(), header_ref("RetryAfterWhenBusy"));
        }
        _ => {}
    }
    ReferenceOr::Item(response)
}

/// The Error schema dropshot emits, made precise: the server always sends
/// `error_code` (see `server/src/error.rs`).
fn patch_error_schema(doc: &mut OpenAPI) {
    let components = doc.components.as_mut().expect("components exist");
    let Some(ReferenceOr::Item(error)) = components.schemas.get_mut("Error") else {
        panic!("dropshot defines the Error schema");
    };
    error.schema_data.description = Some(
        "The body of every error response. `error_code` is stable (match on it); \
         `message` is for people."
            .to_string(),
    );
    let SchemaKind::Type(Type::Object(object)) = &mut error.schema_kind else {
        panic!("Error is an object");
    };
    for (name, description) in [
        (
            "error_code",
            "A stable snake_case code; each response lists the codes it can carry.",
        ),
        (
            "message",
            "A lowercase sentence for people; never internals.",
        ),
        (
            "request_id",
            "The request's id, as logged by the server (also in the `x-request-id` header).",
        ),
    ] {
        if let Some(ReferenceOr::Item(property)) = object.properties.get_mut(name) {
            property.schema_data.description = Some(description.to_string());
        }
    }
    object.required = vec![
        "error_code".to_string(),
        "message".to_string(),
        "request_id".to_string(),
    ];
    // Replaced by the per-status responses.
    components.responses.shift_remove("Error");
    components.headers.insert(
        "RetryAfter".to_string(),
        header(
            "Seconds to wait before retrying.",
            Type::Integer(openapiv3::IntegerType {
                minimum: Some(1),
                ..Default::default()
            }),
        ),
    );
    let mut when_busy = header(
        "Seconds to wait before retrying; sent with `server_busy`.",
        Type::Integer(openapiv3::IntegerType {
            minimum: Some(1),
            ..Default::default()
        }),
    );
    if let ReferenceOr::Item(h) = &mut when_busy {
        h.required = false;
    }
    components
        .headers
        .insert("RetryAfterWhenBusy".to_string(), when_busy);
    components.headers.insert(
        "WwwAuthenticate".to_string(),
        header(
            "The authentication scheme: always `Bearer`.",
            Type::String(Default::default()),
        ),
    );
}

pub(crate) fn patch_document(doc: &mut OpenAPI) {
    doc.servers = vec![Server {
        url: DEFAULT_SERVER.to_string(),
        description: Some(
            // Plain text: Redoc shows a server's description as typed.
            "A local server on the default bind address; deployments serve the same \
             paths at their own base URL."
                .to_string(),
        ),
        variables: None,
        extensions: Default::default(),
    }];
    if let Some(license) = doc.info.license.as_mut() {
        license.url = Some("https://www.mozilla.org/en-US/MPL/2.0/".to_string());
    }

    let components = doc.components.get_or_insert_with(Default::default);
    components.security_schemes.insert(
        "bearer".to_string(),
        ReferenceOr::Item(SecurityScheme::HTTP {
            scheme: "bearer".to_string(),
            bearer_format: Some("JWT".to_string()),
            description: Some("The `access_token` returned by `POST /api/auth/login`.".into()),
            extensions: Default::default(),
        }),
    );
    components.security_schemes.insert(
        "deploymentKey".to_string(),
        ReferenceOr::Item(SecurityScheme::HTTP {
            scheme: "bearer".to_string(),
            bearer_format: Some("wsk_live_…".to_string()),
            description: Some(
                "A deployment's `api_key` (`POST /api/agent_deploy/create`), for the \
                 OpenAI-compatible operations only; `X-API-Key: <key>` works too."
                    .into(),
            ),
            extensions: Default::default(),
        }),
    );
    components.security_schemes.insert(
        "scimToken".to_string(),
        ReferenceOr::Item(SecurityScheme::HTTP {
            scheme: "bearer".to_string(),
            bearer_format: Some("wscim_…".to_string()),
            description: Some(
                "An organization's SCIM token (`POST /api/org/scim/token`), for the \
                 SCIM service (`/scim/v2`) only."
                    .into(),
            ),
            extensions: Default::default(),
        }),
    );
    let scim_token: SecurityRequirement = [("scimToken".to_string(), Vec::new())]
        .into_iter()
        .collect();
    let deployment_key: SecurityRequirement = [("deploymentKey".to_string(), Vec::new())]
        .into_iter()
        .collect();
    let bearer: SecurityRequirement = [("bearer".to_string(), Vec::new())].into_iter().collect();
    doc.security = Some(vec![bearer]);

    patch_error_schema(doc);
    add_schema::<crate::conversations::ConversationStreamEvent>(doc);
    add_schema::<crate::deployments::ChatCompletion>(doc);
    add_schema::<crate::deployments::ChatCompletionChunk>(doc);
    add_schema::<crate::deployments::OpenAiModelList>(doc);
    add_schema::<crate::deployments::OpenAiHttpError>(doc);
    name_tagged_variants(doc, STREAM_EVENTS, "type");
    add_schema::<crate::chat::ChatStreamEvent>(doc);
    name_tagged_variants(doc, CHAT_STREAM_EVENTS, "type");
    // The frames of the chat WebSocket (`chat_ws`), for frontends.
    add_schema::<crate::chat::ChatLiveEvent>(doc);
    name_tagged_variants(doc, "ChatLiveEvent", "type");
    add_schema::<crate::kb::KbQueryStreamEvent>(doc);
    add_schema::<crate::users::AccountExport>(doc);
    add_schema::<crate::chat_transfer::ChatExportDocument>(doc);
    add_schema::<crate::scim::ScimUser>(doc);
    add_schema::<crate::scim::ScimGroup>(doc);
    add_schema::<crate::scim::ScimListResponse>(doc);
    add_schema::<crate::scim::ScimPatchRequest>(doc);
    add_schema::<crate::scim::ScimError>(doc);
    add_schema::<crate::scim::ScimServiceProviderConfig>(doc);
    add_schema::<crate::scim::ScimResourceType>(doc);
    add_schema::<crate::scim::ScimSchema>(doc);
    name_tagged_variants(doc, "KbQueryStreamEvent", "type");
    type_nullable_references(doc);

    for (_, path_item) in doc.paths.paths.iter_mut() {
        let ReferenceOr::Item(item) = path_item else {
            continue;
        };
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for op in ops.into_iter().flatten() {
            let Some(id) = op.operation_id.clone() else {
                continue;
            };
            let id = id.as_str();
            if PUBLIC_OPERATIONS.contains(&id) {
                op.security = Some(Vec::new());
            }
            let schema = if DEPLOYMENT_KEY_OPERATIONS.contains(&id) {
                op.security = Some(vec![deployment_key.clone()]);
                "OpenAiError"
            } else if SCIM_OPERATIONS.contains(&id) {
                op.security = Some(vec![scim_token.clone()]);
                "ScimError"
            } else {
                "Error"
            };
            patch_query_parameters(id, op);
            let events = if STREAMING_OPERATIONS.contains(&id) {
                Some(STREAM_EVENTS)
            } else if CHAT_STREAMING_OPERATIONS.contains(&id) {
                Some(CHAT_STREAM_EVENTS)
            } else {
                None
            };
            if let Some(events) = events {
                let mut response = Response {
                    description: format!(
                        "A Server-Sent Events stream: each event is a line \
                         `data: <json>` followed by a blank line, the JSON being a \
                         `{events}`; in resumable streams an `id: N` line (the \
                         event's number, for `Last-Event-ID`) precedes it."
                    ),
                    ..Default::default()
                };
                response.content.insert(
                    "text/event-stream".to_string(),
                    MediaType {
                        schema: Some(schema_ref(events)),
                        ..Default::default()
                    },
                );
                op.responses.default = None;
                op.responses
                    .responses
                    .insert(StatusCode::Code(200), ReferenceOr::Item(response));
            }
            patch_deployment_responses(id, op);
            patch_streamed_json(id, op);
            patch_chat_export(id, op);
            patch_scim(id, op);
            let has_input = !op.parameters.is_empty() || op.request_body.is_some();
            let has_body = op.request_body.is_some();
            let statuses = error_statuses(id, has_input, has_body)
                .unwrap_or_else(|| panic!("{id} is missing from OPERATION_ERRORS"));
            op.responses
                .responses
                .retain(|status, _| matches!(status, StatusCode::Code(200..=399)));
            for (status, codes) in statuses {
                // A body that does not arrive in time is answered by the
                // server's body reader, in the API's own error shape.
                let response = match (schema, status) {
                    ("ScimError", 408) => error_response(status, &codes, "Error"),
                    ("ScimError", _) => scim_error_response(status, &codes),
                    _ => error_response(status, &codes, schema),
                };
                op.responses
                    .responses
                    .insert(StatusCode::Code(status), response);
            }
            // Every answer, errors included (`http.server_timing`).
            for (_, response) in op.responses.responses.iter_mut() {
                if let ReferenceOr::Item(response) = response {
                    response
                        .headers
                        .insert("Server-Timing".to_string(), header_ref("ServerTiming"));
                }
            }
        }
    }
    let components = doc.components.get_or_insert_with(Default::default);
    let mut server_timing = header(
        "W3C Server Timing: `app;dur=<milliseconds>`, the time the server took from \
         the request's arrival to this answer's head (a streamed body goes on after \
         it). Sent unless the server's `http.server_timing` is off; a page on an \
         allowed origin may read it (`Timing-Allow-Origin`).",
        Type::String(Default::default()),
    );
    if let ReferenceOr::Item(h) = &mut server_timing {
        h.required = false;
    }
    components
        .headers
        .insert("ServerTiming".to_string(), server_timing);
}

#[cfg(test)]
mod tests {
    use crate::conversations::ConversationStreamEvent;
    use crate::operations::{
        DATABASE_FREE_OPERATIONS, MULTIPART_OPERATIONS, OPERATION_ERRORS, PUBLIC_OPERATIONS,
        QUERY_DEFAULTS, STREAM_EVENTS, STREAMED_JSON_OPERATIONS, STREAMING_OPERATIONS,
    };
    use openapiv3::{OpenAPI, ReferenceOr, Schema, SchemaKind, Type};
    use serde_json::{Value, json};

    fn operation_ids(doc: &OpenAPI) -> Vec<String> {
        doc.paths
            .paths
            .values()
            .flat_map(|item| {
                item.as_item()
                    .unwrap()
                    .iter()
                    .map(|(_, op)| op.operation_id.clone().unwrap())
            })
            .collect()
    }

    fn component<'a>(doc: &'a OpenAPI, name: &str) -> &'a Schema {
        doc.components.as_ref().unwrap().schemas[name]
            .as_item()
            .unwrap()
    }

    /// Checks that `value` has every required property of the object schema
    /// `name` and no property it does not declare.
    fn assert_shape(doc: &OpenAPI, name: &str, value: &Value) {
        let SchemaKind::Type(Type::Object(object)) = &component(doc, name).schema_kind else {
            panic!("{name} is an object");
        };
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        for required in &object.required {
            assert!(
                keys.contains(&required),
                "{name}: {required} missing in {value}"
            );
        }
        for key in keys {
            assert!(
                object.properties.contains_key(key),
                "{name}: {key} undeclared"
            );
        }
    }

    #[test]
    fn operation_lists_name_real_operations() {
        let doc = crate::openapi_document();
        let ids = operation_ids(&doc);
        let table: Vec<&str> = OPERATION_ERRORS.iter().map(|(id, _)| *id).collect();
        for id in &ids {
            assert_eq!(
                table.iter().filter(|t| **t == id.as_str()).count(),
                1,
                "{id}: one row in OPERATION_ERRORS"
            );
        }
        let listed = table
            .iter()
            .chain(PUBLIC_OPERATIONS)
            .chain(STREAMING_OPERATIONS)
            .chain(MULTIPART_OPERATIONS)
            .chain(DATABASE_FREE_OPERATIONS)
            .chain(crate::operations::CHAT_EXPORT_OPERATIONS)
            .copied()
            .chain(QUERY_DEFAULTS.iter().map(|(id, _, _)| *id))
            .chain(STREAMED_JSON_OPERATIONS.iter().map(|(id, _)| *id));
        for id in listed {
            assert!(ids.iter().any(|i| i == id), "{id} is no operation");
        }
    }

    /// The events the server sends (it serialises these very types) match
    /// the published schemas, variant by variant.
    #[test]
    fn stream_events_match_their_schemas() {
        let doc = crate::openapi_document();
        let schema = component(&doc, STREAM_EVENTS);
        let mapping = &schema.schema_data.discriminator.as_ref().unwrap().mapping;
        let events = [
            (
                ConversationStreamEvent::Start {
                    message_id: "0b4f".into(),
                },
                json!({"type": "start", "message_id": "0b4f"}),
            ),
            (
                ConversationStreamEvent::Content {
                    content: "Hel".into(),
                },
                json!({"type": "content", "content": "Hel"}),
            ),
            (
                ConversationStreamEvent::Reasoning {
                    content: "Thinking".into(),
                },
                json!({"type": "reasoning", "content": "Thinking"}),
            ),
            (
                ConversationStreamEvent::Route {
                    model: "chat-main".into(),
                    deployment: "east".into(),
                    reason: "failover".into(),
                },
                json!({"type": "route", "model": "chat-main", "deployment": "east",
                       "reason": "failover"}),
            ),
            (
                ConversationStreamEvent::Restart {
                    reason: "the deployment broke off".into(),
                },
                json!({"type": "restart", "reason": "the deployment broke off"}),
            ),
            (ConversationStreamEvent::End, json!({"type": "end"})),
            (
                ConversationStreamEvent::Error {
                    error_code: "provider_timeout".into(),
                    message: "the model did not answer in time".into(),
                },
                json!({
                    "type": "error",
                    "error_code": "provider_timeout",
                    "message": "the model did not answer in time"
                }),
            ),
        ];
        assert_eq!(mapping.len(), events.len());
        for (event, wire) in events {
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(value, wire);
            let tag = value["type"].as_str().unwrap();
            let variant = mapping[tag].trim_start_matches("#/components/schemas/");
            assert_shape(&doc, variant, &value);
        }
        // And the streaming operations reference the event schema.
        for (_, item) in &doc.paths.paths {
            for (_, op) in item.as_item().unwrap().iter() {
                if STREAMING_OPERATIONS.contains(&op.operation_id.as_deref().unwrap()) {
                    let ok = op.responses.responses[&openapiv3::StatusCode::Code(200)]
                        .as_item()
                        .unwrap();
                    let schema = ok.content["text/event-stream"].schema.as_ref().unwrap();
                    // `kb_query` adds a `sources` event to the vocabulary.
                    let events = if op.operation_id.as_deref() == Some("kb_query") {
                        "KbQueryStreamEvent"
                    } else {
                        STREAM_EVENTS
                    };
                    assert!(matches!(schema, ReferenceOr::Reference { reference }
                        if reference.ends_with(&format!("/{events}"))));
                }
            }
        }
    }

    /// Required nullable fields are sent as `null`, not left out.
    #[test]
    fn nullable_fields_are_sent_as_null() {
        let doc = crate::openapi_document();
        let pending = crate::users::UserListItem {
            id: None,
            email: "bob@example.com".into(),
            first_name: String::new(),
            last_name: String::new(),
            full_name: String::new(),
            status: crate::users::UserListStatus::Pending,
            invite_id: Some(uuid::Uuid::nil()),
            invited_at: Some(chrono::Utc::now()),
            last_active_at: None,
            organizations: Vec::new(),
        };
        let value = serde_json::to_value(&pending).unwrap();
        assert_eq!(value["id"], Value::Null);
        assert_eq!(value["last_active_at"], Value::Null);
        assert_shape(&doc, "UserListItem", &value);
        let invalid = crate::invitations::InvitationValidation {
            valid: false,
            invitation: None,
            existing_account: false,
        };
        let value = serde_json::to_value(&invalid).unwrap();
        assert_eq!(
            value,
            json!({"valid": false, "invitation": null, "existing_account": false})
        );
        assert_shape(&doc, "InvitationValidation", &value);
    }

    /// Every property that is nullable in a response schema is required
    /// (present, possibly null): the server never leaves such fields out.
    /// Request schemas may keep optional nullable fields.
    fn request_schemas(doc: &openapiv3::OpenAPI) -> std::collections::BTreeSet<String> {
        // Every schema name reachable from a request body, found through
        // the `$ref`s of the JSON text.
        let schemas = &doc.components.as_ref().unwrap().schemas;
        let refs = |value: &serde_json::Value| -> Vec<String> {
            let text = value.to_string();
            text.split("#/components/schemas/")
                .skip(1)
                .filter_map(|rest| rest.split('"').next().map(str::to_string))
                .collect()
        };
        let mut todo: Vec<String> = Vec::new();
        for (_, item) in doc.paths.iter() {
            let item = serde_json::to_value(item).unwrap();
            for op in item.as_object().unwrap().values() {
                if let Some(body) = op.get("requestBody") {
                    todo.extend(refs(body));
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        while let Some(name) = todo.pop() {
            if seen.insert(name.clone())
                && let Some(schema) = schemas.get(&name)
            {
                todo.extend(refs(&serde_json::to_value(schema).unwrap()));
            }
        }
        seen
    }

    #[test]
    fn nullable_response_properties_are_required() {
        let doc = crate::openapi_document();
        let request_side = request_schemas(&doc);
        for (name, schema) in &doc.components.as_ref().unwrap().schemas {
            // Schemas that request bodies use (also when responses echo
            // them) may leave nullable fields out.
            let is_request = request_side.contains(name.as_str());
            let Some(Schema {
                schema_kind: SchemaKind::Type(Type::Object(object)),
                ..
            }) = schema.as_item()
            else {
                continue;
            };
            if is_request {
                continue;
            }
            for (property, schema) in &object.properties {
                if let ReferenceOr::Item(schema) = schema
                    && schema.schema_data.nullable
                {
                    assert!(
                        object.required.contains(property),
                        "{name}.{property} is nullable but optional"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod parameter_descriptions {
    /// Every parameter of every operation says what it is: the document is
    /// what frontend teams read (a field without a doc comment shows as a
    /// bare name in every generated client).
    #[test]
    fn every_parameter_has_a_description() {
        let doc = crate::openapi_document();
        let mut missing = Vec::new();
        for (path, item) in doc.paths.paths.iter() {
            let openapiv3::ReferenceOr::Item(item) = item else {
                continue;
            };
            for (method, op) in item.iter() {
                for p in &op.parameters {
                    if let openapiv3::ReferenceOr::Item(p) = p {
                        let data = p.parameter_data_ref();
                        if data.description.as_deref().unwrap_or("").trim().is_empty() {
                            missing.push(format!("{method} {path} {}", data.name));
                        }
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "parameters without a description: {missing:#?}"
        );
    }
}
