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
        reasoning: None,
        whole: false,
        continue_final: false,
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        backoff: Duration::from_millis(5),
        idle_timeout: Duration::from_secs(5),
        answer_timeout: Duration::from_secs(5),
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
            cached_tokens: 4,
            ..Default::default()
        })
    );
}

/// An answer wanted only once complete is asked for with `stream: false`
/// and read in one piece: the same events as streamed (text, tool calls,
/// usage, finish); an answer slower than the idle timeout but within the
/// answer timeout arrives; a cut, a malformed, a slower or an oversized
/// one is an error of its kind (retried as a stream's would be).
#[tokio::test]
async fn openai_whole_answers_are_asked_unstreamed() {
    let fake = FakeProvider::with_default(Reply::openai_tool_call("call_7", "get_weather")).await;
    fake.keep_alive();
    let client = OpenAiClient::new(
        workspace_tests::http(),
        &format!("{}/v1", fake.base_url()),
        Some("k".into()),
        "gpt-x",
    );
    let whole = ChatRequest {
        whole: true,
        ..request()
    };
    let answer = |policy: RetryPolicy| {
        let (client, whole) = (&client, &whole);
        async move {
            match providers::start(client, whole, &policy, &log()).await {
                Ok(stream) => stream.collect::<Vec<_>>().await,
                Err(e) => vec![Err(e)],
            }
        }
    };
    let got: Vec<ChatEvent> = answer(policy())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
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
    assert_eq!(r.body["stream"], false, "{}", r.body);
    assert!(r.body.get("stream_options").is_none(), "{}", r.body);
    assert_eq!(r.header("accept"), Some("application/json"));
    assert_eq!(r.body["tools"][0]["function"]["name"], "get_weather");

    // Text and usage; 300 ms to answer with an idle timeout of 100 ms.
    fake.set_default(Reply::openai_text(&["Hel", "lo"]).paced(Duration::from_millis(50)));
    let patient = RetryPolicy {
        idle_timeout: Duration::from_millis(100),
        answer_timeout: Duration::from_secs(5),
        ..policy()
    };
    let got: Vec<ChatEvent> = answer(patient)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        [
            ChatEvent::Text("Hello".into()),
            ChatEvent::Usage(Usage {
                input_tokens: 11,
                output_tokens: 2,
                cached_tokens: 4,
                ..Default::default()
            }),
            ChatEvent::Finish(FinishReason::Stop),
        ]
    );

    // Beyond the answer timeout: a timeout (retried, then given up).
    let impatient = RetryPolicy {
        max_retries: 1,
        idle_timeout: Duration::from_secs(5),
        answer_timeout: Duration::from_millis(100),
        ..policy()
    };
    let before = fake.requests().len();
    let got = answer(impatient).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].as_ref().unwrap_err().kind,
        ProviderErrorKind::Timeout
    );
    assert_eq!(fake.requests().len() - before, 2, "one retry");

    // Cut off (retried, then given up) and malformed (not retried):
    // errors of their kind.
    for (reply, kind) in [
        (
            Reply::openai_text(&["a", "b"]).drop_after(3),
            ProviderErrorKind::Interrupted,
        ),
        (
            Reply::openai_text(&["a", "b"]).malformed_at(2),
            ProviderErrorKind::Malformed,
        ),
    ] {
        fake.set_default(reply);
        let got = answer(policy()).await;
        assert_eq!(got[0].as_ref().unwrap_err().kind, kind);
    }

    // Larger than 8 MiB: refused before it is all read.
    let huge = "x".repeat(9 * 1024 * 1024);
    fake.set_default(Reply::openai_text(&[&huge]));
    let got = answer(policy()).await;
    let error = got[0].as_ref().unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Malformed);
    assert!(error.detail.contains("over 8388608 bytes"), "{error:?}");
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
                cached_tokens: 0,
                ..Default::default()
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

/// Extended thinking in a tool loop: the runtime sends the thinking block
/// back unchanged (its signature included) before the `tool_use` it led
/// to, as Anthropic requires; the reasoning streams apart from the text;
/// both requests validate against the `anthropic` SDK's request type.
#[tokio::test]
async fn anthropic_thinking_goes_back_unchanged_in_a_tool_loop() {
    use workspace_server::runtime::{self, RunLimits, RunSpec, RuntimeEvent, RuntimeTool};
    struct Weather;
    #[async_trait::async_trait]
    impl RuntimeTool for Weather {
        fn spec(&self) -> ToolSpec {
            request().tools[0].clone()
        }
        async fn call(&self, input: serde_json::Value) -> Result<serde_json::Value, String> {
            Ok(serde_json::json!({"city": input["city"], "sky": "clear"}))
        }
    }
    let fake = FakeProvider::start().await;
    fake.push(Reply::anthropic_thinking_tool_use(
        &["The user wants the weather. ", "I will call the tool."],
        "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        "toolu_01",
        "get_weather",
    ));
    fake.push(Reply::anthropic_text(&["Clear ", "in Paris."]));
    let model = workspace_server::providers::ModelEntry::direct(
        "claude-sonnet-4-5",
        "anthropic",
        200_000,
        workspace_server::config::capabilities::resolve("claude-sonnet-4-5", None, None, None),
        std::sync::Arc::new(AnthropicClient::new(
            workspace_tests::http(),
            &fake.base_url(),
            Some("k".into()),
            "claude-sonnet-4-5",
        )),
    );
    let spec = RunSpec {
        model,
        retry: policy(),
        system_prompt: String::new(),
        temperature: None,
        max_tokens: Some(8_000),
        reasoning: Some(providers::Reasoning::Budget(2_048)),
        history: vec![ChatMessage::user("weather in Paris?")],
        tools: vec![std::sync::Arc::new(Weather)],
        limits: RunLimits::default(),
        log: log(),
        usage: None,
        whole: false,
    };
    let mut events = runtime::run(spec);
    let (mut reasoning, mut text) = (String::new(), String::new());
    while let Some(event) = events.recv().await {
        match event {
            RuntimeEvent::Reasoning(r) => reasoning.push_str(&r),
            RuntimeEvent::Text(t) => text.push_str(&t),
            RuntimeEvent::End => break,
            RuntimeEvent::Error(e) => panic!("{e:?}"),
            _ => {}
        }
    }
    assert_eq!(
        reasoning,
        "The user wants the weather. I will call the tool."
    );
    assert_eq!(text, "Clear in Paris.");
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    let blocks = sent[1].assistant_blocks();
    assert_eq!(
        blocks[0],
        serde_json::json!({"type": "thinking",
            "thinking": "The user wants the weather. I will call the tool.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"})
    );
    assert_eq!(blocks[1]["type"], "tool_use");
    assert_eq!(blocks[1]["id"], "toolu_01");
    for r in &sent {
        assert_eq!(
            r.body["thinking"],
            serde_json::json!({"type": "enabled", "budget_tokens": 2048})
        );
    }
    workspace_tests::provider_types::validate_provider_bodies(
        "anthropic",
        &sent.iter().map(|r| r.body.clone()).collect::<Vec<_>>(),
    )
    .unwrap();
}
