//! Routing an answer among a model's deployments and fallbacks (issue
//! #53), end to end: the real server, fake providers on 127.0.0.1 failing
//! in scripted ways (429 with and without `Retry-After`, 529, 500, a
//! refused connection, stalls before the first byte and in the middle, a
//! reset after k chunks with and without prefill, a malformed chunk, a
//! refused key), every deployment down (`503 providers_unavailable`),
//! three instances sharing one cooldown through PostgreSQL, the
//! context-window fallback, the admin listing and the metrics.
//!
//! Deployments after the first have weight 0 ("only when the others are
//! unavailable"), so that which deployment answers first is not left to
//! chance. Answers go to chats created beforehand: a new chat's title
//! request would be one more routed request.

use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_server::config::{Config, DeploymentConfig, ModelConfig, ProviderKind};
use workspace_tests::fake_provider::{Action, FakeProvider, Part, Recorded, Reply};
use workspace_tests::sse::NumberedReader as Sse;
use workspace_tests::{TestContext, TestUser, http, req};

const METRICS_TOKEN: &str = "routing-metrics-token-0123456789";

/// Small timeouts and cooldowns, the metrics listener, a system admin.
fn fast(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 0;
    c.providers.retry_backoff_ms = 10;
    c.providers.max_retries = 2;
    c.providers.allowed_fails = 3;
    c.providers.fail_window_secs = 60;
    c.providers.cooldown_secs = 3;
    c.providers.max_cooldown_secs = 10;
    c.providers.first_event_timeout_secs = 2;
    c.providers.idle_timeout_secs = 2;
    c.metrics.bind_address = Some("127.0.0.1:0".parse().unwrap());
    c.metrics.token = Some(METRICS_TOKEN.to_string());
    c.auth.system_admins = vec!["root@example.com".into()];
}

/// An OpenAI-compatible deployment `name` served by the fake at `url`.
fn deployment(name: &str, url: &str, key: &str) -> DeploymentConfig {
    DeploymentConfig {
        name: Some(name.into()),
        base_url: Some(format!("{url}/v1")),
        api_key: Some(key.into()),
        upstream_model: Some("fake-upstream".into()),
        ..Default::default()
    }
}

/// `d` with weight 0: tried only after the deployments with a weight.
fn spare(d: DeploymentConfig) -> DeploymentConfig {
    DeploymentConfig {
        weight: Some(0),
        ..d
    }
}

/// `d` continuing a broken answer from its partial text (vLLM's
/// `continue_final_message`).
fn prefilled(d: DeploymentConfig) -> DeploymentConfig {
    DeploymentConfig {
        prefill: Some(true),
        ..d
    }
}

/// An OpenAI-compatible model served by `deployments`.
fn routed(name: &str, deployments: Vec<DeploymentConfig>) -> ModelConfig {
    ModelConfig {
        provider: Some(ProviderKind::OpenaiCompatible),
        deployments,
        ..ModelConfig::named(name)
    }
}

struct Setup {
    cx: TestContext,
    ada: TestUser,
    root: TestUser,
    org: Uuid,
}

async fn setup(name: &str, models: Vec<ModelConfig>, adjust: impl FnOnce(&mut Config)) -> Setup {
    let cx = TestContext::with_config(name, move |c| {
        fast(c);
        c.models.extend(models);
        adjust(c);
    })
    .await;
    let root = cx.user("root").await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    Setup { cx, ada, root, org }
}

impl Setup {
    async fn model(&self, name: &str) -> Uuid {
        self.ada.model_id(self.org, name).await
    }

    /// A chat of Ada's (on any instance: they share the database).
    async fn new_chat(&self) -> Uuid {
        let (status, v) = req(
            &self.cx.base_url,
            &self.ada.token,
            Method::POST,
            "/api/chat",
            &[("org_id", self.org.to_string())],
            Some(json!({"title": "Routing"})),
        )
        .await;
        assert_eq!(status, 201, "{v}");
        v["id"].as_str().unwrap().parse().unwrap()
    }

    async fn open_on(
        &self,
        base: &str,
        chat: Uuid,
        model: Uuid,
        content: &str,
    ) -> reqwest::Response {
        http()
            .post(format!("{base}/api/chat/send_message"))
            .bearer_auth(&self.ada.token)
            .query(&[("org_id", self.org.to_string())])
            .json(&json!({"chat_id": chat, "model_id": model, "content": content}))
            .send()
            .await
            .unwrap()
    }

    /// Sends `content` to `chat` on the instance at `base`: the stream's
    /// events, once it ended.
    async fn ask_on(&self, base: &str, chat: Uuid, model: Uuid, content: &str) -> Vec<Value> {
        let response = self.open_on(base, chat, model, content).await;
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        Sse::new(response)
            .collect()
            .await
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    async fn ask(&self, chat: Uuid, model: Uuid, content: &str) -> Vec<Value> {
        self.ask_on(&self.cx.base_url, chat, model, content).await
    }

    async fn chat(&self, chat: Uuid) -> Value {
        let (status, v) = req(
            &self.cx.base_url,
            &self.ada.token,
            Method::GET,
            "/api/chat",
            &[
                ("org_id", self.org.to_string()),
                ("chat_id", chat.to_string()),
            ],
            None,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// The chat's last message (the answer just given).
    async fn answer(&self, chat: Uuid) -> Value {
        let v = self.chat(chat).await;
        let messages = v["messages"].as_array().unwrap();
        let last = messages.last().unwrap().clone();
        assert_eq!(last["role"], "MODEL", "{v}");
        last
    }

    /// `GET /api/system/model-deployments` as the system admin.
    async fn listing(&self) -> Value {
        let (status, v) = req(
            &self.cx.base_url,
            &self.root.token,
            Method::GET,
            "/api/system/model-deployments",
            &[],
            None,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// One model's entry of the admin listing.
    async fn listed_model(&self, model: &str) -> Value {
        let v = self.listing().await;
        v["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == model)
            .unwrap_or_else(|| panic!("no model {model} in {v}"))
            .clone()
    }

    /// One deployment's health in the admin listing.
    async fn health(&self, model: &str, deployment: &str) -> Value {
        let m = self.listed_model(model).await;
        m["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == deployment)
            .unwrap_or_else(|| panic!("no deployment {deployment} in {m}"))
            .clone()
    }

    /// Waits until `deployment` no longer cools down (its probe is due).
    async fn until_cooled(&self, model: &str, deployment: &str) {
        let started = Instant::now();
        loop {
            let h = self.health(model, deployment).await;
            if h["state"] != "cooling_down" {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{model}/{deployment} still cooling down: {h}"
            );
            let left = h["cooldown_remaining_secs"].as_f64().unwrap_or(0.1);
            tokio::time::sleep(Duration::from_secs_f64(left.clamp(0.05, 5.0) + 0.05)).await;
        }
    }

    async fn metrics(&self) -> String {
        metrics_at(self.cx.server.metrics_addr().expect("the metrics listener")).await
    }
}

async fn metrics_at(addr: std::net::SocketAddr) -> String {
    let response = http()
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

/// The value of one series (`name{labels}`) in a metrics page.
fn metric(page: &str, series: &str) -> Option<f64> {
    page.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The requests for answers a fake received (streamed; a title would be
/// asked for in one piece).
fn answers(fake: &FakeProvider) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.body["stream"] == true)
        .collect()
}

/// The `route` events: (model, deployment, reason).
fn routes(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "route")
        .map(|e| {
            (
                e["model"].as_str().unwrap().to_string(),
                e["deployment"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn route(model: &str, deployment: &str, reason: &str) -> (String, String, String) {
    (model.into(), deployment.into(), reason.into())
}

/// Every `content` event's text, in order, as sent.
fn all_content(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "content")
        .map(|e| e["content"].as_str().unwrap())
        .collect()
}

/// The answer as a client shows it: the content, dropped at each
/// `restart`.
fn shown(events: &[Value]) -> String {
    let mut text = String::new();
    for e in events {
        match e["type"].as_str() {
            Some("content") => text.push_str(e["content"].as_str().unwrap()),
            Some("restart") => text.clear(),
            _ => {}
        }
    }
    text
}

/// The event types in order, repeats collapsed.
fn kinds(events: &[Value]) -> Vec<String> {
    let mut t: Vec<String> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    t.dedup();
    t
}

fn position(events: &[Value], kind: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event in {events:?}"))
}

/// The stream ended well, and said who answers before the first content.
fn assert_answered(events: &[Value]) {
    assert_eq!(events.last().unwrap()["type"], "end", "{events:?}");
    assert!(
        position(events, "route") < position(events, "content"),
        "a route before the first content: {events:?}"
    );
}

// ---- 429, 529, 500, a refused connection ----

/// A `429` with `Retry-After: 2` moves the answer to the next deployment
/// and cools the first down for those 2 s (not `cooldown_secs`): answers
/// meanwhile go straight to the other; after it, one request probes the
/// first, which answers again and is healthy.
#[tokio::test]
async fn a_429_with_retry_after_cools_down_for_that_long() {
    let a =
        FakeProvider::with_default(Reply::error(429, "slow down").header("retry-after", "2")).await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_429_retry_after",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |c| c.providers.cooldown_secs = 30,
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;

    let events = s.ask(chat, model, "hello").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert!(!kinds(&events).contains(&"restart".to_string()));
    assert_eq!(shown(&events), "From b.");
    assert_eq!((answers(&a).len(), answers(&b).len()), (1, 1));
    assert_eq!(s.answer(chat).await["content"], "From b.");

    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    let left = h["cooldown_remaining_secs"].as_f64().unwrap();
    assert!(left > 0.0 && left <= 2.0, "the Retry-After, not 30 s: {h}");
    assert_eq!(h["last_error_class"], "rate_limited");
    assert_eq!(s.health("chat-main", "b").await["state"], "healthy");

    // Meanwhile: straight to b, a is not asked.
    let events = s.ask(chat, model, "again").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "first")]);
    assert_eq!((answers(&a).len(), answers(&b).len()), (1, 2));

    // After it: one request probes a, which answers now.
    a.set_default(Reply::openai_text(&["From ", "a."]));
    s.until_cooled("chat-main", "a").await;
    let events = s.ask(chat, model, "and now?").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "a", "first")]);
    assert_eq!(shown(&events), "From a.");
    assert_eq!((answers(&a).len(), answers(&b).len()), (2, 2));
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "healthy", "{h}");
    assert_eq!(h["recent_failures"], 0, "{h}");
    assert_eq!(h["cooldown_remaining_secs"], Value::Null, "{h}");
    s.cx.teardown().await;
}

/// A `429` without `Retry-After` cools the deployment down for
/// `cooldown_secs`; one asking for an hour is held to
/// `max_cooldown_secs`.
#[tokio::test]
async fn a_429_without_retry_after_cools_down_for_cooldown_secs_and_long_ones_are_capped() {
    let plain = FakeProvider::with_default(Reply::error(429, "slow down")).await;
    let hour =
        FakeProvider::with_default(Reply::error(429, "slow down").header("retry-after", "3600"))
            .await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_429_plain",
        vec![
            routed(
                "plain-429",
                vec![
                    deployment("a", &plain.base_url(), "sk-a"),
                    spare(deployment("b", &b.base_url(), "sk-b")),
                ],
            ),
            routed(
                "hour-429",
                vec![
                    deployment("a", &hour.base_url(), "sk-h"),
                    spare(deployment("b", &b.base_url(), "sk-b")),
                ],
            ),
        ],
        |c| {
            c.providers.cooldown_secs = 4;
            c.providers.max_cooldown_secs = 7;
        },
    )
    .await;
    for name in ["plain-429", "hour-429"] {
        let model = s.model(name).await;
        let chat = s.new_chat().await;
        let events = s.ask(chat, model, "hello").await;
        assert_answered(&events);
        assert_eq!(routes(&events), [route(name, "b", "failover")]);
        assert_eq!(shown(&events), "From b.");
    }
    let h = s.health("plain-429", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    let left = h["cooldown_remaining_secs"].as_f64().unwrap();
    assert!(left > 2.0 && left <= 4.0, "cooldown_secs: {h}");
    let h = s.health("hour-429", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    let left = h["cooldown_remaining_secs"].as_f64().unwrap();
    assert!(left > 5.0 && left <= 7.0, "max_cooldown_secs: {h}");
    assert_eq!((answers(&plain).len(), answers(&hour).len()), (1, 1));
    s.cx.teardown().await;
}

/// A `529` (overloaded) moves on and cools the deployment down at once,
/// although `allowed_fails` is 3.
#[tokio::test]
async fn a_529_moves_on_and_cools_down_at_once() {
    let a = FakeProvider::with_default(Reply::error(529, "Overloaded")).await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_529",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert_eq!(shown(&events), "From b.");
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    assert_eq!(h["last_error_class"], "overloaded");
    assert!(h["cooldown_remaining_secs"].as_f64().unwrap() <= 3.0, "{h}");
    let events = s.ask(chat, model, "again").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "first")]);
    assert_eq!(answers(&a).len(), 1, "not asked while it cools down");
    s.cx.teardown().await;
}

/// A `500` moves on; the deployment cools down only once it failed
/// `allowed_fails` (2) times in the window. A model whose only deployment
/// fails falls back to its fallback model.
#[tokio::test]
async fn server_errors_cool_down_after_allowed_fails_and_fall_back() {
    let a = FakeProvider::with_default(Reply::error(500, "internal error")).await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let backup = FakeProvider::with_default(Reply::openai_text(&["From ", "backup."])).await;
    let s = setup(
        "routing_500",
        vec![
            routed(
                "chat-main",
                vec![
                    deployment("a", &a.base_url(), "sk-a"),
                    spare(deployment("b", &b.base_url(), "sk-b")),
                ],
            ),
            ModelConfig {
                fallbacks: vec!["backup".into()],
                ..routed("solo", vec![deployment("only", &a.base_url(), "sk-a")])
            },
            backup.model_config("backup"),
        ],
        |c| c.providers.allowed_fails = 2,
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;

    let events = s.ask(chat, model, "one").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "healthy", "one failure of two allowed: {h}");
    assert_eq!(h["recent_failures"], 1, "{h}");
    assert_eq!(h["last_error_class"], "server");

    let events = s.ask(chat, model, "two").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "cooling_down", "the second failure: {h}");
    assert_eq!(h["recent_failures"], 2, "{h}");

    let events = s.ask(chat, model, "three").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "first")]);
    assert_eq!((answers(&a).len(), answers(&b).len()), (2, 3));

    // The fallback model.
    let solo = s.model("solo").await;
    let events = s.ask(chat, solo, "four").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("backup", "default", "fallback")]);
    assert_eq!(shown(&events), "From backup.");
    assert_eq!(answers(&a).len(), 3, "the solo deployment asked once");
    let stored = s.answer(chat).await;
    assert_eq!(stored["content"], "From backup.");
    assert_eq!(
        stored["metadata"]["route"],
        json!([{"model": "backup", "deployment": "default", "from": 0, "reason": "fallback"}])
    );
    s.cx.teardown().await;
}

/// A refused connection (nothing listens on the deployment's port) moves
/// on and cools the deployment down at once.
#[tokio::test]
async fn a_refused_connection_moves_on_and_cools_down_at_once() {
    let closed = workspace_tests::fake_provider::closed_port_url().await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_refused",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &closed, "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert_eq!(shown(&events), "From b.");
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    assert_eq!(h["last_error_class"], "connect");
    let page = s.metrics().await;
    assert_eq!(
        metric(
            &page,
            r#"workspace_model_deployment_failures_total{model="chat-main",deployment="a",class="connect"}"#
        ),
        Some(1.0),
        "{page}"
    );
    let events = s.ask(chat, model, "again").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "first")]);
    s.cx.teardown().await;
}

// ---- stalls, resets, malformed chunks ----

/// A deployment that writes nothing (not even its status line) for longer
/// than `first_event_timeout_secs` (1 s) is left for the next one: the
/// answer does not wait for it.
#[tokio::test]
async fn a_stall_before_the_first_byte_moves_on_after_the_first_event_timeout() {
    let a = FakeProvider::scripted(|seq, _| match seq {
        // Nothing at all.
        0 => Action::Stall(Duration::from_secs(10), Reply::openai_text(&["Late."])),
        // Its status line and headers, then nothing.
        _ => Action::Reply(Reply::openai_text(&["Late."]).paced(Duration::from_secs(10))),
    })
    .await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_stall_first",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |c| c.providers.first_event_timeout_secs = 1,
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let started = Instant::now();
    let events = s.ask(chat, model, "hello").await;
    let took = started.elapsed();
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert_eq!(shown(&events), "From b.");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(6),
        "about the first-event timeout, not the stall: {took:?}"
    );
    assert_eq!(answers(&a).len(), 1);
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "healthy", "1 failure of 3 allowed: {h}");
    assert_eq!(h["recent_failures"], 1, "{h}");
    assert_eq!(h["last_error_class"], "timeout");

    // Headers in time, but no first piece: the same.
    let started = Instant::now();
    let events = s.ask(chat, model, "again").await;
    let took = started.elapsed();
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert_eq!(answers(&a).len(), 2);
    assert_eq!(s.health("chat-main", "a").await["recent_failures"], 2);
    s.cx.teardown().await;
}

/// A deployment that stalls after its first piece for longer than
/// `idle_timeout_secs` (1 s) is replaced in the middle of the answer; the
/// next (without prefill) starts over: `route`, `restart`, then its whole
/// answer, which alone is stored.
#[tokio::test]
async fn a_stall_in_the_middle_restarts_on_the_next_deployment() {
    let a = FakeProvider::with_default(
        Reply::openai_text(&["One ", "two ", "three."]).stall_after(2, Duration::from_secs(10)),
    )
    .await;
    let b = FakeProvider::with_default(Reply::openai_text(&["Uno ", "dos ", "tres."])).await;
    let s = setup(
        "routing_stall_middle",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |c| c.providers.idle_timeout_secs = 1,
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let started = Instant::now();
    let events = s.ask(chat, model, "count to three").await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_answered(&events);
    assert_eq!(
        routes(&events),
        [
            route("chat-main", "a", "first"),
            route("chat-main", "b", "failover")
        ]
    );
    let restart = position(&events, "restart");
    assert_eq!(events[restart - 1]["type"], "route", "{events:?}");
    assert_eq!(all_content(&events[..restart]), "One ");
    assert_eq!(shown(&events), "Uno dos tres.");
    let stored = s.answer(chat).await;
    assert_eq!(stored["status"], "complete");
    assert_eq!(stored["content"], "Uno dos tres.");
    assert_eq!(
        stored["metadata"]["route"],
        json!([
            {"model": "chat-main", "deployment": "a", "from": 0, "reason": "first"},
            {"model": "chat-main", "deployment": "b", "from": 0, "reason": "failover"},
        ])
    );
    assert_eq!(
        s.health("chat-main", "a").await["last_error_class"],
        "timeout"
    );
    s.cx.teardown().await;
}

/// The answer broken by a TCP reset after "The quick " continues on a
/// deployment with prefill: it is sent the partial text as a final
/// assistant message with `continue_final_message`, and its continuation
/// streams on. No `restart`; the client's content is the partial text and
/// the continuation, nothing repeated or lost; the stored route says
/// where b took over.
#[tokio::test]
async fn a_reset_after_k_chunks_continues_from_the_partial_text_with_prefill() {
    let a = FakeProvider::scripted(|_, _| {
        Action::ResetAfter(3, Reply::openai_text(&["The ", "quick ", "brown ", "fox."]))
    })
    .await;
    // A continuation as vLLM writes one: with the space the prefix lost.
    let b = FakeProvider::with_default(Reply::openai_text(&[" brown ", "fox ", "jumps."])).await;
    let s = setup(
        "routing_reset_prefill",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                prefilled(spare(deployment("b", &b.base_url(), "sk-b"))),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "a pangram please").await;
    assert_answered(&events);
    assert_eq!(
        routes(&events),
        [
            route("chat-main", "a", "first"),
            route("chat-main", "b", "failover")
        ]
    );
    assert!(
        !kinds(&events).contains(&"restart".to_string()),
        "{events:?}"
    );
    let second_route = events.iter().rposition(|e| e["type"] == "route").unwrap();
    assert_eq!(all_content(&events[..second_route]), "The quick ");
    assert_eq!(all_content(&events), "The quick brown fox jumps.");
    assert_eq!(shown(&events), "The quick brown fox jumps.");

    let sent = answers(&b);
    assert_eq!(sent.len(), 1);
    let continued = &sent[0];
    assert_eq!(
        continued.messages().last().unwrap(),
        &("assistant".to_string(), "The quick".to_string()),
        "{}",
        continued.body
    );
    assert_eq!(continued.body["continue_final_message"], true);
    assert_eq!(continued.body["add_generation_prompt"], false);
    let first = &answers(&a)[0];
    assert!(
        first.body.get("continue_final_message").is_none(),
        "{}",
        first.body
    );
    assert_eq!(first.messages().last().unwrap().0, "user");

    let stored = s.answer(chat).await;
    assert_eq!(stored["status"], "complete");
    assert_eq!(stored["content"], "The quick brown fox jumps.");
    assert_eq!(
        stored["metadata"]["route"],
        json!([
            {"model": "chat-main", "deployment": "a", "from": 0, "reason": "first"},
            {"model": "chat-main", "deployment": "b", "from": 10, "reason": "failover"},
        ])
    );
    assert_eq!(
        s.health("chat-main", "a").await["last_error_class"],
        "interrupted"
    );
    s.cx.teardown().await;
}

/// The same reset, with a next deployment that cannot continue a partial
/// text: `route`, `restart`, its whole answer (asked for as the first
/// was); only that answer is stored.
#[tokio::test]
async fn a_reset_after_k_chunks_restarts_without_prefill() {
    let a = FakeProvider::scripted(|_, _| {
        Action::ResetAfter(3, Reply::openai_text(&["The ", "quick ", "brown ", "fox."]))
    })
    .await;
    let b =
        FakeProvider::with_default(Reply::openai_text(&["A ", "whole ", "new ", "answer."])).await;
    let s = setup(
        "routing_reset_restart",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "a pangram please").await;
    assert_answered(&events);
    assert_eq!(
        routes(&events),
        [
            route("chat-main", "a", "first"),
            route("chat-main", "b", "failover")
        ]
    );
    let restart = position(&events, "restart");
    assert_eq!(events[restart - 1]["type"], "route");
    assert_eq!(all_content(&events[..restart]), "The quick ");
    assert_eq!(all_content(&events[restart..]), "A whole new answer.");
    assert_eq!(shown(&events), "A whole new answer.");
    let sent = answers(&b);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].messages().last().unwrap().0,
        "user",
        "{}",
        sent[0].body
    );
    assert!(sent[0].body.get("continue_final_message").is_none());
    assert_eq!(
        sent[0].messages(),
        answers(&a)[0].messages(),
        "asked as a was"
    );
    let stored = s.answer(chat).await;
    assert_eq!(stored["status"], "complete");
    assert_eq!(stored["content"], "A whole new answer.");
    assert_eq!(
        stored["metadata"]["route"],
        json!([
            {"model": "chat-main", "deployment": "a", "from": 0, "reason": "first"},
            {"model": "chat-main", "deployment": "b", "from": 0, "reason": "failover"},
        ])
    );
    s.cx.teardown().await;
}

/// An Anthropic deployment continues a partial text by default (a final
/// assistant message, Anthropic's prefill), without vLLM's flags.
#[tokio::test]
async fn an_anthropic_deployment_continues_by_default() {
    let a = FakeProvider::scripted(|_, _| {
        Action::ResetAfter(3, Reply::openai_text(&["The ", "quick ", "brown ", "fox."]))
    })
    .await;
    let claude = FakeProvider::with_default(Reply::anthropic_text(&["brown ", "fox."])).await;
    let s = setup(
        "routing_anthropic_prefill",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                DeploymentConfig {
                    provider: Some(ProviderKind::Anthropic),
                    base_url: Some(claude.base_url()),
                    upstream_model: Some("claude-sonnet-4-5".into()),
                    ..spare(deployment("claude", "http://unused", "sk-ant"))
                },
            ],
        )],
        |_| {},
    )
    .await;
    assert_eq!(s.health("chat-main", "claude").await["prefill"], true);
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "a pangram please").await;
    assert_answered(&events);
    assert_eq!(
        routes(&events),
        [
            route("chat-main", "a", "first"),
            route("chat-main", "claude", "failover")
        ]
    );
    assert!(
        !kinds(&events).contains(&"restart".to_string()),
        "{events:?}"
    );
    assert_eq!(all_content(&events), "The quick brown fox.");
    let sent = answers(&claude);
    assert_eq!(sent.len(), 1);
    let last = sent[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant", "{}", sent[0].body);
    let prefix = match &last["content"] {
        Value::String(t) => t.clone(),
        blocks => blocks[0]["text"].as_str().unwrap_or_default().to_string(),
    };
    assert_eq!(prefix, "The quick", "without its trailing space: {last}");
    assert!(sent[0].body.get("continue_final_message").is_none());
    assert_eq!(s.answer(chat).await["content"], "The quick brown fox.");
    s.cx.teardown().await;
}

/// A stream that breaks before its first piece (its role chunk only)
/// passed nothing on: the next deployment answers, no `restart`.
#[tokio::test]
async fn a_stream_broken_before_its_first_piece_moves_on_quietly() {
    let a = FakeProvider::scripted(|_, _| {
        Action::ResetAfter(1, Reply::openai_text(&["The ", "quick."]))
    })
    .await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_broken_early",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert!(
        !kinds(&events).contains(&"restart".to_string()),
        "{events:?}"
    );
    assert_eq!(all_content(&events), "From b.");
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["recent_failures"], 1, "{h}");
    assert_eq!(h["last_error_class"], "interrupted");
    s.cx.teardown().await;
}

/// A stream that breaks in the middle when no other deployment can take
/// over: the answer fails once, with the partial text kept, and the
/// error says that no deployment was left (`providers_unavailable`).
#[tokio::test]
async fn a_break_with_no_deployment_left_fails_the_answer_once() {
    let a = FakeProvider::scripted(|_, _| {
        Action::ResetAfter(3, Reply::openai_text(&["The ", "quick ", "brown ", "fox."]))
    })
    .await;
    let b = FakeProvider::with_default(Reply::error(500, "internal error")).await;
    let s = setup(
        "routing_break_nowhere",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "a pangram please").await;
    assert_eq!(routes(&events), [route("chat-main", "a", "first")]);
    assert_eq!(all_content(&events), "The quick ");
    let errors: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert_eq!(events.last().unwrap()["type"], "error");
    assert_eq!(
        (answers(&a).len(), answers(&b).len()),
        (1, 1),
        "b was tried"
    );
    let stored = s.answer(chat).await;
    assert_eq!(stored["status"], "failed");
    assert_eq!(stored["content"], "The quick ");
    assert_eq!(
        (
            errors[0]["error_code"].as_str(),
            stored["metadata"]["error_code"].as_str()
        ),
        (Some("providers_unavailable"), Some("providers_unavailable")),
        "{events:?}"
    );
    s.cx.teardown().await;
}

/// A chunk that is not JSON breaks the stream like a reset: the next
/// deployment starts over.
#[tokio::test]
async fn a_malformed_chunk_fails_over() {
    let a = FakeProvider::with_default(
        Reply::openai_text(&["The ", "quick ", "brown ", "fox."]).malformed_at(3),
    )
    .await;
    let b =
        FakeProvider::with_default(Reply::openai_text(&["A ", "whole ", "new ", "answer."])).await;
    let s = setup(
        "routing_malformed",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "a pangram please").await;
    assert_answered(&events);
    assert_eq!(
        routes(&events),
        [
            route("chat-main", "a", "first"),
            route("chat-main", "b", "failover")
        ]
    );
    let restart = position(&events, "restart");
    assert_eq!(all_content(&events[..restart]), "The quick ");
    assert_eq!(shown(&events), "A whole new answer.");
    assert_eq!(s.answer(chat).await["content"], "A whole new answer.");
    assert_eq!(
        s.health("chat-main", "a").await["last_error_class"],
        "interrupted"
    );
    s.cx.teardown().await;
}

// ---- a refused key ----

/// A `401` on key A disables that deployment (shown to admins, recorded
/// once on the system audit chain) and moves the answer to a deployment
/// with another key: c, which has the same key as a, is not tried.
#[tokio::test]
async fn a_401_disables_the_deployment_and_moves_to_another_key() {
    let a = FakeProvider::with_default(Reply::error(401, "Incorrect API key provided: sk-a-1234"))
        .await;
    let c = FakeProvider::with_default(Reply::openai_text(&["From ", "c."])).await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_401",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a-1234"),
                // Weight 0 both: c is tried before b, unless its key is
                // known to be refused.
                spare(deployment("c", &c.base_url(), "sk-a-1234")),
                spare(deployment("b", &b.base_url(), "sk-b-5678")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert_eq!(shown(&events), "From b.");
    assert_eq!(
        (answers(&a).len(), answers(&c).len(), answers(&b).len()),
        (1, 0, 1),
        "the refused key is not tried again"
    );

    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "disabled", "{h}");
    assert_eq!(h["disabled_status"], 401, "{h}");
    assert_eq!(h["last_error_class"], "auth");
    assert_eq!(h["cooldown_remaining_secs"], Value::Null);
    assert_eq!(s.health("chat-main", "b").await["state"], "healthy");

    let (status, v) = req(
        &s.cx.base_url,
        &s.root.token,
        Method::GET,
        "/api/audit/events",
        &[("action", "model_deployment.disable".to_string())],
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{v}");
    assert_eq!(items[0]["org_id"], Value::Null, "the system chain");
    assert_eq!(items[0]["target_id"], "chat-main/a");
    assert_eq!(items[0]["details"]["status"], 401);
    assert!(!v.to_string().contains("sk-a-1234"), "no key in the log");

    // Disabled: not asked again.
    let events = s.ask(chat, model, "again").await;
    assert_answered(&events);
    assert_eq!(answers(&a).len(), 1);
    s.cx.teardown().await;
}

// ---- every deployment down ----

/// Every deployment of the model and of its fallback fails (429, 529,
/// 500 with `allowed_fails` 1): one clear error in the stream,
/// `providers_unavailable`. Then, every one cooling down, `send_message`
/// answers `503 providers_unavailable` with `Retry-After` (the first
/// cooldown's end) before anything is stored; once it passed, the model
/// answers again.
#[tokio::test]
async fn every_deployment_down_is_one_clear_error_then_503_with_retry_after() {
    let a =
        FakeProvider::with_default(Reply::error(429, "slow down").header("retry-after", "2")).await;
    let b = FakeProvider::with_default(Reply::error(529, "Overloaded")).await;
    let backup = FakeProvider::with_default(Reply::error(500, "internal error")).await;
    let s = setup(
        "routing_all_down",
        vec![
            ModelConfig {
                fallbacks: vec!["backup".into()],
                ..routed(
                    "chat-main",
                    vec![
                        deployment("a", &a.base_url(), "sk-a"),
                        spare(deployment("b", &b.base_url(), "sk-b")),
                    ],
                )
            },
            backup.model_config("backup"),
        ],
        |c| {
            c.providers.allowed_fails = 1;
            c.providers.cooldown_secs = 5;
        },
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{events:?}");
    assert_eq!(last["error_code"], "providers_unavailable", "{events:?}");
    assert!(routes(&events).is_empty(), "{events:?}");
    assert_eq!(
        (answers(&a).len(), answers(&b).len(), answers(&backup).len()),
        (1, 1, 1),
        "each tried once"
    );
    let stored = s.answer(chat).await;
    assert_eq!(stored["status"], "failed");
    assert_eq!(stored["metadata"]["error_code"], "providers_unavailable");
    for (m, d) in [
        ("chat-main", "a"),
        ("chat-main", "b"),
        ("backup", "default"),
    ] {
        assert_eq!(s.health(m, d).await["state"], "cooling_down", "{m}/{d}");
    }

    // All cooling down: refused before anything is stored.
    let before = s.chat(chat).await["messages"].as_array().unwrap().len();
    let response = s.open_on(&s.cx.base_url, chat, model, "still there?").await;
    assert_eq!(response.status(), 503);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=2).contains(&retry),
        "a's Retry-After, the soonest: {retry}"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error_code"], "providers_unavailable", "{body}");
    assert_eq!(
        s.chat(chat).await["messages"].as_array().unwrap().len(),
        before
    );
    assert_eq!(
        (answers(&a).len(), answers(&b).len(), answers(&backup).len()),
        (1, 1, 1),
        "nothing asked"
    );

    // Once the Retry-After passed, a is probed and answers.
    a.set_default(Reply::openai_text(&["Back."]));
    tokio::time::sleep(Duration::from_secs(retry) + Duration::from_millis(100)).await;
    let events = s.ask(chat, model, "now?").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "a", "first")]);
    assert_eq!(shown(&events), "Back.");
    s.cx.teardown().await;
}

// ---- three instances, one cooldown ----

/// Three instances on one database: a dead deployment (500, cooling down
/// after one failure) gets one request per cooldown window in total, not
/// one per instance; after the cooldown exactly one request (of three
/// sent at once, one to each instance) probes it; once it answers again
/// every instance uses it.
#[tokio::test]
async fn three_instances_share_one_cooldown() {
    let dead = FakeProvider::with_default(Reply::error(500, "internal error")).await;
    let live = FakeProvider::with_default(Reply::openai_text(&["Alive."])).await;
    let models = vec![routed(
        "chat-main",
        vec![
            deployment("dead", &dead.base_url(), "sk-d"),
            spare(deployment("live", &live.base_url(), "sk-l")),
        ],
    )];
    let adjust = |c: &mut Config| {
        c.providers.allowed_fails = 1;
        c.providers.cooldown_secs = 3;
    };
    let s = setup("routing_three_instances", models.clone(), adjust).await;
    let mut others = Vec::new();
    for _ in 0..2 {
        let models = models.clone();
        others.push(
            s.cx.second_instance(move |c| {
                fast(c);
                c.models.extend(models);
                adjust(c);
            })
            .await,
        );
    }
    let bases: Vec<String> = std::iter::once(s.cx.base_url.clone())
        .chain(others.iter().map(|o| format!("http://{}", o.local_addr())))
        .collect();
    let model = s.model("chat-main").await;

    // One after the other: the first instance finds it dead; the others
    // know it without asking.
    for (i, base) in bases.iter().enumerate() {
        let chat = s.new_chat().await;
        let events = s.ask_on(base, chat, model, "hello").await;
        assert_answered(&events);
        let expected = if i == 0 { "failover" } else { "first" };
        assert_eq!(
            routes(&events),
            [route("chat-main", "live", expected)],
            "instance {i}"
        );
    }
    assert_eq!(answers(&dead).len(), 1, "one request, not one per instance");

    // After the cooldown, three at once: one probe.
    s.until_cooled("chat-main", "dead").await;
    let mut chats = Vec::new();
    for _ in 0..3 {
        chats.push(s.new_chat().await);
    }
    let asked = futures::future::join_all(
        bases
            .iter()
            .zip(&chats)
            .map(|(base, chat)| s.ask_on(base, *chat, model, "hello again")),
    )
    .await;
    assert_eq!(answers(&dead).len(), 2, "exactly one probe");
    let mut reasons: Vec<String> = asked
        .iter()
        .map(|events| {
            assert_answered(events);
            let r = routes(events);
            assert_eq!(r.len(), 1, "{events:?}");
            assert_eq!(r[0].1, "live");
            r[0].2.clone()
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons, ["failover", "first", "first"]);

    // The failed probe cooled it down again, for everyone.
    for base in &bases {
        let chat = s.new_chat().await;
        let events = s.ask_on(base, chat, model, "and again").await;
        assert_eq!(routes(&events), [route("chat-main", "live", "first")]);
    }
    assert_eq!(answers(&dead).len(), 2);

    // It recovers: the next probe succeeds, and every instance uses it.
    dead.set_default(Reply::openai_text(&["Risen."]));
    s.until_cooled("chat-main", "dead").await;
    for (i, base) in bases.iter().enumerate().rev() {
        let chat = s.new_chat().await;
        let events = s.ask_on(base, chat, model, "are you back?").await;
        assert_answered(&events);
        assert_eq!(
            routes(&events),
            [route("chat-main", "dead", "first")],
            "instance {i}"
        );
        assert_eq!(shown(&events), "Risen.");
    }
    assert_eq!(answers(&dead).len(), 5);
    let h = s.health("chat-main", "dead").await;
    assert_eq!(h["state"], "healthy", "{h}");
    assert_eq!(h["recent_failures"], 0, "{h}");
    for other in others {
        other.shutdown().await.unwrap();
    }
    s.cx.teardown().await;
}

// ---- fallbacks by error class ----

fn error_reply(status: u16, error: Value) -> Reply {
    Reply {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        parts: vec![Part::Data(json!({ "error": error }).to_string())],
        drop_at_end: false,
    }
}

/// A context-window error (said in the message, or only by OpenAI's code
/// `context_length_exceeded`) moves the answer to the model's
/// `context_window_fallbacks`; another `400` and a content-policy refusal
/// (no `content_policy_fallbacks`) end the answer there, the fallback not
/// asked.
#[tokio::test]
async fn a_context_window_error_takes_the_larger_window_fallback() {
    let small = FakeProvider::start().await;
    let big = FakeProvider::with_default(Reply::openai_text(&["A ", "long ", "answer."])).await;
    let s = setup(
        "routing_context_window",
        vec![
            ModelConfig {
                context_window_fallbacks: vec!["big".into()],
                context_tokens: Some(8_192),
                ..small.model_config("small")
            },
            ModelConfig {
                context_tokens: Some(128_000),
                ..big.model_config("big")
            },
        ],
        |_| {},
    )
    .await;
    let model = s.model("small").await;
    assert_eq!(s.listed_model("small").await["routed"], true);
    let chat = s.new_chat().await;
    for error in [
        json!({"message": "This model's maximum context length is 8192 tokens. However, your \
            messages resulted in 9021 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages"}),
        json!({"message": "Please reduce the length of the messages.",
            "type": "invalid_request_error", "code": "context_length_exceeded"}),
    ] {
        small.push(error_reply(400, error));
        let events = s.ask(chat, model, "a long question").await;
        assert_answered(&events);
        assert_eq!(
            routes(&events),
            [route("big", "default", "context_window_fallback")]
        );
        assert_eq!(shown(&events), "A long answer.");
        let stored = s.answer(chat).await;
        assert_eq!(stored["content"], "A long answer.");
        assert_eq!(stored["metadata"]["route"][0]["model"], "big");
    }
    assert_eq!((answers(&small).len(), answers(&big).len()), (2, 2));

    // Another 400, and a content-policy refusal: the answer's error.
    for error in [
        json!({"message": "Invalid value for 'temperature'", "type": "invalid_request_error"}),
        json!({"message": "Your request was rejected by our safety system",
            "type": "invalid_request_error", "code": "content_policy_violation"}),
    ] {
        small.push(error_reply(400, error));
        let events = s.ask(chat, model, "another question").await;
        let last = events.last().unwrap();
        assert_eq!(last["type"], "error", "{events:?}");
        assert_eq!(last["error_code"], "provider_rejected");
    }
    assert_eq!((answers(&small).len(), answers(&big).len()), (4, 2));
    assert_eq!(
        s.health("small", "default").await["state"],
        "healthy",
        "the request's fault, not the deployment's"
    );
    s.cx.teardown().await;
}

// ---- not routed ----

/// A model with one deployment and no fallback answers as before: no
/// `route` event, the same upstream retried `max_retries` times, no
/// health kept for it.
#[tokio::test]
async fn a_single_deployment_model_is_not_routed() {
    let fake = FakeProvider::with_default(Reply::openai_text(&["Plain."])).await;
    fake.push(Reply::error(500, "internal error"));
    fake.push(Reply::error(503, "unavailable"));
    let s = setup("routing_single", vec![fake.model_config("plain")], |_| {}).await;
    let model = s.model("plain").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_eq!(
        kinds(&events),
        ["start", "content", "usage", "end"],
        "{events:?}"
    );
    assert_eq!(shown(&events), "Plain.");
    assert_eq!(answers(&fake).len(), 3, "1 + 2 retries of the one upstream");
    let stored = s.answer(chat).await;
    assert!(stored["metadata"].get("route").is_none(), "{stored}");
    let listed = s.listed_model("plain").await;
    assert_eq!(listed["routed"], false);
    let d = &listed["deployments"][0];
    assert_eq!(d["name"], "default");
    assert_eq!(d["state"], "healthy");
    assert_eq!(d["recent_failures"], 0);
    assert_eq!(d["last_error_class"], Value::Null);
    let page = s.metrics().await;
    assert!(
        !page.contains("model=\"plain\",deployment="),
        "no per-deployment series: {page}"
    );
    s.cx.teardown().await;
}

// ---- what admins and metrics see ----

/// `GET /api/system/model-deployments` (system admins only) lists every
/// model's deployments with their configuration (never key or URL) and
/// shared health; `/metrics` counts tries by outcome, failures by class,
/// cooldowns and the time to the first event.
#[tokio::test]
async fn admins_list_deployments_and_metrics_count_them() {
    let a = FakeProvider::with_default(Reply::error(500, "internal error")).await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_admin_metrics",
        vec![ModelConfig {
            fallbacks: vec![workspace_server::config::OFFLINE_MODEL_NAME.into()],
            ..routed(
                "chat-main",
                vec![
                    deployment("a", &a.base_url(), "sk-secret-a"),
                    DeploymentConfig {
                        rpm: Some(100),
                        tpm: Some(100_000),
                        ..spare(deployment("b", &b.base_url(), "sk-secret-b"))
                    },
                ],
            )
        }],
        |c| {
            c.providers.allowed_fails = 1;
            c.providers.cooldown_secs = 2;
        },
    )
    .await;
    let (status, v) = req(
        &s.cx.base_url,
        &s.ada.token,
        Method::GET,
        "/api/system/model-deployments",
        &[],
        None,
    )
    .await;
    assert_eq!(
        (status, v["error_code"].as_str()),
        (403, Some("forbidden")),
        "{v}"
    );

    let listing = s.listing().await;
    let text = listing.to_string();
    for secret in ["sk-secret", &a.base_url(), &b.base_url()] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    let m = s.listed_model("chat-main").await;
    assert_eq!(m["routed"], true);
    assert_eq!(m["fallbacks"], json!(["offline-dev-model"]));
    assert_eq!(m["context_window_fallbacks"], json!([]));
    let names: Vec<&str> = m["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let b0 = &m["deployments"][1];
    assert_eq!(b0["provider"], "openai_compatible");
    assert_eq!(
        (
            b0["weight"].as_u64(),
            b0["rpm"].as_u64(),
            b0["tpm"].as_u64()
        ),
        (Some(0), Some(100), Some(100_000))
    );
    assert_eq!(b0["prefill"], false);
    assert_eq!(b0["state"], "healthy");
    assert_eq!(b0["cooldowns"], 0);
    assert_eq!(s.listed_model("offline-dev-model").await["routed"], false);

    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    let left = h["cooldown_remaining_secs"].as_f64().unwrap();
    assert!(left > 0.0 && left <= 2.0, "{h}");
    assert_eq!(h["recent_failures"], 1);
    assert_eq!(h["cooldowns"], 1);
    assert_eq!(h["last_error_class"], "server");
    assert!(h["last_error_secs_ago"].as_f64().unwrap() < 10.0, "{h}");

    let page = s.metrics().await;
    let series = |name: &str, labels: &str| metric(&page, &format!("{name}{{{labels}}}"));
    assert_eq!(
        series(
            "workspace_model_deployment_requests_total",
            r#"model="chat-main",deployment="a",outcome="failed""#
        ),
        Some(1.0),
        "{page}"
    );
    assert_eq!(
        series(
            "workspace_model_deployment_requests_total",
            r#"model="chat-main",deployment="b",outcome="ok""#
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            "workspace_model_deployment_failures_total",
            r#"model="chat-main",deployment="a",class="server""#
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            "workspace_model_deployment_cooldowns_total",
            r#"model="chat-main",deployment="a""#
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            "workspace_model_deployment_first_event_seconds_count",
            r#"model="chat-main",deployment="b""#
        ),
        Some(1.0)
    );
    assert!(page.contains(
        r#"workspace_model_deployment_first_event_seconds_bucket{model="chat-main",deployment="b",le="+Inf"} 1"#
    ));

    s.cx.teardown().await;
}

/// A probe that fails cools the deployment down again: a cooldown like
/// the first, counted as one in the admin listing (`cooldowns`) and in
/// `workspace_model_deployment_cooldowns_total`.
#[tokio::test]
async fn a_failed_probe_is_counted_as_another_cooldown() {
    let a = FakeProvider::with_default(Reply::error(500, "internal error")).await;
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let s = setup(
        "routing_failed_probe",
        vec![routed(
            "chat-main",
            vec![
                deployment("a", &a.base_url(), "sk-a"),
                spare(deployment("b", &b.base_url(), "sk-b")),
            ],
        )],
        |c| {
            c.providers.allowed_fails = 1;
            c.providers.cooldown_secs = 2;
        },
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    let events = s.ask(chat, model, "hello").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert_eq!(s.health("chat-main", "a").await["cooldowns"], 1);

    // After the cooldown the probe fails: a second cooldown.
    s.until_cooled("chat-main", "a").await;
    let events = s.ask(chat, model, "again").await;
    assert_eq!(routes(&events), [route("chat-main", "b", "failover")]);
    assert_eq!(answers(&a).len(), 2, "the probe");
    let h = s.health("chat-main", "a").await;
    assert_eq!(h["state"], "cooling_down", "{h}");
    let left = h["cooldown_remaining_secs"].as_f64().unwrap();
    assert!(left > 1.0 && left <= 2.0, "a whole cooldown again: {h}");
    let page = s.metrics().await;
    assert_eq!(
        metric(
            &page,
            r#"workspace_model_deployment_failures_total{model="chat-main",deployment="a",class="server"}"#
        ),
        Some(2.0)
    );
    let counted = metric(
        &page,
        r#"workspace_model_deployment_cooldowns_total{model="chat-main",deployment="a"}"#,
    );
    assert_eq!(
        (h["cooldowns"].as_i64(), counted),
        (Some(2), Some(2.0)),
        "a failed probe's cooldown is a cooldown (listing, metrics): {h}"
    );
    s.cx.teardown().await;
}

/// `rpm` (and `tpm`) are counted per minute in the database: a deployment
/// at its `rpm` is skipped (`over_limit`) for the next; the admin listing
/// shows the minute's requests and tokens, also of a deployment that
/// never failed.
#[tokio::test]
async fn rpm_limits_are_counted_and_listed() {
    let b = FakeProvider::with_default(Reply::openai_text(&["From ", "b."])).await;
    let c = FakeProvider::with_default(Reply::openai_text(&["From ", "c."])).await;
    let s = setup(
        "routing_rpm",
        vec![routed(
            "chat-main",
            vec![
                DeploymentConfig {
                    rpm: Some(1),
                    tpm: Some(100_000),
                    ..deployment("b", &b.base_url(), "sk-b")
                },
                spare(deployment("c", &c.base_url(), "sk-c")),
            ],
        )],
        |_| {},
    )
    .await;
    let model = s.model("chat-main").await;
    let chat = s.new_chat().await;
    // Both answers in one minute (the database's, on this machine's
    // clock).
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        % 60.0;
    if into_minute > 45.0 {
        tokio::time::sleep(Duration::from_secs_f64(60.2 - into_minute)).await;
    }
    let events = s.ask(chat, model, "one").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "b", "first")]);
    // b had its one request of the minute: c answers.
    let events = s.ask(chat, model, "two").await;
    assert_answered(&events);
    assert_eq!(routes(&events), [route("chat-main", "c", "first")]);
    assert_eq!((answers(&b).len(), answers(&c).len()), (1, 1));
    let page = s.metrics().await;
    assert_eq!(
        metric(
            &page,
            r#"workspace_model_deployment_requests_total{model="chat-main",deployment="b",outcome="over_limit"}"#
        ),
        Some(1.0),
        "{page}"
    );
    let h = s.health("chat-main", "b").await;
    assert_eq!(h["state"], "healthy", "{h}");
    assert_eq!(h["minute_requests"], 1, "the minute's request, shown: {h}");
    assert_eq!(h["minute_tokens"], 13, "11 in, 2 out: {h}");
    s.cx.teardown().await;
}
