//! Agents area, lifecycle status, and the agent runtime (the offline
//! model's `/tool` convention calling a sandboxed code tool).

use crate::tools::{ADDER, category, tool, tool_body};
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;
use workspace_tests::req;
use workspace_tests::{TestContext, resources};

async fn offline_model(cx: &TestContext, token: &str, org: Uuid) -> Uuid {
    let client = resources::client_for(&cx.base_url, token);
    resources::offline_model(&client, org).await
}

pub fn agent_body(model: Uuid, tools: Value) -> Value {
    json!({
        "name": "helper", "description": "helps", "agent_type": "chat", "model_id": model,
        "params": {"system_prompt": "Be brief", "temperature": 0.2, "max_tokens": 256},
        "tools": tools,
    })
}

fn aq(agent: Uuid) -> Vec<(&'static str, String)> {
    vec![("agent_id", agent.to_string())]
}

/// Creates an agent and returns its id (the typed fixture).
pub async fn agent(cx: &TestContext, token: &str, org: Uuid, body: Value) -> Uuid {
    let client = resources::client_for(&cx.base_url, token);
    resources::agent(&client, org, body).await
}

/// An organization with the adder tool, the offline model and an agent
/// that uses the tool; returns (org, tool, model, agent).
pub async fn setup(cx: &TestContext, token: &str) -> (Uuid, Uuid, Uuid, Uuid) {
    let (_, me) = req(&cx.base_url, token, Method::GET, "/api/users/me", &[], None).await;
    let org: Uuid = me["organizations"][0]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let cat = category(cx, token, org, "Math").await;
    let t = tool(cx, token, org, tool_body("adder", cat, ADDER)).await;
    let model = offline_model(cx, token, org).await;
    let a = agent(
        cx,
        token,
        org,
        agent_body(
            model,
            json!([{"tool_id": t, "config": [{"name": "offset", "value": 100}]}]),
        ),
    )
    .await;
    (org, t, model, a)
}

#[tokio::test]
async fn agents_crud_validation_and_isolation() {
    let cx = TestContext::new("agents_crud").await;
    let ada = cx.user("agents-ada").await;
    let bob = cx.user("agents-bob").await;
    let t = ada.token.as_str();
    let (org, tool_id, model, id) = setup(&cx, t).await;

    // Detail: tools with category and config, deployments, status.
    let (s, d) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/agents/get",
        &aq(id),
        None,
    )
    .await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["status"], "configured");
    assert_eq!(d["model"]["id"], json!(model));
    assert_eq!(d["tools"][0]["id"], json!(tool_id));
    assert_eq!(d["tools"][0]["category"]["name"], "Math");
    assert_eq!(
        d["tools"][0]["config"],
        json!([{"name": "offset", "value": 100}])
    );
    assert_eq!(d["deployments"], json!([]));
    // List: model and deployments_count.
    let (_, l) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/agents/list",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    assert_eq!(l[0]["deployments_count"], 0);
    assert_eq!(l[0]["model"]["name"], "offline-dev-model");

    // Validation.
    let bob_org = bob.personal_org().await;
    let bob_cat = category(&cx, &bob.token, bob_org, "B").await;
    let bob_tool = tool(
        &cx,
        &bob.token,
        bob_org,
        tool_body("private", bob_cat, ADDER),
    )
    .await;
    let cases: Vec<(Value, &str)> = vec![
        (
            {
                let mut b = agent_body(model, json!([]));
                b["params"]["temperature"] = json!(1.5);
                b
            },
            "invalid_params",
        ),
        (
            {
                let mut b = agent_body(model, json!([]));
                b["params"]["max_tokens"] = json!(0);
                b
            },
            "invalid_params",
        ),
        (agent_body(Uuid::new_v4(), json!([])), "model_unavailable"),
        (
            agent_body(model, json!([{"tool_id": bob_tool}])),
            "unknown_tool",
        ),
        (
            agent_body(model, json!([{"tool_id": Uuid::new_v4()}])),
            "unknown_tool",
        ),
        (
            agent_body(
                model,
                json!([{"tool_id": tool_id, "config": [{"name": "nope", "value": 1}]}]),
            ),
            "invalid_tool_config",
        ),
        (
            agent_body(
                model,
                json!([{"tool_id": tool_id, "config": [{"name": "offset", "value": "x"}]}]),
            ),
            "invalid_tool_config",
        ),
        (
            agent_body(model, json!([{"tool_id": tool_id}, {"tool_id": tool_id}])),
            "invalid_tools",
        ),
        (
            {
                let mut b = agent_body(model, json!([]));
                b["name"] = json!(" ");
                b
            },
            "invalid_name",
        ),
    ];
    for (body, code) in cases {
        let (s, b) = req(
            &cx.base_url,
            t,
            Method::POST,
            "/api/agents",
            &[("org_id", org.to_string())],
            Some(body),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str()), (400, Some(code)), "{b}");
    }
    let (_, l) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/agents/list",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    assert_eq!(l.as_array().unwrap().len(), 1, "nothing half-written");

    // Update: every field; bad tool list leaves the agent untouched.
    let (s, u) = req(&cx.base_url, t, Method::PUT, "/api/agents/update", &aq(id),
        Some(json!({"name": "renamed", "params": {"system_prompt": "", "temperature": 0.5}, "tools": []}))).await;
    assert_eq!(
        (s, u["name"].as_str(), u["status"].as_str()),
        (200, Some("renamed"), Some("created")),
        "{u}"
    );
    let (s, _) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/agents/update",
        &aq(id),
        Some(json!({"tools": [{"tool_id": bob_tool}]})),
    )
    .await;
    assert_eq!(s, 400);

    // Isolation: Bob cannot address Ada's agent by id.
    for (m, path) in [
        (Method::GET, "/api/agents/get"),
        (Method::PUT, "/api/agents/update"),
        (Method::DELETE, "/api/agents/delete"),
        (Method::POST, "/api/agents/test"),
    ] {
        let body = match m {
            Method::PUT => Some(json!({"name": "x"})),
            Method::POST => Some(json!({"message": "hi"})),
            _ => None,
        };
        let (s, b) = req(&cx.base_url, &bob.token, m, path, &aq(id), body).await;
        assert_eq!(
            (s, b["error_code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }

    // A tool in use cannot be deleted; the agent can.
    let (_, _) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/agents/update",
        &aq(id),
        Some(json!({"tools": [{"tool_id": tool_id}]})),
    )
    .await;
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::DELETE,
        "/api/tools/delete",
        &[
            ("org_id", org.to_string()),
            ("tool_id", tool_id.to_string()),
        ],
        None,
    )
    .await;
    assert_eq!((s, b["error_code"].as_str()), (409, Some("tool_in_use")));
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::DELETE,
        "/api/agents/delete",
        &aq(id),
        None,
    )
    .await;
    assert_eq!((s, b["success"].as_bool()), (200, Some(true)));
    let (s, _) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/agents/get",
        &aq(id),
        None,
    )
    .await;
    assert_eq!(s, 404);
    cx.teardown().await;
}

#[tokio::test]
async fn agent_runtime_calls_a_sandboxed_tool() {
    let cx = TestContext::with_config("agents_runtime", |c| c.providers.offline_chunk_delay_ms = 0)
        .await;
    let ada = cx.user("runtime-ada").await;
    let t = ada.token.as_str();
    let (_, _, _, id) = setup(&cx, t).await;

    // The offline model's convention: `/tool NAME {json}` calls the tool.
    let started = std::time::Instant::now();
    let (s, r) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/agents/test",
        &aq(id),
        Some(json!({"message": "/tool adder {\"a\": 1}"})),
    )
    .await;
    let with_tool = started.elapsed();
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["tool_calls"][0]["name"], "adder");
    assert_eq!(r["tool_calls"][0]["input"], json!({"a": 1}));
    // 1 + 1 + the agent's configured offset 100.
    assert_eq!(r["tool_calls"][0]["output"], json!(102));
    assert_eq!(r["output"], "Tool adder returned: 102");
    assert_eq!(r["status"], "ready");
    assert!(r["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // A tool error goes back to the model as the tool's result.
    let (_, r) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/agents/test",
        &aq(id),
        Some(json!({"message": "/tool adder {\"a\": \"not a number\"}"})),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["tool_calls"][0]["successful"], false);
    assert!(r["output"].as_str().unwrap().contains("error: "), "{r}");
    // An unknown tool too.
    let (_, r) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/agents/test",
        &aq(id),
        Some(json!({"message": "/tool nosuch {}"})),
    )
    .await;
    assert_eq!(r["tool_calls"][0]["error"], "there is no tool named nosuch");

    // Step overhead: the same agent answering without a tool.
    let started = std::time::Instant::now();
    let (_, r) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/agents/test",
        &aq(id),
        Some(json!({"message": "hello"})),
    )
    .await;
    let plain = started.elapsed();
    assert!(r["output"].as_str().unwrap().contains("hello"));
    eprintln!("agent test: plain answer {plain:?}, with one sandboxed tool call {with_tool:?}");
    cx.teardown().await;
}
