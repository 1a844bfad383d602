//! The OTLP/HTTP span exporter: a batch of finished spans encoded straight
//! into one `ExportTraceServiceRequest` protobuf body and posted to the
//! collector's `/v1/traces`.
//!
//! Why not `opentelemetry-otlp`'s exporter: it first converts every span
//! into the generated protobuf structs (a `String` or `Vec` per name, id,
//! attribute key and value, and a copy of the resource per batch), encodes
//! those, then copies the body again for each attempt — on a 2-core
//! machine its batch thread was a tenth of a traced server's CPU (issue
//! #37, `bench api`). Here each field is written once, from the span as
//! the SDK hands it over, into a body allocated at its exact size; the
//! resource is encoded once. The unit tests check that the bytes decode,
//! with the `opentelemetry-proto` definitions, to exactly what that
//! crate's own conversion gives for the same spans.
//!
//! Sending follows the OTLP/HTTP specification and the crate it replaces:
//! `Content-Type: application/x-protobuf`, the configured headers and
//! `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS`;
//! 429, 502, 503 and 504 and failed connections retried (at most 3
//! times, 100 ms doubling to 1.6 s with jitter, `Retry-After` honoured),
//! attempts and waits together within the export's 10 s; the answer read
//! at most 64 kB.

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::SpanData;
use std::time::{Duration, SystemTime};

/// The whole export's time limit (the specification's default).
const TIMEOUT: Duration = Duration::from_secs(10);
/// Retries after the first attempt.
const RETRIES: u32 = 3;
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_millis(1600);
/// A collector's answer is small; never read more.
const MAX_ANSWER: u64 = 64 * 1024;

/// The exporter the batch span processor calls.
#[derive(Debug)]
pub(super) struct Exporter {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: http::HeaderMap,
    runtime: tokio::runtime::Handle,
    /// The `Resource` message, encoded once.
    resource: Vec<u8>,
    /// The resource's schema URL.
    resource_schema: String,
}

impl Exporter {
    /// An exporter posting to `url` (`…/v1/traces`) with `headers`, run on
    /// the current tokio runtime.
    pub(super) fn new(url: &str, headers: http::HeaderMap) -> anyhow::Result<Exporter> {
        Ok(Exporter {
            client: reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            url: reqwest::Url::parse(url)?,
            headers,
            runtime: tokio::runtime::Handle::current(),
            resource: Vec::new(),
            resource_schema: String::new(),
        })
    }
}

/// `name=value` pairs separated by commas (values percent-decoded), as
/// `OTEL_EXPORTER_OTLP_HEADERS` writes them; a malformed pair is an error
/// that names neither it nor its value (either may be a key).
pub(super) fn parse_header_list(list: &str, headers: &mut http::HeaderMap) -> Result<(), String> {
    for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| "a header in the list is not name=value".to_string())?;
        insert_header(headers, name.trim(), &percent_decode(value.trim()))?;
    }
    Ok(())
}

/// Adds `name: value` to `headers`, or says the header is not a valid
/// HTTP header (naming it, never its value: that may be a key).
pub(super) fn insert_header(
    headers: &mut http::HeaderMap,
    name: &str,
    value: &str,
) -> Result<(), String> {
    let parsed = (
        http::HeaderName::from_bytes(name.as_bytes()),
        http::HeaderValue::from_str(value),
    );
    let (Ok(header), Ok(value)) = parsed else {
        return Err(format!("the header `{name}` is not a valid HTTP header"));
    };
    headers.insert(header, value);
    Ok(())
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl opentelemetry_sdk::trace::SpanExporter for Exporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        // Encoded here, on the batch processor's thread; only the sending
        // runs on the server's runtime.
        let body = bytes::Bytes::from(encode_request(
            &self.resource,
            &self.resource_schema,
            &batch,
        ));
        drop(batch);
        let (client, url, headers) = (self.client.clone(), self.url.clone(), self.headers.clone());
        let sending = self.runtime.spawn(send(client, url, headers, body));
        async move {
            sending
                .await
                .map_err(|_| OTelSdkError::InternalFailure("the export task failed".into()))?
        }
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        let mut encoded = Vec::new();
        Resource(resource).encode(&mut encoded);
        self.resource = encoded;
        self.resource_schema = resource.schema_url().unwrap_or_default().to_string();
    }
}

/// Posts `body`, retrying what the specification calls retryable.
async fn send(
    client: reqwest::Client,
    url: reqwest::Url,
    headers: http::HeaderMap,
    body: bytes::Bytes,
) -> OTelSdkResult {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut delay = FIRST_DELAY;
    let mut attempt = 0;
    loop {
        // Each attempt gets what is left of the export's 10 s, so retries
        // never stretch an export past them.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let outcome = client
            .post(url.clone())
            .headers(headers.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .timeout(left)
            .body(body.clone())
            .send()
            .await;
        let (retry_after, why) = match outcome {
            Ok(response) if response.status().is_success() => {
                // The answer (a partial success at most) is read, bounded,
                // so the connection can be reused.
                let _ = crate::fetch::read_limited(response, MAX_ANSWER).await;
                return Ok(());
            }
            Ok(response) => {
                let status = response.status();
                if !matches!(status.as_u16(), 429 | 502 | 503 | 504) {
                    return Err(OTelSdkError::InternalFailure(format!(
                        "the collector answered {status}"
                    )));
                }
                let retry_after = crate::fetch::retry_after(response.headers());
                (retry_after, format!("the collector answered {status}"))
            }
            Err(error) if error.is_connect() || error.is_timeout() || error.is_request() => {
                (None, "the collector could not be reached".to_string())
            }
            Err(_) => {
                return Err(OTelSdkError::InternalFailure(
                    "the collector's answer could not be read".into(),
                ));
            }
        };
        attempt += 1;
        // A throttling collector's wait is honoured even past the usual
        // cap; the export's deadline is the final bound.
        let wait = retry_after.unwrap_or(delay + jitter());
        if attempt > RETRIES || tokio::time::Instant::now() + wait >= deadline {
            return Err(OTelSdkError::InternalFailure(why));
        }
        tokio::time::sleep(wait).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// Up to 100 ms, from the clock's nanoseconds (retries of several
/// instances should not align; no cryptographic quality needed).
fn jitter() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    Duration::from_millis(u64::from(nanos % 100))
}

/// The `ExportTraceServiceRequest` for `spans`: one `ResourceSpans` (the
/// server's resource), one `ScopeSpans` per instrumentation scope.
pub(super) fn encode_request(
    resource: &[u8],
    resource_schema: &str,
    spans: &[SpanData],
) -> Vec<u8> {
    let request = ExportRequest {
        resource,
        resource_schema,
        spans,
    };
    let mut length = Length(0);
    request.encode(&mut length);
    let mut body = Vec::with_capacity(length.0);
    request.encode(&mut body);
    body
}

// ---- protobuf writing ----------------------------------------------------

/// Where encoded bytes go: a buffer, or a counter of their length.
trait Sink: Sized {
    fn raw(&mut self, bytes: &[u8]);
    fn varint(&mut self, value: u64);
    /// A length-delimited field holding `message`.
    fn message<M: Encode>(&mut self, field: u32, message: &M);
}

/// A protobuf message (or part of one) that can write itself.
trait Encode {
    fn encode<S: Sink>(&self, sink: &mut S);
}

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const DELIMITED: u32 = 2;
const FIXED32: u32 = 5;

/// Counts the bytes a message takes.
struct Length(usize);

impl Sink for Length {
    fn raw(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }

    fn varint(&mut self, value: u64) {
        self.0 += prost::encoding::encoded_len_varint(value);
    }

    fn message<M: Encode>(&mut self, field: u32, message: &M) {
        let before = self.0;
        message.encode(self);
        let length = self.0 - before;
        self.varint(u64::from(field << 3 | DELIMITED));
        self.varint(length as u64);
    }
}

impl Sink for Vec<u8> {
    fn raw(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn varint(&mut self, value: u64) {
        prost::encoding::encode_varint(value, self);
    }

    fn message<M: Encode>(&mut self, field: u32, message: &M) {
        let mut length = Length(0);
        message.encode(&mut length);
        self.varint(u64::from(field << 3 | DELIMITED));
        self.varint(length.0 as u64);
        message.encode(self);
    }
}

fn key<S: Sink>(sink: &mut S, field: u32, wire: u32) {
    sink.varint(u64::from(field << 3 | wire));
}

/// A `bytes` or `string` field, left out when empty (proto3).
fn bytes<S: Sink>(sink: &mut S, field: u32, value: &[u8]) {
    if !value.is_empty() {
        key(sink, field, DELIMITED);
        sink.varint(value.len() as u64);
        sink.raw(value);
    }
}

/// A varint field (`uint32`, `int64`, an enum), left out when zero.
fn uint<S: Sink>(sink: &mut S, field: u32, value: u64) {
    if value != 0 {
        key(sink, field, VARINT);
        sink.varint(value);
    }
}

/// A `fixed64` field, left out when zero.
fn fixed64<S: Sink>(sink: &mut S, field: u32, value: u64) {
    if value != 0 {
        key(sink, field, FIXED64);
        sink.raw(&value.to_le_bytes());
    }
}

/// A `fixed32` field, left out when zero.
fn fixed32<S: Sink>(sink: &mut S, field: u32, value: u32) {
    if value != 0 {
        key(sink, field, FIXED32);
        sink.raw(&value.to_le_bytes());
    }
}

/// Nanoseconds since the epoch (0 before it), as the SDK's exporter.
fn nanos(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Span flags: the trace flags, "whether the parent is remote" known
/// (bit 8) and, when it is, set (bit 9).
fn flags(trace_flags: u8, remote: bool) -> u32 {
    u32::from(trace_flags) | 0x100 | if remote { 0x200 } else { 0 }
}

// ---- the OTLP messages -----------------------------------------------------

/// `opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest`.
struct ExportRequest<'a> {
    resource: &'a [u8],
    resource_schema: &'a str,
    spans: &'a [SpanData],
}

impl Encode for ExportRequest<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        // resource_spans = 1
        sink.message(1, &ResourceSpans(self));
    }
}

/// `ResourceSpans`: the resource, then the spans of each scope.
struct ResourceSpans<'a, 'b>(&'a ExportRequest<'b>);

impl Encode for ResourceSpans<'_, '_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        let request = self.0;
        // resource = 1 (always present, as the SDK's exporter sends it)
        sink.message(1, &Raw(request.resource));
        // scope_spans = 2: one per distinct scope, in order of first use.
        for (i, span) in request.spans.iter().enumerate() {
            let scope = &span.instrumentation_scope;
            if request.spans[..i]
                .iter()
                .all(|earlier| earlier.instrumentation_scope != *scope)
            {
                sink.message(
                    2,
                    &ScopeSpans {
                        scope,
                        spans: &request.spans[i..],
                    },
                );
            }
        }
        // schema_url = 3
        bytes(sink, 3, request.resource_schema.as_bytes());
    }
}

/// Bytes already encoded (the resource).
struct Raw<'a>(&'a [u8]);

impl Encode for Raw<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        sink.raw(self.0);
    }
}

/// `Resource`: its attributes.
struct Resource<'a>(&'a opentelemetry_sdk::Resource);

impl Encode for Resource<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        for (key, value) in self.0.iter() {
            // attributes = 1
            sink.message(1, &Attribute(key.as_str(), value));
        }
    }
}

/// `ScopeSpans`: a scope and the spans (from `spans`) that belong to it.
struct ScopeSpans<'a> {
    scope: &'a InstrumentationScope,
    spans: &'a [SpanData],
}

impl Encode for ScopeSpans<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        // scope = 1
        sink.message(1, &Scope(self.scope));
        // spans = 2
        for span in self
            .spans
            .iter()
            .filter(|s| s.instrumentation_scope == *self.scope)
        {
            sink.message(2, &Span(span));
        }
        // schema_url = 3
        bytes(
            sink,
            3,
            self.scope.schema_url().unwrap_or_default().as_bytes(),
        );
    }
}

/// `InstrumentationScope`.
struct Scope<'a>(&'a InstrumentationScope);

impl Encode for Scope<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        bytes(sink, 1, self.0.name().as_bytes());
        bytes(sink, 2, self.0.version().unwrap_or_default().as_bytes());
        for attribute in self.0.attributes() {
            sink.message(3, &Attribute(attribute.key.as_str(), &attribute.value));
        }
    }
}

/// `Span`.
struct Span<'a>(&'a SpanData);

impl Encode for Span<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        let span = self.0;
        context(sink, &span.span_context, 1, 2, 3);
        if span.parent_span_id != SpanId::INVALID {
            bytes(sink, 4, &span.parent_span_id.to_bytes());
        }
        bytes(sink, 5, span.name.as_bytes());
        uint(sink, 6, kind(&span.span_kind));
        fixed64(sink, 7, nanos(span.start_time));
        fixed64(sink, 8, nanos(span.end_time));
        attributes(sink, 9, &span.attributes);
        uint(sink, 10, u64::from(span.dropped_attributes_count));
        for event in span.events.iter() {
            sink.message(11, &Event(event));
        }
        uint(sink, 12, u64::from(span.events.dropped_count));
        for link in span.links.iter() {
            sink.message(13, &Link(link));
        }
        uint(sink, 14, u64::from(span.links.dropped_count));
        // status = 15 (always present, as the SDK's exporter sends it)
        sink.message(15, &SpanStatus(&span.status));
        fixed32(
            sink,
            16,
            flags(
                span.span_context.trace_flags().to_u8(),
                span.parent_span_is_remote,
            ),
        );
    }
}

/// A span context's trace id, span id and trace state, as fields.
fn context<S: Sink>(sink: &mut S, context: &SpanContext, trace: u32, span: u32, state: u32) {
    bytes(sink, trace, &context.trace_id().to_bytes());
    bytes(sink, span, &context.span_id().to_bytes());
    bytes(sink, state, context.trace_state().header().as_bytes());
}

/// `Span.SpanKind`.
fn kind(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

fn attributes<S: Sink>(sink: &mut S, field: u32, attributes: &[KeyValue]) {
    for attribute in attributes {
        sink.message(field, &Attribute(attribute.key.as_str(), &attribute.value));
    }
}

/// `Span.Event`.
struct Event<'a>(&'a opentelemetry::trace::Event);

impl Encode for Event<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        fixed64(sink, 1, nanos(self.0.timestamp));
        bytes(sink, 2, self.0.name.as_bytes());
        attributes(sink, 3, &self.0.attributes);
        uint(sink, 4, u64::from(self.0.dropped_attributes_count));
    }
}

/// `Span.Link`.
struct Link<'a>(&'a opentelemetry::trace::Link);

impl Encode for Link<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        let link = self.0;
        context(sink, &link.span_context, 1, 2, 3);
        attributes(sink, 4, &link.attributes);
        uint(sink, 5, u64::from(link.dropped_attributes_count));
        fixed32(
            sink,
            6,
            flags(
                link.span_context.trace_flags().to_u8(),
                link.span_context.is_remote(),
            ),
        );
    }
}

/// `Status`: its message (an error's description) and code.
struct SpanStatus<'a>(&'a Status);

impl Encode for SpanStatus<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        match self.0 {
            Status::Unset => {}
            Status::Ok => uint(sink, 3, 1),
            Status::Error { description } => {
                bytes(sink, 2, description.as_bytes());
                uint(sink, 3, 2);
            }
        }
    }
}

/// `KeyValue`: a key and its value (always present).
struct Attribute<'a>(&'a str, &'a Value);

impl Encode for Attribute<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        bytes(sink, 1, self.0.as_bytes());
        sink.message(2, &Any(self.1));
    }
}

/// `AnyValue`: a oneof, so its field is written even when zero or empty.
struct Any<'a>(&'a Value);

impl Encode for Any<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        match self.0 {
            Value::Bool(value) => scalar_bool(sink, *value),
            Value::I64(value) => scalar_i64(sink, *value),
            Value::F64(value) => scalar_f64(sink, *value),
            Value::String(value) => scalar_str(sink, value.as_str()),
            Value::Array(array) => sink.message(5, &ArrayValue(array)),
            // A kind of value newer than this exporter: an empty AnyValue.
            _ => {}
        }
    }
}

fn scalar_bool<S: Sink>(sink: &mut S, value: bool) {
    key(sink, 2, VARINT);
    sink.varint(u64::from(value));
}

fn scalar_i64<S: Sink>(sink: &mut S, value: i64) {
    key(sink, 3, VARINT);
    sink.varint(value as u64);
}

fn scalar_f64<S: Sink>(sink: &mut S, value: f64) {
    key(sink, 4, FIXED64);
    sink.raw(&value.to_bits().to_le_bytes());
}

fn scalar_str<S: Sink>(sink: &mut S, value: &str) {
    key(sink, 1, DELIMITED);
    sink.varint(value.len() as u64);
    sink.raw(value.as_bytes());
}

/// `ArrayValue`: its values, each an `AnyValue`.
struct ArrayValue<'a>(&'a Array);

/// One element of an array, as an `AnyValue`.
enum Element<'a> {
    Bool(bool),
    I64(i64),
    F64(f64),
    Str(&'a str),
}

impl Encode for Element<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        match self {
            Element::Bool(value) => scalar_bool(sink, *value),
            Element::I64(value) => scalar_i64(sink, *value),
            Element::F64(value) => scalar_f64(sink, *value),
            Element::Str(value) => scalar_str(sink, value),
        }
    }
}

impl Encode for ArrayValue<'_> {
    fn encode<S: Sink>(&self, sink: &mut S) {
        match self.0 {
            Array::Bool(values) => {
                for value in values {
                    sink.message(1, &Element::Bool(*value));
                }
            }
            Array::I64(values) => {
                for value in values {
                    sink.message(1, &Element::I64(*value));
                }
            }
            Array::F64(values) => {
                for value in values {
                    sink.message(1, &Element::F64(*value));
                }
            }
            Array::String(values) => {
                for value in values {
                    sink.message(1, &Element::Str(value.as_str()));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use prost::Message as _;
    use std::borrow::Cow;

    fn scope(name: &'static str, version: Option<&'static str>) -> InstrumentationScope {
        let mut builder = InstrumentationScope::builder(name);
        if let Some(version) = version {
            builder = builder
                .with_version(version)
                .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
                .with_attributes([KeyValue::new("scope.attribute", 7)]);
        }
        builder.build()
    }

    fn context(trace: u128, span: u64, state: &str, remote: bool) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            state.parse::<TraceState>().unwrap_or_default(),
        )
    }

    /// Spans using every part of the format: each kind of attribute value
    /// (zeros, empties and arrays included), events, links, each status,
    /// a remote parent, a trace state, two scopes interleaved.
    fn spans() -> Vec<SpanData> {
        let epoch = SystemTime::UNIX_EPOCH;
        let mut spans = Vec::new();
        for i in 0..6u64 {
            let scope = if i % 2 == 0 {
                scope("workspace-server", None)
            } else {
                scope("another", Some("1.2.3"))
            };
            spans.push(SpanData {
                span_context: context(
                    0x0af7651916cd43dd8448eb211c80319c + u128::from(i),
                    0xb7ad6b7169203331 + i,
                    if i == 1 { "vendor=value,other=x" } else { "" },
                    false,
                ),
                parent_span_id: if i == 0 {
                    SpanId::INVALID
                } else {
                    SpanId::from(0x1000 + i)
                },
                parent_span_is_remote: i == 2,
                span_kind: [
                    SpanKind::Server,
                    SpanKind::Client,
                    SpanKind::Internal,
                    SpanKind::Producer,
                    SpanKind::Consumer,
                    SpanKind::Client,
                ][i as usize]
                    .clone(),
                name: Cow::Owned(format!("span {i} é")),
                start_time: epoch + Duration::from_nanos(1_700_000_000_123_456_789 + i),
                end_time: epoch + Duration::from_nanos(1_700_000_000_223_456_789 + i),
                attributes: vec![
                    KeyValue::new("db.query.text", "SELECT 1 FROM t WHERE a = $1"),
                    KeyValue::new("empty", ""),
                    KeyValue::new("zero", 0i64),
                    KeyValue::new("negative", -42i64),
                    KeyValue::new("false", false),
                    KeyValue::new("true", true),
                    KeyValue::new("float", 0.0f64),
                    KeyValue::new("pi", 3.25f64),
                    KeyValue::new(
                        "strings",
                        Value::Array(Array::String(vec!["a".into(), "".into()])),
                    ),
                    KeyValue::new("ints", Value::Array(Array::I64(vec![0, -1, i64::MAX]))),
                    KeyValue::new("bools", Value::Array(Array::Bool(vec![false, true]))),
                    KeyValue::new("floats", Value::Array(Array::F64(vec![0.5, -0.0]))),
                    KeyValue::new("empty array", Value::Array(Array::I64(vec![]))),
                ],
                dropped_attributes_count: (i % 3) as u32,
                events: {
                    let mut events = opentelemetry_sdk::trace::SpanEvents::default();
                    if i == 3 {
                        events.events.push(opentelemetry::trace::Event::new(
                            "exception",
                            epoch + Duration::from_secs(5),
                            vec![KeyValue::new("exception.message", "boom")],
                            1,
                        ));
                    }
                    events.dropped_count = u32::from(i == 4);
                    events
                },
                links: {
                    let mut links = opentelemetry_sdk::trace::SpanLinks::default();
                    if i == 5 {
                        links.links.push(opentelemetry::trace::Link::new(
                            context(77, 78, "k=v", true),
                            vec![KeyValue::new("link.kind", "cause")],
                            2,
                        ));
                    }
                    links.dropped_count = u32::from(i == 1) * 3;
                    links
                },
                status: match i % 3 {
                    0 => Status::Unset,
                    1 => Status::Ok,
                    _ => Status::error(format!("failed {i}")),
                },
                instrumentation_scope: scope,
            });
        }
        spans
    }

    fn resource() -> opentelemetry_sdk::Resource {
        opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("workspace")
            .with_attribute(KeyValue::new("deployment.environment", "test"))
            .with_schema_url([], "https://opentelemetry.io/schemas/1.21.0")
            .build()
    }

    /// What `opentelemetry-proto`'s own conversion makes of `spans`.
    fn expected(
        spans: Vec<SpanData>,
        resource: &opentelemetry_sdk::Resource,
    ) -> ExportTraceServiceRequest {
        let resource: ResourceAttributesWithSchema = resource.into();
        ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans, &resource),
        }
    }

    fn encoded(spans: &[SpanData], resource: &opentelemetry_sdk::Resource) -> Vec<u8> {
        let mut encoded = Vec::new();
        Resource(resource).encode(&mut encoded);
        encode_request(&encoded, resource.schema_url().unwrap_or_default(), spans)
    }

    #[test]
    fn spans_decode_to_what_the_reference_conversion_gives() {
        let resource = resource();
        let body = encoded(&spans(), &resource);
        let decoded = ExportTraceServiceRequest::decode(body.as_slice()).expect("valid protobuf");
        let expected = expected(spans(), &resource);
        assert_eq!(decoded.resource_spans.len(), 1);
        assert_eq!(decoded.resource_spans[0].scope_spans.len(), 2);
        assert_eq!(decoded, expected);
        // Byte for byte the same length as the reference encoding (no
        // field written twice, none left out).
        assert_eq!(body.len(), expected.encode_to_vec().len());
    }

    #[test]
    fn the_body_is_allocated_at_its_exact_size() {
        let resource = resource();
        let body = encoded(&spans(), &resource);
        assert_eq!(body.capacity(), body.len());
    }

    #[test]
    fn an_empty_batch_is_the_resource_alone() {
        let resource = resource();
        let body = encoded(&[], &resource);
        assert_eq!(
            ExportTraceServiceRequest::decode(body.as_slice()).unwrap(),
            expected(vec![], &resource)
        );
    }

    #[test]
    fn the_environments_header_list_is_read() {
        let mut headers = http::HeaderMap::new();
        parse_header_list(" api-key = se%3Dcret , x-tenant=a b ,", &mut headers).unwrap();
        assert_eq!(headers["api-key"], "se=cret");
        assert_eq!(headers["x-tenant"], "a b");
        let error = parse_header_list("x-ok=1,secret", &mut headers).unwrap_err();
        assert!(!error.contains("secret"), "{error}");
        let error = parse_header_list("bad name=secret", &mut headers).unwrap_err();
        assert!(!error.contains("secret"), "{error}");
    }
}
