//! The provider clients on their own, against the fake provider on
//! 127.0.0.1: tool-call deltas, usage, error bodies, retries.

use futures::StreamExt;
use std::time::Duration;
use workspace_server::providers::anthropic::AnthropicClient;
use workspace_server::providers::openai::OpenAiClient;
use workspace_server::providers::{
    self, ChatEvent, ChatMessage, ChatModel, ChatRequest, FinishReason, ProviderErrorKind,
    RetryPolicy, ToolCall, ToolSpec, Usage,
};
use workspace_tests::fake_provider::{FakeProvider, Reply};

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("weather in Paris?"),
        ],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "current weather".into(),
            parameters: serde_json::json!({"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }],
        max_tokens: Some(100),
        temperature: Some(0.2),
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        backoff: Duration::from_millis(5),
        idle_timeout: Duration::from_secs(5),
    }
}

fn log() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

async fn events(model: &dyn ChatModel) -> Vec<ChatEvent> {
    providers::start(model, &request(), &policy(), &log())
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await
}

#[tokio::test]
async fn openai_tool_call_deltas_and_usage() {
    let fake = FakeProvider::with_default(Reply::openai_tool_call("call_7", "get_weather")).await;
    let client = OpenAiClient::new(
        workspace_tests::http(),
        &format!("{}/v1", fake.base_url()),
        Some("k".into()),
        "gpt-x",
    );
    assert_eq!(
        events(&client).await,
        [
            ChatEvent::ToolCall(ToolCall {
                id: "call_7".into(),
                name: "get_weather".into(),
                arguments: "{\"city\":\"Paris\"}".into()
            }),
            ChatEvent::Finish(FinishReason::ToolCalls),
        ]
    );
    let r = &fake.requests()[0];
    assert_eq!(r.body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(r.body["max_tokens"], 100);
    assert_eq!(r.body["messages"][0]["role"], "system");

    fake.set_default(Reply::openai_text(&["a", "b"]));
    let got = events(&client).await;
    assert_eq!(
        got[2],
        ChatEvent::Usage(Usage {
            input_tokens: 11,
            output_tokens: 2,
            cached_tokens: 4
        })
    );
}

#[tokio::test]
async fn anthropic_tool_use_and_system_prompt() {
    let fake =
        FakeProvider::with_default(Reply::anthropic_tool_use("toolu_9", "get_weather")).await;
    let client = AnthropicClient::new(
        workspace_tests::http(),
        &fake.base_url(),
        Some("k".into()),
        "claude-x",
    );
    assert_eq!(
        events(&client).await,
        [
            ChatEvent::ToolCall(ToolCall {
                id: "toolu_9".into(),
                name: "get_weather".into(),
                arguments: "{\"city\": \"Paris\"}".into()
            }),
            ChatEvent::Usage(Usage {
                input_tokens: 5,
                output_tokens: 9,
                cached_tokens: 0
            }),
            ChatEvent::Finish(FinishReason::ToolCalls),
        ]
    );
    let r = &fake.requests()[0];
    assert_eq!(r.body["system"], "be brief");
    assert_eq!(r.body["tools"][0]["input_schema"]["required"][0], "city");
    assert_eq!(r.body["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn error_bodies_are_classified_and_scrubbed() {
    let fake = FakeProvider::with_default(Reply::error(
        401,
        "Incorrect API key provided: sk-live-abcdef",
    ))
    .await;
    let client = OpenAiClient::new(
        workspace_tests::http(),
        &format!("{}/v1", fake.base_url()),
        Some("sk-live-abcdef".into()),
        "gpt-x",
    );
    let error = match providers::start(&client, &request(), &policy(), &log()).await {
        Err(e) => e,
        Ok(_) => panic!("expected an error"),
    };
    assert_eq!(error.kind, ProviderErrorKind::Rejected(401));
    assert!(!error.detail.contains("sk-live-abcdef"), "{}", error.detail);
    assert_eq!(fake.requests().len(), 1, "4xx is not retried");

    fake.set_default(Reply::error(429, "rate limited").header("retry-after", "0"));
    let error = match providers::start(&client, &request(), &policy(), &log()).await {
        Err(e) => e,
        Ok(_) => panic!("expected an error"),
    };
    assert_eq!(error.kind, ProviderErrorKind::RateLimited);
    assert_eq!(error.error_code(), "provider_rate_limited");
    assert_eq!(fake.requests().len(), 4, "1 + 2 retries");
}
