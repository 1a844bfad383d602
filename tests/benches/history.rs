//! `cargo xtask bench history`: an answer's start and memory beside the
//! length of its history (issue #33). Not a test.
//!
//! One server instance in this process (so a counting allocator sees its
//! heap), the offline model without pauses (`offline_chunk_delay_ms = 0`,
//! the default `context_tokens`). Every round, for each area (chat
//! `send_message`, conversation `stream_chat`) and each history length
//! (`HISTORY_SIZES`: 10, 200 (the row cap) and 10,000 earlier messages of
//! `MESSAGE_BYTES` bytes, stored beforehand with one `INSERT` into a fresh
//! chat or session each, then `VACUUM ANALYZE`), one answer is read to its
//! end, one at a time. Prints per case:
//! - time to the first `content` event, p50 and p95 (request sent -> event
//!   read);
//! - the heap's peak above its level when the request was sent (the whole
//!   process: client, server and the answer's tasks), median;
//! - the bytes allocated while the answer ran (all allocations, freed or
//!   not), median;
//! - the earlier messages the model received (the offline model says how
//!   many).
//!
//! `HISTORY_ROUNDS` (default 20) changes the rounds; 3 warm-up rounds
//! come first. About a minute. `HISTORY_EXPLAIN=1` also prints the plan of
//! the longest chat's history statement (it must read the chat's own
//! index: about 200 rows, not the table).

use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::Client;
use workspace_client::sse::SseReader;
use workspace_client::types;
use workspace_tests::{TestContext, resources};

/// Counts the process's heap: bytes live now, their peak, and bytes
/// allocated in all.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let live = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(live, Relaxed);
    ALLOCATED.fetch_add(n, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

const HISTORY_SIZES: [usize; 3] = [10, 200, 10_000];
const MESSAGE_BYTES: i32 = 120;
const WARMUP: usize = 3;

#[derive(Clone, Copy, PartialEq)]
enum Area {
    Chat,
    Conversation,
}

impl Area {
    fn name(self) -> &'static str {
        match self {
            Area::Chat => "chat send_message",
            Area::Conversation => "conversation stream_chat",
        }
    }
}

#[derive(Default)]
struct Figures {
    ttft_ms: Vec<f64>,
    peak_kb: Vec<f64>,
    allocated_kb: Vec<f64>,
    sent: Vec<usize>,
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (v.len() as f64 - 1.0)).round() as usize;
    v[rank.min(v.len() - 1)]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

struct Setup {
    cx: TestContext,
    client: Client,
    org: Uuid,
    model: Uuid,
}

/// A fresh chat or session holding `n` earlier messages (alternately the
/// user's and the model's, `MESSAGE_BYTES` each); its id.
async fn history_of(s: &Setup, area: Area, n: usize) -> Uuid {
    let db = s.cx.db().await;
    let content = "rpad(CASE WHEN g % 2 = 0 THEN 'Question ' ELSE 'Answer ' END || g || ': ', $3, \
                   ' the quick brown fox jumps over the lazy dog')";
    match area {
        Area::Chat => {
            let chat = s
                .client
                .chat_create()
                .org_id(s.org)
                .body(types::ChatWrite::builder())
                .send()
                .await
                .expect("chat/create")
                .into_inner()
                .id;
            let filler = " the quick brown fox jumps over the lazy dog";
            let rows: Vec<(&str, String)> = (0..n)
                .map(|g| {
                    let head = if g % 2 == 0 { "Question " } else { "Answer " };
                    let mut text = format!("{head}{g}: ");
                    while text.len() < MESSAGE_BYTES as usize {
                        text.push_str(filler);
                    }
                    text.truncate(MESSAGE_BYTES as usize);
                    (if g % 2 == 0 { "USER" } else { "MODEL" }, text)
                })
                .collect();
            workspace_tests::fixtures::append_chat_messages(&db, s.org, chat, Some(s.model), &rows)
                .await;
            chat
        }
        Area::Conversation => {
            let conversation =
                resources::conversation(&s.client, s.org, json!({"title": "history"})).await;
            let session = s
                .client
                .conversation_create_session()
                .org_id(s.org)
                .body(
                    types::ConversationSessionCreate::builder()
                        .conversation_id(conversation.id)
                        .model_id(s.model),
                )
                .send()
                .await
                .expect("create_session")
                .into_inner()
                .id;
            db.execute(
                &format!(
                    "INSERT INTO conversation_messages \
                         (id, organization_id, conversation_id, session_id, role, content) \
                     SELECT gen_random_uuid(), $1, $2, $4, \
                         CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, {content} \
                     FROM generate_series(0, $5 - 1) g ORDER BY g"
                ),
                &[
                    &s.org,
                    &conversation.id,
                    &MESSAGE_BYTES,
                    &session,
                    &(n as i32),
                ],
            )
            .await
            .expect("conversation history");
            session
        }
    }
}

/// One answer in the chat or session `id`, read to its end: time to the
/// first content event, heap peak above the start, bytes allocated, and
/// the earlier messages the model was given.
async fn answer(s: &Setup, area: Area, id: Uuid) -> (Duration, usize, usize, usize) {
    let message = "How long is this conversation?";
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let allocated = ALLOCATED.load(Relaxed);
    let sent = Instant::now();
    let stream = match area {
        Area::Chat => s
            .client
            .chat_send_message()
            .org_id(s.org)
            .body(
                serde_json::from_value::<types::SendMessageRequest>(
                    json!({"content": message, "chat_id": id, "model_id": s.model}),
                )
                .expect("a request"),
            )
            .send()
            .await
            .expect("send_message")
            .into_inner(),
        Area::Conversation => s
            .client
            .conversation_stream_chat()
            .org_id(s.org)
            .body(
                types::StreamChatRequest::builder()
                    .chat_session_id(id)
                    .message(message.to_string()),
            )
            .send()
            .await
            .expect("stream_chat")
            .into_inner(),
    };
    let mut reader = SseReader::from_byte_stream(stream);
    let mut first = None;
    let mut text = String::new();
    while let Some(event) = reader.next().await {
        let event: Value = event.expect("the stream").json().expect("an event");
        match event["type"].as_str() {
            Some("content") => {
                first.get_or_insert_with(|| sent.elapsed());
                text.push_str(event["content"].as_str().unwrap_or(""));
            }
            Some("end") => break,
            Some("error") => panic!("error event {event}"),
            _ => {}
        }
    }
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    let allocated = ALLOCATED.load(Relaxed) - allocated;
    let earlier = text
        .rsplit("Earlier messages in this session: ")
        .next()
        .and_then(|n| n.trim_end_matches('.').trim().parse::<usize>().ok())
        .expect("the offline model's count");
    (first.expect("a content event"), peak, allocated, earlier)
}

async fn bench() {
    let rounds: usize = std::env::var("HISTORY_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let cx = TestContext::with_config("bench_history", |c| {
        c.providers.offline_chunk_delay_ms = 0;
        c.features.daily_chat_limit = 1_000_000;
    })
    .await;
    let user = cx.user("bench").await;
    let org = user.personal_org().await;
    let client = user.client.clone();
    let model = resources::offline_model(&client, org).await;
    let s = Setup {
        cx,
        client,
        org,
        model,
    };
    let cases: Vec<(Area, usize)> = [Area::Chat, Area::Conversation]
        .into_iter()
        .flat_map(|a| HISTORY_SIZES.map(|n| (a, n)))
        .collect();
    // Every round's chats and sessions first, then VACUUM ANALYZE: the
    // answers are measured on settled tables, not beside the inserts'
    // after-effects (autovacuum, hint bits).
    let mut ids = Vec::new();
    for _ in 0..WARMUP + rounds {
        let mut round = Vec::new();
        for &(area, n) in &cases {
            round.push(history_of(&s, area, n).await);
        }
        ids.push(round);
    }
    s.cx.db()
        .await
        .batch_execute("VACUUM ANALYZE chat_messages, conversation_messages")
        .await
        .expect("vacuum");
    let mut figures: Vec<Figures> = cases.iter().map(|_| Figures::default()).collect();
    for (round, round_ids) in ids.iter().enumerate() {
        for (i, &(area, _)) in cases.iter().enumerate() {
            let (ttft, peak, allocated, sent) = answer(&s, area, round_ids[i]).await;
            if round >= WARMUP {
                let f = &mut figures[i];
                f.ttft_ms.push(ttft.as_secs_f64() * 1000.0);
                f.peak_kb.push(peak as f64 / 1024.0);
                f.allocated_kb.push(allocated as f64 / 1024.0);
                f.sent.push(sent);
            }
        }
    }
    if std::env::var_os("HISTORY_EXPLAIN").is_some() {
        // The plan of a long chat's history statement, as the server runs
        // it (see `chat_begin_exchange`), on the settled tables.
        let chat = ids[0][HISTORY_SIZES.len() - 1];
        let db = s.cx.db().await;
        for row in db
            .query(
                "EXPLAIN (ANALYZE, BUFFERS) SELECT h.id FROM ( \
                     SELECT id, role, content, depth, sum(CASE WHEN content = '' THEN 0 \
                         ELSE (octet_length(content) + 2) / 3 + 4 END) OVER w AS running, \
                         row_number() OVER w AS n \
                     FROM chat_messages WHERE organization_id = $1 AND chat_id = $2 AND on_path \
                         AND depth <= 2147483647 \
                     WINDOW w AS (ORDER BY depth DESC) ORDER BY depth DESC LIMIT 200) h \
                 WHERE h.n = 1 OR h.running <= 28000 ORDER BY h.depth",
                &[&s.org, &chat],
            )
            .await
            .expect("explain")
        {
            println!("{}", row.get::<_, String>(0));
        }
    }
    println!();
    println!(
        "history benchmark: {rounds} rounds (+{WARMUP} warm-up), one answer at a time, offline \
         model without pauses; earlier messages of {MESSAGE_BYTES} bytes"
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>12} {:>14} {:>6}",
        "", "earlier", "TTFT p50", "TTFT p95", "heap peak", "allocated", "sent"
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>12} {:>14} {:>6}",
        "", "messages", "ms", "ms", "KB (p50)", "KB (p50)", ""
    );
    for (f, &(area, n)) in figures.iter().zip(&cases) {
        println!(
            "{:<26} {:>9} {:>9.2} {:>9.2} {:>12.0} {:>14.0} {:>6}",
            area.name(),
            n,
            percentile(&f.ttft_ms, 50.0),
            percentile(&f.ttft_ms, 95.0),
            percentile(&f.peak_kb, 50.0),
            percentile(&f.allocated_kb, 50.0),
            f.sent.iter().max().copied().unwrap_or(0),
        );
    }
    println!(
        "(heap peak: the process's heap above its level when the request was sent; allocated: \
         every allocation while the answer ran; sent: earlier messages the model received)"
    );
    s.cx.teardown().await;
}
