//! Usage, cost and budgets (issue #36), on two instances sharing one
//! database: every model call is recorded (the provider's token figures,
//! or estimated when it reports none) and priced from the configuration;
//! reports group and total it (JSON and CSV); budgets refuse calls with
//! `429 budget_exceeded` (the chat endpoint's error shape and the
//! deployment endpoint's OpenAI shape); 50 concurrent callers on two
//! instances overspend a token budget by at most one call; a threshold
//! notifies the admins once.

use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;
use workspace_server::config::{Config, ModelConfig, Price, ProviderKind};
use workspace_tests::fake_provider::{FakeProvider, Part, Reply};
use workspace_tests::{TestContext, req};

/// What the reporting fake answers: 11 tokens in, 2 out (reported).
const IN: i64 = 11;
const OUT: i64 = 2;

fn model(name: &str, url: String) -> ModelConfig {
    ModelConfig {
        name: name.into(),
        provider: Some(ProviderKind::OpenaiCompatible),
        upstream_model: None,
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
    }
}

/// An OpenAI stream without a usage chunk (a provider that reports none).
fn unreported(pieces: &[&str]) -> Reply {
    let mut reply = Reply::openai_text(pieces);
    reply.parts.retain(|p| match p {
        Part::Data(d) => !d.contains("\"usage\""),
        Part::Pause(_) => true,
    });
    reply
}

fn configure(reporting: String, silent: String) -> impl FnOnce(&mut Config) + Clone {
    move |c: &mut Config| {
        c.providers.retry_backoff_ms = 5;
        c.models.insert(0, model("fake", reporting));
        c.models.insert(1, model("fake-silent", silent));
        // $2 and $4 per million tokens: 2 and 4 micro-dollars a token.
        c.usage.prices.insert(
            "fake".into(),
            Price {
                input: 2.0,
                output: 4.0,
            },
        );
        c.usage.budget_cache_ms = 0;
        c.usage.flush_interval_ms = 20;
        // At least what a call of the fake uses (11 + 2): budgets then
        // admit no call that the limit cannot hold but one.
        c.usage.reserve_output_tokens = 16;
    }
}

/// Sends a chat message (to a new chat: its title is one more model call)
/// and reads the whole stream: the status and, for a refusal, the error
/// body and `Retry-After` (else the stream's text).
async fn chat(base: &str, token: &str, org: Uuid, model: Uuid) -> (u16, Value, Option<u64>) {
    chat_in(base, token, org, model, None).await
}

/// The same, in the chat `chat_id` when given (no title then).
async fn chat_in(
    base: &str,
    token: &str,
    org: Uuid,
    model: Uuid,
    chat_id: Option<&str>,
) -> (u16, Value, Option<u64>) {
    let mut body = json!({"content": "hi", "model_id": model});
    if let Some(id) = chat_id {
        body["chat_id"] = json!(id);
    }
    let r = workspace_tests::http()
        .post(format!("{base}/api/chat/send_message"))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let text = r.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body, retry)
}

/// The chat id of a `send_message` stream's start event.
fn chat_id_of(stream: &Value) -> String {
    let text = stream.as_str().expect("the stream's text");
    let at = text.find("\"chat_id\":\"").expect("a start event") + 11;
    text[at..at + 36].to_string()
}

async fn report(base: &str, token: &str, org: Uuid, group_by: &str) -> Value {
    let (s, b) = req(
        base,
        token,
        Method::GET,
        "/api/org/usage/report",
        &[("org_id", org.to_string()), ("group_by", group_by.into())],
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b
}

async fn create_budget(base: &str, token: &str, org: Uuid, body: Value) -> Value {
    let (s, b) = req(
        base,
        token,
        Method::POST,
        "/api/org/budgets/create",
        &[("org_id", org.to_string())],
        Some(body),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn budget(base: &str, token: &str, org: Uuid, id: &str) -> Value {
    let (_, l) = req(
        base,
        token,
        Method::GET,
        "/api/org/budgets/list",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    l["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .cloned()
        .expect("the budget")
}

/// Waits until the recorder wrote what it gathered: `calls` calls of the
/// kind `kind`.
async fn settled_kind(base: &str, token: &str, org: Uuid, kind: &str, calls: i64) {
    for _ in 0..100 {
        let r = report(base, token, org, "kind").await;
        let n = r["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == kind)
            .map_or(0, |g| g["calls"].as_i64().unwrap());
        if n == calls {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("usage not recorded: expected {calls} {kind} calls");
}

/// Waits for `calls` chat answers (and, with `titles`, as many titles).
async fn settled(base: &str, token: &str, org: Uuid, calls: i64) {
    settled_kind(base, token, org, "chat", calls).await;
}

#[tokio::test]
async fn usage_is_recorded_priced_reported_and_budgeted_on_two_instances() {
    let reporting = FakeProvider::with_default(Reply::openai_text(&["Hello", " world"])).await;
    let silent = FakeProvider::with_default(unreported(&["Hello", " world"])).await;
    let setup = configure(
        format!("{}/v1", reporting.base_url()),
        format!("{}/v1", silent.base_url()),
    );
    let cx = TestContext::with_config("usage_reports", setup.clone()).await;
    let second = cx.second_instance(setup).await;
    let two = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let fake = ada.model_id(org, "fake").await;
    let quiet = ada.model_id(org, "fake-silent").await;

    // One new chat on each instance, one model reporting usage, one not:
    // each answer and each chat's title is a call.
    let (s, first, _) = chat(&cx.base_url, &ada.token, org, fake).await;
    assert_eq!(s, 200);
    let chat_id = chat_id_of(&first);
    assert_eq!(chat(&two, &ada.token, org, quiet).await.0, 200);
    settled(&cx.base_url, &ada.token, org, 2).await;
    settled_kind(&cx.base_url, &ada.token, org, "title", 2).await;
    // The title is asked for in one piece (nothing of it is used before its
    // end), the answer streamed; both report their usage.
    let asked = reporting.requests();
    let title = asked
        .iter()
        .find(|r| {
            r.messages()
                .first()
                .is_some_and(|(_, c)| c.starts_with("Write a title"))
        })
        .expect("the title's request");
    assert_eq!(title.body["stream"], false, "{}", title.body);
    assert!(asked.iter().any(|r| r.body["stream"] == true), "{asked:?}");

    let by_model = report(&two, &ada.token, org, "model").await;
    let groups = by_model["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{by_model}");
    let g = &groups[0];
    assert_eq!(g["key"], "fake");
    assert_eq!(
        (
            g["calls"].as_i64(),
            g["input_tokens"].as_i64(),
            g["output_tokens"].as_i64()
        ),
        (Some(2), Some(2 * IN), Some(2 * OUT)),
        "{g}"
    );
    assert_eq!(g["cost_micros"].as_i64(), Some(2 * (IN * 2 + OUT * 4)));
    assert_eq!(g["estimated_calls"], 0);
    let q = &groups[1];
    assert_eq!(q["key"], "fake-silent");
    assert_eq!(q["calls"], 2, "{q}");
    assert_eq!(q["estimated_calls"], 2, "{q}");
    // "Hello world" is 11 characters: 3 tokens estimated, twice.
    assert_eq!(q["output_tokens"], 6, "{q}");
    assert_eq!(q["cost_micros"], 0, "no price: no cost");
    let totals = &by_model["totals"];
    assert_eq!(totals["calls"], 4);
    assert_eq!(
        totals["total_tokens"].as_i64().unwrap(),
        g["total_tokens"].as_i64().unwrap() + q["total_tokens"].as_i64().unwrap()
    );
    let by_user = report(&cx.base_url, &ada.token, org, "user").await;
    assert_eq!(by_user["groups"][0]["key"], ada.id.to_string());
    assert_eq!(by_user["groups"][0]["label"], ada.email.as_str());
    let by_kind = report(&cx.base_url, &ada.token, org, "kind").await;
    assert_eq!(by_kind["groups"][0]["key"], "chat");
    assert_eq!(by_kind["groups"][1]["key"], "title");
    let by_day = report(&cx.base_url, &ada.token, org, "day").await;
    assert_eq!(by_day["groups"].as_array().unwrap().len(), 1);
    assert_eq!(by_day["totals"], by_model["totals"]);

    // CSV: a header, a row per group, the totals.
    let csv = workspace_tests::http()
        .get(format!("{two}/api/org/usage/export"))
        .query(&[("org_id", org.to_string()), ("group_by", "model".into())])
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("key,label,calls,input_tokens"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("fake,,2,22,4,26,60,0.000060,0,0"),
        "{text}"
    );
    assert!(lines[3].starts_with("total,,4,"), "{text}");

    // A bad range; a member who is no admin.
    let (s, b) = req(
        &cx.base_url,
        &ada.token,
        Method::GET,
        "/api/org/usage/report",
        &[
            ("org_id", org.to_string()),
            ("group_by", "day".into()),
            ("from", "2026-02-01T00:00:00Z".into()),
            ("to", "2026-01-01T00:00:00Z".into()),
        ],
        None,
    )
    .await;
    assert_eq!((s, b["error_code"].as_str()), (400, Some("invalid_range")));

    // Budgets: validation.
    for (body, status, code) in [
        (
            json!({"scope": "user", "metric": "tokens", "period": "day", "limit": 5}),
            400,
            "invalid_budget",
        ),
        (
            json!({"scope": "organization", "subject_id": ada.id, "metric": "tokens", "period": "day", "limit": 5}),
            400,
            "invalid_budget",
        ),
        (
            json!({"scope": "deployment", "subject_id": Uuid::new_v4(), "metric": "tokens", "period": "day", "limit": 5}),
            404,
            "not_found",
        ),
    ] {
        let (s, b) = req(
            &cx.base_url,
            &ada.token,
            Method::POST,
            "/api/org/budgets/create",
            &[("org_id", org.to_string())],
            Some(body),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str()), (status, Some(code)), "{b}");
    }

    // A user budget of 20 tokens a day, notifying at 10 %: the first call
    // (13 tokens) crosses the threshold, the second the limit, the third
    // is refused on either instance.
    let b = create_budget(
        &cx.base_url,
        &ada.token,
        org,
        json!({"scope": "user", "subject_id": ada.id, "metric": "tokens", "period": "day",
               "limit": 20, "threshold_percent": 10}),
    )
    .await;
    let id = b["id"].as_str().unwrap().to_string();
    // In the first chat: no title, one call each.
    let chat = |base: String| {
        let (token, chat_id) = (ada.token.clone(), chat_id.clone());
        async move { chat_in(&base, &token, org, fake, Some(&chat_id)).await }
    };
    let (s, _, _) = chat(two.clone()).await;
    assert_eq!(s, 200);
    settled(&cx.base_url, &ada.token, org, 3).await;
    let (s, _, _) = chat(cx.base_url.clone()).await;
    assert_eq!(s, 200);
    settled(&cx.base_url, &ada.token, org, 4).await;
    let now = budget(&two, &ada.token, org, &id).await;
    assert_eq!(
        (now["spent"].as_i64(), now["reserved"].as_i64()),
        (Some(2 * (IN + OUT)), Some(0)),
        "{now}"
    );
    for base in [&cx.base_url, &two] {
        let (s, body, retry) = chat(base.clone()).await;
        assert_eq!(s, 429, "{body}");
        assert_eq!(body["error_code"], "budget_exceeded", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("resets at"),
            "{body}"
        );
        let retry = retry.expect("Retry-After");
        assert!((1..=86_400).contains(&retry), "{retry}");
    }
    // An operation released without a 429 answer refuses with the status
    // it declared, 403, and the same code.
    let r = workspace_tests::http()
        .post(format!("{two}/api/chat/prompt"))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(&ada.token)
        .json(&json!({"text": "cooking"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (status, body["error_code"].as_str()),
        (403, Some("budget_exceeded")),
        "{body}"
    );
    // The admin was told once.
    let db = cx.db().await;
    let notices: i64 = db
        .query_one(
            "SELECT count(*) FROM email_outbox WHERE kind = 'budget_threshold' AND to_address = $1",
            &[&ada.email],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(notices, 1);
    // Raising the limit lets calls through again.
    let (s, _) = req(
        &two,
        &ada.token,
        Method::PUT,
        "/api/org/budgets/update",
        &[("org_id", org.to_string()), ("budget_id", id.clone())],
        Some(json!({"limit": 1000})),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(chat(cx.base_url.clone()).await.0, 200);
    let (s, _) = req(
        &two,
        &ada.token,
        Method::DELETE,
        "/api/org/budgets/delete",
        &[("org_id", org.to_string()), ("budget_id", id.clone())],
        None,
    )
    .await;
    assert_eq!(s, 200);

    // A member who is no admin sees neither reports nor budgets.
    let bob = cx.user("bob").await;
    ada.add_member(org, bob.id, ada.role_id(org, "member").await)
        .await;
    for path in ["/api/org/usage/report", "/api/org/budgets/list"] {
        let (s, b) = req(
            &cx.base_url,
            &bob.token,
            Method::GET,
            path,
            &[("org_id", org.to_string()), ("group_by", "day".into())],
            None,
        )
        .await;
        assert_eq!((s, b["error_code"].as_str()), (403, Some("forbidden")));
    }
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn fifty_concurrent_callers_overspend_a_token_budget_by_at_most_one_call() {
    let paced = Reply::openai_text(&["Hello", " world"]).paced(Duration::from_millis(20));
    let reporting = FakeProvider::with_default(paced.clone()).await;
    let silent = FakeProvider::with_default(paced).await;
    let setup = configure(
        format!("{}/v1", reporting.base_url()),
        format!("{}/v1", silent.base_url()),
    );
    let cx = TestContext::with_config("usage_concurrency", setup.clone()).await;
    let second = cx.second_instance(setup).await;
    let two = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let fake = ada.model_id(org, "fake").await;
    // 50 chats first (their titles are calls of their own): the callers
    // then answer in them, one model call each.
    let mut chats = Vec::new();
    for _ in 0..50 {
        let (s, stream, _) = chat(&cx.base_url, &ada.token, org, fake).await;
        assert_eq!(s, 200);
        chats.push(chat_id_of(&stream));
    }
    settled(&cx.base_url, &ada.token, org, 50).await;
    const LIMIT: i64 = 200;
    let b = create_budget(
        &cx.base_url,
        &ada.token,
        org,
        json!({"scope": "organization", "metric": "tokens", "period": "month", "limit": LIMIT}),
    )
    .await;
    let id = b["id"].as_str().unwrap().to_string();

    let calls = chats.iter().enumerate().map(|(i, chat_id)| {
        let base = if i % 2 == 0 {
            cx.base_url.clone()
        } else {
            two.clone()
        };
        let token = ada.token.clone();
        async move { chat_in(&base, &token, org, fake, Some(chat_id)).await.0 }
    });
    let statuses = futures::future::join_all(calls).await;
    let ok = statuses.iter().filter(|s| **s == 200).count() as i64;
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(ok as usize + refused, 50, "{statuses:?}");
    assert!(ok >= 1 && refused >= 1, "{statuses:?}");
    settled(&cx.base_url, &ada.token, org, 50 + ok).await;
    let now = budget(&two, &ada.token, org, &id).await;
    let spent = now["spent"].as_i64().unwrap();
    assert_eq!(spent, ok * (IN + OUT), "{now}");
    assert_eq!(now["reserved"], 0, "{now}");
    // Each call reserved at least what it used: the budget is exceeded by
    // at most the one call admitted just below the limit.
    assert!(spent <= LIMIT + IN + OUT, "spent {spent} of {LIMIT}");
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn a_deployment_key_budget_refuses_in_openai_shape() {
    let cx = TestContext::new("usage_deployment").await;
    let ada = cx.user("ada").await;
    let t = ada.token.as_str();
    let (org, _, _, agent) = crate::agents::setup(&cx, t).await;
    crate::deployments::make_ready(&cx, t, agent).await;
    let d = crate::deployments::deploy(
        &cx,
        t,
        agent,
        json!({"name": "api", "channel": "api", "rate_limit_per_minute": 100}),
    )
    .await;
    let key = d["api_key"].as_str().unwrap().to_string();
    create_budget(
        &cx.base_url,
        t,
        org,
        json!({"scope": "deployment", "subject_id": d["id"], "metric": "tokens",
               "period": "day", "limit": 1}),
    )
    .await;
    let body = json!({"model": "x", "messages": [{"role": "user", "content": "hello"}]});
    let r = crate::deployments::v1(
        &cx,
        &key,
        Method::POST,
        "/chat/completions",
        Some(body.clone()),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    // The first call's usage reaches the counter within a flush.
    let mut refused = None;
    for _ in 0..50 {
        let r = crate::deployments::v1(
            &cx,
            &key,
            Method::POST,
            "/chat/completions",
            Some(body.clone()),
            None,
        )
        .await;
        if r.status() == 429 {
            refused = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = refused.expect("a refusal");
    assert!(r.headers().get("retry-after").is_some());
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "budget_exceeded", "{e}");
    assert!(e["error"]["type"].is_string(), "{e}");
    assert!(e.get("error_code").is_none(), "OpenAI's shape: {e}");
    // Recorded as the deployment's (the agent's test before it).
    settled_kind(&cx.base_url, t, org, "deployment", 1).await;
    let by_deployment = report(&cx.base_url, t, org, "deployment").await;
    let g = &by_deployment["groups"][0];
    assert_eq!(g["key"], d["id"], "{by_deployment}");
    assert_eq!(g["label"], "api");
    assert_eq!(g["calls"], 1);
    assert_eq!(by_deployment["groups"][1]["key"], Value::Null);
    cx.teardown().await;
}
