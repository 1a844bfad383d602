//! Agent deployments: keys (shown once, stored hashed, regenerated, paused,
//! deleted, expired), the agent lifecycle they move, isolation, and the
//! OpenAI-compatible surface (JSON, streaming, errors in OpenAI's shape,
//! per-key rate limit shared across instances, CORS), also through the
//! real `openai` Python client.

use crate::agents::setup;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;
use workspace_tests::req;
use workspace_tests::{TestContext, too_many_requests};

fn aq(agent: Uuid) -> Vec<(&'static str, String)> {
    vec![("agent_id", agent.to_string())]
}

fn dq(deployment: &Value) -> Vec<(&'static str, String)> {
    vec![(
        "deployment_id",
        deployment["id"].as_str().unwrap().to_string(),
    )]
}

/// Tests the agent so it is `ready` (deployable).
pub(crate) async fn make_ready(cx: &TestContext, token: &str, agent: Uuid) {
    let (s, b) = req(
        &cx.base_url,
        token,
        Method::POST,
        "/api/agents/test",
        &aq(agent),
        Some(json!({"message": "hello"})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["status"], "ready", "{b}");
}

async fn agent_status(cx: &TestContext, token: &str, agent: Uuid) -> String {
    let (_, b) = req(
        &cx.base_url,
        token,
        Method::GET,
        "/api/agents/get",
        &aq(agent),
        None,
    )
    .await;
    b["status"].as_str().unwrap().to_string()
}

pub(crate) async fn deploy(cx: &TestContext, token: &str, agent: Uuid, body: Value) -> Value {
    let client = workspace_tests::resources::client_for(&cx.base_url, token);
    let created = workspace_tests::resources::deployment(&client, agent, body).await;
    serde_json::to_value(created).expect("a deployment as JSON")
}

/// A request to the OpenAI-compatible surface with `key`.
pub(crate) async fn v1(
    cx: &TestContext,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    origin: Option<&str>,
) -> reqwest::Response {
    v1_at(&cx.base_url, key, method, path, body, origin).await
}

/// [`v1`] on the instance at `base`.
pub(crate) async fn v1_at(
    base: &str,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    origin: Option<&str>,
) -> reqwest::Response {
    let mut r = workspace_tests::http()
        .request(method, format!("{base}/api/agent_deploy/v1{path}"))
        .bearer_auth(key);
    if let Some(o) = origin {
        r = r.header("Origin", o);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    r.send().await.unwrap()
}

fn chat(content: &str) -> Value {
    json!({"model": "anything", "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn deployments_keys_lifecycle_and_isolation() {
    let cx = TestContext::new("deployments_crud").await;
    let ada = cx.user("deploy-ada").await;
    let bob = cx.user("deploy-bob").await;
    let t = ada.token.as_str();
    let (_org, _tool, _model, agent) = setup(&cx, t).await;

    // An untested agent cannot be deployed.
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/agent_deploy/create",
        &aq(agent),
        Some(json!({"name": "api", "channel": "api"})),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (409, Some("agent_not_ready"))
    );
    make_ready(&cx, t, agent).await;

    // Validation: nothing stored.
    for (body, code) in [
        (json!({"name": " ", "channel": "api"}), "invalid_name"),
        (json!({"name": "w", "channel": "widget"}), "invalid_origins"),
        (
            json!({"name": "w", "channel": "iframe", "allowed_origins": ["https://a.example/path"]}),
            "invalid_origins",
        ),
        (
            json!({"name": "a", "channel": "api", "rate_limit_per_minute": 0}),
            "invalid_rate_limit",
        ),
        (
            json!({"name": "a", "channel": "api", "expires_at": "2001-01-01T00:00:00Z"}),
            "invalid_expiry",
        ),
    ] {
        let (s, b) = req(
            &cx.base_url,
            t,
            Method::POST,
            "/api/agent_deploy/create",
            &aq(agent),
            Some(body),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str()), (400, Some(code)), "{b}");
    }
    let (_, l) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/agent_deploy/list",
        &aq(agent),
        None,
    )
    .await;
    assert_eq!(l, json!([]));

    // Create: the key is shown once, stored as a hash only.
    let d = deploy(
        &cx,
        t,
        agent,
        json!({"name": "site", "description": "on the site", "channel": "widget",
               "allowed_origins": ["https://Shop.example/"], "rate_limit_per_minute": 30}),
    )
    .await;
    let key = d["api_key"].as_str().unwrap().to_string();
    assert!(key.starts_with("wsk_live_") && key.len() == 9 + 43, "{key}");
    assert_eq!(d["allowed_origins"], json!(["https://shop.example"]));
    assert_eq!(d["status"], "active");
    assert!(key.starts_with(d["key_prefix"].as_str().unwrap()));
    assert!(d["embed"].as_str().unwrap().contains("<script"));
    assert_eq!(agent_status(&cx, t, agent).await, "deployed");
    let (s, g) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/agent_deploy/get",
        &dq(&d),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert!(g.get("api_key").is_none(), "{g}");
    let db = cx.db().await;
    let stored: Vec<u8> = db
        .query_one(
            "SELECT key_hash FROM agent_deployments WHERE id = $1::text::uuid",
            &[&d["id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored.len(), 32);
    let dump: String = db
        .query_one(
            "SELECT row_to_json(d)::text FROM agent_deployments d WHERE id = $1::text::uuid",
            &[&d["id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!dump.contains(&key[9..]), "the key is stored in clear");

    // The key works, and makes the agent active.
    let r = v1(&cx, &key, Method::GET, "/models", None, None).await;
    assert_eq!(r.status(), 200);
    let models: Value = r.json().await.unwrap();
    assert_eq!(models["data"][0]["id"], format!("agent-{agent}"));
    assert_eq!(agent_status(&cx, t, agent).await, "active");

    // A deployment key is no user token, and a user token no deployment key.
    let (s, _) = req(&cx.base_url, &key, Method::GET, "/api/users/me", &[], None).await;
    assert_eq!(s, 401);
    let r = v1(&cx, t, Method::GET, "/models", None, None).await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_api_key");
    assert_eq!(e["error"]["type"], "authentication_error");

    // Regenerate: the old key dies at once.
    let (s, r2) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/agent_deploy/regenerate_key",
        &dq(&d),
        None,
    )
    .await;
    assert_eq!(s, 200, "{r2}");
    let key2 = r2["api_key"].as_str().unwrap().to_string();
    assert_ne!(key, key2);
    assert_eq!(
        v1(&cx, &key, Method::GET, "/models", None, None)
            .await
            .status(),
        401
    );
    assert_eq!(
        v1(&cx, &key2, Method::GET, "/models", None, None)
            .await
            .status(),
        200
    );

    // Pause: refused; active again: accepted. Pausing the last active
    // deployment moves the agent back to deployed.
    let (s, p) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/agent_deploy/update",
        &dq(&d),
        Some(json!({"status": "paused", "name": "renamed"})),
    )
    .await;
    assert_eq!((s, p["status"].as_str()), (200, Some("paused")), "{p}");
    assert_eq!(p["name"], "renamed");
    assert_eq!(agent_status(&cx, t, agent).await, "deployed");
    assert_eq!(
        v1(&cx, &key2, Method::GET, "/models", None, None)
            .await
            .status(),
        401
    );
    req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/agent_deploy/update",
        &dq(&d),
        Some(json!({"status": "active"})),
    )
    .await;
    assert_eq!(
        v1(&cx, &key2, Method::GET, "/models", None, None)
            .await
            .status(),
        200
    );

    // Expired: refused.
    db.execute(
        "UPDATE agent_deployments SET key_expires_at = now() - interval '1 second' \
         WHERE id = $1::text::uuid",
        &[&d["id"].as_str().unwrap()],
    )
    .await
    .unwrap();
    assert_eq!(
        v1(&cx, &key2, Method::GET, "/models", None, None)
            .await
            .status(),
        401
    );
    let (_, u) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/agent_deploy/update",
        &dq(&d),
        Some(json!({"clear_expiry": true})),
    )
    .await;
    assert_eq!(u["expires_at"], Value::Null);
    assert_eq!(
        v1(&cx, &key2, Method::GET, "/models", None, None)
            .await
            .status(),
        200
    );

    // Usage is counted (within the usage writer's flush interval).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let g = loop {
        let (_, g) = req(
            &cx.base_url,
            t,
            Method::GET,
            "/api/agent_deploy/get",
            &dq(&d),
            None,
        )
        .await;
        if g["usage"]["requests"].as_i64().unwrap() >= 4 || std::time::Instant::now() > deadline {
            break g;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(g["usage"]["requests"].as_i64().unwrap() >= 4, "{g}");
    assert!(g["last_used_at"].is_string());

    // Isolation: bob sees none of it.
    let b = bob.token.as_str();
    for (method, path, q) in [
        (Method::GET, "/api/agent_deploy/get", dq(&d)),
        (Method::PUT, "/api/agent_deploy/update", dq(&d)),
        (Method::DELETE, "/api/agent_deploy/delete", dq(&d)),
        (Method::POST, "/api/agent_deploy/regenerate_key", dq(&d)),
        (Method::GET, "/api/agent_deploy/list", aq(agent)),
        (Method::POST, "/api/agent_deploy/create", aq(agent)),
    ] {
        let body = match method {
            Method::PUT => Some(json!({"name": "x"})),
            Method::POST => Some(json!({"name": "x", "channel": "api"})),
            _ => None,
        };
        let (s, e) = req(&cx.base_url, b, method.clone(), path, &q, body).await;
        assert_eq!(s, 404, "{method} {path}: {e}");
    }

    // Delete: the key dies, the agent is ready again.
    let (s, _) = req(
        &cx.base_url,
        t,
        Method::DELETE,
        "/api/agent_deploy/delete",
        &dq(&d),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        v1(&cx, &key2, Method::GET, "/models", None, None)
            .await
            .status(),
        401
    );
    assert_eq!(agent_status(&cx, t, agent).await, "ready");
    cx.teardown().await;
}

#[tokio::test]
async fn the_openai_surface_answers_streams_limits_and_checks_origins() {
    let cx = TestContext::new("deployments_openai").await;
    let ada = cx.user("openai-ada").await;
    let t = ada.token.as_str();
    let (_org, _tool, _model, agent) = setup(&cx, t).await;
    make_ready(&cx, t, agent).await;
    let d = deploy(
        &cx,
        t,
        agent,
        json!({"name": "frame", "channel": "iframe",
               "allowed_origins": ["https://shop.example"], "rate_limit_per_minute": 6}),
    )
    .await;
    let key = d["api_key"].as_str().unwrap();

    // Non-streaming, with a sandboxed tool call on the way (the offline
    // model's `/tool` convention): 1 + 1 + offset 100.
    let r = v1(
        &cx,
        key,
        Method::POST,
        "/chat/completions",
        Some(chat("/tool adder {\"a\": 1}")),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let c: Value = r.json().await.unwrap();
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["choices"][0]["message"]["role"], "assistant");
    let answer = c["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(answer.contains("102"), "{answer}");
    assert!(c["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // Streaming: chunks, usage, [DONE].
    let mut body = chat("hello there");
    body["stream"] = json!(true);
    let r = v1(
        &cx,
        key,
        Method::POST,
        "/chat/completions",
        Some(body),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let frames = workspace_tests::sse::data_of(r).await;
    assert_eq!(
        frames.last().map(String::as_str),
        Some("[DONE]"),
        "{frames:?}"
    );
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    // Each chunk is the contract's ChatCompletionChunk, exactly (nothing
    // more, nothing less, after a round trip through the typed value).
    for c in &chunks {
        let typed: workspace_api::deployments::ChatCompletionChunk =
            serde_json::from_value(c.clone()).unwrap_or_else(|e| panic!("{e}: {c}"));
        assert_eq!(&serde_json::to_value(&typed).unwrap(), c);
        assert_eq!(typed.object, "chat.completion.chunk");
    }
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(!streamed.is_empty());
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop")
    );
    assert!(
        chunks.last().unwrap()["usage"]["total_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The streamed answer's tokens reach the deployment's usage (recorded
    // by the answer pipeline after the stream's last event).
    let streamed_output = chunks.last().unwrap()["usage"]["completion_tokens"]
        .as_i64()
        .unwrap();
    let client = workspace_tests::resources::client_for(&cx.base_url, t);
    let deployment_id: uuid::Uuid = d["id"].as_str().unwrap().parse().unwrap();
    let usage = || async {
        client
            .deployments_get()
            .deployment_id(deployment_id)
            .send()
            .await
            .unwrap()
            .into_inner()
            .usage
    };
    let mut recorded = usage().await;
    for _ in 0..50 {
        if recorded.output_tokens
            >= c["usage"]["completion_tokens"].as_i64().unwrap() + streamed_output
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        recorded = usage().await;
    }
    assert_eq!(
        recorded.output_tokens,
        c["usage"]["completion_tokens"].as_i64().unwrap() + streamed_output,
        "the usage of both answers: {recorded:?}"
    );

    // Errors in OpenAI's shape.
    let r = v1(
        &cx,
        key,
        Method::POST,
        "/chat/completions",
        Some(json!({"messages": [{"role": "assistant", "content": "hi"}]})),
        None,
    )
    .await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_messages");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    let r = v1(
        &cx,
        key,
        Method::POST,
        "/chat/completions",
        Some(json!({"messages": "nope"})),
        None,
    )
    .await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_request", "{e}");
    // What OpenAI refuses is refused, in its shape, naming the parameter
    // (a temperature of 99 was accepted and clamped). On a deployment of
    // its own, so the limit checked below is not spent here.
    let checked = deploy(
        &cx,
        t,
        agent,
        json!({"name": "ranges", "channel": "api", "rate_limit_per_minute": 60}),
    )
    .await;
    let ranges_key = checked["api_key"].as_str().unwrap();
    for (extra, param, code) in [
        (
            json!({"temperature": 99}),
            "temperature",
            "decimal_above_max_value",
        ),
        (
            json!({"temperature": 2.5}),
            "temperature",
            "decimal_above_max_value",
        ),
        (
            json!({"temperature": -0.1}),
            "temperature",
            "decimal_below_min_value",
        ),
        (
            json!({"max_tokens": 0}),
            "max_tokens",
            "integer_below_min_value",
        ),
        (
            json!({"max_completion_tokens": 0}),
            "max_completion_tokens",
            "integer_below_min_value",
        ),
    ] {
        let mut body = chat("hello");
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = v1(
            &cx,
            ranges_key,
            Method::POST,
            "/chat/completions",
            Some(body),
            None,
        )
        .await;
        assert_eq!(r.status(), 400, "{extra}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(e["error"]["param"], param, "{e}");
        assert_eq!(e["error"]["code"], code, "{e}");
    }
    // The bounds themselves are accepted.
    let mut body = chat("hello");
    body["temperature"] = json!(2);
    let r = v1(
        &cx,
        ranges_key,
        Method::POST,
        "/chat/completions",
        Some(body),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);

    // CORS: an allowed origin is echoed; another is refused.
    let r = v1(
        &cx,
        key,
        Method::GET,
        "/models",
        None,
        Some("https://shop.example"),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    let counted = |db: tokio_postgres::Client| async move {
        db.query_one(
            "SELECT coalesce(sum(count), 0)::int8 FROM deployment_rate_windows",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    let before = counted(cx.db().await).await;
    let r = v1(
        &cx,
        key,
        Method::GET,
        "/models",
        None,
        Some("https://evil.example"),
    )
    .await;
    assert_eq!(r.status(), 403);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "origin_not_allowed");
    // A refused origin is not counted against the key's limit (the count
    // is taken in the key's round trip, keyed by the key and the origin).
    assert_eq!(counted(cx.db().await).await, before);
    let pre = workspace_tests::http()
        .request(
            Method::OPTIONS,
            format!("{}/api/agent_deploy/v1/chat/completions", cx.base_url),
        )
        .header("Origin", "https://shop.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert!(
        pre.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );

    // The per-minute limit (6) holds across server instances: a second
    // server on the same database shares the count.
    let second_server = cx.second_instance(|_| {}).await;
    let second = format!("http://{}", second_server.local_addr());
    let mut statuses = Vec::new();
    for i in 0..6 {
        let base = if i % 2 == 0 {
            cx.base_url.clone()
        } else {
            second.clone()
        };
        let r = workspace_tests::http()
            .get(format!("{base}/api/agent_deploy/v1/models"))
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap();
        statuses.push((
            r.status().as_u16(),
            r.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string()),
        ));
    }
    let limited: Vec<_> = statuses.iter().filter(|(s, _)| *s == 429).collect();
    assert!(!limited.is_empty(), "{statuses:?}");
    let retry: u64 = limited[0].1.as_deref().unwrap().parse().unwrap();
    assert!((1..=120).contains(&retry));
    second_server.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn a_deployment_limit_counts_the_previous_minute() {
    // The per-minute limit slides: requests late in the previous minute
    // still count early in this one, so a burst split across a minute
    // boundary is one burst. A fixed window would let the second request
    // below through.
    let cx = TestContext::new("deployments_sliding").await;
    let ada = cx.user("slide-ada").await;
    let t = ada.token.as_str();
    let (_org, _tool, _model, agent) = setup(&cx, t).await;
    make_ready(&cx, t, agent).await;
    let d = deploy(
        &cx,
        t,
        agent,
        json!({"name": "slide", "channel": "api", "rate_limit_per_minute": 5}),
    )
    .await;
    let key = d["api_key"].as_str().unwrap();
    let id: Uuid = d["id"].as_str().unwrap().parse().unwrap();
    let db = cx.db().await;
    let into_minute = || async {
        let row = db
            .query_one(
                "SELECT extract(epoch FROM now() - date_trunc('minute', now()))::float8",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, f64>(0)
    };
    // Clear of the minute's end, so both requests land in one minute.
    let before = into_minute().await;
    if before > 45.0 {
        tokio::time::sleep(Duration::from_secs_f64(61.0 - before)).await;
    }
    let before = into_minute().await;
    let models = || {
        workspace_tests::http()
            .get(format!("{}/api/agent_deploy/v1/models", cx.base_url))
            .bearer_auth(key)
    };
    assert_eq!(models().send().await.unwrap().status(), 200);
    // 50 requests in the previous minute (as another instance would have
    // counted them).
    db.execute(
        "INSERT INTO deployment_rate_windows (deployment_id, window_start, count) \
         VALUES ($1, date_trunc('minute', now()) - interval '1 minute', 50)",
        &[&id],
    )
    .await
    .unwrap();
    let (retry, code) = too_many_requests(models()).await;
    let after = into_minute().await;
    assert_eq!(code, "rate_limited");
    // 2 here plus one more fit once the 50 weigh at most 2: 57.6 s into
    // this minute.
    assert!(
        (57.6 - after - 1.0..=57.6 - before + 1.0).contains(&(retry as f64)),
        "Retry-After {retry} at {before:.1}..{after:.1} s into the minute"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn the_openai_python_client_talks_to_a_deployed_agent() {
    let cx = TestContext::new("deployments_openai_python").await;
    let ada = cx.user("py-ada").await;
    let t = ada.token.as_str();
    let (_org, _tool, _model, agent) = setup(&cx, t).await;
    make_ready(&cx, t, agent).await;
    let d = deploy(&cx, t, agent, json!({"name": "sdk", "channel": "sdk"})).await;
    let key = d["api_key"].as_str().unwrap();
    let script = r#"
import os, sys, openai
client = openai.OpenAI(base_url=os.environ["BASE"], api_key=os.environ["KEY"])
models = client.models.list()
assert models.data[0].id.startswith("agent-"), models
r = client.chat.completions.create(model=models.data[0].id,
    messages=[{"role": "user", "content": '/tool adder {"a": 5}'}])
assert "106" in r.choices[0].message.content, r
assert r.usage.total_tokens > 0
parts = []
for chunk in client.chat.completions.create(model="x", stream=True,
        messages=[{"role": "user", "content": "stream please"}]):
    if chunk.choices and chunk.choices[0].delta.content:
        parts.append(chunk.choices[0].delta.content)
assert "".join(parts), "nothing streamed"
bad = openai.OpenAI(base_url=os.environ["BASE"], api_key="wsk_live_wrong", max_retries=0)
try:
    bad.models.list()
    sys.exit("a wrong key was accepted")
except openai.AuthenticationError as e:
    assert e.code == "invalid_api_key", e
print("ok")
"#;
    // Off the runtime's thread: the server under test runs on it.
    let (base, key) = (
        format!("{}/api/agent_deploy/v1", cx.base_url),
        key.to_string(),
    );
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(workspace_tests::python())
            .args(["-c", script])
            .env("BASE", base)
            .env("KEY", key)
            .output()
            .expect("python3")
    })
    .await
    .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "the openai client failed (pip install openai==3.54.0):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    cx.teardown().await;
}

/// What a deployment counts: every request its key admits, once, whatever
/// its answer (a chat completion not streamed with its tokens when
/// answered; a streamed one when admitted, its tokens when it ends; a
/// rate-limited one not at all), on every instance (one with usage
/// recording off: the counts are the deployment's, not usage reporting's),
/// each within the usage writer's flush interval (100 ms) of its answer;
/// and the agent becomes `active` with its first completion, before the
/// answer.
#[tokio::test]
async fn a_deployment_counts_each_admitted_request_once_with_its_tokens() {
    let cx = TestContext::new("deployments_counts").await;
    let second = cx.second_instance(|c| c.usage.enabled = false).await;
    let two = format!("http://{}", second.local_addr());
    let ada = cx.user("count-ada").await;
    let t = ada.token.as_str();
    let (_org, _tool, _model, agent) = setup(&cx, t).await;
    make_ready(&cx, t, agent).await;
    let d = deploy(
        &cx,
        t,
        agent,
        json!({"name": "counted", "channel": "api", "rate_limit_per_minute": 5}),
    )
    .await;
    let key = d["api_key"].as_str().unwrap().to_string();
    assert_eq!(agent_status(&cx, t, agent).await, "deployed");
    let usage = || async {
        let (s, g) = req(
            &cx.base_url,
            t,
            Method::GET,
            "/api/agent_deploy/get",
            &dq(&d),
            None,
        )
        .await;
        assert_eq!(s, 200, "{g}");
        g
    };
    // The record once it counts `requests` (polled for 5 s at most), then
    // still that many after three flush intervals more (nothing counted
    // twice or late).
    let counted = |requests: i64| async move {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let g = usage().await;
            if g["usage"]["requests"] == requests || std::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let g = usage().await;
        assert_eq!(g["usage"]["requests"], requests, "{g}");
        g
    };

    // A completion: counted with its tokens; its agent active as answered.
    let r = v1(
        &cx,
        &key,
        Method::POST,
        "/chat/completions",
        Some(chat("Hello there")),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(agent_status(&cx, t, agent).await, "active");
    let answer: Value = r.json().await.unwrap();
    let g = counted(1).await;
    assert_eq!(
        g["usage"]["input_tokens"], answer["usage"]["prompt_tokens"],
        "{g} {answer}"
    );
    assert_eq!(
        g["usage"]["output_tokens"], answer["usage"]["completion_tokens"],
        "{g} {answer}"
    );
    assert!(g["usage"]["output_tokens"].as_i64().unwrap() > 0, "{g}");
    assert!(g["last_used_at"].is_string(), "{g}");

    // A refused completion (no messages) is an admitted request too.
    let r = v1(
        &cx,
        &key,
        Method::POST,
        "/chat/completions",
        Some(json!({"model": "anything", "messages": []})),
        None,
    )
    .await;
    assert_eq!(r.status(), 400);
    counted(2).await;

    // A streamed one, on the other instance (usage recording off there):
    // counted, and its tokens added when it ends.
    let mut streamed = chat("Hello again");
    streamed["stream"] = json!(true);
    let r = v1_at(
        &two,
        &key,
        Method::POST,
        "/chat/completions",
        Some(streamed),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("[DONE]"), "{text}");
    let before = g["usage"]["output_tokens"].as_i64().unwrap();
    let g = counted(3).await;
    assert!(
        g["usage"]["output_tokens"].as_i64().unwrap() > before,
        "{g}"
    );

    // One not streamed on the other instance too.
    let r = v1_at(
        &two,
        &key,
        Method::POST,
        "/chat/completions",
        Some(chat("And once more")),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    counted(4).await;

    // The list of models: one more; then the limit (5 a minute) refuses,
    // and a refused request is not counted.
    assert_eq!(
        v1(&cx, &key, Method::GET, "/models", None, None)
            .await
            .status(),
        200
    );
    counted(5).await;
    let r = v1(
        &cx,
        &key,
        Method::POST,
        "/chat/completions",
        Some(chat("Over")),
        None,
    )
    .await;
    assert_eq!(r.status(), 429);
    counted(5).await;
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A completion its client does not stream is asked of an OpenAI-compatible
/// provider in one piece (`stream: false`: one read instead of one per
/// chunk), and answers with the provider's text and tokens; a streamed one
/// is still streamed from the provider.
#[tokio::test]
async fn a_completion_not_streamed_is_asked_of_the_provider_in_one_piece() {
    use workspace_tests::fake_provider::{FakeProvider, Reply};
    let fake = FakeProvider::with_default(Reply::openai_text(&["Whole", " answer."])).await;
    let model = fake.model_config("fake");
    let cx = TestContext::with_config("deployments_whole", move |c| c.models.push(model)).await;
    let ada = cx.user("whole-ada").await;
    let org = ada.personal_org().await;
    let model = ada.model_id(org, "fake").await;
    let agent = workspace_tests::resources::agent(
        &ada.client,
        org,
        json!({
            "name": "whole", "description": "answers in one piece", "agent_type": "chat",
            "model_id": model, "params": {"system_prompt": "Be brief"}, "tools": [],
        }),
    )
    .await;
    make_ready(&cx, &ada.token, agent).await;
    let d = deploy(
        &cx,
        &ada.token,
        agent,
        json!({"name": "whole", "channel": "api"}),
    )
    .await;
    let key = d["api_key"].as_str().unwrap().to_string();
    let asked = fake.requests().len();

    let r = v1(
        &cx,
        &key,
        Method::POST,
        "/chat/completions",
        Some(chat("Hi")),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"], "Whole answer.",
        "{answer}"
    );
    assert_eq!(answer["usage"]["prompt_tokens"], 11, "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"], 2, "{answer}");
    let requests = fake.requests();
    assert_eq!(requests.len(), asked + 1);
    let upstream = &requests[asked];
    assert_eq!(upstream.body["stream"], false, "{}", upstream.body);
    assert!(upstream.body.get("stream_options").is_none());
    assert_eq!(
        upstream.messages().last().map(|(_, c)| c.as_str()),
        Some("Hi")
    );

    let mut streamed = chat("Hi again");
    streamed["stream"] = json!(true);
    let r = v1(
        &cx,
        &key,
        Method::POST,
        "/chat/completions",
        Some(streamed),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains(" answer.") && text.contains("[DONE]"),
        "{text}"
    );
    let upstream = fake.requests().pop().unwrap();
    assert_eq!(upstream.body["stream"], true, "{}", upstream.body);
    cx.teardown().await;
}
