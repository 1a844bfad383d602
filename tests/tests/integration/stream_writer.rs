//! The shared stream event writer (`app::streams`): many answers' events
//! stored together, each answer's delivered in order and stored before its
//! client sees them, and one answer whose row vanished costs the others
//! nothing.

use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;
use workspace_server::config::Config;
use workspace_tests::TestContext;
use workspace_tests::sse::NumberedReader;

/// Answers streamed at once.
const ANSWERS: usize = 24;

fn paced(c: &mut Config) {
    // The answers' chunks come due together: their events meet in the
    // writer's queue.
    c.providers.offline_chunk_delay_ms = 20;
    c.metrics.bind_address = Some("127.0.0.1:0".parse().unwrap());
}

/// `ANSWERS` sessions of one user, and the user's token and organization.
async fn sessions(cx: &TestContext) -> (String, Uuid, Vec<Uuid>) {
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let http = workspace_tests::http();
    let post = |path: &str, body: Value| {
        http.post(format!("{}/api/{path}?org_id={org}", cx.base_url))
            .bearer_auth(&ada.token)
            .json(&body)
            .send()
    };
    let models: Value = http
        .get(format!("{}/api/models/list?org_id={org}", cx.base_url))
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let model = models[0]["id"].clone();
    let conversation: Value = post("conversation/create", json!({"title": "writer"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..ANSWERS {
        let session: Value = post(
            "conversation/create_session",
            json!({"conversation_id": conversation["id"], "model_id": model}),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        ids.push(session["id"].as_str().unwrap().parse().unwrap());
    }
    (ada.token.clone(), org, ids)
}

/// Opens a streamed answer in `session`.
async fn open(cx: &TestContext, token: &str, org: Uuid, session: Uuid, n: usize) -> NumberedReader {
    let resp = workspace_tests::http()
        .post(format!("{}/api/conversation/stream_chat", cx.base_url))
        .bearer_auth(token)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"chat_session_id": session, "message": format!("answer number {n}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    NumberedReader::new(resp)
}

/// The stored events of an answer, in order.
async fn stored(db: &tokio_postgres::Client, message_id: &str) -> Vec<(i32, Value)> {
    let id: Uuid = message_id.parse().unwrap();
    db.query(
        "SELECT seq, event FROM conversation_stream_events WHERE message_id = $1 ORDER BY seq",
        &[&id],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get("seq"), r.get("event")))
    .collect()
}

/// Checks a complete answer: numbered from 1 without a gap, `start` first
/// and `end` last, and exactly what is stored. Returns its message id.
async fn check_complete(db: &tokio_postgres::Client, events: &[(Option<i32>, Value)]) -> String {
    let ids: Vec<i32> = events.iter().map(|(id, _)| id.expect("numbered")).collect();
    assert_eq!(
        ids,
        (1..=events.len() as i32).collect::<Vec<_>>(),
        "in order, once"
    );
    assert_eq!(events[0].1["type"], "start", "{events:?}");
    assert_eq!(events.last().unwrap().1["type"], "end", "{events:?}");
    let message_id = events[0].1["message_id"].as_str().unwrap().to_string();
    let delivered: Vec<(i32, Value)> = events
        .iter()
        .map(|(id, e)| (id.unwrap(), e.clone()))
        .collect();
    assert_eq!(
        stored(db, &message_id).await,
        delivered,
        "stored as delivered"
    );
    message_id
}

/// A counter of `/metrics`.
async fn counter(cx: &TestContext, name: &str) -> f64 {
    let addr = cx.server.metrics_addr().expect("metrics served");
    let text = workspace_tests::http()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[tokio::test]
async fn many_answers_are_stored_together_and_delivered_in_order() {
    let cx = TestContext::with_config("stream_writer_many", paced).await;
    let (token, org, sessions) = sessions(&cx).await;
    let readers = futures::future::join_all(
        sessions
            .iter()
            .enumerate()
            .map(|(n, s)| open(&cx, &token, org, *s, n)),
    )
    .await;
    let answers = futures::future::join_all(readers.into_iter().map(|r| r.collect())).await;
    let db = cx.db().await;
    let mut total = 0;
    for events in &answers {
        let id = check_complete(&db, events).await;
        let text: String = events
            .iter()
            .filter(|(_, e)| e["type"] == "content")
            .map(|(_, e)| e["content"].as_str().unwrap())
            .collect();
        assert!(text.contains("answer number"), "{id}: {text}");
        total += events.len();
    }
    let stored_total = counter(&cx, "workspace_stream_events_stored_total").await;
    let statements = counter(&cx, "workspace_stream_event_statements_total").await;
    assert_eq!(stored_total, total as f64);
    assert!(
        statements < stored_total / 2.0,
        "{statements} statements for {stored_total} events: not batched across answers"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn an_answer_deleted_midway_costs_the_others_no_event() {
    let cx = TestContext::with_config("stream_writer_deleted", paced).await;
    let (token, org, sessions) = sessions(&cx).await;
    let mut readers = futures::future::join_all(
        sessions
            .iter()
            .enumerate()
            .map(|(n, s)| open(&cx, &token, org, *s, n)),
    )
    .await;
    // The first events of each; then one answer's row is deleted while
    // all are streaming: its next events fail the shared statement.
    let mut heads = Vec::new();
    for r in &mut readers {
        let mut head = Vec::new();
        for _ in 0..3 {
            head.push(r.next().await.expect("an event"));
        }
        heads.push(head);
    }
    let doomed: Uuid = heads[0][0].1["message_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let db = cx.db().await;
    db.execute(
        "DELETE FROM conversation_messages WHERE id = $1",
        &[&doomed],
    )
    .await
    .unwrap();
    let mut readers = readers.into_iter();
    let doomed_reader = readers.next().unwrap();
    let rest = futures::future::join_all(readers.map(|r| r.collect())).await;
    for (mut events, tail) in heads.into_iter().skip(1).zip(rest) {
        events.extend(tail);
        check_complete(&db, &events).await;
    }
    // The deleted answer's stream ends one way or another.
    let _ = tokio::time::timeout(Duration::from_secs(60), doomed_reader.collect())
        .await
        .expect("the deleted answer's stream ends");
    assert!(stored(&db, &doomed.to_string()).await.is_empty());
    cx.teardown().await;
}
