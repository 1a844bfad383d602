//! OpenTelemetry traces (issue #37): with `telemetry.otlp_endpoint` set,
//! the server sends its spans over OTLP/HTTP (protobuf) to a collector,
//! here a receiver on 127.0.0.1 that decodes them with the
//! `opentelemetry-proto` definitions. One chat answer's tree is checked:
//! the request's span under the caller's `traceparent`, its database
//! statements (SQL, never parameters) and its model call (GenAI
//! conventions), whose `traceparent` the provider receives.

use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::json;
use workspace_tests::TestContext;
use workspace_tests::fake_provider::{FakeProvider, Reply};
use workspace_tests::otlp::{Collector, attribute, descends, hex};

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
    let model = ada.model_id(org, "fake").await;
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
    let db = cx.db().await;
    let mut stored = 0;
    for _ in 0..100 {
        stored = db
            .query_one(
                "SELECT count(*) FROM chat_messages WHERE organization_id = $1 \
                 AND role = 'MODEL' AND status = 'complete' AND content = 'Traced answer.'",
                &[&org],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        if stored == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(stored, 1, "the answer is stored");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // Dropshot's own line for the request names the trace.
    let completed = std::fs::read_to_string(&cx.log_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("request completed") && l.contains("/api/chat/send_message"))
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert!(
        completed
            .iter()
            .any(|l| l.contains(&format!("\"trace_id\":\"{trace_id}\""))),
        "{completed:?}"
    );
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
    let model = ada.model_id(org, "fake").await;
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

/// Each request's path and `traceparent`.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A peer on 127.0.0.1 for the work a request leaves behind: an
/// OpenAI-compatible `/v1/embeddings` (a vector per input) and a webhook
/// receiver (`200` to anything else). It keeps every request's path and
/// `traceparent`.
struct Peer {
    url: String,
    seen: Seen,
}

impl Peer {
    async fn start() -> Peer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let shared = seen.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(answer(socket, shared.clone()));
            }
        });
        Peer { url, seen }
    }

    /// The `traceparent` of every request to a path starting with `path`.
    fn traceparents(&self, path: &str) -> Vec<Option<String>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p.starts_with(path))
            .map(|(_, t)| t.clone())
            .collect()
    }
}

/// Answers one request on `socket` (then closes it).
async fn answer(mut socket: tokio::net::TcpStream, seen: Seen) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string();
    let mut length = 0;
    let mut traceparent = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "traceparent" => traceparent = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    while buffer.len() < head_end + length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    seen.lock().unwrap().push((path.clone(), traceparent));
    let body = &buffer[head_end..head_end + length];
    let reply = if path == "/v1/embeddings" {
        let input: serde_json::Value = serde_json::from_slice(body).unwrap();
        let n = input["input"].as_array().map_or(0, Vec::len);
        let data: Vec<serde_json::Value> = (0..n)
            .map(|i| {
                let mut v = vec![0.0f32; 384];
                v[i % 384] = 1.0;
                json!({"index": i, "embedding": v})
            })
            .collect();
        json!({"data": data, "usage": {"prompt_tokens": 7 * n, "total_tokens": 7 * n}})
    } else {
        json!({"ok": true})
    };
    let reply = reply.to_string();
    let _ = socket
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{reply}",
                reply.len()
            )
            .as_bytes(),
        )
        .await;
}

/// Work a traced request leaves behind joins its trace: an ingestion
/// job (with its embeddings), a webhook delivery, and an MCP tool call
/// (under the model's `execute_tool` span) are spans of the caller's
/// trace, and the embedding service, the webhook receiver and the MCP
/// server each receive the `traceparent` of their own span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_work_and_tool_calls_join_the_trace_that_started_them() {
    use workspace_server::mcp::config::{McpAuth, McpServerConfig};
    use workspace_tests::mcp_pager::McpPager;
    workspace_tests::ensure_local_model().await;
    let collector = Collector::start().await;
    let peer = Peer::start().await;
    let pager = McpPager::start().await;
    let (endpoint, embeddings, mcp) = (
        collector.url.clone(),
        format!("{}/v1", peer.url),
        pager.url(),
    );
    let cx = TestContext::with_config("telemetry_background", move |c| {
        c.telemetry.otlp_endpoint = Some(endpoint);
        c.fetch.allow_private_networks = true;
        c.webhooks.allow_http = true;
        c.webhooks.poll_interval_ms = 100;
        c.kb.poll_interval_ms = 100;
        c.embedders
            .push(workspace_server::kb_config::EmbedderConfig {
                name: "traced-embedder".into(),
                kind: workspace_server::kb_config::EmbedderKind::Openai,
                upstream_model: Some("embed-upstream".into()),
                base_url: Some(embeddings),
                api_key_env: None,
                dimensions: 384,
            });
        c.mcp_servers = vec![McpServerConfig {
            name: "Pager".into(),
            toolkit_name: "Pager".into(),
            toolkit_slug: "pager".into(),
            toolkit_logo: None,
            url: mcp,
            auth: McpAuth::None,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
        }];
    })
    .await;
    let ada = cx.user("ada-queued").await;
    let org = ada.personal_org().await;
    // Each request is the caller's own trace.
    let traced = |trace: &'static str, method: reqwest::Method, path: &str| {
        workspace_tests::http()
            .request(method, format!("{}{path}", cx.base_url))
            .bearer_auth(&ada.token)
            .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
    };

    // A knowledge base: its ingestion job runs later, on a worker.
    let ingest_trace = "11111111111111111111111111111111";
    let file = ada
        .client
        .chat_upload_file(
            org,
            None,
            "notes.txt",
            b"Tracing spans a queue. ".repeat(40),
        )
        .await
        .unwrap()
        .into_inner()
        .id;
    let kb = traced(ingest_trace, reqwest::Method::POST, "/api/kb/create")
        .query(&[("org_id", org.to_string())])
        .json(&json!({
            "name": "Traced", "description": "", "embedding_model": "traced-embedder",
            "sources": [{"type": "file", "config": {"file_ids": [file]}}]
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(kb.status().as_u16(), 201, "{:?}", kb.text().await);
    let kb: serde_json::Value = kb.json().await.unwrap();

    // A webhook's test delivery, sent by a worker too.
    let hook_trace = "22222222222222222222222222222222";
    let hook = ada
        .client
        .org_webhooks_create()
        .org_id(org)
        .body(
            workspace_client::types::WebhookEndpointCreate::builder()
                .url(format!("{}/hook", peer.url))
                .event_types(vec!["webhook.test".to_string()]),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let test = traced(hook_trace, reqwest::Method::POST, "/api/org/webhooks/test")
        .query(&[
            ("org_id", org.to_string()),
            ("endpoint_id", hook.endpoint.id.to_string()),
        ])
        .send()
        .await
        .unwrap();
    assert!(test.status().is_success(), "{:?}", test.text().await);

    // An MCP tool, called by the model during a playground answer.
    let mcp_trace = "33333333333333333333333333333333";
    let server_id = ada
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    ada.client
        .mcp_connect_account()
        .org_id(org)
        .body(workspace_client::types::ConnectAccount::builder().server_id(server_id))
        .send()
        .await
        .unwrap();
    let instance = ada
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances[0]
        .id;
    let played = traced(mcp_trace, reqwest::Method::POST, "/api/mcp_playground/chat")
        .query(&[("org_id", org.to_string())])
        .json(
            &json!({"content": "/tool pager_list_messages {}", "mcp_instance_ids": [instance],
                      "model": "offline-dev-model"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(played.status().as_u16(), 200);
    let played = played.text().await.unwrap();
    assert!(played.contains("page-2"), "{played}");

    // Wait for the workers: the document embedded, the delivery received.
    let started = std::time::Instant::now();
    loop {
        let (_, status) = workspace_tests::req(
            &cx.base_url,
            &ada.token,
            reqwest::Method::GET,
            "/api/kb/ingestion_status",
            &[("kb_id", kb["id"].as_str().unwrap().to_string())],
            None,
        )
        .await;
        if status["status"] == "ready" && !peer.traceparents("/hook").is_empty() {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "{status} {:?}",
            peer.traceparents("/")
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    cx.teardown().await;
    let spans = collector.spans();
    let of = |trace: &str| -> Vec<Span> {
        spans
            .iter()
            .filter(|s| hex(&s.trace_id) == trace)
            .cloned()
            .collect()
    };
    let named = |trace: &[Span], name: &str| -> Span {
        trace
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "no span {name}: {:?}",
                    trace.iter().map(|s| &s.name).collect::<Vec<_>>()
                )
            })
    };
    // Sent with the span it stands for.
    let sent_by = |traceparents: Vec<Option<String>>, trace: &str, span: &Span| {
        let expected = format!("00-{trace}-{}-01", hex(&span.span_id));
        assert!(
            traceparents.iter().any(|t| t.as_deref() == Some(&expected)),
            "{expected} not in {traceparents:?}"
        );
    };

    // Ingestion: request → job → embeddings (GenAI names), sent on.
    let ingestion = of(ingest_trace);
    let request = named(&ingestion, "POST /api/kb/create");
    let job = named(&ingestion, "kb ingest");
    assert!(descends(&job, &request, &ingestion));
    assert_eq!(
        attribute(&job, "workspace.kb_id").as_deref(),
        kb["id"].as_str()
    );
    let embed = named(&ingestion, "embeddings embed-upstream");
    assert!(descends(&embed, &job, &ingestion));
    assert_eq!(
        attribute(&embed, "gen_ai.operation.name").as_deref(),
        Some("embeddings")
    );
    assert!(attribute(&embed, "gen_ai.usage.input_tokens").is_some());
    assert!(
        ingestion
            .iter()
            .any(|s| attribute(s, "db.system.name").is_some() && descends(s, &job, &ingestion)),
        "the job's statements are its children"
    );
    sent_by(peer.traceparents("/v1/embeddings"), ingest_trace, &embed);

    // The webhook delivery: request → delivery, its traceparent sent.
    let hooks = of(hook_trace);
    let request = named(&hooks, "POST /api/org/webhooks/test");
    let delivery = named(&hooks, "webhook webhook.test");
    assert!(descends(&delivery, &request, &hooks));
    assert_eq!(
        attribute(&delivery, "http.response.status_code").as_deref(),
        Some("200")
    );
    sent_by(peer.traceparents("/hook"), hook_trace, &delivery);

    // The MCP call: request → execute_tool → tools/call, sent on.
    let mcp = of(mcp_trace);
    let request = named(&mcp, "POST /api/mcp_playground/chat");
    let tool = named(&mcp, "execute_tool pager_list_messages");
    assert!(descends(&tool, &request, &mcp));
    let call = named(&mcp, "tools/call list_messages");
    assert!(descends(&call, &tool, &mcp));
    assert_eq!(
        attribute(&call, "server.address").as_deref(),
        Some("127.0.0.1")
    );
    let called: Vec<Option<String>> = pager
        .traces()
        .into_iter()
        .filter(|(method, _)| method == "tools/call")
        .map(|(_, t)| t)
        .collect();
    sent_by(called, mcp_trace, &call);
}

/// `telemetry.sample_ratio = 0`: the server records none of its own
/// traces, yet a caller that samples its trace (`traceparent` flags `01`)
/// gets its requests recorded, and one that does not (`00`) does not
/// (parent-based sampling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_sample_ratio_records_only_what_callers_sample() {
    let collector = Collector::start().await;
    let endpoint = collector.url.clone();
    let cx = TestContext::with_config("telemetry_sampled", move |c| {
        c.telemetry.otlp_endpoint = Some(endpoint);
        c.telemetry.sample_ratio = Some(0.0);
    })
    .await;
    let ada = cx.user("ada-sampled").await;
    let sampled = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let unsampled = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    for traceparent in [
        Some(format!("00-{sampled}-00f067aa0ba902b7-01")),
        Some(format!("00-{unsampled}-00f067aa0ba902b7-00")),
        None,
    ] {
        let mut request = workspace_tests::http()
            .get(format!("{}/api/users/me", cx.base_url))
            .bearer_auth(&ada.token);
        if let Some(t) = traceparent {
            request = request.header("traceparent", t);
        }
        assert_eq!(request.send().await.unwrap().status().as_u16(), 200);
    }
    // The conversation list, twice (the first prepares its statement):
    // the second sends the authorization statement and the page as one
    // batch, one span.
    let org = ada.personal_org().await;
    for _ in 0..2 {
        let listed = workspace_tests::http()
            .get(format!("{}/api/conversation/list", cx.base_url))
            .query(&[("org_id", org.to_string())])
            .bearer_auth(&ada.token)
            .header("traceparent", format!("00-{sampled}-00f067aa0ba902b7-01"))
            .send()
            .await
            .unwrap();
        assert_eq!(listed.status().as_u16(), 200);
    }
    cx.teardown().await;
    let spans = collector.spans();
    let batches: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "BATCH SELECT postgresql")
        .collect();
    assert_eq!(
        batches.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let batch = batches[0];
    assert_eq!(
        attribute(batch, "db.operation.name").as_deref(),
        Some("BATCH SELECT")
    );
    assert_eq!(
        attribute(batch, "db.operation.batch.size").as_deref(),
        Some("2")
    );
    let text = attribute(batch, "db.query.text").unwrap_or_default();
    assert!(
        text.starts_with("SELECT u.id AS user_id") && text.contains("; SELECT id, title"),
        "{text}"
    );
    assert!(
        spans
            .iter()
            .any(|s| s.name == "GET /api/users/me" && hex(&s.trace_id) == sampled),
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) == sampled),
        "only the caller's sampled trace: {:?}",
        spans
            .iter()
            .map(|s| (s.name.clone(), hex(&s.trace_id)))
            .collect::<Vec<_>>()
    );
}

/// The exporter as a collector sees it: protobuf posted to `/v1/traces`
/// with the configured headers; a throttled (`429` with `Retry-After`) or
/// unavailable (`503`) collector is retried, and the batch arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_collector_gets_the_batch_again_with_the_configured_headers() {
    let collector = Collector::start().await;
    collector.refuse_next(&[
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
        "HTTP/1.1 429 Too Many Requests\r\nretry-after: 0\r\ncontent-length: 0\r\n\r\n",
    ]);
    let endpoint = collector.url.clone();
    let cx = TestContext::with_config("telemetry_retried", move |c| {
        c.telemetry.otlp_endpoint = Some(endpoint);
        c.telemetry
            .headers
            .insert("x-collector-key".into(), "k-7f3a".into());
    })
    .await;
    let ada = cx.user("ada-retried").await;
    let trace_id = "cccccccccccccccccccccccccccccccc";
    let response = workspace_tests::http()
        .get(format!("{}/api/users/me", cx.base_url))
        .bearer_auth(&ada.token)
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    // Shutting down flushes the batch: refused twice, then accepted.
    cx.teardown().await;
    let heads = collector.heads.lock().unwrap().clone();
    assert!(
        heads.len() >= 3,
        "two refusals and an accepted export: {heads:?}"
    );
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        assert!(lower.starts_with("post /v1/traces "), "{head}");
        assert!(
            lower.contains("content-type: application/x-protobuf"),
            "{head}"
        );
        assert!(lower.contains("x-collector-key: k-7f3a"), "{head}");
    }
    let spans = collector.spans();
    let request_spans: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "GET /api/users/me" && hex(&s.trace_id) == trace_id)
        .collect();
    assert_eq!(
        request_spans.len(),
        1,
        "the request's span arrives once: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
}
