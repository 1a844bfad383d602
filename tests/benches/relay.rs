//! Benchmark (not a test): what the server adds to a streamed answer.
//!
//! A fake OpenAI-compatible provider on 127.0.0.1 answers every request
//! with the same reply: `CHUNKS` content chunks, one every `INTERVAL`. The
//! same request is made `ROUNDS` times directly to the provider (reqwest,
//! SSE parsed the same way) and `ROUNDS` times through the server
//! (`POST /api/conversation/stream_chat` via the generated client, which
//! authenticates, authorizes, stores the user message, loads the history,
//! calls the provider and relays each chunk, then stores the answer).
//!
//! Printed:
//! - time to first token (request sent -> first content chunk received),
//!   direct and through the server, p50/p95, and the difference;
//! - per-chunk relay latency: for each content chunk, the time from the
//!   provider writing it to the client reading it, direct and through the
//!   server (same process, same clock), p50/p95, and the difference.
//!
//! Run with `cargo xtask bench` (release build) or
//! `cargo bench -p workspace-tests --bench relay`.

use std::time::{Duration, Instant};
use workspace_api::conversations::ConversationStreamEvent;
use workspace_client::types::{ConversationCreate, ConversationSessionCreate, StreamChatRequest};
use workspace_server::config::{ModelConfig, ProviderKind};
use workspace_tests::TestContext;
use workspace_tests::fake_provider::{FakeProvider, Reply};
use workspace_tests::sse::EventReader;

const ROUNDS: usize = 30;
const WARMUP: usize = 3;
const CHUNKS: usize = 20;
const INTERVAL: Duration = Duration::from_millis(5);

fn reply() -> Reply {
    let pieces: Vec<String> = (0..CHUNKS).map(|i| format!("token{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Reply::openai_text(&pieces).paced(INTERVAL)
}

/// Arrival instants of the content chunks of one answer, and when the
/// request was sent.
struct Run {
    sent: Instant,
    arrivals: Vec<Instant>,
}

async fn direct(url: &str, http: &reqwest::Client) -> Run {
    let body = serde_json::json!({
        "model": "gpt-bench", "stream": true,
        "messages": [{"role": "user", "content": "hello"}],
    });
    let sent = Instant::now();
    let response = http
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("direct request");
    let mut events = workspace_client::sse::SseReader::from_response(response);
    let mut arrivals = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.expect("direct body");
        if event.data == "[DONE]" {
            continue;
        }
        let chunk: serde_json::Value = event.json().expect("chunk");
        if chunk
            .pointer("/choices/0/delta/content")
            .and_then(|c| c.as_str())
            .is_some_and(|c| !c.is_empty())
        {
            arrivals.push(Instant::now());
        }
    }
    Run { sent, arrivals }
}

async fn through_server(
    client: &workspace_client::Client,
    org: uuid::Uuid,
    session: uuid::Uuid,
) -> Run {
    let sent = Instant::now();
    let response = client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(session)
                .message("hello".to_string()),
        )
        .send()
        .await
        .expect("stream_chat");
    let mut reader = EventReader::new(response.into_inner());
    let mut arrivals = Vec::new();
    while let Some(event) = reader.next().await {
        match event {
            ConversationStreamEvent::Content { .. } => arrivals.push(Instant::now()),
            ConversationStreamEvent::End => break,
            ConversationStreamEvent::Error { error_code, .. } => panic!("error {error_code}"),
            ConversationStreamEvent::Start { .. }
            | ConversationStreamEvent::Reasoning { .. }
            | ConversationStreamEvent::Route { .. }
            | ConversationStreamEvent::Restart { .. } => {}
        }
    }
    Run { sent, arrivals }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (values.len() as f64 - 1.0)).round() as usize;
    values[rank.min(values.len() - 1)]
}

/// TTFTs and per-chunk latencies (ms) of `runs`, whose replies were the
/// provider's requests `first_request..`.
fn measure(runs: &[Run], writes: &[Vec<Instant>]) -> (Vec<f64>, Vec<f64>) {
    let mut ttft = Vec::new();
    let mut relay = Vec::new();
    for (run, written) in runs.iter().zip(writes) {
        assert_eq!(run.arrivals.len(), CHUNKS, "every chunk arrived");
        ttft.push(ms(run.arrivals[0] - run.sent));
        // Data part 0 is the role chunk; content chunk k is part k + 1.
        for (k, arrived) in run.arrivals.iter().enumerate() {
            relay.push(ms(arrived.saturating_duration_since(written[k + 1])));
        }
    }
    (ttft, relay)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let fake = FakeProvider::with_default(reply()).await;
    let base = format!("{}/v1", fake.base_url());
    let provider_base = base.clone();
    let cx = TestContext::with_config("bench_relay", move |c| {
        c.models.push(ModelConfig {
            name: "gpt-bench".into(),
            provider: Some(ProviderKind::Openai),
            upstream_model: None,
            base_url: Some(provider_base),
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
    })
    .await;
    let user = cx.user("bench").await;
    let me = user
        .client
        .users_me()
        .send()
        .await
        .expect("me")
        .into_inner();
    let org = me.organizations[0].id;
    let models = user
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .expect("models")
        .into_inner();
    let model = models
        .iter()
        .find(|m| m.name == "gpt-bench")
        .expect("bench model")
        .id;
    let conversation = user
        .client
        .conversation_create()
        .org_id(org)
        .body(ConversationCreate::builder().title("bench".to_string()))
        .send()
        .await
        .expect("conversation")
        .into_inner()
        .id;
    // A fresh session per answer keeps the history (and so the request
    // size) the same in every round.
    let mut sessions = Vec::new();
    for _ in 0..WARMUP + ROUNDS {
        sessions.push(
            user.client
                .conversation_create_session()
                .org_id(org)
                .body(
                    ConversationSessionCreate::builder()
                        .conversation_id(conversation)
                        .model_id(model),
                )
                .send()
                .await
                .expect("session")
                .into_inner()
                .id,
        );
    }

    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("{base}/chat/completions");

    // Alternate direct and server rounds so that drift affects both.
    let mut direct_runs = Vec::new();
    let mut server_runs = Vec::new();
    let mut direct_index = Vec::new();
    let mut server_index = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let before = fake.requests().len();
        let run = direct(&url, &http).await;
        if i >= WARMUP {
            direct_runs.push(run);
            direct_index.push(before);
        }
        let before = fake.requests().len();
        let run = through_server(&user.client, org, *session).await;
        if i >= WARMUP {
            server_runs.push(run);
            server_index.push(before);
        }
    }
    let writes = fake.write_times();
    let pick = |index: &[usize]| -> Vec<Vec<Instant>> {
        index.iter().map(|&i| writes[i].clone()).collect()
    };
    let (mut direct_ttft, mut direct_relay) = measure(&direct_runs, &pick(&direct_index));
    let (mut server_ttft, mut server_relay) = measure(&server_runs, &pick(&server_index));

    let row = |name: &str, d: &mut Vec<f64>, s: &mut Vec<f64>| {
        let (d50, d95) = (percentile(d, 50.0), percentile(d, 95.0));
        let (s50, s95) = (percentile(s, 50.0), percentile(s, 95.0));
        println!(
            "{name:<22} {d50:>9.3} {d95:>9.3} {s50:>11.3} {s95:>11.3} {:>11.3} {:>11.3}",
            s50 - d50,
            s95 - d95
        );
    };
    println!();
    println!(
        "relay benchmark: {ROUNDS} answers each way (+{WARMUP} warm-up), {CHUNKS} chunks every {} ms from a local fake provider",
        INTERVAL.as_millis()
    );
    println!(
        "{:<22} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11}",
        "milliseconds", "direct50", "direct95", "server50", "server95", "added p50", "added p95"
    );
    row("time to first token", &mut direct_ttft, &mut server_ttft);
    row("per-chunk relay", &mut direct_relay, &mut server_relay);
    println!(
        "(per-chunk relay = provider writes a chunk -> client reads it; {} chunks per side)",
        direct_relay.len()
    );
    cx.teardown().await;
}
