//! The Chat area: sessions (private to their user), send_message with its
//! numbered events, titles, usage, uploads, knowledge bases, agents,
//! quota, provider failures, resumable streams across two server
//! instances, stop, prompts, and isolation of every id-addressed
//! operation.

use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;
use workspace_server::config::Config;
use workspace_tests::sse::NumberedReader as Sse;
use workspace_tests::ws;
use workspace_tests::{TestContext, http, req};

fn fast(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 0;
    c.providers.retry_backoff_ms = 5;
}

async fn open(
    base: &str,
    token: &str,
    method: Method,
    path: &str,
    query: &[(&str, String)],
    body: Option<Value>,
    last_event_id: Option<i32>,
) -> reqwest::Response {
    let mut r = http()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token)
        .query(query);
    if let Some(b) = body {
        r = r.json(&b);
    }
    if let Some(id) = last_event_id {
        r = r.header("Last-Event-ID", id.to_string());
    }
    r.send().await.expect("request")
}

fn q_org(org: Uuid) -> Vec<(&'static str, String)> {
    vec![("org_id", org.to_string())]
}

/// Sends a message; the open stream.
async fn send(base: &str, token: &str, org: Uuid, body: Value) -> Sse {
    let resp = open(
        base,
        token,
        Method::POST,
        "/api/chat/send_message",
        &q_org(org),
        Some(body),
        None,
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    Sse::new(resp)
}

fn text_of(events: &[(Option<i32>, Value)]) -> String {
    events
        .iter()
        .filter(|(_, e)| e["type"] == "content")
        .map(|(_, e)| e["content"].as_str().unwrap().to_string())
        .collect()
}

fn types(events: &[(Option<i32>, Value)]) -> Vec<String> {
    let mut t: Vec<String> = events
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap().to_string())
        .collect();
    t.dedup();
    t
}

fn message_id_of(events: &[(Option<i32>, Value)]) -> String {
    events[0].1["message_id"].as_str().unwrap().to_string()
}

/// A chat with one answered message; returns (chat, answer id). Used by
/// the authorization test's fixture.
pub async fn fixture_chat(cx: &TestContext, token: &str, org: Uuid) -> (Uuid, Uuid) {
    let client = workspace_tests::resources::client_for(&cx.base_url, token);
    let answered =
        workspace_tests::resources::chat_message(&client, org, json!({"content": "fixture"})).await;
    (answered.chat_id, answered.message_id)
}

async fn get_chat(cx: &TestContext, token: &str, org: Uuid, chat: Uuid) -> (u16, Value) {
    req(
        &cx.base_url,
        token,
        Method::GET,
        "/api/chat",
        &[("org_id", org.to_string()), ("chat_id", chat.to_string())],
        None,
    )
    .await
}

#[tokio::test]
async fn chat_sessions_are_private_to_their_user() {
    let cx = TestContext::with_config("chat_sessions", fast).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    let base = cx.base_url.clone();

    // Defaults.
    let (s, created) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat",
        &q_org(org),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let chat: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let (s, view) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(s, 200);
    assert_eq!(view["title"], "New Chat");
    assert_eq!(view["status"], "ACTIVE");
    assert_eq!(view["settings"], Value::Null);
    assert_eq!(view["metadata"]["usage"]["total_tokens"], 0);
    assert_eq!(view["user_id"], ada.id.to_string());
    assert_eq!(view["messages"], json!([]));
    assert_eq!(view["uploads"], json!([]));

    // Settings, validation.
    let (s, second) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat",
        &q_org(org),
        Some(json!({"title": "  Plans  ", "settings": {"temperature": 0.5, "max_tokens": 100}})),
    )
    .await;
    assert_eq!(s, 201);
    let second: Uuid = second["id"].as_str().unwrap().parse().unwrap();
    let (_, v) = get_chat(&cx, &ada.token, org, second).await;
    assert_eq!(v["title"], "Plans");
    assert_eq!(
        v["settings"],
        json!({"temperature": 0.5, "max_tokens": 100})
    );
    assert_eq!(
        v["metadata"]["settings"],
        json!({"temperature": 0.5, "max_tokens": 100})
    );
    for (body, code) in [
        (json!({"title": "   "}), "invalid_title"),
        (
            json!({"settings": {"temperature": 1.5}}),
            "invalid_settings",
        ),
        (json!({"settings": {"top_p": -0.1}}), "invalid_settings"),
        (json!({"settings": {"max_tokens": 0}}), "invalid_settings"),
    ] {
        let (s, b) = req(
            &base,
            &ada.token,
            Method::POST,
            "/api/chat",
            &q_org(org),
            Some(body),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str().unwrap()), (400, code));
    }

    // Rename, archive, list filters.
    let q = vec![("org_id", org.to_string()), ("chat_id", second.to_string())];
    let (s, _) = req(
        &base,
        &ada.token,
        Method::PUT,
        "/api/chat",
        &q,
        Some(json!({"title": "Renamed", "status": "ARCHIVED"})),
    )
    .await;
    assert_eq!(s, 200);
    let list = |status: Option<&str>| {
        let mut q = q_org(org);
        if let Some(st) = status {
            q.push(("status", st.to_string()));
        }
        let base = base.clone();
        let token = ada.token.clone();
        async move {
            let (s, b) = req(&base, &token, Method::GET, "/api/chat/list", &q, None).await;
            assert_eq!(s, 200, "{b}");
            b.as_array()
                .unwrap()
                .iter()
                .map(|c| c["title"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(None).await, vec!["Renamed", "New Chat"]);
    assert_eq!(list(Some("ARCHIVED")).await, vec!["Renamed"]);
    assert_eq!(list(Some("ACTIVE")).await, vec!["New Chat"]);
    let (s, _) = req(
        &base,
        &ada.token,
        Method::PUT,
        "/api/chat",
        &q,
        Some(json!({"status": "DELETED"})),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(list(None).await, vec!["New Chat"]);
    assert_eq!(list(Some("DELETED")).await, vec!["Renamed"]);
    let (s, b) = req(
        &base,
        &ada.token,
        Method::GET,
        "/api/chat/list",
        &[("org_id", org.to_string()), ("limit", "0".into())],
        None,
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str().unwrap()),
        (400, "invalid_pagination")
    );

    // Bob, a member of the same organization, sees none of Ada's chats.
    let (s, b) = req(
        &base,
        &bob.token,
        Method::GET,
        "/api/chat/list",
        &q_org(org),
        None,
    )
    .await;
    assert_eq!((s, b), (200, json!([])));
    assert_eq!(get_chat(&cx, &bob.token, org, chat).await.0, 404);
    let (s, _) = req(
        &base,
        &bob.token,
        Method::PUT,
        "/api/chat",
        &[("org_id", org.to_string()), ("chat_id", chat.to_string())],
        Some(json!({"title": "x"})),
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = req(
        &base,
        &bob.token,
        Method::DELETE,
        "/api/chat/delete_session",
        &[("session_id", chat.to_string())],
        None,
    )
    .await;
    assert_eq!(s, 404);

    // Bob's upload naming Ada's chat is not one of its uploads.
    bob.client
        .chat_upload_file(org, Some(chat), "intruder.txt", b"hello".to_vec())
        .await
        .unwrap();

    // Deleting removes the messages and the uploads.
    let events = send(
        &base,
        &ada.token,
        org,
        json!({"chat_id": chat, "content": "hello"}),
    )
    .await
    .collect()
    .await;
    assert_eq!(events.last().unwrap().1["type"], "end");
    let upload = ada
        .client
        .chat_upload_file(org, Some(chat), "notes.txt", b"some notes".to_vec())
        .await
        .unwrap()
        .into_inner();
    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(v["messages"].as_array().unwrap().len(), 2);
    assert_eq!(v["uploads"][0]["id"], upload.id.to_string());
    assert_eq!(v["uploads"].as_array().unwrap().len(), 1);
    let (s, b) = req(
        &base,
        &ada.token,
        Method::DELETE,
        "/api/chat/delete_session",
        &[("session_id", chat.to_string())],
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(get_chat(&cx, &ada.token, org, chat).await.0, 404);
    let db = cx.db().await;
    let count = |sql: &'static str| {
        let db = &db;
        async move { db.query_one(sql, &[&chat]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(
        count("SELECT count(*) FROM chat_messages WHERE chat_id = $1").await,
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM files WHERE chat_id = $1").await,
        1,
        "only Bob's own upload is left"
    );

    // Bulk delete: one outcome per distinct id.
    let missing = Uuid::new_v4();
    let (s, b) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/bulk_delete_sessions",
        &q_org(org),
        Some(json!({"chat_ids": [second, missing, second]})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["deleted"], 1);
    assert_eq!(
        b["results"],
        json!([{"chat_id": second, "outcome": "deleted"}, {"chat_id": missing, "outcome": "not_found"}])
    );
    let (s, _) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/bulk_delete_sessions",
        &q_org(org),
        Some(json!({"chat_ids": []})),
    )
    .await;
    assert_eq!(s, 400);
    cx.teardown().await;
}

#[tokio::test]
async fn send_message_streams_numbered_events_with_a_title_and_usage() {
    let cx = TestContext::with_config("chat_send", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let base = cx.base_url.clone();

    let events = send(
        &base,
        &ada.token,
        org,
        json!({"content": "Plan a trip to Lisbon in spring please"}),
    )
    .await
    .collect()
    .await;
    let ids: Vec<i32> = events.iter().map(|(id, _)| id.unwrap()).collect();
    assert_eq!(
        ids,
        (1..=events.len() as i32).collect::<Vec<_>>(),
        "numbered from 1"
    );
    assert_eq!(
        types(&events),
        vec!["start", "content", "usage", "title", "end"]
    );
    let start = &events[0].1;
    let chat: Uuid = start["chat_id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        events.last().unwrap().1,
        json!({"type": "end", "message": "DONE", "finish_reason": "stop"})
    );
    let title = events.iter().find(|(_, e)| e["type"] == "title").unwrap();
    assert_eq!(title.1["title"], "Plan a trip to Lisbon in");
    let usage = &events.iter().find(|(_, e)| e["type"] == "usage").unwrap().1;
    assert!(usage["total_tokens"].as_i64().unwrap() > 0);
    let answer = text_of(&events);
    assert!(answer.contains("Plan a trip to Lisbon"), "{answer}");

    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(v["title"], "Plan a trip to Lisbon in");
    let messages = v["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "USER");
    assert_eq!(messages[0]["id"], start["user_message_id"]);
    assert_eq!(messages[1]["role"], "MODEL");
    assert_eq!(messages[1]["id"], start["message_id"]);
    assert_eq!(messages[1]["parent_message_id"], start["user_message_id"]);
    assert_eq!(messages[1]["status"], "complete");
    assert_eq!(messages[1]["content"].as_str().unwrap(), answer);
    assert_eq!(
        v["metadata"]["usage"]["total_tokens"],
        usage["total_tokens"]
    );

    // A second message: the history goes along, no new title, usage adds up.
    let events = send(
        &base,
        &ada.token,
        org,
        json!({"chat_id": chat, "content": "And in summer?"}),
    )
    .await
    .collect()
    .await;
    assert_eq!(types(&events), vec!["start", "content", "usage", "end"]);
    assert!(
        text_of(&events).contains("Earlier messages in this session: 2"),
        "{}",
        text_of(&events)
    );
    let second_usage = events.iter().find(|(_, e)| e["type"] == "usage").unwrap().1["total_tokens"]
        .as_i64()
        .unwrap();
    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(
        v["metadata"]["usage"]["total_tokens"].as_i64().unwrap(),
        usage["total_tokens"].as_i64().unwrap() + second_usage
    );

    // Validation before the stream.
    for (body, status, code) in [
        (json!({"content": "  "}), 400, "invalid_message"),
        (
            json!({"content": "x", "model_id": Uuid::new_v4()}),
            400,
            "model_unavailable",
        ),
        (
            json!({"content": "x", "settings": {"temperature": 2}}),
            400,
            "invalid_settings",
        ),
        (
            json!({"content": "x", "chat_id": Uuid::new_v4()}),
            404,
            "not_found",
        ),
        (
            json!({"content": "x", "upload_ids": [Uuid::new_v4()]}),
            404,
            "not_found",
        ),
    ] {
        let (s, b) = req(
            &base,
            &ada.token,
            Method::POST,
            "/api/chat/send_message",
            &q_org(org),
            Some(body),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str().unwrap()), (status, code));
    }

    // Prompt suggestions.
    let resp = open(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/prompt",
        &q_org(org),
        Some(json!({"text": "cooking"})),
        None,
    )
    .await;
    assert_eq!(resp.status(), 200);
    let events = Sse::new(resp).collect().await;
    assert_eq!(types(&events), vec!["content", "end"]);
    assert!(events.iter().all(|(id, _)| id.is_none()));
    assert_eq!(events.last().unwrap().1["message"], "DONE");
    cx.teardown().await;
}

#[tokio::test]
async fn uploads_and_knowledge_bases_go_into_the_prompt() {
    let cx = TestContext::with_config("chat_context", fast).await;
    let ada = cx.user("ada").await;
    let eve = cx.user("eve").await;
    let org = ada.personal_org().await;
    let eve_org = eve.personal_org().await;
    let base = cx.base_url.clone();
    let upload = ada
        .client
        .chat_upload_file(
            org,
            None,
            "facts.md",
            b"# Facts\nThe password is swordfish.".to_vec(),
        )
        .await
        .unwrap()
        .into_inner();
    let kb = |user: &workspace_tests::TestUser, org: Uuid| {
        let client = user.client.clone();
        async move {
            workspace_tests::resources::knowledge_base(
                &client,
                org,
                json!({"name": "kb", "description": "", "embedding_model": "all-minilm-l6-v2", "sources": []}),
            )
            .await
            .id
        }
    };
    let kb_id = kb(&ada, org).await;
    let events = send(&base, &ada.token, org, json!({
        "content": "What is the password?", "upload_ids": [upload.id], "knowledge_base_ids": [kb_id]}))
        .await
        .collect()
        .await;
    assert_eq!(events.last().unwrap().1["type"], "end");
    let answer = text_of(&events);
    assert!(answer.contains("The password is swordfish."), "{answer}");
    let chat: Uuid = events[0].1["chat_id"].as_str().unwrap().parse().unwrap();
    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(
        v["messages"][0]["metadata"]["upload_ids"],
        json!([upload.id])
    );
    assert_eq!(
        v["messages"][0]["metadata"]["knowledge_base_ids"],
        json!([kb_id])
    );
    // The upload joined the chat (and is deleted with it).
    assert_eq!(v["uploads"][0]["id"], upload.id.to_string());
    assert_eq!(
        v["messages"][1]["prompt_data"]["upload_ids"],
        json!([upload.id])
    );

    // Another organization's knowledge base, another user's upload: 404.
    let eve_kb = kb(&eve, eve_org).await;
    let (s, b) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/send_message",
        &q_org(org),
        Some(json!({"content": "x", "knowledge_base_ids": [eve_kb]})),
    )
    .await;
    assert_eq!((s, b["error_code"].as_str().unwrap()), (404, "not_found"));
    let (s, b) = req(
        &base,
        &eve.token,
        Method::POST,
        "/api/chat/send_message",
        &q_org(eve_org),
        Some(json!({"content": "x", "upload_ids": [upload.id]})),
    )
    .await;
    assert_eq!((s, b["error_code"].as_str().unwrap()), (404, "not_found"));
    cx.teardown().await;
}

#[tokio::test]
async fn the_daily_limit_and_provider_failures() {
    let broken_url = workspace_tests::fake_provider::closed_port_url().await;
    let cx = TestContext::with_config("chat_limits", move |c| {
        fast(c);
        c.features.daily_chat_limit = 1;
        c.providers.max_retries = 1;
        c.models.push(workspace_server::config::ModelConfig {
            name: "broken".into(),
            provider: Some(workspace_server::config::ProviderKind::OpenaiCompatible),
            upstream_model: Some("broken".into()),
            base_url: Some(broken_url),
            api_key: Some("sk-test".into()),
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
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let base = cx.base_url.clone();
    let (_, models) = req(
        &base,
        &ada.token,
        Method::GET,
        "/api/models/list",
        &q_org(org),
        None,
    )
    .await;
    let broken = models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "broken")
        .unwrap()["id"]
        .clone();
    // The provider is down: retried, then an error event; the (empty)
    // answer is kept as failed.
    let events = send(
        &base,
        &ada.token,
        org,
        json!({"content": "hi", "model_id": broken}),
    )
    .await
    .collect()
    .await;
    let last = &events.last().unwrap().1;
    assert_eq!(last["type"], "error", "{events:?}");
    assert_eq!(last["error_code"], "provider_unavailable");
    let chat: Uuid = events[0].1["chat_id"].as_str().unwrap().parse().unwrap();
    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(v["messages"][1]["status"], "failed");
    assert_eq!(
        v["messages"][1]["metadata"]["error_code"],
        "provider_unavailable"
    );
    assert_eq!(v["title"], "New Chat", "no title for a failed first answer");
    // The limit (1 a day) is reached: 429 with Retry-After, nothing stored.
    let resp = open(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/send_message",
        &q_org(org),
        Some(json!({"content": "again", "chat_id": chat})),
        None,
    )
    .await;
    assert_eq!(resp.status(), 429);
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error_code"], "daily_chat_limit_exceeded");
    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    assert_eq!(v["messages"].as_array().unwrap().len(), 2);
    cx.teardown().await;
}

#[tokio::test]
async fn agents_answer_through_the_runtime_once_ready() {
    let cx = TestContext::with_config("chat_agents", fast).await;
    let ada = cx.user("ada").await;
    let base = cx.base_url.clone();
    let (org, _tool, _model, agent) = crate::agents::setup(&cx, &ada.token).await;
    let (s, b) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/send_message",
        &q_org(org),
        Some(json!({"content": "hi", "agent_id": agent})),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str().unwrap()),
        (409, "agent_not_active")
    );
    let (s, _) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/agents/test",
        &[("agent_id", agent.to_string())],
        Some(json!({"message": "hello"})),
    )
    .await;
    assert_eq!(s, 200);
    let events = send(
        &base,
        &ada.token,
        org,
        json!({"content": "/tool adder {\"a\": 1}", "agent_id": agent}),
    )
    .await
    .collect()
    .await;
    let t = types(&events);
    assert_eq!(
        t,
        vec![
            "start",
            "tool_started",
            "tool_finished",
            "content",
            "usage",
            "title",
            "end"
        ],
        "{events:?}"
    );
    let finished = &events
        .iter()
        .find(|(_, e)| e["type"] == "tool_finished")
        .unwrap()
        .1;
    assert_eq!(finished["output"], 102);
    assert_eq!(finished["successful"], true);
    assert!(text_of(&events).contains("102"));
    cx.teardown().await;
}

/// A slow offline model: 40 ms per word.
fn slow(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 40;
}

#[tokio::test]
async fn a_dropped_stream_resumes_on_another_instance_exactly_once() {
    let cx = TestContext::with_config("chat_resume", slow).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let second = cx.second_instance(slow).await;
    let second_url = format!("http://{}", second.local_addr());

    let mut live = send(
        &cx.base_url,
        &ada.token,
        org,
        json!({"content": "Tell me a long story about a lighthouse keeper"}),
    )
    .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(live.next().await.unwrap());
    }
    drop(live); // the connection drops mid-answer
    let message_id = seen[0].1["message_id"].as_str().unwrap().to_string();
    let last_id = seen.last().unwrap().0.unwrap();
    let started = std::time::Instant::now();
    let resp = open(
        &second_url,
        &ada.token,
        Method::GET,
        "/api/chat/stream",
        &[
            ("org_id", org.to_string()),
            ("message_id", message_id.clone()),
        ],
        None,
        Some(last_id),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut resumed = Sse::new(resp);
    let first = resumed.next().await.unwrap();
    let resume_latency = started.elapsed();
    let mut rest = vec![first];
    rest.extend(resumed.collect().await);
    eprintln!("resume: first event after {resume_latency:?}");
    assert_eq!(
        rest.last().unwrap().1["type"],
        "end",
        "the answer went on after the disconnect"
    );
    let mut all = seen.clone();
    all.extend(rest);
    let ids: Vec<i32> = all.iter().map(|(id, _)| id.unwrap()).collect();
    assert_eq!(
        ids,
        (1..=all.len() as i32).collect::<Vec<_>>(),
        "every event once, in order"
    );
    // A full replay from the start gives the same events.
    let started = std::time::Instant::now();
    let mut replay = Sse::new(
        open(
            &second_url,
            &ada.token,
            Method::GET,
            "/api/chat/stream",
            &[
                ("org_id", org.to_string()),
                ("message_id", message_id.clone()),
            ],
            None,
            Some(0),
        )
        .await,
    );
    let first = replay.next().await.unwrap();
    eprintln!(
        "resume: a stored event replayed {:?} after the request",
        started.elapsed()
    );
    assert_eq!(first.0, Some(1));
    drop(replay);
    let replay = Sse::new(
        open(
            &second_url,
            &ada.token,
            Method::GET,
            "/api/chat/stream",
            &[
                ("org_id", org.to_string()),
                ("message_id", message_id.clone()),
            ],
            None,
            None,
        )
        .await,
    )
    .collect()
    .await;
    assert_eq!(replay, all);
    let answer = text_of(&all);
    assert!(answer.contains("lighthouse keeper"), "{answer}");
    // A Last-Event-ID that is no event number is refused.
    let resp = workspace_tests::http()
        .get(format!("{second_url}/api/chat/stream"))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string()), ("message_id", message_id)])
        .header("Last-Event-ID", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    // Resuming after the last event: an empty stream that ends.
    let after_end = Sse::new(
        open(
            &second_url,
            &ada.token,
            Method::GET,
            "/api/chat/stream",
            &[
                ("org_id", org.to_string()),
                ("message_id", message_id_of(&all)),
            ],
            None,
            Some(all.len() as i32),
        )
        .await,
    )
    .collect()
    .await;
    assert!(after_end.is_empty(), "{after_end:?}");

    // Once the events of an ended answer expired, a resume says so.
    let db = cx.db().await;
    let id: Uuid = all[0].1["message_id"].as_str().unwrap().parse().unwrap();
    db.execute(
        "DELETE FROM chat_stream_events WHERE message_id = $1",
        &[&id],
    )
    .await
    .unwrap();
    let expired = Sse::new(
        open(
            &second_url,
            &ada.token,
            Method::GET,
            "/api/chat/stream",
            &[("org_id", org.to_string()), ("message_id", id.to_string())],
            None,
            Some(3),
        )
        .await,
    )
    .collect()
    .await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].1["error_code"], "stream_expired");
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn stop_ends_an_answer_and_keeps_its_text() {
    let cx =
        TestContext::with_config("chat_stop", |c| c.providers.offline_chunk_delay_ms = 100).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let base = cx.base_url.clone();
    let mut live = send(
        &base,
        &ada.token,
        org,
        json!({"content": "Write an essay about rivers and mountains and seas"}),
    )
    .await;
    let start = live.next().await.unwrap().1;
    let message_id = start["message_id"].as_str().unwrap().to_string();
    live.next().await.unwrap();
    live.next().await.unwrap();
    let q = vec![
        ("org_id", org.to_string()),
        ("message_id", message_id.clone()),
    ];
    let (s, b) = req(&base, &ada.token, Method::POST, "/api/chat/stop", &q, None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["stopped"], true);
    let rest = live.collect().await;
    let last = &rest.last().unwrap().1;
    assert_eq!(
        last,
        &json!({"type": "end", "message": "DONE", "finish_reason": "stopped"})
    );
    let chat: Uuid = start["chat_id"].as_str().unwrap().parse().unwrap();
    let (_, v) = get_chat(&cx, &ada.token, org, chat).await;
    let answer = &v["messages"][1];
    assert_eq!(answer["status"], "stopped");
    let text = answer["content"].as_str().unwrap();
    assert!(
        !text.is_empty() && !text.contains("Earlier messages"),
        "partial: {text}"
    );
    let (s, b) = req(&base, &ada.token, Method::POST, "/api/chat/stop", &q, None).await;
    assert_eq!((s, b["stopped"].clone()), (200, json!(false)));
    cx.teardown().await;
}

/// A request of the isolation test.
type Probe = (
    Method,
    &'static str,
    Vec<(&'static str, String)>,
    Option<Value>,
);

#[tokio::test]
async fn chat_ids_of_other_organizations_are_not_found() {
    let cx = TestContext::with_config("chat_isolation", fast).await;
    let ada = cx.user("ada").await;
    let eve = cx.user("eve").await;
    let org = ada.personal_org().await;
    let eve_org = eve.personal_org().await;
    let base = cx.base_url.clone();
    let (chat, answer) = fixture_chat(&cx, &ada.token, org).await;
    let in_eve =
        |k: &'static str, v: Uuid| vec![("org_id", eve_org.to_string()), (k, v.to_string())];
    // Eve, in her own organization, with Ada's ids.
    let checks: Vec<Probe> = vec![
        (Method::GET, "/api/chat", in_eve("chat_id", chat), None),
        (
            Method::PUT,
            "/api/chat",
            in_eve("chat_id", chat),
            Some(json!({"title": "x"})),
        ),
        (
            Method::DELETE,
            "/api/chat/delete_session",
            vec![("session_id", chat.to_string())],
            None,
        ),
        (
            Method::POST,
            "/api/chat/send_message",
            q_org(eve_org),
            Some(json!({"chat_id": chat, "content": "x"})),
        ),
        (
            Method::GET,
            "/api/chat/stream",
            in_eve("message_id", answer),
            None,
        ),
        (
            Method::POST,
            "/api/chat/stop",
            in_eve("message_id", answer),
            None,
        ),
    ];
    for (method, path, query, body) in checks {
        let (s, b) = req(&base, &eve.token, method.clone(), path, &query, body).await;
        assert_eq!(s, 404, "{method} {path}: {b}");
        assert_eq!(b["error_code"], "not_found");
    }
    // Ada's org id with Eve's token: not a member.
    let (s, _) = req(
        &base,
        &eve.token,
        Method::GET,
        "/api/chat",
        &[("org_id", org.to_string()), ("chat_id", chat.to_string())],
        None,
    )
    .await;
    assert_eq!(s, 403);
    let (s, b) = req(
        &base,
        &eve.token,
        Method::POST,
        "/api/chat/bulk_delete_sessions",
        &q_org(eve_org),
        Some(json!({"chat_ids": [chat]})),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(b["results"][0]["outcome"], "not_found");
    assert_eq!(
        get_chat(&cx, &ada.token, org, chat).await.0,
        200,
        "still there"
    );
    cx.teardown().await;
}

/// A short WAV file (RIFF header and 100 silent samples).
fn wav() -> Vec<u8> {
    let samples = 100u32;
    let data_len = samples * 2;
    let mut w = Vec::new();
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + data_len).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&16000u32.to_le_bytes());
    w.extend_from_slice(&32000u32.to_le_bytes());
    w.extend_from_slice(&2u16.to_le_bytes());
    w.extend_from_slice(&16u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&data_len.to_le_bytes());
    w.extend(std::iter::repeat_n(0u8, data_len as usize));
    w
}

async fn transcribe_raw(
    base: &str,
    token: &str,
    org: Uuid,
    extra: &[(&str, &str)],
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value) {
    let mut q = vec![("org_id".to_string(), org.to_string())];
    for (k, v) in extra {
        q.push((k.to_string(), v.to_string()));
    }
    let mut r = workspace_tests::http()
        .post(format!("{base}/api/chat/transcribe"))
        .bearer_auth(token)
        .query(&q)
        .body(body);
    if let Some(ct) = content_type {
        r = r.header("content-type", ct);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn form(boundary: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"voice.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[tokio::test]
async fn transcription_goes_to_an_openai_compatible_service() {
    // None configured: 503 with a how-to message.
    let cx = TestContext::with_config("chat_transcribe_none", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let (s, b) = transcribe_raw(
        &cx.base_url,
        &ada.token,
        org,
        &[("content_type", "audio/wav")],
        None,
        wav(),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str().unwrap()),
        (503, "transcription_unavailable")
    );
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("[transcription] base_url"),
        "{b}"
    );
    cx.teardown().await;

    let fake =
        workspace_tests::fake_transcriber::FakeTranscriber::start("bonjour tout le monde", false)
            .await;
    let url = fake.base_url();
    let cx = TestContext::with_config("chat_transcribe", move |c| {
        fast(c);
        c.transcription.base_url = Some(url);
        c.transcription.api_key = Some("sk-transcribe-test".into());
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let base = cx.base_url.clone();
    let audio = wav();

    // Multipart with a language.
    let (s, b) = transcribe_raw(
        &base,
        &ada.token,
        org,
        &[("language", "fr-FR")],
        Some("multipart/form-data; boundary=XyZ"),
        form("XyZ", &audio),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        b,
        json!({"text": "bonjour tout le monde", "language": "fr-FR"})
    );
    let got = fake.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/v1/audio/transcriptions");
    assert_eq!(
        got[0].authorization.as_deref(),
        Some("Bearer sk-transcribe-test")
    );
    assert_eq!(got[0].field("model"), Some("whisper-1"));
    assert_eq!(got[0].field("language"), Some("fr"));
    assert_eq!(got[0].field("response_format"), Some("json"));
    assert_eq!(got[0].file_name.as_deref(), Some("audio.wav"));
    assert_eq!(got[0].file_type.as_deref(), Some("audio/wav"));
    assert_eq!(got[0].file, audio);

    // Raw bytes with content_type; no language: detected, null.
    let (s, b) = transcribe_raw(
        &base,
        &ada.token,
        org,
        &[("content_type", "audio/wav")],
        None,
        audio.clone(),
    )
    .await;
    assert_eq!((s, b["language"].clone()), (200, Value::Null), "{b}");
    assert!(fake.requests()[1].field("language").is_none());

    // Refusals, before the service is called.
    for (extra, ct, body, code) in [
        (vec![], None, audio.clone(), "unsupported_audio_format"),
        (
            vec![("content_type", "text/plain")],
            None,
            audio.clone(),
            "unsupported_audio_format",
        ),
        (
            vec![("content_type", "audio/mpeg")],
            None,
            b"%PDF-1.7\n1 0 obj".to_vec(),
            "unsupported_audio_format",
        ),
        (
            vec![("content_type", "audio/wav"), ("language", "xx-XX")],
            None,
            audio.clone(),
            "unsupported_language",
        ),
        (
            vec![("content_type", "audio/wav")],
            None,
            Vec::new(),
            "invalid_audio",
        ),
        (
            vec![],
            Some("multipart/form-data; boundary=B"),
            b"--B--\r\n".to_vec(),
            "invalid_audio",
        ),
    ] {
        let (s, b) = transcribe_raw(&base, &ada.token, org, &extra, ct, body).await;
        assert_eq!(
            (s, b["error_code"].as_str().unwrap_or_default()),
            (400, code),
            "{extra:?} {b}"
        );
    }
    assert_eq!(fake.requests().len(), 2);
    cx.teardown().await;

    // The service failing: 503 transcription_failed.
    let failing = workspace_tests::fake_transcriber::FakeTranscriber::start("", true).await;
    let url = failing.base_url();
    let cx = TestContext::with_config("chat_transcribe_fail", move |c| {
        fast(c);
        c.transcription.base_url = Some(url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let (s, b) = transcribe_raw(
        &cx.base_url,
        &ada.token,
        org,
        &[("content_type", "audio/wav")],
        None,
        wav(),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str().unwrap()),
        (503, "transcription_failed")
    );
    cx.teardown().await;
}

#[tokio::test]
async fn titles_reach_websocket_clients_on_another_instance() {
    let cx = TestContext::with_config("chat_ws", fast).await;
    let second = cx.second_instance(fast).await;
    let second_url = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;

    // Ada and Bob watch on the second instance.
    let mut ada_ws = ws::open(
        &second_url,
        org,
        &ws::ticket(&cx.base_url, &ada.token, org).await,
    )
    .await;
    let ready = ws::next(&mut ada_ws, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        ready,
        json!({"type": "ready", "org_id": org, "user_id": ada.id})
    );
    let mut bob_ws = ws::open(
        &second_url,
        org,
        &ws::ticket(&second_url, &bob.token, org).await,
    )
    .await;
    assert_eq!(
        ws::next(&mut bob_ws, Duration::from_secs(10))
            .await
            .unwrap()["type"],
        "ready"
    );

    // Ada starts a chat on the first instance.
    let mut sse = send(
        &cx.base_url,
        &ada.token,
        org,
        json!({"content": "Ideas for a garden party"}),
    )
    .await;
    let mut chat = None;
    let mut title_at = None;
    while let Some((_, e)) = sse.next().await {
        if e["type"] == "start" {
            chat = Some(e["chat_id"].clone());
        }
        if e["type"] == "title" {
            title_at = Some(std::time::Instant::now());
        }
    }
    let chat = chat.unwrap();
    let notice = ws::next(&mut ada_ws, Duration::from_secs(10))
        .await
        .unwrap();
    let fan_out = title_at.unwrap().elapsed();
    eprintln!(
        "websocket fan-out across instances: title seen {fan_out:?} after the SSE title event"
    );
    assert_eq!(
        notice,
        json!({"type": "title", "chat_id": chat, "title": "Ideas for a garden party"})
    );
    let notice = ws::next(&mut ada_ws, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(notice["type"], "message");
    assert_eq!(notice["chat_id"], chat);
    assert_eq!(notice["status"], "complete");

    // A rename is broadcast too.
    let chat_id: Uuid = chat.as_str().unwrap().parse().unwrap();
    let (s, _) = req(
        &cx.base_url,
        &ada.token,
        Method::PUT,
        "/api/chat",
        &[
            ("org_id", org.to_string()),
            ("chat_id", chat_id.to_string()),
        ],
        Some(json!({"title": "Party"})),
    )
    .await;
    assert_eq!(s, 200);
    let notice = ws::next(&mut ada_ws, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        notice,
        json!({"type": "title", "chat_id": chat, "title": "Party"})
    );

    // Bob hears nothing of Ada's chats.
    assert_eq!(
        ws::next(&mut bob_ws, Duration::from_millis(500)).await,
        None
    );

    // Tickets: single use, bound to their organization.
    let ticket = ws::ticket(&cx.base_url, &ada.token, org).await;
    let mut first = ws::open(&cx.base_url, org, &ticket).await;
    assert_eq!(
        ws::next(&mut first, Duration::from_secs(10)).await.unwrap()["type"],
        "ready"
    );
    let mut again = ws::open(&second_url, org, &ticket).await;
    assert_eq!(
        ws::next(&mut again, Duration::from_secs(10)).await,
        None,
        "a used ticket"
    );
    let bob_org = bob.personal_org().await;
    let ticket = ws::ticket(&cx.base_url, &bob.token, bob_org).await;
    let mut wrong = ws::open(&cx.base_url, org, &ticket).await;
    assert_eq!(
        ws::next(&mut wrong, Duration::from_secs(10)).await,
        None,
        "another organization"
    );
    let mut bogus = ws::open(&cx.base_url, org, "not-a-ticket").await;
    assert_eq!(ws::next(&mut bogus, Duration::from_secs(10)).await, None);
    drop(first);

    // An instance that shuts down closes its sockets as "going away" (the
    // clients reconnect elsewhere) rather than waiting for them.
    let (shutdown, ada_close, bob_close) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(30), second.shutdown()),
        ws::close_code(&mut ada_ws, Duration::from_secs(30)),
        ws::close_code(&mut bob_ws, Duration::from_secs(30)),
    );
    shutdown
        .expect("the shutdown waited for open sockets")
        .unwrap();
    assert_eq!((ada_close, bob_close), (Some(1001), Some(1001)));
    cx.teardown().await;
}

/// The median of some durations.
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Time to the first token of `send_message` beside the bare provider (a
/// fake OpenAI-compatible server on 127.0.0.1), without and with one
/// knowledge base. Prints the medians; asserts only a generous bound.
#[tokio::test]
async fn send_message_time_to_first_token_overhead() {
    use workspace_tests::fake_provider::FakeProvider;
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("chat_ttft", move |c| {
        fast(c);
        c.models.push(workspace_server::config::ModelConfig {
            name: "fake".into(),
            provider: Some(workspace_server::config::ProviderKind::OpenaiCompatible),
            upstream_model: Some("fake-upstream".into()),
            base_url: Some(url),
            api_key: Some("sk-test".into()),
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
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let base = cx.base_url.clone();
    let (_, models) = req(
        &base,
        &ada.token,
        Method::GET,
        "/api/models/list",
        &q_org(org),
        None,
    )
    .await;
    let model = models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "fake")
        .unwrap()["id"]
        .clone();
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({"name": "kb", "description": "", "embedding_model": "all-minilm-l6-v2", "sources": []}),
    )
    .await
    .id;
    let http = workspace_tests::http();
    const N: usize = 25;

    let mut bare = Vec::new();
    for _ in 0..N {
        let t = std::time::Instant::now();
        let mut resp = http
            .post(format!("{}/v1/chat/completions", fake.base_url()))
            .json(&json!({"model": "fake-upstream", "stream": true,
                "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        resp.chunk().await.unwrap();
        bare.push(t.elapsed());
    }
    let measure = |body: Value| {
        let base = base.clone();
        let token = ada.token.clone();
        async move {
            let mut times = Vec::new();
            for _ in 0..N {
                let t = std::time::Instant::now();
                let mut sse = send(&base, &token, org, body.clone()).await;
                loop {
                    let (_, e) = sse.next().await.expect("an event");
                    if e["type"] == "content" {
                        break;
                    }
                }
                times.push(t.elapsed());
                sse.collect().await;
            }
            median(times)
        }
    };
    let plain = measure(json!({"content": "hi", "model_id": model})).await;
    let with_kb =
        measure(json!({"content": "hi", "model_id": model, "knowledge_base_ids": [kb]})).await;
    // The conversation stream on the same model, for comparison.
    let conv =
        workspace_tests::resources::conversation(&ada.client, org, json!({"title": "ttft"})).await;
    let (_, session) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/conversation/create_session",
        &q_org(org),
        Some(json!({"conversation_id": conv.id, "model_id": model})),
    )
    .await;
    let mut conversation = Vec::new();
    for _ in 0..N {
        let t = std::time::Instant::now();
        let resp = open(
            &base,
            &ada.token,
            Method::POST,
            "/api/conversation/stream_chat",
            &q_org(org),
            Some(json!({"chat_session_id": session["id"], "message": "hi"})),
            None,
        )
        .await;
        let mut sse = Sse::new(resp);
        while let Some((_, e)) = sse.next().await {
            if e["type"] == "content" {
                break;
            }
        }
        conversation.push(t.elapsed());
        sse.collect().await;
    }
    let conversation = median(conversation);
    // A plain JSON read through the same client, for scale.
    let mut plain_json = Vec::new();
    for _ in 0..N {
        let t = std::time::Instant::now();
        req(
            &base,
            &ada.token,
            Method::GET,
            "/api/chat/list",
            &q_org(org),
            None,
        )
        .await;
        plain_json.push(t.elapsed());
    }
    eprintln!(
        "GET /api/chat/list, one keep-alive client (median of {N}): {:?}",
        median(plain_json)
    );
    let bare = median(bare);
    eprintln!("time to first token (median of {N}): conversation stream {conversation:?}");
    eprintln!(
        "time to first token (median of {N}): bare provider {bare:?}, send_message {plain:?} \
         (+{:?}), with one knowledge base {with_kb:?} (+{:?})",
        plain.saturating_sub(bare),
        with_kb.saturating_sub(bare)
    );
    assert!(plain < Duration::from_secs(2) && with_kb < Duration::from_secs(2));
    cx.teardown().await;
}
