//! An answer's history is bounded by its model's context (issue #33): with
//! a small configured `context_tokens`, a long chat or conversation
//! session sends only its most recent whole turns that fit beside the
//! system prompt, the new message and the answer's `max_tokens`, as the
//! provider (a fake OpenAI-compatible server) receives them.

use serde_json::json;
use uuid::Uuid;
use workspace_client::Client;
use workspace_client::types::{ConversationSessionCreate, StreamChatRequest};
use workspace_server::config::{Config, ModelConfig, ProviderKind};
use workspace_tests::fake_provider::FakeProvider;
use workspace_tests::sse::{EventReader, content};
use workspace_tests::{TestContext, resources};

/// The model's context in the tests: small, so that a history of
/// `TURNS` turns does not fit.
const CONTEXT: u32 = 1_000;
/// Earlier turns stored before the new message.
const TURNS: usize = 100;
/// Bytes of every stored message.
const MESSAGE_BYTES: usize = 30;
const NEW_MESSAGE: &str = "the new question";

/// The documented estimate: UTF-8 bytes / 3 rounded up, plus 4 a message.
fn tokens(bytes: usize) -> u32 {
    (bytes.div_ceil(3) + 4) as u32
}

/// How many of the newest stored turns fit `budget` tokens: whole turns
/// (a message that fits without its question is not sent).
fn turns_that_fit(budget: u32) -> usize {
    (budget / tokens(MESSAGE_BYTES)) as usize / 2
}

/// The stored turn `i`: (question, answer), `MESSAGE_BYTES` each.
fn turn(i: usize) -> (String, String) {
    (
        format!("{:.<MESSAGE_BYTES$}", format!("question {i:03} ")),
        format!("{:.<MESSAGE_BYTES$}", format!("answer {i:03} ")),
    )
}

/// Stored turns `first..TURNS`, then the new message, as the provider
/// should receive them.
fn expected(first: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in first..TURNS {
        let (q, a) = turn(i);
        out.push(("user".to_string(), q));
        out.push(("assistant".to_string(), a));
    }
    out.push(("user".to_string(), NEW_MESSAGE.to_string()));
    out
}

fn configure(fake_url: String, max_tokens: Option<u32>) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        c.providers.offline_chunk_delay_ms = 0;
        c.providers.retry_backoff_ms = 5;
        c.models.push(ModelConfig {
            name: "small-context".into(),
            provider: Some(ProviderKind::OpenaiCompatible),
            upstream_model: None,
            base_url: Some(fake_url),
            api_key: Some("sk-test".into()),
            api_key_env: None,
            max_tokens,
            context_tokens: Some(CONTEXT),
            input: None,
            reasoning: None,
            max_output_tokens: None,
            deployments: Vec::new(),
            fallbacks: Vec::new(),
            context_window_fallbacks: Vec::new(),
            content_policy_fallbacks: Vec::new(),
        });
    }
}

async fn model_id(client: &Client, org: Uuid) -> Uuid {
    client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|m| m.name == "small-context")
        .expect("the model")
        .id
}

#[tokio::test]
async fn a_long_chat_sends_only_the_recent_turns_that_fit() {
    let fake = FakeProvider::start().await;
    let cx = TestContext::with_config(
        "history_chat",
        configure(format!("{}/v1", fake.base_url()), None),
    )
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org).await;
    // An agent on the model: its system prompt ("Be brief") and
    // max_tokens (256) are always sent and reserved.
    let agent = resources::agent(
        &ada.client,
        org,
        crate::agents::agent_body(model, json!([])),
    )
    .await;
    ada.client
        .agents_test()
        .agent_id(agent)
        .body(workspace_client::types::AgentTestRequest::builder().message("hello".to_string()))
        .send()
        .await
        .expect("the agent passes its test");
    let first = resources::chat_message(
        &ada.client,
        org,
        json!({"content": "first", "agent_id": agent}),
    )
    .await;
    // TURNS earlier turns after the first.
    let turns: Vec<(&str, String)> = (0..TURNS)
        .flat_map(|i| {
            let (q, a) = turn(i);
            [("USER", q), ("MODEL", a)]
        })
        .collect();
    workspace_tests::fixtures::append_chat_messages(
        &cx.db().await,
        org,
        first.chat_id,
        Some(model),
        &turns,
    )
    .await;

    let answered = resources::chat_message(
        &ada.client,
        org,
        json!({"content": NEW_MESSAGE, "chat_id": first.chat_id, "agent_id": agent}),
    )
    .await;
    assert_eq!(answered.text(), "Hello, world");
    let sent = fake.requests().last().expect("a request").messages();
    assert_eq!(
        sent[0],
        ("system".to_string(), "Be brief".to_string()),
        "the system prompt is always sent"
    );
    let budget = CONTEXT - 256 - tokens("Be brief".len()) - tokens(NEW_MESSAGE.len());
    let kept = turns_that_fit(budget);
    assert!(kept > 0 && kept < TURNS, "{kept}");
    assert_eq!(sent[1..], expected(TURNS - kept));
    cx.teardown().await;
}

#[tokio::test]
async fn a_long_conversation_sends_only_the_recent_turns_that_fit() {
    let fake = FakeProvider::start().await;
    let cx = TestContext::with_config(
        "history_conversation",
        configure(format!("{}/v1", fake.base_url()), Some(200)),
    )
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = model_id(&ada.client, org).await;
    let conversation = resources::conversation(&ada.client, org, json!({"title": "long"})).await;
    let session = ada
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    cx.db()
        .await
        .execute(
            "INSERT INTO conversation_messages \
                 (id, organization_id, conversation_id, session_id, role, content) \
             SELECT gen_random_uuid(), $1, $2, $3, \
                 CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, \
                 rpad(CASE WHEN g % 2 = 0 THEN 'question ' ELSE 'answer ' END \
                      || lpad((g / 2)::text, 3, '0') || ' ', $4, '.') \
             FROM generate_series(0, $5 - 1) g ORDER BY g",
            &[
                &org,
                &conversation.id,
                &session,
                &(MESSAGE_BYTES as i32),
                &(2 * TURNS as i32),
            ],
        )
        .await
        .unwrap();

    let response = ada
        .client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(session)
                .message(NEW_MESSAGE.to_string()),
        )
        .send()
        .await
        .unwrap();
    let events = EventReader::new(response.into_inner()).collect().await;
    assert_eq!(content(&events), "Hello, world");
    let sent = fake.requests().last().expect("a request").messages();
    // Conversations have no system prompt: the history and the new message.
    let budget = CONTEXT - 200 - tokens(NEW_MESSAGE.len());
    let kept = turns_that_fit(budget);
    assert!(kept > 0 && kept < TURNS, "{kept}");
    assert_eq!(sent, expected(TURNS - kept));
    cx.teardown().await;
}
