//! Benchmark (not a test): what recording usage and checking budgets add
//! to a chat answer (issue #36), measured side by side.
//!
//! A fake OpenAI-compatible provider on 127.0.0.1 answers every request
//! with `CHUNKS` content chunks, one every `INTERVAL`. Two server
//! instances (in this process, release build) share the test database:
//! `off` runs with `usage.enabled = false` (the code path before usage
//! and budgets), `on` with the defaults. Interleaved rounds of
//! `POST /api/chat/send_message` (a new chat each time) measure the time
//! to the first content event (TTFT) and to the end of the answer:
//! - through `off`;
//! - through `on`, for an organization without budgets (recorded in the
//!   background; no database round trip added to the answer);
//! - through `on`, for an organization with a budget (one more statement
//!   before the model is called: the atomic check and reservation).
//!
//! Run with `cargo xtask bench usage`.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_server::config::{Config, ModelConfig, ProviderKind};
use workspace_tests::TestContext;
use workspace_tests::fake_provider::{FakeProvider, Reply};

const ROUNDS: usize = 60;
const WARMUP: usize = 5;
const CHUNKS: usize = 20;
const INTERVAL: Duration = Duration::from_millis(2);

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (values.len() as f64 - 1.0)).round() as usize;
    values[rank.min(values.len() - 1)]
}

fn configure(url: String, enabled: bool) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        c.providers.retry_backoff_ms = 5;
        c.usage.enabled = enabled;
        c.models.insert(
            0,
            ModelConfig {
                name: "bench".into(),
                provider: Some(ProviderKind::OpenaiCompatible),
                upstream_model: None,
                base_url: Some(url),
                api_key: Some("sk-bench".into()),
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
            },
        );
    }
}

/// `(TTFT, end)` of one new chat's answer through `base`.
async fn answer(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    org: Uuid,
    model: Uuid,
) -> (f64, f64) {
    let sent = Instant::now();
    let response = http
        .post(format!("{base}/api/chat/send_message"))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(token)
        .json(&json!({"content": "What do the gardeners do?", "model_id": model}))
        .send()
        .await
        .expect("send_message");
    assert!(response.status().is_success(), "{}", response.status());
    let mut events = workspace_client::sse::SseReader::from_response(response);
    let mut first = None;
    while let Some(event) = events.next().await {
        let event = event.expect("event");
        let e: Value = event.json().expect("json");
        match e["type"].as_str() {
            Some("content") if first.is_none() => first = Some(sent.elapsed()),
            Some("error") => panic!("error event {e}"),
            _ => {}
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(first.expect("a content event")), ms(sent.elapsed()))
}

async fn model_id(http: &reqwest::Client, base: &str, token: &str, org: Uuid) -> Uuid {
    let models: Value = http
        .get(format!("{base}/api/models/list"))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(token)
        .send()
        .await
        .expect("models")
        .json()
        .await
        .expect("models json");
    models
        .as_array()
        .expect("list")
        .iter()
        .find(|m| m["name"] == "bench")
        .and_then(|m| m["id"].as_str())
        .expect("the bench model")
        .parse()
        .expect("uuid")
}

#[tokio::main]
async fn main() {
    let pieces: Vec<String> = (0..CHUNKS).map(|i| format!("token{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let fake = FakeProvider::with_default(Reply::openai_text(&pieces).paced(INTERVAL)).await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("bench_usage", configure(url.clone(), false)).await;
    let on = cx.second_instance(configure(url, true)).await;
    let off_base = cx.base_url.clone();
    let on_base = format!("http://{}", on.local_addr());
    let http = workspace_tests::http();
    // Two users: one organization without budgets, one with a budget far
    // from its limit.
    let plain = cx.user("plain").await;
    let budgeted = cx.user("budgeted").await;
    let plain_org = plain.personal_org().await;
    let budget_org = budgeted.personal_org().await;
    let status = http
        .post(format!("{on_base}/api/org/budgets/create"))
        .query(&[("org_id", budget_org.to_string())])
        .bearer_auth(&budgeted.token)
        .json(
            &json!({"scope": "organization", "metric": "tokens", "period": "month",
                      "limit": 1_000_000_000i64}),
        )
        .send()
        .await
        .expect("budget")
        .status();
    assert_eq!(status.as_u16(), 201);
    let plain_model = model_id(&http, &off_base, &plain.token, plain_org).await;
    let budget_model = model_id(&http, &off_base, &budgeted.token, budget_org).await;

    let (mut off_t, mut off_e) = (Vec::new(), Vec::new());
    let (mut on_t, mut on_e) = (Vec::new(), Vec::new());
    let (mut b_t, mut b_e) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS + WARMUP {
        let a = answer(&http, &off_base, &plain.token, plain_org, plain_model).await;
        let b = answer(&http, &on_base, &plain.token, plain_org, plain_model).await;
        let c = answer(&http, &on_base, &budgeted.token, budget_org, budget_model).await;
        if i >= WARMUP {
            off_t.push(a.0);
            off_e.push(a.1);
            on_t.push(b.0);
            on_e.push(b.1);
            b_t.push(c.0);
            b_e.push(c.1);
        }
    }
    println!();
    println!(
        "usage benchmark: {ROUNDS} rounds (+{WARMUP} warm-up), interleaved; a local fake provider \
         sends {CHUNKS} chunks every {} ms",
        INTERVAL.as_millis()
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>9}",
        "milliseconds", "TTFT p50", "TTFT p95", "end p50", "end p95"
    );
    for (name, t, e) in [
        ("usage off (before)", &mut off_t, &mut off_e),
        ("usage on, no budget", &mut on_t, &mut on_e),
        (
            "usage on, a budget (admission statement)",
            &mut b_t,
            &mut b_e,
        ),
    ] {
        println!(
            "{name:<44} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
            percentile(t, 50.0),
            percentile(t, 95.0),
            percentile(e, 50.0),
            percentile(e, 95.0)
        );
    }
    on.shutdown().await.expect("the second instance stops");
    cx.teardown().await;
}
