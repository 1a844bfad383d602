//! OpenTelemetry traces over OTLP/HTTP (protobuf), off by default (issue
//! #37): a span per request (its route, status, organization), a child per
//! database statement (its SQL, never its parameters) and per model call
//! (the GenAI semantic conventions: provider, model, input and output
//! tokens, time to first token). An incoming `traceparent` is the
//! request's parent; calls to model providers carry the current one.
//!
//! Off (no `telemetry.otlp_endpoint`), nothing is created: every hook
//! checks one relaxed atomic load first and does nothing more.
//!
//! Spans are batched by the SDK's own thread, which encodes them (see
//! [`otlp`]); the HTTP goes through this server's reqwest on its tokio
//! runtime (answers bounded, 10 s timeout), never a second HTTP stack.

use opentelemetry::trace::{FutureExt as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue, global};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

mod otlp;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The tracer's name (the instrumentation scope of every span).
const SCOPE: &str = "workspace-server";

/// The tracer while tracing is on: the SDK's own type, not the global
/// boxed one (no lookup of the global provider and no boxed span per
/// span).
static TRACER: std::sync::RwLock<Option<opentelemetry_sdk::trace::SdkTracer>> =
    std::sync::RwLock::new(None);

/// The tracer (`None` once tracing stopped).
fn tracer() -> Option<opentelemetry_sdk::trace::SdkTracer> {
    TRACER.read().ok().and_then(|t| t.clone())
}

/// `[telemetry]`: where spans go.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP collector's base URL (`http://collector:4318`); spans
    /// are posted to `{otlp_endpoint}/v1/traces` as protobuf. Unset:
    /// tracing is off (env `WORKSPACE_OTLP_ENDPOINT`, or the standard
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the spans (default `workspace`).
    pub service_name: Option<String>,
    /// Headers sent to the collector (an API key, a tenant).
    pub headers: BTreeMap<String, String>,
    /// The share of traces recorded, from 0 to 1 (default 1: every one).
    /// Decided once per trace from its id, so a trace is whole or absent;
    /// a request whose caller's `traceparent` says sampled (or not) follows
    /// the caller (parent-based). Env `WORKSPACE_TRACE_SAMPLE_RATIO` or the
    /// standard `OTEL_TRACES_SAMPLER_ARG`.
    pub sample_ratio: Option<f64>,
}

/// Whether spans are being recorded.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The tracer provider while tracing is on; flushed at shutdown.
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Starts exporting spans when `config` names a collector.
    pub fn start(config: &TelemetryConfig, log: &slog::Logger) -> anyhow::Result<Telemetry> {
        let Some(endpoint) = config.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) else {
            return Ok(Telemetry { provider: None });
        };
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let mut headers = http::HeaderMap::new();
        for (name, value) in &config.headers {
            otlp::insert_header(&mut headers, name, value)
                .map_err(|why| anyhow::anyhow!("telemetry.headers: {why}"))?;
        }
        // The standard variables, the traces' own first (as the SDK reads them).
        if let Some((variable, list)) = [
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ]
        .into_iter()
        .find_map(|name| Some((name, std::env::var(name).ok()?)))
        {
            otlp::parse_header_list(&list, &mut headers)
                .map_err(|why| anyhow::anyhow!("{variable}: {why}"))?;
        }
        let exporter = otlp::Exporter::new(&url, headers)?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(
                config
                    .service_name
                    .clone()
                    .unwrap_or_else(|| "workspace".to_string()),
            )
            .build();
        let ratio = config.sample_ratio.unwrap_or(1.0).clamp(0.0, 1.0);
        let sampler = opentelemetry_sdk::trace::Sampler::ParentBased(Box::new(if ratio >= 1.0 {
            opentelemetry_sdk::trace::Sampler::AlwaysOn
        } else {
            opentelemetry_sdk::trace::Sampler::TraceIdRatioBased(ratio)
        }));
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_sampler(sampler)
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        global::set_tracer_provider(provider.clone());
        {
            use opentelemetry::trace::TracerProvider as _;
            if let Ok(mut tracer) = TRACER.write() {
                *tracer = Some(provider.tracer(SCOPE));
            }
        }
        global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        ENABLED.store(true, Ordering::Relaxed);
        slog::info!(log, "OpenTelemetry traces on"; "endpoint" => url, "sample_ratio" => ratio);
        Ok(Telemetry {
            provider: Some(provider),
        })
    }

    /// Sends the spans still buffered and stops exporting (at shutdown;
    /// on a blocking thread, since the export runs on this runtime).
    pub async fn shutdown(mut self) {
        if let Some(provider) = self.provider.take() {
            ENABLED.store(false, Ordering::Relaxed);
            if let Ok(mut tracer) = TRACER.write() {
                *tracer = None;
            }
            let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            ENABLED.store(false, Ordering::Relaxed);
            if let Ok(mut tracer) = TRACER.write() {
                *tracer = None;
            }
            let _ = provider.shutdown();
        }
    }
}

/// Reads the `traceparent`/`tracestate` of incoming headers.
struct HeaderReader<'a>(&'a http::HeaderMap);

impl opentelemetry::propagation::Extractor for HeaderReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Writes `traceparent`/`tracestate` into outgoing headers.
struct HeaderWriter<'a>(&'a mut http::HeaderMap);

impl opentelemetry::propagation::Injector for HeaderWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// What a request's span names, per operation: read once from the API's
/// description, and only while tracing is on.
#[derive(Clone, Copy)]
pub struct Route {
    /// The route template (`/api/chat/{id}`-style paths, as the published
    /// document writes them).
    template: &'static str,
    /// The span's name: `{METHOD} {template}`.
    name: &'static str,
    /// The method.
    method: &'static str,
    /// The operation's id.
    operation_id: &'static str,
}

/// The route of an operation (`None` while tracing is off or for an
/// operation the document does not have).
pub fn route_of(operation_id: &str) -> Option<Route> {
    static ROUTES: std::sync::LazyLock<std::collections::HashMap<&'static str, Route>> =
        std::sync::LazyLock::new(|| {
            let mut routes = std::collections::HashMap::new();
            let document = workspace_api::openapi_document();
            let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
            for (path, item) in document.paths.paths.iter() {
                let openapiv3::ReferenceOr::Item(item) = item else {
                    continue;
                };
                let template = leak(path.clone());
                for (method, op) in item.iter() {
                    if let Some(id) = &op.operation_id {
                        let method = leak(method.to_ascii_uppercase());
                        let operation_id = leak(id.clone());
                        routes.insert(
                            operation_id,
                            Route {
                                template,
                                name: leak(format!("{method} {template}")),
                                method,
                                operation_id,
                            },
                        );
                    }
                }
            }
            routes
        });
    if !enabled() {
        return None;
    }
    ROUTES.get(operation_id).copied()
}

/// A request's span, ended by [`RequestSpan::end`] with its status.
pub struct RequestSpan {
    cx: Context,
}

/// Starts the span of a request (`None` while tracing is off): a child of
/// the request's `traceparent` when it has a valid one. Its name and
/// attributes are the route's static strings (no allocation).
pub fn request_span(headers: &http::HeaderMap, route: Option<Route>) -> Option<RequestSpan> {
    if !enabled() {
        return None;
    }
    let route = route.unwrap_or(Route {
        template: "unknown",
        name: "unknown",
        method: "unknown",
        operation_id: "unknown",
    });
    let parent = global::get_text_map_propagator(|p| p.extract(&HeaderReader(headers)));
    let tracer = tracer()?;
    let span = tracer
        .span_builder(route.name)
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("http.request.method", route.method),
            KeyValue::new("http.route", route.template),
            KeyValue::new("workspace.operation_id", route.operation_id),
        ])
        .start_with_context(&tracer, &parent);
    Some(RequestSpan {
        cx: parent.with_span(span),
    })
}

impl RequestSpan {
    /// The context to run the request's handler in.
    pub fn context(&self) -> Context {
        self.cx.clone()
    }

    /// The trace's id, for log lines.
    pub fn trace_id(&self) -> String {
        self.cx.span().span_context().trace_id().to_string()
    }

    /// Ends the span with the response's status.
    pub fn end(self, status: u16) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
        span.end();
    }
}

/// Notes the organization a request acts in on its span.
pub fn note_organization(org_id: uuid::Uuid) {
    if enabled() {
        Context::map_current(|cx| {
            cx.span().set_attribute(KeyValue::new(
                "workspace.organization_id",
                org_id.to_string(),
            ))
        });
    }
}

/// Sets an attribute on the current span (nothing while tracing is off).
pub fn note(attribute: KeyValue) {
    if enabled() {
        Context::map_current(|cx| cx.span().set_attribute(attribute));
    }
}

/// Marks the current span failed (nothing while tracing is off).
pub fn fail_current(why: &str) {
    if enabled() {
        let why = why.chars().take(200).collect::<String>();
        Context::map_current(|cx| cx.span().set_status(Status::error(why)));
    }
}

/// The trace id of the current span, for log lines (`None` while tracing
/// is off or outside a span).
pub fn current_trace_id() -> Option<String> {
    if !enabled() {
        return None;
    }
    Context::map_current(|cx| {
        let span = cx.span();
        let context = span.span_context();
        context.is_valid().then(|| context.trace_id().to_string())
    })
}

/// Adds the current `traceparent` to an outgoing request's headers (a
/// model provider, an MCP server, a webhook receiver).
pub fn inject(headers: &mut http::HeaderMap) {
    if enabled() {
        global::get_text_map_propagator(|p| {
            p.inject_context(&Context::current(), &mut HeaderWriter(headers))
        });
    }
}

/// A child span of the current one, ended when dropped.
pub struct ChildSpan {
    cx: Context,
}

impl ChildSpan {
    /// Sets an attribute.
    pub fn set(&mut self, attribute: KeyValue) {
        self.cx.span().set_attribute(attribute);
    }

    /// Marks the span failed.
    pub fn fail(&mut self, why: impl Into<std::borrow::Cow<'static, str>>) {
        self.cx.span().set_status(Status::error(why));
    }

    /// Runs `future` with this span current (its `traceparent` is the one
    /// [`inject`] writes).
    pub fn run<F: std::future::Future>(&self, future: F) -> opentelemetry::trace::WithContext<F> {
        future.with_context(self.cx.clone())
    }
}

impl Drop for ChildSpan {
    fn drop(&mut self) {
        self.cx.span().end();
    }
}

impl ChildSpan {
    /// The `traceparent` (and `tracestate`) naming this span, as headers
    /// for the outgoing request it stands for.
    pub fn headers(&self) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        global::get_text_map_propagator(|p| {
            p.inject_context(&self.cx, &mut HeaderWriter(&mut headers))
        });
        headers
    }
}

fn child(
    name: impl Into<std::borrow::Cow<'static, str>>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
) -> ChildSpan {
    start(name, kind, attributes, Context::current())
}

fn start(
    name: impl Into<std::borrow::Cow<'static, str>>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
    parent: Context,
) -> ChildSpan {
    // Stopped meanwhile: a span of nothing (never the parent's, which
    // dropping this would end).
    let Some(tracer) = tracer() else {
        return ChildSpan { cx: Context::new() };
    };
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    ChildSpan {
        cx: parent.with_span(span),
    }
}

/// The current span's `traceparent` (`None` while tracing is off or
/// outside a span): kept with work queued for later (an ingestion job, a
/// webhook event), whose span then joins the trace that queued it.
pub fn current_traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    global::get_text_map_propagator(|p| p.inject_context(&Context::current(), &mut carrier));
    carrier.remove("traceparent")
}

/// The span of one queued job run by a worker (`None` while tracing is
/// off): a child of the trace that queued it when its `traceparent` was
/// kept (and is well formed), else a trace of its own.
/// `describe` gives the span's name and attributes, called only while
/// tracing is on.
pub fn job(
    traceparent: Option<&str>,
    describe: impl FnOnce() -> (String, Vec<KeyValue>),
) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    let (name, attributes) = describe();
    let parent = match traceparent {
        Some(value) => {
            let carrier =
                std::collections::HashMap::from([("traceparent".to_string(), value.to_string())]);
            global::get_text_map_propagator(|p| p.extract_with_context(&Context::new(), &carrier))
        }
        None => Context::new(),
    };
    Some(start(name, SpanKind::Consumer, attributes, parent))
}

/// The span of one embedding call (`None` while tracing is off), with the
/// GenAI semantic conventions' names.
pub fn embeddings(provider: &str, model: &str, inputs: usize) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    Some(child(
        format!("embeddings {model}"),
        SpanKind::Client,
        vec![
            KeyValue::new("gen_ai.operation.name", "embeddings"),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
            KeyValue::new("gen_ai.request.model", model.to_string()),
            KeyValue::new("workspace.embedding.inputs", inputs as i64),
        ],
    ))
}

/// The span of one tool run for a model (`None` while tracing is off):
/// `execute_tool {name}` (GenAI semantic conventions).
pub fn tool_run(name: &str, call_id: &str) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    Some(child(
        format!("execute_tool {name}"),
        SpanKind::Internal,
        vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", name.to_string()),
            KeyValue::new("gen_ai.tool.call.id", call_id.to_string()),
        ],
    ))
}

/// The span of one request to an MCP server (`None` while tracing is
/// off): `{method} {tool}` with the MCP semantic conventions' names; the
/// server's host only (an URL's path or query may hold a secret).
pub fn mcp_call(method: &str, tool: Option<&str>, url: &str) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    let mut attributes = vec![KeyValue::new("mcp.method.name", method.to_string())];
    if let Some(tool) = tool {
        attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_string()));
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    if let Some(host) = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
    {
        attributes.push(KeyValue::new("server.address", host));
    }
    let name = match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_string(),
    };
    Some(child(name, SpanKind::Client, attributes))
}

/// The `traceparent` (and `tracestate`) of the current span, as headers
/// for an outgoing request (empty while tracing is off).
pub fn trace_headers() -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    inject(&mut headers);
    headers
}

/// The span of one database statement (`None` while tracing is off): its
/// SQL (never its parameters) and operation. On the hot path (every
/// statement of every request): the name and operation are static, the
/// text is shared (see [`sql_text`]).
pub fn statement(sql: &str) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    let (name, operation) = operation_of(sql);
    Some(database_span(name, operation, None, sql_text(sql)))
}

/// The span of statements sent together as one batch, with one `Sync`
/// (`None` while tracing is off): one database operation, named as the
/// semantic conventions name a batch (`BATCH SELECT postgresql`,
/// `db.operation.name` `BATCH SELECT` when every statement is a
/// `SELECT`), its size (`db.operation.batch.size`) and the statements'
/// texts joined by `; ` (each joined text made once: the statements are
/// constants). One statement is [`statement`]'s span.
pub fn batch(sqls: &[&'static str]) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    let [first, ..] = sqls else {
        return None;
    };
    if sqls.len() == 1 {
        return statement(first);
    }
    let selects = sqls.iter().all(|sql| operation_of(sql).1 == "SELECT");
    let (name, operation) = if selects {
        ("BATCH SELECT postgresql", "BATCH SELECT")
    } else {
        ("BATCH postgresql", "BATCH")
    };
    Some(database_span(
        name,
        operation,
        Some(sqls.len()),
        batch_text(sqls),
    ))
}

/// A database operation's span: the system, the operation, the batch's
/// size when it is one, and the text.
fn database_span(
    name: &'static str,
    operation: &'static str,
    batch_size: Option<usize>,
    text: opentelemetry::StringValue,
) -> ChildSpan {
    let mut attributes = Vec::with_capacity(4);
    attributes.push(KeyValue::new("db.system.name", "postgresql"));
    attributes.push(KeyValue::new("db.operation.name", operation));
    if let Some(size) = batch_size {
        attributes.push(KeyValue::new("db.operation.batch.size", size as i64));
    }
    attributes.push(KeyValue::new("db.query.text", text));
    child(name, SpanKind::Client, attributes)
}

/// The texts of a batch's statements joined by `; `, cut and kept as
/// [`sql_text`] does (found by the statements' addresses: constants never
/// move, so nothing is compared).
fn batch_text(sqls: &[&'static str]) -> opentelemetry::StringValue {
    static TEXTS: TextCache<Vec<(usize, usize)>, ()> = TextCache::new();
    let key = sqls
        .iter()
        .map(|s| (s.as_ptr() as usize, s.len()))
        .collect();
    TEXTS.get_or_make(key, |()| true, || sqls.join("; ").into(), || ())
}

/// A statement's span name and `db.operation.name`, from its first word.
fn operation_of(sql: &str) -> (&'static str, &'static str) {
    let first = sql.split_whitespace().next().unwrap_or_default();
    const KNOWN: [(&str, &str); 10] = [
        ("SELECT", "SELECT postgresql"),
        ("WITH", "WITH postgresql"),
        ("INSERT", "INSERT postgresql"),
        ("UPDATE", "UPDATE postgresql"),
        ("DELETE", "DELETE postgresql"),
        ("LOCK", "LOCK postgresql"),
        ("NOTIFY", "NOTIFY postgresql"),
        ("SET", "SET postgresql"),
        ("BEGIN", "BEGIN postgresql"),
        ("COMMIT", "COMMIT postgresql"),
    ];
    KNOWN
        .iter()
        .find(|(op, _)| op.eq_ignore_ascii_case(first))
        .map(|(op, name)| (*name, *op))
        .unwrap_or(("SQL postgresql", "SQL"))
}

/// The text of a statement as an attribute: at most 2,000 characters,
/// shared between the spans of the same SQL (the server's statements are
/// a few hundred constants; the first 1,024 distinct texts are kept, any
/// other is copied). Found by the SQL's address and length, compared
/// before use, so the hot path neither hashes nor copies the text.
fn sql_text(sql: &str) -> opentelemetry::StringValue {
    static TEXTS: TextCache<(usize, usize), Box<str>> = TextCache::new();
    TEXTS.get_or_make(
        (sql.as_ptr() as usize, sql.len()),
        |original| **original == *sql,
        || sql.into(),
        || sql.into(),
    )
}

/// Statement texts cut to 2,000 characters, kept by key (at most 1,024;
/// beyond, each is made anew), each with what tells whether it still
/// stands for the key's text (`check`).
struct TextCache<K, V>(std::sync::LazyLock<std::sync::RwLock<Texts<K, V>>>);

/// Each key's check value and cut text.
type Texts<K, V> = std::collections::HashMap<K, (V, std::sync::Arc<str>)>;

impl<K: std::hash::Hash + Eq, V> TextCache<K, V> {
    const fn new() -> Self {
        TextCache(std::sync::LazyLock::new(Default::default))
    }

    /// The kept text of `key` if `check` accepts it, else `text()` cut,
    /// kept with `original()` while there is room (each made only when
    /// needed: a statement's text is borrowed, not copied, to be cut).
    fn get_or_make<'t>(
        &self,
        key: K,
        check: impl Fn(&V) -> bool,
        text: impl FnOnce() -> std::borrow::Cow<'t, str>,
        original: impl FnOnce() -> V,
    ) -> opentelemetry::StringValue {
        let kept = self.0.read().ok().and_then(|texts| {
            texts
                .get(&key)
                .filter(|(original, _)| check(original))
                .map(|(_, text)| text.clone())
        });
        if let Some(text) = kept {
            return text.into();
        }
        let text = text();
        let text: std::sync::Arc<str> = match text.char_indices().nth(2000) {
            Some((end, _)) => text[..end].into(),
            None => text.into(),
        };
        if let Ok(mut texts) = self.0.write()
            && texts.len() < 1024
        {
            texts.insert(key, (original(), text.clone()));
        }
        text.into()
    }
}

/// The span of one model call (`None` while tracing is off), with the
/// GenAI semantic conventions' names.
pub fn model_call(provider: &str, model: &str) -> Option<ChildSpan> {
    if !enabled() {
        return None;
    }
    Some(child(
        format!("chat {model}"),
        SpanKind::Client,
        vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
            KeyValue::new("gen_ai.request.model", model.to_string()),
        ],
    ))
}

/// Runs `future` in the current trace context (a task spawned for a
/// request keeps its trace); as is while tracing is off.
pub fn in_current<F: std::future::Future>(
    future: F,
) -> futures::future::Either<F, opentelemetry::trace::WithContext<F>> {
    if enabled() {
        futures::future::Either::Right(future.with_current_context())
    } else {
        futures::future::Either::Left(future)
    }
}

/// Spawns `future` on the runtime in the current trace context: work a
/// request starts in a task of its own (a streamed answer, an export)
/// stays in the request's trace. As `tokio::spawn` while tracing is off.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(in_current(future))
}

/// Runs `future` in `span`'s context (`None`: as is).
pub fn in_span<F: std::future::Future>(
    span: Option<&RequestSpan>,
    future: F,
) -> futures::future::Either<F, opentelemetry::trace::WithContext<F>> {
    match span {
        Some(span) => futures::future::Either::Right(future.with_context(span.context())),
        None => futures::future::Either::Left(future),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_texts_are_cut_at_2000_characters_and_checked_before_reuse() {
        // Cut on a character boundary: 2,000 two-byte characters kept.
        let long = "é".repeat(2500);
        let text = sql_text(&long);
        assert_eq!(text.as_str().chars().count(), 2000);
        assert_eq!(text.as_str().len(), 4000);
        assert_eq!(sql_text("SELECT 1").as_str(), "SELECT 1");

        // A key whose check fails is made anew, not served stale.
        static TEXTS: TextCache<u8, &'static str> = TextCache::new();
        let first = TEXTS.get_or_make(1, |o| *o == "a", || "a".into(), || "a");
        let again = TEXTS.get_or_make(1, |o| *o == "a", || "made again".into(), || "a");
        let other = TEXTS.get_or_make(1, |o| *o == "b", || "b".into(), || "b");
        assert_eq!(
            (first.as_str(), again.as_str(), other.as_str()),
            ("a", "a", "b")
        );

        // A batch: its statements joined, the same text for the same constants.
        const A: &str = "SELECT a";
        const B: &str = "SELECT b";
        assert_eq!(batch_text(&[A, B]).as_str(), "SELECT a; SELECT b");
        assert_eq!(batch_text(&[B, A]).as_str(), "SELECT b; SELECT a");
    }
}
