//! An OTLP/HTTP trace collector on 127.0.0.1 (issue #37): it decodes what
//! the server exports with the `opentelemetry-proto` definitions, as a real
//! collector does, and keeps every span; helpers read a trace's tree.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An OTLP/HTTP collector: every span it was sent.
pub struct Collector {
    /// The base URL (`telemetry.otlp_endpoint`).
    pub url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    /// Every export request: its request line and content type.
    pub requests: Arc<Mutex<Vec<(String, String)>>>,
    /// Every export request's head (request line and headers), refused
    /// ones included.
    pub heads: Arc<Mutex<Vec<String>>>,
    /// Answers given (in order) to the next exports instead of accepting
    /// them: a throttling or failing collector.
    refusals: Arc<Mutex<std::collections::VecDeque<String>>>,
}

impl Collector {
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let collector = Collector {
            url,
            spans: Default::default(),
            requests: Default::default(),
            heads: Default::default(),
            refusals: Default::default(),
        };
        let shared = collector.shared();
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(conn, shared.clone()));
            }
        });
        collector
    }

    /// Answers the next exports with `answers` (whole HTTP responses, such
    /// as `503` or `429` with `Retry-After`), in order, then accepts again.
    pub fn refuse_next(&self, answers: &[&str]) {
        self.refusals
            .lock()
            .unwrap()
            .extend(answers.iter().map(|a| a.to_string()));
    }

    fn shared(&self) -> Shared {
        Shared {
            spans: self.spans.clone(),
            requests: self.requests.clone(),
            heads: self.heads.clone(),
            refusals: self.refusals.clone(),
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

/// What the connections' tasks share with the [`Collector`].
#[derive(Clone)]
struct Shared {
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<Mutex<Vec<(String, String)>>>,
    heads: Arc<Mutex<Vec<String>>>,
    refusals: Arc<Mutex<std::collections::VecDeque<String>>>,
}

/// Serves one keep-alive connection: `POST /v1/traces` bodies decoded as
/// `ExportTraceServiceRequest`, each answered `200` with an empty
/// `ExportTraceServiceResponse` (or, while refusals are queued, with the
/// next of them, the body discarded).
async fn serve(mut conn: tokio::net::TcpStream, shared: Shared) {
    let Shared {
        spans,
        requests,
        heads,
        refusals,
    } = shared;
    let mut buffer = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        let mut lines = head.lines();
        let request_line = lines.next().unwrap_or_default().to_string();
        let mut length = 0usize;
        let mut content_type = String::new();
        for line in lines {
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if let Some(v) = lower.strip_prefix("content-type:") {
                content_type = v.trim().to_string();
            }
        }
        while buffer.len() < head_end + length {
            let mut chunk = [0u8; 65536];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buffer[head_end..head_end + length].to_vec();
        buffer.drain(..head_end + length);
        heads.lock().unwrap().push(head.clone());
        let refusal = refusals.lock().unwrap().pop_front();
        if let Some(refusal) = refusal {
            if conn.write_all(refusal.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        requests
            .lock()
            .unwrap()
            .push((request_line.clone(), content_type));
        let decoded = ExportTraceServiceRequest::decode(body.as_slice())
            .expect("an ExportTraceServiceRequest");
        for resource in decoded.resource_spans {
            for scope in resource.scope_spans {
                spans.lock().unwrap().extend(scope.spans);
            }
        }
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                      content-length: 0\r\n\r\n";
        if conn.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// An attribute of `span`, as text.
pub fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(i) => i.to_string(),
            AnyValue::DoubleValue(d) => d.to_string(),
            AnyValue::BoolValue(b) => b.to_string(),
            other => format!("{other:?}"),
        })
}

/// Lower-case hexadecimal, as `traceparent` writes ids.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `span` descends from `ancestor` among `spans`.
pub fn descends(span: &Span, ancestor: &Span, spans: &[Span]) -> bool {
    let mut parent = span.parent_span_id.clone();
    for _ in 0..64 {
        if parent.is_empty() {
            return false;
        }
        if parent == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|s| s.span_id == parent) {
            Some(next) => parent = next.parent_span_id.clone(),
            None => return false,
        }
    }
    false
}
