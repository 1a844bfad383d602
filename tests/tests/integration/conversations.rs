//! The Conversation area and the model catalog: CRUD, isolation between
//! organizations, permissions, pagination, and streamed answers from the
//! offline model and from a fake provider speaking the real wire formats.

use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;
use workspace_api::conversations::ConversationStreamEvent as Event;
use workspace_client::Client;
use workspace_client::types::{
    ConversationCreate, ConversationSessionCreate, MessageRole, MessageStatus, StreamChatRequest,
};
use workspace_server::config::{Config, ModelConfig, ProviderKind};
use workspace_tests::fake_provider::{FakeProvider, Reply, closed_port_url};
use workspace_tests::resources::model_id;
use workspace_tests::sse::{EventReader, NumberedReader, content};
use workspace_tests::{TestContext, error_of, too_many_requests, ws};

const KEY: &str = "sk-test-key-do-not-leak-0123456789";

fn fast(config: &mut Config) {
    config.providers.offline_chunk_delay_ms = 0;
    config.providers.retry_backoff_ms = 5;
}

fn add_model(config: &mut Config, name: &str, kind: ProviderKind, base_url: String) {
    config.models.push(ModelConfig {
        name: name.to_string(),
        provider: Some(kind),
        upstream_model: Some(format!("{name}-upstream")),
        base_url: Some(base_url),
        api_key: Some(KEY.to_string()),
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
}

async fn conversation(client: &Client, org: Uuid, title: &str) -> Uuid {
    client
        .conversation_create()
        .org_id(org)
        .body(ConversationCreate::builder().title(title.to_string()))
        .send()
        .await
        .unwrap()
        .into_inner()
        .id
}

async fn session(client: &Client, org: Uuid, conversation_id: Uuid, model: Uuid) -> Uuid {
    client
        .conversation_create_session()
        .org_id(org)
        .body(
            ConversationSessionCreate::builder()
                .conversation_id(conversation_id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id
}

async fn open_chat(client: &Client, org: Uuid, session: Uuid, message: &str) -> EventReader {
    let response = client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(session)
                .message(message.to_string()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    EventReader::new(response.into_inner())
}

async fn chat(client: &Client, org: Uuid, session: Uuid, message: &str) -> Vec<Event> {
    open_chat(client, org, session, message)
        .await
        .collect()
        .await
}

/// Checks start ... end and returns the message id.
fn assert_complete(events: &[Event]) -> String {
    let Some(Event::Start { message_id }) = events.first() else {
        panic!("no start event: {events:?}");
    };
    assert_eq!(events.last(), Some(&Event::End), "{events:?}");
    assert!(
        events[1..events.len() - 1]
            .iter()
            .all(|e| matches!(e, Event::Content { .. })),
        "{events:?}"
    );
    message_id.clone()
}

fn error_code(events: &[Event]) -> Option<String> {
    match events.last() {
        Some(Event::Error { error_code, .. }) => Some(error_code.clone()),
        _ => None,
    }
}

async fn all_messages(
    client: &Client,
    org: Uuid,
    conversation_id: Uuid,
) -> Vec<workspace_client::types::ConversationMessage> {
    client
        .conversation_messages()
        .org_id(org)
        .conversation_id(conversation_id)
        .limit(100u32)
        .send()
        .await
        .unwrap()
        .into_inner()
        .messages
}

#[tokio::test]
async fn offline_model_streams_with_zero_configuration() {
    let cx = TestContext::new("conv_offline").await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;

    let models = ada
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(models.len(), 1, "{models:?}");
    assert_eq!(models[0].name, "offline-dev-model");
    assert_eq!(models[0].provider, "offline");

    let created = ada
        .client
        .conversation_create()
        .org_id(org)
        .body(ConversationCreate::builder().title("  First chat ".to_string()))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let created = created.into_inner();
    assert_eq!(created.title, "First chat");
    assert!(!created.is_archived);

    let s = ada
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            ConversationSessionCreate::builder()
                .conversation_id(created.id)
                .model_id(models[0].id),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.conversation_id, created.id);
    assert_eq!(s.model_id, models[0].id);
    assert_eq!(
        s.status,
        workspace_client::types::ConversationSessionStatus::Active
    );

    let events = chat(&ada.client, org, s.id, "hello there").await;
    let message_id = assert_complete(&events);
    let text = content(&events);
    assert!(text.contains("offline-dev-model"), "{text}");
    assert!(text.contains("hello there"), "{text}");
    assert!(events.len() > 4, "streamed in pieces: {events:?}");

    let messages = all_messages(&ada.client, org, created.id).await;
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].role, MessageRole::User);
    assert_eq!(messages[0].content, "hello there");
    assert_eq!(messages[1].role, MessageRole::Assistant);
    assert_eq!(messages[1].id, message_id);
    assert_eq!(messages[1].content, text);
    assert_eq!(messages[1].status, MessageStatus::Complete);
    assert!(messages.iter().all(|m| m.chat_session_id == s.id));

    // The second answer saw the history (two earlier messages).
    let events = chat(&ada.client, org, s.id, "again").await;
    assert_complete(&events);
    assert!(
        content(&events).contains("Earlier messages in this session: 2."),
        "{}",
        content(&events)
    );

    let list = ada
        .client
        .conversation_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, created.id);
    assert!(list[0].updated_at > created.updated_at);
    cx.teardown().await;
}

#[tokio::test]
async fn model_ids_are_stable_across_restarts() {
    let cx = TestContext::with_config("conv_model_ids", |c| {
        add_model(
            c,
            "gpt-stable",
            ProviderKind::Openai,
            "http://127.0.0.1:9/v1".into(),
        )
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let first = ada
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        first.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        ["gpt-stable", "offline-dev-model"]
    );
    let second = cx
        .second_instance(|c| {
            add_model(
                c,
                "gpt-stable",
                ProviderKind::Openai,
                "http://127.0.0.1:9/v1".into(),
            )
        })
        .await;
    let client =
        Client::authenticated(&format!("http://{}", second.local_addr()), &ada.token).unwrap();
    let again = client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first, again);
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn organizations_are_isolated() {
    let cx = TestContext::with_config("conv_isolation", fast).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let ada_org = ada.personal_org().await;
    let bob_org = bob.personal_org().await;
    let model = model_id(&ada.client, ada_org, "offline-dev-model").await;
    let conv = conversation(&ada.client, ada_org, "secret plans").await;
    let sess = session(&ada.client, ada_org, conv, model).await;
    let answer = assert_complete(&chat(&ada.client, ada_org, sess, "the secret").await);

    // Bob is not a member of Ada's organization: 403 on every operation.
    let c = &bob.client;
    assert_eq!(
        error_of(c.conversation_list().org_id(ada_org).send().await),
        (403, "forbidden".into())
    );
    assert_eq!(
        error_of(c.models_list().org_id(ada_org).send().await),
        (403, "forbidden".into())
    );
    assert_eq!(
        error_of(
            c.conversation_messages()
                .org_id(ada_org)
                .conversation_id(conv)
                .send()
                .await
        ),
        (403, "forbidden".into())
    );
    assert_eq!(
        error_of(
            c.conversation_create()
                .org_id(ada_org)
                .body(ConversationCreate::builder().title("x".to_string()))
                .send()
                .await
        ),
        (403, "forbidden".into())
    );
    let stream = c
        .conversation_stream_chat()
        .org_id(ada_org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(sess)
                .message("hi".to_string()),
        )
        .send()
        .await;
    assert_eq!(
        error_of(stream.map(|r| r.status())),
        (403, "forbidden".into())
    );

    // Ada's ids used in Bob's own organization: 404, nothing revealed.
    let not_found = (404, "not_found".to_string());
    assert_eq!(
        error_of(
            c.conversation_get_with_sessions()
                .org_id(bob_org)
                .conversation_id(conv)
                .send()
                .await
        ),
        not_found
    );
    assert_eq!(
        error_of(
            c.conversation_messages()
                .org_id(bob_org)
                .conversation_id(conv)
                .send()
                .await
        ),
        not_found
    );
    assert_eq!(
        error_of(
            c.conversation_create_session()
                .org_id(bob_org)
                .body(
                    ConversationSessionCreate::builder()
                        .conversation_id(conv)
                        .model_id(model)
                )
                .send()
                .await
        ),
        not_found
    );
    let stream = c
        .conversation_stream_chat()
        .org_id(bob_org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(sess)
                .message("hi".to_string()),
        )
        .send()
        .await;
    assert_eq!(error_of(stream.map(|r| r.status())), not_found);
    // Ada's answer: neither resumed nor stopped from Bob's organization.
    let resumed = c
        .conversation_stream()
        .org_id(bob_org)
        .message_id(answer.clone())
        .send()
        .await;
    assert_eq!(error_of(resumed.map(|r| r.status())), not_found);
    assert_eq!(
        error_of(
            c.conversation_stop()
                .org_id(bob_org)
                .message_id(answer.clone())
                .send()
                .await
        ),
        not_found
    );
    // Nor in Ada's organization, where Bob is no member.
    let resumed = c
        .conversation_stream()
        .org_id(ada_org)
        .message_id(answer.clone())
        .send()
        .await;
    assert_eq!(
        error_of(resumed.map(|r| r.status())),
        (403, "forbidden".into())
    );
    assert!(
        c.conversation_list()
            .org_id(bob_org)
            .send()
            .await
            .unwrap()
            .into_inner()
            .is_empty()
    );
    // Nothing was written into Ada's conversation by Bob's attempts.
    assert_eq!(all_messages(&ada.client, ada_org, conv).await.len(), 2);

    // No token: 401.
    assert_eq!(
        error_of(cx.anon().conversation_list().org_id(ada_org).send().await).0,
        401
    );
    cx.teardown().await;
}

#[tokio::test]
async fn guests_read_but_do_not_write() {
    let cx = TestContext::with_config("conv_guest", fast).await;
    let ada = cx.user("ada").await;
    let gus = cx.user("gus").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "team notes").await;
    let sess = session(&ada.client, org, conv, model).await;
    chat(&ada.client, org, sess, "note one").await;

    let db = cx.db().await;
    db.execute(
        "INSERT INTO memberships (user_id, organization_id, role_id, status) \
         SELECT $1, $2, id, 'active' FROM roles WHERE organization_id = $2 AND name = 'guest'",
        &[&gus.id, &org],
    )
    .await
    .unwrap();

    let c = &gus.client;
    let list = c
        .conversation_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.len(), 1);
    let view = c
        .conversation_get_with_sessions()
        .org_id(org)
        .conversation_id(conv)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(view.sessions.len(), 1);
    assert_eq!(all_messages(c, org, conv).await.len(), 2);
    assert_eq!(model_id(c, org, "offline-dev-model").await, model);

    let forbidden = (403, "forbidden".to_string());
    assert_eq!(
        error_of(
            c.conversation_create()
                .org_id(org)
                .body(ConversationCreate::builder().title("x".to_string()))
                .send()
                .await
        ),
        forbidden
    );
    assert_eq!(
        error_of(
            c.conversation_create_session()
                .org_id(org)
                .body(
                    ConversationSessionCreate::builder()
                        .conversation_id(conv)
                        .model_id(model)
                )
                .send()
                .await
        ),
        forbidden
    );
    let stream = c
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(sess)
                .message("hi".to_string()),
        )
        .send()
        .await;
    assert_eq!(error_of(stream.map(|r| r.status())), forbidden);
    assert_eq!(all_messages(c, org, conv).await.len(), 2);
    cx.teardown().await;
}

#[tokio::test]
async fn messages_are_paginated_in_a_stable_order() {
    let cx = TestContext::with_config("conv_pagination", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "long").await;
    let sess = session(&ada.client, org, conv, model).await;
    for i in 0..13 {
        assert_complete(&chat(&ada.client, org, sess, &format!("m{i}")).await);
    }

    let page = ada
        .client
        .conversation_messages()
        .org_id(org)
        .conversation_id(conv)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!((page.limit, page.offset, page.total), (20, 0, 26));
    assert_eq!(page.messages.len(), 20);
    for (i, m) in page.messages.iter().enumerate() {
        let expected = if i % 2 == 0 {
            MessageRole::User
        } else {
            MessageRole::Assistant
        };
        assert_eq!(m.role, expected, "message {i}");
        if i % 2 == 0 {
            assert_eq!(m.content, format!("m{}", i / 2));
        }
    }
    let rest = ada
        .client
        .conversation_messages()
        .org_id(org)
        .conversation_id(conv)
        .offset(20u32)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!((rest.offset, rest.total, rest.messages.len()), (20, 26, 6));
    assert_eq!(rest.messages[0].content, "m10");

    // Pages put together equal the whole list, in the same order.
    let mut paged = Vec::new();
    for offset in (0..26u32).step_by(7) {
        let p = ada
            .client
            .conversation_messages()
            .org_id(org)
            .conversation_id(conv)
            .limit(7u32)
            .offset(offset)
            .send()
            .await
            .unwrap()
            .into_inner();
        paged.extend(p.messages.into_iter().map(|m| m.id));
    }
    let whole: Vec<String> = all_messages(&ada.client, org, conv)
        .await
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(paged, whole);

    // Raw requests: the generated client already refuses a zero limit.
    for limit in [0u32, 101] {
        assert_eq!(
            workspace_tests::raw(
                &cx.base_url,
                Some(&ada.token),
                reqwest::Method::GET,
                "/api/conversation/messages",
                &[
                    ("org_id", org.to_string()),
                    ("conversation_id", conv.to_string()),
                    ("limit", limit.to_string()),
                ],
                None,
            )
            .await,
            (400, "invalid_pagination".into())
        );
    }
    let beyond = ada
        .client
        .conversation_messages()
        .org_id(org)
        .conversation_id(conv)
        .offset(500u32)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(beyond.messages.is_empty());
    assert_eq!(beyond.total, 26);
    cx.teardown().await;
}

#[tokio::test]
async fn invalid_input_is_rejected_before_streaming() {
    let cx = TestContext::with_config("conv_validation", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    assert_eq!(
        error_of(
            ada.client
                .conversation_create()
                .org_id(org)
                .body(ConversationCreate::builder().title("   ".to_string()))
                .send()
                .await
        ),
        (400, "invalid_title".into())
    );
    let conv = conversation(&ada.client, org, "v").await;
    assert_eq!(
        error_of(
            ada.client
                .conversation_create_session()
                .org_id(org)
                .body(
                    ConversationSessionCreate::builder()
                        .conversation_id(conv)
                        .model_id(Uuid::new_v4())
                )
                .send()
                .await
        ),
        (404, "not_found".into())
    );
    let sess = session(&ada.client, org, conv, model).await;
    let blank = ada
        .client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(sess)
                .message(" \n ".to_string()),
        )
        .send()
        .await;
    assert_eq!(
        error_of(blank.map(|r| r.status())),
        (400, "invalid_message".into())
    );
    let unknown = ada
        .client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(Uuid::new_v4())
                .message("hi".to_string()),
        )
        .send()
        .await;
    assert_eq!(
        error_of(unknown.map(|r| r.status())),
        (404, "not_found".into())
    );
    assert!(all_messages(&ada.client, org, conv).await.is_empty());

    // A malformed body is invalid_request (raw request: the client would
    // not send one).
    let response = workspace_tests::http()
        .post(format!(
            "{}/api/conversation/stream_chat?org_id={org}",
            cx.base_url
        ))
        .bearer_auth(&ada.token)
        .header("content-type", "application/json")
        .body("{\"chat_session_id\": 5}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error_code"], "invalid_request");
    cx.teardown().await;
}

#[tokio::test]
async fn openai_provider_gets_the_session_history() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conv_openai_history", |c| {
        fast(c);
        add_model(c, "gpt-fake", ProviderKind::Openai, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "gpt-fake").await;
    let conv = conversation(&ada.client, org, "h").await;
    let sess = session(&ada.client, org, conv, model).await;

    let events = chat(&ada.client, org, sess, "first question").await;
    assert_complete(&events);
    assert_eq!(
        events[1..4],
        [
            Event::Content {
                content: "Hello".into()
            },
            Event::Content {
                content: ", ".into()
            },
            Event::Content {
                content: "world".into()
            },
        ]
    );
    fake.push(Reply::openai_text(&["Second", " answer"]));
    assert_complete(&chat(&ada.client, org, sess, "second question").await);

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let r = &requests[1];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.body["model"], "gpt-fake-upstream");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"]["include_usage"], true);
    assert_eq!(
        r.messages(),
        [
            ("user".to_string(), "first question".to_string()),
            ("assistant".to_string(), "Hello, world".to_string()),
            ("user".to_string(), "second question".to_string()),
        ]
    );

    // Usage from the usage chunk is stored with the answer.
    let db = cx.db().await;
    let row = db
        .query_one(
            "SELECT input_tokens, output_tokens, cached_tokens FROM conversation_messages \
             WHERE role = 'assistant' ORDER BY seq LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    let usage: (Option<i32>, Option<i32>, Option<i32>) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(usage, (Some(11), Some(3), Some(4)));
    cx.teardown().await;
}

#[tokio::test]
async fn anthropic_provider_streams() {
    let fake = FakeProvider::with_default(Reply::anthropic_text(&["Bonjour", " !"])).await;
    let url = fake.base_url();
    let cx = TestContext::with_config("conv_anthropic", |c| {
        fast(c);
        add_model(c, "claude-fake", ProviderKind::Anthropic, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "claude-fake").await;
    let conv = conversation(&ada.client, org, "a").await;
    let sess = session(&ada.client, org, conv, model).await;
    let events = chat(&ada.client, org, sess, "salut").await;
    assert_complete(&events);
    assert_eq!(content(&events), "Bonjour !");
    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.body["model"], "claude-fake-upstream");
    assert_eq!(r.body["max_tokens"], 4096);
    assert_eq!(r.messages(), [("user".to_string(), "salut".to_string())]);
    cx.teardown().await;
}

#[tokio::test]
async fn retries_429_and_5xx_before_the_first_byte() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conv_retry", |c| {
        fast(c);
        add_model(c, "gpt-fake", ProviderKind::Openai, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "gpt-fake").await;
    let conv = conversation(&ada.client, org, "r").await;
    let sess = session(&ada.client, org, conv, model).await;

    fake.push(Reply::error(429, "slow down").header("retry-after", "0"));
    fake.push(Reply::error(503, "overloaded"));
    let events = chat(&ada.client, org, sess, "hi").await;
    assert_complete(&events);
    assert_eq!(content(&events), "Hello, world");
    assert_eq!(fake.requests().len(), 3);

    // A stream that breaks before its first piece is retried too.
    fake.push(Reply::openai_text(&["lost"]).drop_after(0));
    let events = chat(&ada.client, org, sess, "again").await;
    assert_eq!(content(&events), "Hello, world");
    assert_eq!(fake.requests().len(), 5);
    cx.teardown().await;
}

#[tokio::test]
async fn provider_failures_end_the_stream_with_an_error_event() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let dead = format!("{}/v1", closed_port_url().await);
    let cx = TestContext::with_config("conv_provider_failures", |c| {
        fast(c);
        add_model(c, "gpt-fake", ProviderKind::Openai, url);
        add_model(c, "gpt-dead", ProviderKind::Openai, dead);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let conv = conversation(&ada.client, org, "f").await;
    let fake_model = model_id(&ada.client, org, "gpt-fake").await;
    let dead_model = model_id(&ada.client, org, "gpt-dead").await;
    let sess = session(&ada.client, org, conv, fake_model).await;
    let dead_sess = session(&ada.client, org, conv, dead_model).await;

    // Connection refused, after the retries.
    let events = chat(&ada.client, org, dead_sess, "anyone?").await;
    assert!(matches!(events[0], Event::Start { .. }), "{events:?}");
    assert_eq!(error_code(&events).as_deref(), Some("provider_unavailable"));
    assert!(!events.contains(&Event::End));

    // 500 on every attempt (1 + 2 retries).
    for _ in 0..3 {
        fake.push(Reply::error(500, "boom"));
    }
    let events = chat(&ada.client, org, sess, "q1").await;
    assert_eq!(error_code(&events).as_deref(), Some("provider_unavailable"));
    assert_eq!(fake.requests().len(), 3);

    // 401 is not retried, and the key never reaches the client or the log
    // even though the provider echoes it.
    fake.push(Reply::error(
        401,
        &format!("Incorrect API key provided: {KEY}"),
    ));
    let events = chat(&ada.client, org, sess, "q2").await;
    assert_eq!(error_code(&events).as_deref(), Some("provider_rejected"));
    assert_eq!(fake.requests().len(), 4);
    assert!(!format!("{events:?}").contains(KEY));

    // Dropped mid-stream: the partial answer is kept, marked failed.
    fake.push(Reply::openai_text(&["Part", "ial", " answer", " lost"]).drop_after(3));
    let events = chat(&ada.client, org, sess, "q3").await;
    assert_eq!(content(&events), "Partial");
    assert_eq!(
        error_code(&events).as_deref(),
        Some("provider_stream_interrupted")
    );
    assert_eq!(fake.requests().len(), 5, "no retry after content was sent");

    // A malformed chunk mid-stream.
    fake.push(Reply::openai_text(&["Good", " start"]).malformed_at(2));
    let events = chat(&ada.client, org, sess, "q4").await;
    assert_eq!(content(&events), "Good");
    assert_eq!(
        error_code(&events).as_deref(),
        Some("provider_stream_interrupted")
    );

    let messages = all_messages(&ada.client, org, conv).await;
    let summary: Vec<(MessageRole, &str, MessageStatus)> = messages
        .iter()
        .map(|m| (m.role, m.content.as_str(), m.status))
        .collect();
    use MessageRole::{Assistant, User};
    use MessageStatus::{Complete, Failed};
    assert_eq!(
        summary,
        [
            (User, "anyone?", Complete),
            (Assistant, "", Failed),
            (User, "q1", Complete),
            (Assistant, "", Failed),
            (User, "q2", Complete),
            (Assistant, "", Failed),
            (User, "q3", Complete),
            (Assistant, "Partial", Failed),
            (User, "q4", Complete),
            (Assistant, "Good", Failed),
        ]
    );
    let db = cx.db().await;
    let codes: Vec<Option<String>> = db
        .query(
            "SELECT error_code FROM conversation_messages WHERE role = 'assistant' ORDER BY seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        codes,
        [
            Some("provider_unavailable".to_string()),
            Some("provider_unavailable".to_string()),
            Some("provider_rejected".to_string()),
            Some("provider_stream_interrupted".to_string()),
            Some("provider_stream_interrupted".to_string()),
        ]
    );

    // The server kept serving, and the next answer works.
    assert_complete(&chat(&ada.client, org, sess, "q5").await);
    let log = std::env::temp_dir().join("workspace-tests/conv_provider_failures.log");
    let log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(log.contains("model provider failed"), "failures are logged");
    assert!(!log.contains(KEY), "the API key is in the log");
    cx.teardown().await;
}

#[tokio::test]
async fn a_stalled_provider_times_out() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conv_stall", |c| {
        fast(c);
        c.providers.idle_timeout_secs = 1;
        add_model(c, "gpt-fake", ProviderKind::Openai, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "gpt-fake").await;
    let conv = conversation(&ada.client, org, "s").await;
    let sess = session(&ada.client, org, conv, model).await;
    fake.push(Reply::openai_text(&["Slow", " start"]).stall_after(2, Duration::from_secs(5)));
    let events = chat(&ada.client, org, sess, "hi").await;
    assert_eq!(content(&events), "Slow");
    assert_eq!(error_code(&events).as_deref(), Some("provider_timeout"));
    cx.teardown().await;
}

/// Waits until the answer is no longer `streaming`; returns it.
async fn wait_finished(
    client: &Client,
    org: Uuid,
    conversation_id: Uuid,
    message_id: &str,
) -> workspace_client::types::ConversationMessage {
    for _ in 0..400 {
        let messages = all_messages(client, org, conversation_id).await;
        if let Some(m) = messages
            .iter()
            .find(|m| m.id == message_id && m.status != MessageStatus::Streaming)
        {
            return m.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the answer {message_id} did not finish");
}

#[tokio::test]
async fn a_client_disconnect_does_not_stop_the_answer() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conv_disconnect", |c| {
        fast(c);
        add_model(c, "gpt-fake", ProviderKind::Openai, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "gpt-fake").await;
    let conv = conversation(&ada.client, org, "d").await;
    let sess = session(&ada.client, org, conv, model).await;
    let pieces: Vec<String> = (0..50).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    fake.push(Reply::openai_text(&pieces).paced(Duration::from_millis(20)));

    let mut reader = open_chat(&ada.client, org, sess, "tell me a long story").await;
    let Some(Event::Start { message_id }) = reader.next().await else {
        panic!("no start");
    };
    let mut received = String::new();
    for _ in 0..3 {
        match reader.next().await {
            Some(Event::Content { content }) => received.push_str(&content),
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(reader);

    // The answer goes on without the client and is stored whole.
    let stored = wait_finished(&ada.client, org, conv, &message_id).await;
    assert_eq!(stored.status, MessageStatus::Complete);
    assert!(stored.content.starts_with(&received), "{stored:?}");
    assert_eq!(stored.content, pieces.concat());
    cx.teardown().await;
}

#[tokio::test]
async fn stop_ends_an_answer_and_keeps_its_text() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conv_stop", |c| {
        fast(c);
        add_model(c, "gpt-fake", ProviderKind::Openai, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "gpt-fake").await;
    let conv = conversation(&ada.client, org, "s").await;
    let sess = session(&ada.client, org, conv, model).await;
    let pieces: Vec<String> = (0..100).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    fake.push(Reply::openai_text(&pieces).paced(Duration::from_millis(50)));

    let mut reader = open_chat(&ada.client, org, sess, "tell me a long story").await;
    let Some(Event::Start { message_id }) = reader.next().await else {
        panic!("no start");
    };
    let mut received = String::new();
    for _ in 0..3 {
        match reader.next().await {
            Some(Event::Content { content }) => received.push_str(&content),
            other => panic!("unexpected {other:?}"),
        }
    }
    let stopped = ada
        .client
        .conversation_stop()
        .org_id(org)
        .message_id(message_id.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(stopped.stopped, "{stopped:?}");
    assert_eq!(stopped.message_id, message_id);
    // The stream ends with `end` once the partial answer is stored.
    let rest = reader.collect().await;
    assert_eq!(rest.last(), Some(&Event::End), "{rest:?}");
    received.push_str(&content(&rest));
    let stored = wait_finished(&ada.client, org, conv, &message_id).await;
    assert_eq!(stored.status, MessageStatus::Cancelled);
    assert_eq!(
        stored.content, received,
        "the text streamed is the text kept"
    );
    assert!(
        !stored.content.is_empty() && stored.content.len() < pieces.concat().len(),
        "cut short: {stored:?}"
    );
    // A second stop: the answer had ended.
    let again = ada
        .client
        .conversation_stop()
        .org_id(org)
        .message_id(message_id.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!again.stopped);
    // Ids that are no answer: 404.
    for id in [
        Uuid::new_v4().to_string(),
        "not-an-id".to_string(),
        sess.to_string(),
    ] {
        assert_eq!(
            error_of(
                ada.client
                    .conversation_stop()
                    .org_id(org)
                    .message_id(id)
                    .send()
                    .await
            ),
            (404, "not_found".to_string())
        );
    }
    // The user's message is no answer either.
    let user_message = all_messages(&ada.client, org, conv)
        .await
        .into_iter()
        .find(|m| m.role == MessageRole::User)
        .unwrap();
    assert_eq!(
        error_of(
            ada.client
                .conversation_stop()
                .org_id(org)
                .message_id(user_message.id)
                .send()
                .await
        ),
        (404, "not_found".to_string())
    );
    cx.teardown().await;
}

/// A slow offline model: 40 ms per word.
fn slow(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 40;
}

/// Opens `GET /api/conversation/stream` on `base`.
async fn resume(
    base: &str,
    token: &str,
    org: Uuid,
    message_id: &str,
    last_event_id: Option<&str>,
) -> reqwest::Response {
    let mut r = workspace_tests::http()
        .get(format!("{base}/api/conversation/stream"))
        .bearer_auth(token)
        .query(&[
            ("org_id", org.to_string()),
            ("message_id", message_id.to_string()),
        ]);
    if let Some(id) = last_event_id {
        r = r.header("Last-Event-ID", id);
    }
    r.send().await.expect("request")
}

/// Numbered events of a stream, parsed as the typed events (the `id:`
/// lines leave them intact).
async fn numbered(resp: reqwest::Response) -> Vec<(Option<i32>, Event)> {
    let mut sse = NumberedReader::new(resp);
    let mut out = Vec::new();
    while let Some((id, value)) = sse.next().await {
        out.push((id, serde_json::from_value(value).expect("a typed event")));
    }
    out
}

#[tokio::test]
async fn a_dropped_stream_resumes_on_another_instance_exactly_once() {
    let cx = TestContext::with_config("conv_resume", slow).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let second = cx.second_instance(slow).await;
    let second_url = format!("http://{}", second.local_addr());
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "r").await;
    let sess = session(&ada.client, org, conv, model).await;

    // The first instance streams with `id:` lines.
    let resp = workspace_tests::http()
        .post(format!("{}/api/conversation/stream_chat", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(&serde_json::json!({
            "chat_session_id": sess,
            "message": "Tell me a long story about a lighthouse keeper"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut live = NumberedReader::new(resp);
    let mut seen: Vec<(Option<i32>, Event)> = Vec::new();
    for _ in 0..4 {
        let (id, value) = live.next().await.unwrap();
        seen.push((id, serde_json::from_value(value).unwrap()));
    }
    drop(live); // the connection drops mid-answer
    let Event::Start { message_id } = &seen[0].1 else {
        panic!("{seen:?}");
    };
    let message_id = message_id.clone();
    let last_id = seen.last().unwrap().0.unwrap();

    // Resumed on the second instance after the last event seen.
    let started = std::time::Instant::now();
    let resp = resume(
        &second_url,
        &ada.token,
        org,
        &message_id,
        Some(&last_id.to_string()),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut resumed = NumberedReader::new(resp);
    let first = resumed.next().await.expect("an event");
    eprintln!(
        "conversation resume: first event after {:?}",
        started.elapsed()
    );
    let mut rest = vec![first];
    rest.extend(resumed.collect().await);
    let rest: Vec<(Option<i32>, Event)> = rest
        .into_iter()
        .map(|(id, e)| (id, serde_json::from_value(e).expect("a typed event")))
        .collect();
    assert_eq!(rest.last().unwrap().1, Event::End, "the answer went on");
    let mut all = seen.clone();
    all.extend(rest);
    let ids: Vec<i32> = all.iter().map(|(id, _)| id.unwrap()).collect();
    assert_eq!(
        ids,
        (1..=all.len() as i32).collect::<Vec<_>>(),
        "every event once, in order"
    );
    let events: Vec<Event> = all.iter().map(|(_, e)| e.clone()).collect();
    assert_complete(&events);
    let text = content(&events);
    assert!(text.contains("lighthouse keeper"), "{text}");
    // The stored answer is the streamed one.
    let stored = wait_finished(&ada.client, org, conv, &message_id).await;
    assert_eq!(stored.status, MessageStatus::Complete);
    assert_eq!(stored.content, text);

    // A full replay (no Last-Event-ID) gives the same events, on either
    // instance; after the last event, an empty stream that ends.
    for base in [&cx.base_url, &second_url] {
        let replay = numbered(resume(base, &ada.token, org, &message_id, None).await).await;
        assert_eq!(replay, all);
    }
    let after_end = numbered(
        resume(
            &second_url,
            &ada.token,
            org,
            &message_id,
            Some(&all.len().to_string()),
        )
        .await,
    )
    .await;
    assert!(after_end.is_empty(), "{after_end:?}");
    // A Last-Event-ID that is no event number is refused.
    let resp = resume(&second_url, &ada.token, org, &message_id, Some("abc")).await;
    assert_eq!(resp.status(), 400);
    // The generated client reads the same stream.
    let bytes = ada
        .client
        .conversation_stream()
        .org_id(org)
        .message_id(message_id.clone())
        .send()
        .await
        .unwrap();
    let typed = EventReader::new(bytes.into_inner()).collect().await;
    assert_eq!(typed, events);
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn sessions_each_use_their_own_model_and_history() {
    let fake = FakeProvider::start().await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conv_sessions", |c| {
        fast(c);
        add_model(c, "deepseek-fake", ProviderKind::Deepseek, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let offline = model_id(&ada.client, org, "offline-dev-model").await;
    let deepseek = model_id(&ada.client, org, "deepseek-fake").await;
    let conv = conversation(&ada.client, org, "compare").await;
    let s1 = session(&ada.client, org, conv, offline).await;
    let s2 = session(&ada.client, org, conv, deepseek).await;

    assert_complete(&chat(&ada.client, org, s1, "to offline").await);
    assert_complete(&chat(&ada.client, org, s2, "to deepseek").await);
    assert_complete(&chat(&ada.client, org, s2, "deepseek again").await);

    let view = ada
        .client
        .conversation_get_with_sessions()
        .org_id(org)
        .conversation_id(conv)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(view.conversation.id, conv);
    assert_eq!(view.conversation.title, "compare");
    let sessions: Vec<(Uuid, &str, &str)> = view
        .sessions
        .iter()
        .map(|s| (s.id, s.model.name.as_str(), s.model.provider.as_str()))
        .collect();
    assert_eq!(
        sessions,
        [
            (s1, "offline-dev-model", "offline"),
            (s2, "deepseek-fake", "deepseek")
        ]
    );
    assert_eq!(view.sessions[1].model.id, deepseek);

    // The combined view's session has `model` and no `model_id` or
    // `updated_at`, exactly as the spec describes.
    let raw: serde_json::Value = workspace_tests::http()
        .get(format!(
            "{}/api/conversation/get_with_sessions?org_id={org}&conversation_id={conv}",
            cx.base_url
        ))
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut keys: Vec<&str> = raw["sessions"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["conversation_id", "created_at", "id", "model", "status"]
    );

    let messages = all_messages(&ada.client, org, conv).await;
    let by_session: Vec<Uuid> = messages.iter().map(|m| m.chat_session_id).collect();
    assert_eq!(by_session, [s1, s1, s2, s2, s2, s2]);
    // The provider saw only its own session's history.
    let last = fake.requests().pop().unwrap();
    assert_eq!(
        last.messages(),
        [
            ("user".to_string(), "to deepseek".to_string()),
            ("assistant".to_string(), "Hello, world".to_string()),
            ("user".to_string(), "deepseek again".to_string()),
        ]
    );
    cx.teardown().await;
}

#[tokio::test]
async fn the_daily_chat_limit_is_enforced_per_organization() {
    let cx = TestContext::with_config("conv_daily_limit", |c| {
        fast(c);
        c.features.daily_chat_limit = 2;
    })
    .await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "Limited").await;
    let s = session(&ada.client, org, conv, model).await;
    for message in ["one", "two"] {
        assert_complete(&chat(&ada.client, org, s, message).await);
    }
    // The third message of the day is refused before anything is stored.
    let (retry, code) = too_many_requests(
        workspace_tests::http()
            .post(format!("{}/api/conversation/stream_chat", cx.base_url))
            .query(&[("org_id", org.to_string())])
            .bearer_auth(&ada.token)
            .json(&serde_json::json!({"chat_session_id": s, "message": "three"})),
    )
    .await;
    assert!((1..=86_400).contains(&retry), "{retry}");
    assert_eq!(code, "daily_chat_limit_exceeded");
    assert_eq!(
        all_messages(&ada.client, org, conv).await.len(),
        4,
        "nothing stored"
    );

    // Another organization has its own count.
    let bob_org = bob.personal_org().await;
    let bob_conv = conversation(&bob.client, bob_org, "Mine").await;
    let bob_session = session(&bob.client, bob_org, bob_conv, model).await;
    assert_complete(&chat(&bob.client, bob_org, bob_session, "hi").await);

    // A new UTC day starts a new count.
    let db = cx.db().await;
    db.execute(
        "UPDATE organization_daily_usage SET day = day - 1 WHERE organization_id = $1",
        &[&org],
    )
    .await
    .unwrap();
    assert_complete(&chat(&ada.client, org, s, "three").await);
    cx.teardown().await;
}

/// Leases that expire fast: renewed every second, answers without a
/// renewal for 3 s closed, a sweep every second.
fn short_leases(c: &mut Config) {
    c.streams.heartbeat_secs = 1;
    c.streams.lease_secs = 3;
    c.streams.sweep_interval_secs = 1;
}

/// Reads numbered events for at least `at_least` (so that the partial text
/// was saved) and returns them.
async fn read_for(sse: &mut NumberedReader, at_least: Duration) -> Vec<(Option<i32>, Value)> {
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < at_least {
        seen.push(sse.next().await.expect("the answer goes on"));
    }
    seen
}

/// The text of numbered `content` events.
fn text_of(events: &[(Option<i32>, Value)]) -> String {
    events
        .iter()
        .filter(|(_, e)| e["type"] == "content")
        .map(|(_, e)| e["content"].as_str().unwrap_or_default())
        .collect()
}

/// Chat and conversation answers of an instance that crashes mid-answer
/// are closed by another instance's sweeper once their lease expires:
/// `failed` with `answer_interrupted`, their saved text kept, and a last
/// `error` event that ends resumed streams (which would otherwise wait).
#[tokio::test]
async fn answers_of_a_crashed_instance_are_closed_by_a_sweeper() {
    let leases = |c: &mut Config| {
        slow(c);
        short_leases(c);
    };
    let cx = TestContext::with_config("conv_sweep", leases).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "crash").await;
    let sess = session(&ada.client, org, conv, model).await;
    let doomed = cx.crashable_instance(leases);
    let http = workspace_tests::http();
    let long = "Tell me a very long story about a lighthouse keeper and the sea ".repeat(4);
    // Ada's chat WebSocket on the surviving instance.
    let mut live = ws::open(
        &cx.base_url,
        org,
        &ws::ticket(&cx.base_url, &ada.token, org).await,
    )
    .await;
    let ready = ws::next(&mut live, Duration::from_secs(10)).await;
    assert_eq!(ready.expect("ready")["type"], "ready");

    // A conversation answer and a chat answer stream on the doomed instance.
    let resp = http
        .post(format!("{}/api/conversation/stream_chat", doomed.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"chat_session_id": sess, "message": long}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut conv_live = NumberedReader::new(resp);
    let resp = http
        .post(format!("{}/api/chat/send_message", doomed.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"content": long}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut chat_live = NumberedReader::new(resp);
    // Long enough for the partial texts to be saved (once a second).
    let conv_seen = read_for(&mut conv_live, Duration::from_millis(1600)).await;
    let chat_seen = read_for(&mut chat_live, Duration::from_millis(200)).await;
    let conv_answer = conv_seen[0].1["message_id"].as_str().unwrap().to_string();
    let chat_answer = chat_seen[0].1["message_id"].as_str().unwrap().to_string();
    let chat_id = chat_seen[0].1["chat_id"].as_str().unwrap().to_string();

    doomed.crash();
    let crashed = std::time::Instant::now();
    drop(conv_live);
    drop(chat_live);

    // Resumed on the surviving instance, both streams wait, then end with
    // the sweeper's event, numbered after the last stored one. (They
    // resume two events back: the last events a client saw may not have
    // been stored when the instance crashed.)
    let back = |seen: &mut Vec<(Option<i32>, Value)>| {
        seen.truncate(seen.len() - 2);
        seen.last().unwrap().0.unwrap().to_string()
    };
    let (mut conv_seen, mut chat_seen) = (conv_seen, chat_seen);
    let conv_after = back(&mut conv_seen);
    let chat_after = back(&mut chat_seen);
    let conv_rest = NumberedReader::new(
        resume(
            &cx.base_url,
            &ada.token,
            org,
            &conv_answer,
            Some(&conv_after),
        )
        .await,
    );
    let chat_rest = http
        .get(format!("{}/api/chat/stream", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[
            ("org_id", org.to_string()),
            ("message_id", chat_answer.clone()),
        ])
        .header("Last-Event-ID", chat_after)
        .send()
        .await
        .unwrap();
    assert_eq!(chat_rest.status(), 200);
    let (conv_rest, chat_rest) = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join(
            conv_rest.collect(),
            NumberedReader::new(chat_rest).collect(),
        ),
    )
    .await
    .expect("resumed streams of a crashed instance end");
    eprintln!(
        "sweep: streams ended {:?} after the crash",
        crashed.elapsed()
    );
    for (seen, rest) in [(&conv_seen, &conv_rest), (&chat_seen, &chat_rest)] {
        let last = &rest.last().expect("an event").1;
        assert_eq!(last["type"], "error", "{rest:?}");
        assert_eq!(last["error_code"], "answer_interrupted");
        let mut all = seen.clone();
        all.extend(rest.iter().cloned());
        let ids: Vec<i32> = all.iter().map(|(id, _)| id.unwrap()).collect();
        assert_eq!(
            ids,
            (1..=all.len() as i32).collect::<Vec<_>>(),
            "in order, once"
        );
    }
    // The typed conversation events parse.
    for (_, e) in &conv_rest {
        let _: Event = serde_json::from_value(e.clone()).expect("a typed event");
    }

    // The answers are failed, with the text saved before the crash.
    let conv_text = text_of(&conv_seen) + &text_of(&conv_rest);
    let stored = wait_finished(&ada.client, org, conv, &conv_answer).await;
    assert_eq!(stored.status, MessageStatus::Failed);
    assert!(!stored.content.is_empty(), "the saved text is kept");
    assert!(conv_text.starts_with(&stored.content), "{stored:?}");
    let chat: Value = http
        .get(format!("{}/api/chat", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string()), ("chat_id", chat_id.clone())])
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let answer = &chat["messages"][1];
    assert_eq!(answer["status"], "failed");
    assert_eq!(answer["metadata"]["error_code"], "answer_interrupted");
    // The WebSocket heard that the chat answer ended, as it would have
    // from the answer's own instance.
    let mut notices = Vec::new();
    let ended = loop {
        let notice = ws::next(&mut live, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("no notice that the answer ended: {notices:?}"));
        if notice["type"] == "message" {
            break notice;
        }
        notices.push(notice);
    };
    assert_eq!(
        ended,
        json!({"type": "message", "chat_id": chat_id, "message_id": chat_answer,
            "status": "failed"})
    );
    let db = cx.db().await;
    let row = db
        .query_one(
            "SELECT error_code FROM conversation_messages WHERE id = $1::text::uuid",
            &[&conv_answer],
        )
        .await
        .unwrap();
    assert_eq!(
        row.get::<_, Option<String>>(0).as_deref(),
        Some("answer_interrupted")
    );

    cx.teardown().await;
}

/// A stopped instance (SIGTERM) does not lose its answers: it lets an
/// answer in flight finish within `http.shutdown_grace_secs`, and past the
/// grace period closes the rest at once (`failed`, `answer_interrupted`,
/// their streams ended) instead of leaving them to another instance's
/// sweeper.
#[tokio::test]
async fn shutdown_lets_answers_finish_then_interrupts_the_rest() {
    let cx = TestContext::with_config("conv_shutdown", slow).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "shutdown").await;
    let http = workspace_tests::http();
    let ask = |base: String, sess: Uuid, message: String| {
        let http = http.clone();
        let token = ada.token.clone();
        async move {
            let resp = http
                .post(format!("{base}/api/conversation/stream_chat"))
                .bearer_auth(token)
                .query(&[("org_id", org.to_string())])
                .json(&json!({"chat_session_id": sess, "message": message}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            NumberedReader::new(resp)
        }
    };

    // Within the grace period: the answer ends normally.
    let patient = cx
        .second_instance(|c| {
            slow(c);
            c.http.shutdown_grace_secs = 120;
        })
        .await;
    let sess = session(&ada.client, org, conv, model).await;
    let mut sse = ask(
        format!("http://{}", patient.local_addr()),
        sess,
        "Hello there".to_string(),
    )
    .await;
    let first = sse.next().await.expect("the first event");
    let answer = first.1["message_id"].as_str().unwrap().to_string();
    let stopping = std::time::Instant::now();
    let (stopped, rest) = tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join(patient.shutdown(), sse.collect()),
    )
    .await
    .expect("the answer finished and the instance stopped");
    stopped.unwrap();
    assert_eq!(rest.last().expect("events").1["type"], "end", "{rest:?}");
    let stored = wait_finished(&ada.client, org, conv, &answer).await;
    assert_eq!(stored.status, MessageStatus::Complete);
    eprintln!("shutdown: waited {:?} for the answer", stopping.elapsed());

    // Past it (here cut short after 1 s, as by a second Ctrl-C): closed
    // at once as interrupted, the stream ended.
    let hasty = cx
        .second_instance(|c| {
            slow(c);
            c.http.shutdown_grace_secs = 120;
        })
        .await;
    let sess = session(&ada.client, org, conv, model).await;
    let long = "Tell me a very long story about a lighthouse keeper and the sea ".repeat(8);
    let hasty_url = format!("http://{}", hasty.local_addr());
    let mut sse = ask(hasty_url.clone(), sess, long.clone()).await;
    let first = sse.next().await.expect("the first event");
    let answer = first.1["message_id"].as_str().unwrap().to_string();
    // A chat answer too.
    let resp = http
        .post(format!("{hasty_url}/api/chat/send_message"))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"content": long}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let chat_sse = NumberedReader::new(resp);
    let stopping = std::time::Instant::now();
    let (stopped, rest, chat_events) = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join3(
            hasty.shutdown_unless(tokio::time::sleep(Duration::from_secs(1))),
            sse.collect(),
            chat_sse.collect(),
        ),
    )
    .await
    .expect("the instance stopped");
    stopped.unwrap();
    let chat_last = &chat_events.last().expect("chat events").1;
    assert_eq!(
        (&chat_last["type"], &chat_last["error_code"]),
        (&json!("error"), &json!("answer_interrupted")),
        "{chat_events:?}"
    );
    // The cut grace period, and not a lease (30 s by default), bounded it.
    assert!(
        stopping.elapsed() < Duration::from_secs(8),
        "{:?}",
        stopping.elapsed()
    );
    let (last_id, last) = rest.last().expect("events");
    assert_eq!(last["type"], "error", "{rest:?}");
    assert_eq!(last["error_code"], "answer_interrupted");
    // Told by the instance itself, in order: no event lost or repeated.
    let ids: Vec<i32> = std::iter::once(&first)
        .chain(&rest)
        .map(|(id, _)| id.unwrap())
        .collect();
    assert_eq!(ids, (1..=*last_id.as_ref().unwrap()).collect::<Vec<_>>());
    let stored = wait_finished(&ada.client, org, conv, &answer).await;
    assert_eq!(stored.status, MessageStatus::Failed);
    assert_eq!(stored.content, text_of(&rest), "the text so far is kept");
    let row = cx
        .db()
        .await
        .query_one(
            "SELECT error_code FROM conversation_messages WHERE id = $1::text::uuid",
            &[&answer],
        )
        .await
        .unwrap();
    assert_eq!(
        row.get::<_, Option<String>>(0).as_deref(),
        Some("answer_interrupted")
    );
    cx.teardown().await;
}

/// Reads numbered events until `n` `content` events have arrived.
async fn read_contents(sse: &mut NumberedReader, n: usize) -> Vec<(Option<i32>, Value)> {
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|(_, e): &&(Option<i32>, Value)| e["type"] == "content")
        .count()
        < n
    {
        seen.push(sse.next().await.expect("the answer goes on"));
    }
    seen
}

/// A real server process, killed with SIGKILL right after its clients
/// received three `content` events of a conversation answer and of a chat
/// answer, loses none of that text: every event is stored before it is
/// sent, and the sweeper of another instance closes each answer with the
/// text rebuilt from its stored events (the periodic save, once a second,
/// had not run yet).
#[tokio::test]
async fn text_a_client_received_survives_a_sigkill() {
    let cx = TestContext::with_config("conv_sigkill", short_leases).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "offline-dev-model").await;
    let conv = conversation(&ada.client, org, "killed").await;
    let sess = session(&ada.client, org, conv, model).await;

    // The doomed instance: the server executable on the same database.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("doomed.toml");
    std::fs::write(
        &config,
        format!(
            "bind_address = \"127.0.0.1:{port}\"\n\
             [database]\nurl = {:?}\n\
             {}\
             [providers]\noffline_chunk_delay_ms = 150\n\
             [streams]\nheartbeat_secs = 1\nlease_secs = 3\nsweep_interval_secs = 1\n",
            cx.db_url,
            workspace_tests::keys_toml()
        ),
    )
    .unwrap();
    let mut doomed = workspace_tests::server_command()
        .arg("--config")
        .arg(&config)
        .env_remove("WORKSPACE_CONFIG")
        .env_remove("DATABASE_URL")
        .env("WORKSPACE_LOG_LEVEL", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = workspace_tests::http();
    let started = std::time::Instant::now();
    while !http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let long = "Tell me a very long story about a lighthouse keeper and the sea ".repeat(4);
    let resp = http
        .post(format!("{base}/api/conversation/stream_chat"))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"chat_session_id": sess, "message": long}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut conv_live = NumberedReader::new(resp);
    let conv_seen = read_contents(&mut conv_live, 3).await;
    let resp = http
        .post(format!("{base}/api/chat/send_message"))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"content": long}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut chat_live = NumberedReader::new(resp);
    let chat_seen = read_contents(&mut chat_live, 3).await;

    doomed.kill().unwrap(); // SIGKILL
    doomed.wait().unwrap();
    drop(conv_live);
    drop(chat_live);

    let conv_answer = conv_seen[0].1["message_id"].as_str().unwrap().to_string();
    let chat_answer = chat_seen[0].1["message_id"].as_str().unwrap().to_string();
    let chat_id = chat_seen[0].1["chat_id"].as_str().unwrap().to_string();
    let conv_received = text_of(&conv_seen);
    let chat_received = text_of(&chat_seen);
    assert!(!conv_received.is_empty() && !chat_received.is_empty());

    // Resumed on the surviving instance from the last event each client
    // saw: the streams end with the sweeper's event.
    let conv_last = conv_seen.last().unwrap().0.unwrap().to_string();
    let chat_last = chat_seen.last().unwrap().0.unwrap().to_string();
    let conv_rest = NumberedReader::new(
        resume(
            &cx.base_url,
            &ada.token,
            org,
            &conv_answer,
            Some(&conv_last),
        )
        .await,
    );
    let chat_rest = http
        .get(format!("{}/api/chat/stream", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string()), ("message_id", chat_answer)])
        .header("Last-Event-ID", chat_last)
        .send()
        .await
        .unwrap();
    assert_eq!(chat_rest.status(), 200);
    let (conv_rest, chat_rest) = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join(
            conv_rest.collect(),
            NumberedReader::new(chat_rest).collect(),
        ),
    )
    .await
    .expect("resumed streams of a killed instance end");
    for rest in [&conv_rest, &chat_rest] {
        let last = &rest.last().expect("an event").1;
        assert_eq!(last["error_code"], "answer_interrupted", "{rest:?}");
    }

    // The stored answers hold at least every piece their clients saw.
    let stored = wait_finished(&ada.client, org, conv, &conv_answer).await;
    assert_eq!(stored.status, MessageStatus::Failed);
    assert!(
        stored.content.starts_with(&conv_received),
        "received {conv_received:?}, stored {:?}",
        stored.content
    );
    let chat: Value = http
        .get(format!("{}/api/chat", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string()), ("chat_id", chat_id)])
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let answer = &chat["messages"][1];
    assert_eq!(answer["status"], "failed", "{answer}");
    let content = answer["content"].as_str().unwrap();
    assert!(
        content.starts_with(&chat_received),
        "received {chat_received:?}, stored {content:?}"
    );
    cx.teardown().await;
}

/// `conversation/list` reads its page in the authorization statement's
/// round trip (issue #37): the page reaches only a caller the statement
/// grants, and a membership or role change holds from the next request
/// on, on either instance.
#[tokio::test]
async fn the_conversation_list_follows_membership_and_role_from_the_next_request() {
    let cx = TestContext::with_config("conv_list_grant", fast).await;
    let b = cx.second_instance(fast).await;
    let on_b = |user: &workspace_tests::TestUser| {
        Client::authenticated(&format!("http://{}", b.local_addr()), &user.token).expect("client")
    };
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.create_org("Listing").await;
    conversation(&ada.client, org, "the plan").await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    let bob_b = on_b(&bob);
    let titles = |list: Vec<workspace_client::types::Conversation>| {
        list.into_iter().map(|c| c.title).collect::<Vec<_>>()
    };
    let list = async |c: &Client| c.conversation_list().org_id(org).send().await;
    assert_eq!(
        titles(list(&bob.client).await.unwrap().into_inner()),
        ["the plan"]
    );
    // A bad page is 400 to a member...
    assert_eq!(
        error_of(
            bob.client
                .conversation_list()
                .org_id(org)
                .limit(100_000)
                .send()
                .await
        ),
        (400, "invalid_pagination".into())
    );

    // Suspended on A: the next list on B is refused, with nothing of the page.
    ada.client
        .users_suspend()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users_suspend");
    assert_eq!(error_of(list(&bob_b).await), (403, "forbidden".into()));
    // ...and 403, not 400, to a caller the grant refuses.
    assert_eq!(
        error_of(
            bob_b
                .conversation_list()
                .org_id(org)
                .limit(100_000)
                .send()
                .await
        ),
        (403, "forbidden".into())
    );
    ada.client
        .users_reactivate()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users_reactivate");
    assert_eq!(
        titles(list(&bob_b).await.unwrap().into_inner()),
        ["the plan"]
    );

    // A role without `conversation:read`: refused from the next request.
    let none = ada
        .client
        .roles_create()
        .org_id(org)
        .body(
            workspace_client::types::CreateRoleRequest::builder()
                .name("Nothing".to_string())
                .hierarchy_level(5)
                .permission_ids(Vec::<Uuid>::new()),
        )
        .send()
        .await
        .expect("roles_create");
    ada.client
        .users_update()
        .org_id(org)
        .user_id(bob.id)
        .body(workspace_client::types::UpdateUserRoleRequest::builder().role_id(none.id))
        .send()
        .await
        .expect("users_update");
    assert_eq!(error_of(list(&bob_b).await).0, 403);
    assert_eq!(error_of(list(&bob.client).await).0, 403);
    ada.client
        .users_update()
        .org_id(org)
        .user_id(bob.id)
        .body(workspace_client::types::UpdateUserRoleRequest::builder().role_id(member))
        .send()
        .await
        .expect("users_update");
    assert_eq!(
        titles(list(&bob.client).await.unwrap().into_inner()),
        ["the plan"]
    );

    // Logged out: the session's token is refused at once on both.
    bob.client.auth_logout().send().await.expect("logout");
    assert_eq!(
        error_of(list(&bob_b).await),
        (401, "session_revoked".into())
    );
    b.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A model that always reasons (DeepSeek-R1 style `reasoning_content`):
/// its reasoning streams as `reasoning` events before the content, and the
/// stored answer keeps it apart from its content.
#[tokio::test]
async fn a_reasoning_models_thinking_streams_and_is_kept_apart() {
    let fake = FakeProvider::with_default(Reply::openai_reasoning(
        &["The user greets me. ", "I greet back."],
        &["Hello!"],
    ))
    .await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("conversations_reasoning", |c| {
        fast(c);
        add_model(c, "deepseek-reasoner", ProviderKind::Deepseek, url);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org, "deepseek-reasoner").await;
    let conversation_id = conversation(&ada.client, org, "Thinking").await;
    let session_id = session(&ada.client, org, conversation_id, model).await;
    let events = chat(&ada.client, org, session_id, "hi").await;
    assert_eq!(events.last(), Some(&Event::End), "{events:?}");
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            Event::Reasoning { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "The user greets me. I greet back.");
    let first_content = events
        .iter()
        .position(|e| matches!(e, Event::Content { .. }))
        .unwrap();
    assert!(
        events[..first_content]
            .iter()
            .any(|e| matches!(e, Event::Reasoning { .. }))
    );
    let messages = all_messages(&ada.client, org, conversation_id).await;
    assert_eq!(messages[1].content, "Hello!");
    assert_eq!(
        messages[1].reasoning.as_deref(),
        Some("The user greets me. I greet back.")
    );
    assert_eq!(messages[0].reasoning, None);
    // The request was the provider's own, and carried no reasoning back.
    workspace_tests::provider_types::validate_provider_bodies(
        "openai",
        &fake
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    cx.teardown().await;
}
