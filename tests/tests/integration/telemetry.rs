//! OpenTelemetry traces (issue #37): with `telemetry.otlp_endpoint` set,
//! the server sends its spans over OTLP/HTTP (protobuf) to a collector,
//! here a receiver on 127.0.0.1 that decodes them with the
//! `opentelemetry-proto` definitions. One chat answer's tree is checked:
//! the request's span under the caller's `traceparent`, its database
//! statements (SQL, never parameters) and its model call (GenAI
//! conventions), whose `traceparent` the provider receives.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use workspace_tests::TestContext;
use workspace_tests::fake_provider::{FakeProvider, Reply};

/// An OTLP/HTTP collector: every span it was sent.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

impl Collector {
    async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (spans.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(conn, s.clone(), r.clone()));
            }
        });
        Collector {
            url,
            spans,
            requests,
        }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

/// Serves one keep-alive connection: `POST /v1/traces` bodies decoded as
/// `ExportTraceServiceRequest`, each answered `200` with an empty
/// `ExportTraceServiceResponse`.
async fn serve(
    mut conn: tokio::net::TcpStream,
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<Mutex<Vec<(String, String)>>>,
) {
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

fn attribute(span: &Span, key: &str) -> Option<String> {
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

/// The id of the model named `fake` in `org`'s catalog.
async fn model_id(
    cx: &TestContext,
    user: &workspace_tests::TestUser,
    org: uuid::Uuid,
) -> serde_json::Value {
    let (_, models) = workspace_tests::req(
        &cx.base_url,
        &user.token,
        reqwest::Method::GET,
        "/api/models/list",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    models
        .as_array()
        .and_then(|all| all.iter().find(|m| m["name"] == "fake"))
        .map(|m| m["id"].clone())
        .expect("the fake model")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `span` descends from `ancestor` among `spans`.
fn descends(span: &Span, ancestor: &Span, spans: &[Span]) -> bool {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_answer_is_one_trace_from_the_callers_traceparent_to_the_model() {
    let collector = Collector::start().await;
    let fake = FakeProvider::with_default(Reply::openai_text(&["Traced", " answer."])).await;
    let endpoint = collector.url.clone();
    let model = fake.model_config("fake");
    let cx = TestContext::with_config("telemetry_chat", move |c| {
        c.telemetry.otlp_endpoint = Some(endpoint);
        c.telemetry.service_name = Some("workspace-test".into());
        c.models.push(model);
    })
    .await;
    let ada = cx.user("ada-otel").await;
    let org = ada.personal_org().await;
    let model = model_id(&cx, &ada, org).await;
    // The caller's trace: the answer's spans belong to it.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let secret_text = "the parameters never reach a span 7f3a";
    let response = workspace_tests::http()
        .post(format!("{}/api/chat/send_message", cx.base_url))
        .bearer_auth(&ada.token)
        .header("traceparent", format!("00-{trace_id}-{parent_id}-01"))
        .query(&[("org_id", org.to_string())])
        .json(&json!({"content": secret_text, "model_id": model}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body = response.text().await.unwrap();
    assert!(body.contains("Traced"), "{body}");
    // The answer is saved by its own task: wait for it, then stop the
    // server (its spans are flushed at shutdown).
    for _ in 0..100 {
        let (_, chats) = workspace_tests::req(
            &cx.base_url,
            &ada.token,
            reqwest::Method::GET,
            "/api/chat/list",
            &[("org_id", org.to_string())],
            None,
        )
        .await;
        if chats.to_string().contains("Traced") || collector.spans().len() > 20 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    cx.teardown().await;

    let spans = collector.spans();
    let requests = collector.requests.lock().unwrap().clone();
    assert!(
        requests.iter().all(
            |(line, ct)| line.starts_with("POST /v1/traces ") && ct == "application/x-protobuf"
        ),
        "{requests:?}"
    );
    let ours: Vec<Span> = spans
        .iter()
        .filter(|s| hex(&s.trace_id) == trace_id)
        .cloned()
        .collect();
    let request = ours
        .iter()
        .find(|s| s.name == "POST /api/chat/send_message")
        .unwrap_or_else(|| {
            panic!(
                "no request span in the caller's trace: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    assert_eq!(
        hex(&request.parent_span_id),
        parent_id,
        "the caller's span is the parent"
    );
    assert_eq!(
        attribute(request, "http.route").as_deref(),
        Some("/api/chat/send_message")
    );
    assert_eq!(
        attribute(request, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        attribute(request, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(
        attribute(request, "workspace.organization_id"),
        Some(org.to_string())
    );
    // Its statements: SQL text, never a parameter.
    let statements: Vec<&Span> = ours
        .iter()
        .filter(|s| attribute(s, "db.system.name").as_deref() == Some("postgresql"))
        .collect();
    assert!(statements.len() >= 3, "{} statements", statements.len());
    assert!(statements.iter().all(|s| descends(s, request, &ours)));
    assert!(
        statements
            .iter()
            .all(|s| attribute(s, "db.query.text").is_some_and(|q| !q.is_empty())),
    );
    for span in &spans {
        for kv in &span.attributes {
            let text = format!("{:?}", kv.value);
            assert!(
                !text.contains("7f3a"),
                "a parameter in {}: {text}",
                span.name
            );
        }
    }
    // The model call, in the GenAI conventions, under the request.
    let call = ours
        .iter()
        .find(|s| s.name == "chat fake-upstream")
        .unwrap_or_else(|| {
            panic!(
                "no model span: {:?}",
                ours.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    assert!(descends(call, request, &ours));
    assert_eq!(
        attribute(call, "gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(
        attribute(call, "gen_ai.request.model").as_deref(),
        Some("fake-upstream")
    );
    assert_eq!(
        attribute(call, "gen_ai.operation.name").as_deref(),
        Some("chat")
    );
    assert!(
        attribute(call, "gen_ai.usage.input_tokens").is_some(),
        "{call:?}"
    );
    assert!(
        attribute(call, "gen_ai.usage.output_tokens").is_some(),
        "{call:?}"
    );
    let ttft: f64 = attribute(call, "gen_ai.response.time_to_first_token")
        .expect("time to first token")
        .parse()
        .unwrap();
    assert!(ttft > 0.0 && ttft < 10.0, "{ttft}");
    // The provider was told the trace: the model call's span is its parent.
    let sent_all: Vec<String> = fake
        .requests()
        .into_iter()
        .filter_map(|r| r.header("traceparent").map(str::to_string))
        .collect();
    // (Calls outside a request, such as a model's health probe, start
    // traces of their own.)
    let sent = sent_all
        .iter()
        .find(|t| t.contains(trace_id))
        .cloned()
        .unwrap_or_else(|| panic!("the provider got no traceparent of the trace: {sent_all:?}"));
    assert_eq!(sent, format!("00-{trace_id}-{}-01", hex(&call.span_id)));
}

/// Off (the default), nothing is traced and nothing is passed on.
#[tokio::test]
async fn without_a_collector_nothing_is_traced_or_passed_on() {
    let fake = FakeProvider::with_default(Reply::openai_text(&["Plain."])).await;
    let model = fake.model_config("fake");
    let cx = TestContext::with_config("telemetry_off", move |c| c.models.push(model)).await;
    assert!(!workspace_server::telemetry::enabled());
    let ada = cx.user("ada-plain").await;
    let org = ada.personal_org().await;
    let model = model_id(&cx, &ada, org).await;
    let response = workspace_tests::http()
        .post(format!("{}/api/chat/send_message", cx.base_url))
        .bearer_auth(&ada.token)
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .query(&[("org_id", org.to_string())])
        .json(&json!({"content": "hi", "model_id": model}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.text().await.unwrap();
    let requests = fake.requests();
    assert!(!requests.is_empty());
    assert!(requests.iter().all(|r| r.header("traceparent").is_none()));
    cx.teardown().await;
}
