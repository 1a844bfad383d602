//! Benchmark (not a test): what the chat area adds, measured side by side.
//!
//! A fake OpenAI-compatible provider on 127.0.0.1 answers every request
//! with `CHUNKS` content chunks, one every `INTERVAL`. Two server
//! instances (in this process, release build) share the test database.
//! Interleaved rounds measure:
//! - time to first token (request sent -> first content chunk read):
//!   straight to the provider; `POST /api/chat/send_message` for a new
//!   chat without a knowledge base; and with one knowledge base of
//!   `DOCS` documents ingested by the local embedder (the question is
//!   embedded, the hybrid search runs, the chunks go into the prompt with
//!   citations): a question not asked before in every round, then the
//!   same question again (the server caches query vectors). Printed with
//!   the overhead over the bare provider, and what retrieval adds over the
//!   chat without a knowledge base;
//! - resume latency: an answer is started on instance A, the client drops
//!   the connection after the first content event and reconnects to
//!   instance B with `GET /api/chat/stream` and `Last-Event-ID`; the time
//!   from the reconnect request to the first replayed event, and to the
//!   end of the answer compared with an answer read without a break;
//! - WebSocket fan-out: a rename (`PUT /api/chat`) on instance A, read by
//!   two WebSocket clients of the same user, one on A and one on B; the
//!   time from sending the rename to each client reading the notice.
//!
//! Run with `cargo xtask bench chat`.

use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_server::config::{Config, ModelConfig, ProviderKind};
use workspace_tests::fake_provider::{FakeProvider, Reply};
use workspace_tests::sse::NumberedReader;
use workspace_tests::{TestContext, ws};

const ROUNDS: usize = 30;
const WARMUP: usize = 3;
const CHUNKS: usize = 20;
const INTERVAL: Duration = Duration::from_millis(5);
const MODEL: &str = "all-minilm-l6-v2";
const DOCS: usize = 8;

fn reply() -> Reply {
    let pieces: Vec<String> = (0..CHUNKS).map(|i| format!("token{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Reply::openai_text(&pieces).paced(INTERVAL)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (values.len() as f64 - 1.0)).round() as usize;
    values[rank.min(values.len() - 1)]
}

/// Time from sending to the first content chunk, straight to the provider.
async fn direct(http: &reqwest::Client, url: &str) -> Duration {
    let body = json!({
        "model": "gpt-bench", "stream": true,
        "messages": [{"role": "user", "content": "What do the gardeners do?"}],
    });
    let sent = Instant::now();
    let response = http
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("direct request");
    let mut events = workspace_client::sse::SseReader::from_response(response);
    let mut first = None;
    while let Some(event) = events.next().await {
        let event = event.expect("direct body");
        if event.data == "[DONE]" || first.is_some() {
            continue;
        }
        let chunk: Value = event.json().expect("chunk");
        if chunk
            .pointer("/choices/0/delta/content")
            .and_then(|c| c.as_str())
            .is_some_and(|c| !c.is_empty())
        {
            first = Some(sent.elapsed());
        }
    }
    first.expect("a content chunk")
}

struct Instance {
    base: String,
    token: String,
    org: Uuid,
    http: reqwest::Client,
}

impl Instance {
    async fn open(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
        last_event_id: Option<i32>,
    ) -> reqwest::Response {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .query(query);
        if let Some(b) = body {
            r = r.json(&b);
        }
        if let Some(id) = last_event_id {
            r = r.header("Last-Event-ID", id.to_string());
        }
        let response = r.send().await.expect("request");
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response
    }

    async fn send(&self, body: Value) -> NumberedReader {
        NumberedReader::new(
            self.open(
                Method::POST,
                "/api/chat/send_message",
                &[("org_id", self.org.to_string())],
                Some(body),
                None,
            )
            .await,
        )
    }
}

/// Time to the first content event of a new chat's answer; the events
/// are read to the end.
async fn through_server(a: &Instance, body: Value) -> Duration {
    let sent = Instant::now();
    let mut reader = a.send(body).await;
    let mut first = None;
    while let Some((_, e)) = reader.next().await {
        match e["type"].as_str() {
            Some("content") if first.is_none() => first = Some(sent.elapsed()),
            Some("error") => panic!("error event {e}"),
            _ => {}
        }
    }
    first.expect("a content event")
}

fn row(name: &str, base: &mut [f64], values: &mut [f64]) {
    let (b50, b95) = (percentile(base, 50.0), percentile(base, 95.0));
    let (v50, v95) = (percentile(values, 50.0), percentile(values, 95.0));
    println!(
        "{name:<34} {v50:>9.2} {v95:>9.2} {:>11.2} {:>11.2}",
        v50 - b50,
        v95 - b95
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

async fn bench() {
    workspace_tests::ensure_local_model().await;
    let fake = FakeProvider::with_default(reply()).await;
    let provider = format!("{}/v1", fake.base_url());
    let configure = move |c: &mut Config| {
        c.models.push(ModelConfig {
            name: "gpt-bench".into(),
            provider: Some(ProviderKind::Openai),
            upstream_model: None,
            base_url: Some(provider.clone()),
            api_key: Some("bench-key".into()),
            api_key_env: None,
            max_tokens: None,
            context_tokens: None,
            input: None,
            reasoning: None,
            max_output_tokens: None,
            deployments: Vec::new(),
            fallbacks: Vec::new(),
            context_window_fallbacks: Vec::new(),
            content_policy_fallbacks: Vec::new(),
        });
        c.kb.poll_interval_ms = 50;
    };
    let cx = TestContext::with_config("bench_chat", configure.clone()).await;
    let second = cx.second_instance(configure).await;
    let user = cx.user("bench").await;
    let org = user.personal_org().await;
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let a = Instance {
        base: cx.base_url.clone(),
        token: user.token.clone(),
        org,
        http: http.clone(),
    };
    let b = Instance {
        base: format!("http://{}", second.local_addr()),
        token: user.token.clone(),
        org,
        http: http.clone(),
    };
    let models: Value = a
        .open(
            Method::GET,
            "/api/models/list",
            &[("org_id", org.to_string())],
            None,
            None,
        )
        .await
        .json()
        .await
        .expect("models");
    let model_id = models
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == "gpt-bench"))
        .and_then(|m| m["id"].as_str())
        .expect("the bench model")
        .to_string();

    // One knowledge base: DOCS uploads of a few paragraphs each.
    let topics = [
        "gardeners prune the roses in early spring and mulch the beds",
        "the harbour master schedules the ferries and logs the tides",
        "accountants close the books at the end of every quarter",
        "pilots file a flight plan and check the weather before departure",
        "bakers proof the dough overnight and bake before dawn",
        "engineers review each change and run the test suite",
        "the committee meets monthly to approve the budget",
        "customers return goods within thirty days with a receipt",
    ];
    let mut files = Vec::new();
    for i in 0..DOCS {
        let text = (0..40)
            .map(|p| {
                format!(
                    "Paragraph {p} of note {i}: {}.",
                    topics[(i + p) % topics.len()]
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        files.push(
            user.client
                .chat_upload_file(org, None, &format!("note{i}.txt"), text.into_bytes())
                .await
                .expect("upload")
                .into_inner()
                .id,
        );
    }
    let kb: Value = a
        .open(
            Method::POST,
            "/api/kb/create",
            &[("org_id", org.to_string())],
            Some(
                json!({"name": "bench", "description": "", "embedding_model": MODEL,
                "sources": [{"type": "file", "config": {"file_ids": files}}]}),
            ),
            None,
        )
        .await
        .json()
        .await
        .expect("kb");
    let kb_id = kb["id"].as_str().expect("kb id").to_string();
    loop {
        let status: Value = a
            .open(
                Method::GET,
                "/api/kb/ingestion_status",
                &[("kb_id", kb_id.clone())],
                None,
                None,
            )
            .await
            .json()
            .await
            .expect("status");
        if status["status"] == "ready" {
            assert_eq!(status["documents_failed"], 0, "{status}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let chunks: i64 = cx
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM kb_chunks WHERE kb_id = $1::text::uuid",
            &[&kb_id],
        )
        .await
        .expect("chunks")
        .get(0);

    let url = format!("{}/v1/chat/completions", fake.base_url());
    let question = "What do the gardeners do?";
    let plain = json!({"content": question, "model_id": model_id});
    // The server caches query vectors: every round asks the knowledge
    // base a question not asked before, and the same one again.
    let with_kb = |i: usize| {
        json!({"content": format!("What do the gardeners do in week {i}?"),
            "model_id": model_id, "knowledge_base_ids": [kb_id]})
    };
    let (mut d, mut s, mut k, mut kc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..WARMUP + ROUNDS {
        let t_direct = direct(&http, &url).await;
        let t_plain = through_server(&a, plain.clone()).await;
        let t_kb = through_server(&a, with_kb(i)).await;
        let t_kb_cached = through_server(&a, with_kb(i)).await;
        if i >= WARMUP {
            d.push(ms(t_direct));
            s.push(ms(t_plain));
            k.push(ms(t_kb));
            kc.push(ms(t_kb_cached));
        }
    }

    // Resume: one chat, answers broken and unbroken, alternately.
    let chat_id = {
        let mut reader = a
            .send(json!({"content": "hello", "model_id": model_id}))
            .await;
        let (_, start) = reader.next().await.expect("start");
        let _ = reader.collect().await;
        start["chat_id"].as_str().expect("chat id").to_string()
    };
    let mut first_replayed = Vec::new();
    let (mut total_resumed, mut total_unbroken) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + ROUNDS {
        let (first, total, n_resumed) = resumed_in(&a, &b, &chat_id, &model_id).await;
        let (whole, n_whole) = unbroken_in(&a, &chat_id, &model_id).await;
        assert_eq!(n_resumed, n_whole, "every event exactly once");
        if i >= WARMUP {
            first_replayed.push(ms(first));
            total_resumed.push(ms(total));
            total_unbroken.push(ms(whole));
        }
    }

    // WebSocket fan-out: the same user's clients on A and on B.
    let mut ws_a = ws::open(&a.base, org, &ws::ticket(&a.base, &a.token, org).await).await;
    let mut ws_b = ws::open(&b.base, org, &ws::ticket(&b.base, &b.token, org).await).await;
    for w in [&mut ws_a, &mut ws_b] {
        let ready = ws::next(w, Duration::from_secs(10)).await.expect("ready");
        assert_eq!(ready["type"], "ready");
    }
    let (mut same, mut across) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + ROUNDS {
        let title = format!("Renamed {i}");
        let sent = Instant::now();
        a.open(
            Method::PUT,
            "/api/chat",
            &[("org_id", org.to_string()), ("chat_id", chat_id.clone())],
            Some(json!({"title": title})),
            None,
        )
        .await;
        let (wa, wb) = tokio::join!(
            async {
                loop {
                    let n = ws::next(&mut ws_a, Duration::from_secs(10))
                        .await
                        .expect("notice on A");
                    if n["title"] == title.as_str() {
                        return sent.elapsed();
                    }
                }
            },
            async {
                loop {
                    let n = ws::next(&mut ws_b, Duration::from_secs(10))
                        .await
                        .expect("notice on B");
                    if n["title"] == title.as_str() {
                        return sent.elapsed();
                    }
                }
            }
        );
        if i >= WARMUP {
            same.push(ms(wa));
            across.push(ms(wb));
        }
    }

    println!();
    println!(
        "chat benchmark: {ROUNDS} rounds each (+{WARMUP} warm-up), interleaved; a local fake provider \
         sends {CHUNKS} chunks every {} ms; knowledge base: {DOCS} documents, {chunks} chunks, local {MODEL}",
        INTERVAL.as_millis()
    );
    println!(
        "{:<34} {:>9} {:>9} {:>11} {:>11}",
        "milliseconds", "p50", "p95", "added p50", "added p95"
    );
    let (d50, d95) = (percentile(&mut d, 50.0), percentile(&mut d, 95.0));
    println!("{:<34} {d50:>9.2} {d95:>9.2}", "TTFT, provider direct");
    row("TTFT, send_message (new chat)", &mut d, &mut s);
    row("TTFT, send_message + 1 KB", &mut d, &mut k);
    row("  the same question again", &mut d, &mut kc);
    // What retrieval adds: the knowledge-base line minus the plain one.
    let (s50, s95) = (percentile(&mut s, 50.0), percentile(&mut s, 95.0));
    let (k50, k95) = (percentile(&mut k, 50.0), percentile(&mut k, 95.0));
    println!(
        "{:<34} {:>9.2} {:>9.2}",
        "retrieval added (KB - new chat)",
        k50 - s50,
        k95 - s95
    );
    let (r50, r95) = (
        percentile(&mut first_replayed, 50.0),
        percentile(&mut first_replayed, 95.0),
    );
    println!(
        "{:<34} {r50:>9.2} {r95:>9.2}",
        "resume on B: first replayed event"
    );
    row(
        "answer end, resumed vs unbroken",
        &mut total_unbroken,
        &mut total_resumed,
    );
    let (a50, a95) = (percentile(&mut same, 50.0), percentile(&mut same, 95.0));
    println!(
        "{:<34} {a50:>9.2} {a95:>9.2}",
        "rename -> WebSocket, same instance"
    );
    row(
        "rename -> WebSocket, other instance",
        &mut same,
        &mut across,
    );
    println!(
        "(added = minus the line's baseline: the provider direct for TTFT, the unbroken answer for resume, \
         the same instance's client for fan-out)"
    );
    second.shutdown().await.expect("second instance stops");
    cx.teardown().await;
}

async fn unbroken_in(a: &Instance, chat_id: &str, model_id: &str) -> (Duration, usize) {
    let sent = Instant::now();
    let events = a
        .send(json!({"content": "Tell me more", "chat_id": chat_id, "model_id": model_id}))
        .await
        .collect()
        .await;
    assert_eq!(events.last().expect("events").1["type"], "end");
    (sent.elapsed(), events.len())
}

async fn resumed_in(
    a: &Instance,
    b: &Instance,
    chat_id: &str,
    model_id: &str,
) -> (Duration, Duration, usize) {
    let sent = Instant::now();
    let mut reader = a
        .send(json!({"content": "Tell me more", "chat_id": chat_id, "model_id": model_id}))
        .await;
    let mut message_id = None;
    let mut last = None;
    let mut seen = 0;
    while let Some((id, e)) = reader.next().await {
        seen += 1;
        last = id;
        if e["type"] == "start" {
            message_id = e["message_id"].as_str().map(str::to_string);
        }
        if e["type"] == "content" {
            break;
        }
    }
    drop(reader);
    let message_id = message_id.expect("a start event");
    let reconnect = Instant::now();
    let mut reader = NumberedReader::new(
        b.open(
            Method::GET,
            "/api/chat/stream",
            &[("org_id", b.org.to_string()), ("message_id", message_id)],
            None,
            last,
        )
        .await,
    );
    let (first_id, _) = reader.next().await.expect("a replayed event");
    let first = reconnect.elapsed();
    assert_eq!(first_id, last.map(|n| n + 1), "resumed after the last seen");
    seen += 1;
    let rest = reader.collect().await;
    assert_eq!(rest.last().expect("events").1["type"], "end");
    (first, sent.elapsed(), seen + rest.len())
}
