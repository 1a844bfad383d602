//! The MCP area against a real MCP server on 127.0.0.1:
//! `@modelcontextprotocol/server-everything` over streamable HTTP (installed
//! by `.ci/run` into `tests/peers/node_modules`).

use reqwest::Method;
use serde_json::json;
use std::time::Duration;
use uuid::Uuid;
use workspace_client::types::{
    ConnectAccount, ConnectAccountFlowType, GenerateUrl, InstanceRename,
};
use workspace_server::mcp::McpClient;
use workspace_server::mcp::config::{McpAuth, McpServerConfig};
use workspace_tests::mcp_peers::{Everything, MOCK_ACCESS_TOKEN, MockOauth};
use workspace_tests::{TestContext, error_of, raw};

const FRONTEND: &str = "http://frontend.test";
const API_PUBLIC: &str = "http://api.test";

fn server(name: &str, slug: &str, url: &str, auth: McpAuth) -> McpServerConfig {
    McpServerConfig {
        name: name.to_string(),
        toolkit_name: name.to_string(),
        toolkit_slug: slug.to_string(),
        toolkit_logo: None,
        url: url.to_string(),
        auth,
        client_id: None,
        client_secret: None,
        scopes: Vec::new(),
    }
}

async fn context(name: &str, servers: Vec<McpServerConfig>, quota: u32) -> TestContext {
    TestContext::with_config(name, |c| {
        c.mcp.frontend_url = FRONTEND.to_string();
        c.mcp.api_public_url = API_PUBLIC.to_string();
        c.mcp_servers = servers;
        c.features.mcp_sessions = quota;
    })
    .await
}

fn query_of(url: &str) -> std::collections::HashMap<String, String> {
    reqwest::Url::parse(url)
        .expect("a URL")
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[tokio::test]
async fn mcp_catalog_tools_instances_and_isolation() {
    let peer = Everything::start().await;
    let cx = context(
        "mcp_catalog_tools_instances_and_isolation",
        vec![server("Everything", "everything", &peer.url, McpAuth::None)],
        10,
    )
    .await;
    let owner = cx.user("mcp-owner").await;
    let org = owner.personal_org().await;

    // The catalog, with the caller's instance count.
    let servers = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    assert_eq!(servers.len(), 1);
    let everything = &servers[0];
    assert_eq!(everything.name, "Everything");
    assert_eq!(everything.toolkit_slug, "everything");
    assert_eq!(everything.server_instance_count, 0);

    // Its tools, listed over MCP streamable HTTP.
    let with_tools = owner
        .client
        .mcp_server_with_tools()
        .org_id(org)
        .server_id(everything.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    let echo = with_tools
        .tools
        .iter()
        .find(|t| t.name == "echo")
        .expect("the echo tool");
    assert_eq!(echo.slug, "everything_echo");
    assert_eq!(echo.toolkit, "everything");
    assert!(!echo.description.is_empty());
    // Cached in PostgreSQL (not in process memory).
    let cached: i64 = cx
        .db()
        .await
        .query_one(
            "SELECT jsonb_array_length(tools)::int8 FROM mcp_tool_cache WHERE server_id = $1",
            &[&everything.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(cached as usize, with_tools.tools.len());

    // The client calls a tool over the same protocol.
    let client = workspace_server::mcp::RmcpClient {
        timeout: Duration::from_secs(20),
        log: slog::Logger::root(slog::Discard, slog::o!()),
    };
    let mut args = serde_json::Map::new();
    args.insert("message".into(), json!("hello over MCP"));
    let out = client
        .call_tool(&peer.url, None, "echo", args)
        .await
        .expect("echo");
    assert!(!out.is_error);
    assert!(out.result.to_string().contains("hello over MCP"), "{out:?}");

    // Connecting a server without authentication: active at once.
    let start = owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(
            ConnectAccount::builder()
                .server_id(everything.id)
                .flow_type(Some("chat".parse::<ConnectAccountFlowType>().unwrap())),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(start.status, "active");
    assert_eq!(start.connection_data.auth_config, "none");
    assert!(
        start
            .redirect_url
            .starts_with(&format!("{FRONTEND}/mcp/callback?"))
    );
    let q = query_of(&start.redirect_url);
    assert_eq!(q["mcp_server_id"], everything.id.to_string());
    assert_eq!(q["mcp_session_id"], start.id);
    assert_eq!(q["flow_type"], "chat");
    let session_id: Uuid = start.id.parse().unwrap();

    let instances = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances;
    assert_eq!(instances.len(), 1);
    let instance = &instances[0];
    assert_eq!(instance.session_id, session_id);
    assert_eq!(instance.server_id, everything.id);
    assert_eq!(instance.name, "Everything");
    assert_eq!(instance.status, "active");
    let servers = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    assert_eq!(servers[0].server_instance_count, 1);

    // Rename.
    let renamed = owner
        .client
        .mcp_update_instance()
        .org_id(org)
        .instance_id(instance.id)
        .body(InstanceRename::builder().name("  My tools  "))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.name, "My tools");
    let (status, code) = raw(
        &cx.base_url,
        Some(&owner.token),
        Method::PUT,
        "/api/mcp/instance",
        &[
            ("org_id", org.to_string()),
            ("instance_id", instance.id.to_string()),
        ],
        Some(json!({"name": "   "})),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_name"));

    // Gateway URLs: a fresh secret each time.
    let gen_url = || async {
        owner
            .client
            .mcp_generate_url()
            .org_id(org)
            .body(
                GenerateUrl::builder()
                    .server_id(everything.id)
                    .session_id(session_id),
            )
            .send()
            .await
            .unwrap()
            .into_inner()
    };
    let first = gen_url().await;
    let second = gen_url().await;
    assert_eq!(first.status, "active");
    assert!(
        first
            .mcp_url
            .starts_with(&format!("{API_PUBLIC}/api/mcp/gateway/"))
    );
    assert_ne!(first.mcp_url, second.mcp_url);
    // The gateway URL works from an independent MCP client (rmcp over
    // streamable HTTP); the replaced URL no longer does.
    let gateway = second.mcp_url.replacen(API_PUBLIC, &cx.base_url, 1);
    let through = client
        .list_tools(&gateway, None)
        .await
        .expect("tools via the gateway");
    assert!(through.iter().any(|t| t.name == "echo"));
    let mut args = serde_json::Map::new();
    args.insert("message".into(), json!("through the gateway"));
    let out = client
        .call_tool(&gateway, None, "echo", args)
        .await
        .expect("echo via the gateway");
    assert!(out.result.to_string().contains("through the gateway"));
    let stale = first.mcp_url.replacen(API_PUBLIC, &cx.base_url, 1);
    assert!(client.list_tools(&stale, None).await.is_err());
    // The gateway secrets used above are long-lived credentials: the
    // request log has the gateway's path, never a secret.
    // (The log is written asynchronously: wait for the lines.)
    let started = std::time::Instant::now();
    let log = loop {
        let log = std::fs::read_to_string(&cx.log_path).unwrap();
        if log.contains("/api/mcp/gateway/[redacted]")
            || started.elapsed() > Duration::from_secs(10)
        {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        log.contains("/api/mcp/gateway/[redacted]"),
        "gateway requests not logged"
    );
    for url in [&first.mcp_url, &second.mcp_url] {
        let secret = url.rsplit('/').next().unwrap();
        assert!(!log.contains(secret), "a gateway secret reached the log");
    }
    // Or the instance id with the user's own bearer token.
    let by_id = format!("{}/api/mcp/gateway/{}", cx.base_url, instance.id);
    let through = client
        .list_tools(&by_id, Some(&owner.token))
        .await
        .expect("tools via the gateway with the user's token");
    assert!(through.iter().any(|t| t.name == "echo"));
    assert!(client.list_tools(&by_id, None).await.is_err());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}});
    let id_path = format!("/api/mcp/gateway/{}", instance.id);
    let (s, c) = raw(
        &cx.base_url,
        Some("not-a-token"),
        Method::POST,
        &id_path,
        &[],
        Some(init.clone()),
    )
    .await;
    assert_eq!((s, c.as_str()), (401, "invalid_token"));

    // Nobody else sees or touches the instance: another member of the
    // organization, and another organization's member with their own org.
    let colleague = cx.user("mcp-colleague").await;
    let member_role = owner.role_id(org, "member").await;
    owner.add_member(org, colleague.id, member_role).await;
    let stranger = cx.user("mcp-stranger").await;
    let stranger_org = stranger.personal_org().await;
    for (user, in_org) in [(&colleague, org), (&stranger, stranger_org)] {
        let listed = user
            .client
            .mcp_list_instances()
            .org_id(in_org)
            .send()
            .await
            .unwrap()
            .into_inner()
            .instances;
        assert!(listed.is_empty());
        let (s, c) = error_of(
            user.client
                .mcp_update_instance()
                .org_id(in_org)
                .instance_id(instance.id)
                .body(InstanceRename::builder().name("mine"))
                .send()
                .await,
        );
        assert_eq!((s, c.as_str()), (404, "not_found"));
        let (s, c) = error_of(
            user.client
                .mcp_delete_instance()
                .org_id(in_org)
                .instance_id(instance.id)
                .send()
                .await,
        );
        assert_eq!((s, c.as_str()), (404, "not_found"));
        let (s, c) = error_of(
            user.client
                .mcp_generate_url()
                .org_id(in_org)
                .body(
                    GenerateUrl::builder()
                        .server_id(everything.id)
                        .session_id(session_id),
                )
                .send()
                .await,
        );
        assert_eq!((s, c.as_str()), (404, "not_found"));
        let (s, c) = raw(
            &cx.base_url,
            Some(&user.token),
            Method::POST,
            &id_path,
            &[],
            Some(init.clone()),
        )
        .await;
        assert_eq!((s, c.as_str()), (404, "not_found"));
    }
    // The stranger cannot use the owner's organization at all.
    let (s, _) = error_of(
        stranger
            .client
            .mcp_list_instances()
            .org_id(org)
            .send()
            .await,
    );
    assert_eq!(s, 403);

    // An unknown server.
    let (s, c) = error_of(
        owner
            .client
            .mcp_connect_account()
            .org_id(org)
            .body(ConnectAccount::builder().server_id(Uuid::new_v4()))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (404, "not_found"));

    // With the peer gone the tools still come from the database cache.
    drop(peer);
    let again = owner
        .client
        .mcp_server_with_tools()
        .org_id(org)
        .server_id(everything.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.tools, with_tools.tools);

    // Delete: gone, and a second delete is 404.
    let deleted = owner
        .client
        .mcp_delete_instance()
        .org_id(org)
        .instance_id(instance.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(deleted.success);
    let left: i64 = cx
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM mcp_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    let (s, c) = error_of(
        owner
            .client
            .mcp_delete_instance()
            .org_id(org)
            .instance_id(instance.id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (404, "not_found"));
    let path = reqwest::Url::parse(&gateway).unwrap().path().to_string();
    let (s, c) = raw(
        &cx.base_url,
        None,
        Method::POST,
        &path,
        &[],
        Some(json!({})),
    )
    .await;
    assert_eq!((s, c.as_str()), (404, "not_found"));
    cx.teardown().await;
}

#[tokio::test]
async fn mcp_server_ids_are_stable_and_unreachable_servers_are_502() {
    // Nothing listens on port 9 of 127.0.0.1.
    let dead = server("Dead", "dead", "http://127.0.0.1:9/mcp", McpAuth::None);
    let cx = context(
        "mcp_server_ids_are_stable_and_unreachable_servers_are_502",
        vec![dead.clone()],
        10,
    )
    .await;
    let owner = cx.user("mcp-dead").await;
    let org = owner.personal_org().await;
    let list = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    let id = list[0].id;
    let (s, c) = error_of(
        owner
            .client
            .mcp_server_with_tools()
            .org_id(org)
            .server_id(id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (502, "mcp_server_unavailable"));
    // A second instance on the same database keeps the id.
    let second = cx.second_instance(|c| c.mcp_servers = vec![dead]).await;
    let row: Uuid = cx
        .db()
        .await
        .query_one("SELECT id FROM mcp_servers WHERE name = 'Dead'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(row, id);
    drop(second);
    cx.teardown().await;
}

#[tokio::test]
async fn mcp_sessions_quota_is_402() {
    let peer = Everything::start().await;
    let cx = context(
        "mcp_sessions_quota_is_402",
        vec![server("Everything", "everything", &peer.url, McpAuth::None)],
        1,
    )
    .await;
    let owner = cx.user("mcp-quota").await;
    let org = owner.personal_org().await;
    let id = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    let connect = || async {
        owner
            .client
            .mcp_connect_account()
            .org_id(org)
            .body(ConnectAccount::builder().server_id(id))
            .send()
            .await
    };
    connect().await.unwrap();
    let (s, c) = error_of(connect().await);
    assert_eq!((s, c.as_str()), (402, "mcp_sessions_quota_exceeded"));
    // Deleting the instance frees the slot.
    let instance = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances[0]
        .id;
    owner
        .client
        .mcp_delete_instance()
        .org_id(org)
        .instance_id(instance)
        .send()
        .await
        .unwrap();
    connect().await.unwrap();
    // A bad flow_type.
    let (status, code) = raw(
        &cx.base_url,
        Some(&owner.token),
        Method::POST,
        "/api/mcp/connect_account",
        &[("org_id", org.to_string())],
        Some(json!({"server_id": id, "flow_type": "no spaces"})),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_flow_type"));
    cx.teardown().await;
}

#[tokio::test]
async fn mcp_callback_with_a_bad_state_redirects_with_an_error() {
    let cx = context(
        "mcp_callback_with_a_bad_state_redirects_with_an_error",
        vec![],
        10,
    )
    .await;
    let http = workspace_tests::browser();
    for query in [vec![("state", "forged"), ("code", "x")], vec![]] {
        let response = http
            .get(format!("{}/api/mcp/callback", cx.base_url))
            .query(&query)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 303);
        let location = response.headers()["location"].to_str().unwrap().to_string();
        assert!(location.starts_with(&format!("{FRONTEND}/mcp/callback?")));
        assert_eq!(query_of(&location)["error"], "invalid_state");
    }
    cx.teardown().await;
}

#[tokio::test]
async fn mcp_oauth_discovery_registration_pkce_and_callback() {
    let peer = MockOauth::start(API_PUBLIC).await;
    let mcp_url = format!("{}/mcp", peer.base);
    let cx = context(
        "mcp_oauth_discovery_registration_pkce_and_callback",
        vec![server("Mock", "mock", &mcp_url, McpAuth::Oauth)],
        10,
    )
    .await;
    let owner = cx.user("mcp-oauth").await;
    let org = owner.personal_org().await;
    let id = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;

    // The endpoint really is protected: the catalog cannot list its tools
    // before the caller has connected.
    let client = workspace_server::mcp::RmcpClient {
        timeout: Duration::from_secs(20),
        log: slog::Logger::root(slog::Discard, slog::o!()),
    };
    assert!(matches!(
        client.list_tools(&mcp_url, None).await,
        Err(workspace_server::mcp::McpError::Unauthorized(_))
    ));
    let (s, c) = error_of(
        owner
            .client
            .mcp_server_with_tools()
            .org_id(org)
            .server_id(id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (502, "mcp_server_unavailable"));

    // Start: discovery, dynamic registration, PKCE S256, state.
    let start = owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(
            ConnectAccount::builder()
                .server_id(id)
                .flow_type(Some("settings".parse::<ConnectAccountFlowType>().unwrap())),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(start.status, "pending");
    assert_eq!(start.connection_data.auth_config, "oauth2");
    assert!(
        start
            .redirect_url
            .starts_with(&format!("{}/authorize?", peer.base))
    );
    let q = query_of(&start.redirect_url);
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["redirect_uri"], format!("{API_PUBLIC}/api/mcp/callback"));
    assert!(!q["client_id"].is_empty());
    assert!(q["state"].len() >= 16);
    let session_id: Uuid = start.id.parse().unwrap();
    // The registration is kept (sealed) for the next connection.
    let clients: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM mcp_oauth_clients", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(clients, 1);

    // The authorization server approves and sends the browser back.
    let http = workspace_tests::browser();
    let approved = http.get(&start.redirect_url).send().await.unwrap();
    assert_eq!(approved.status().as_u16(), 302);
    let back = approved.headers()["location"].to_str().unwrap().to_string();
    assert!(back.starts_with(&format!("{API_PUBLIC}/api/mcp/callback?")));
    // `api_public_url` is a name for this test server.
    let callback = back.replacen(API_PUBLIC, &cx.base_url, 1);
    let landed = http.get(&callback).send().await.unwrap();
    assert_eq!(landed.status().as_u16(), 303);
    let location = landed.headers()["location"].to_str().unwrap().to_string();
    let q = query_of(&location);
    assert!(location.starts_with(&format!("{FRONTEND}/mcp/callback?")));
    assert_eq!(q["mcp_server_id"], id.to_string());
    assert_eq!(q["mcp_session_id"], session_id.to_string());
    assert_eq!(q["flow_type"], "settings");
    assert!(!q.contains_key("error"));

    // Active, with its instance; the tokens are sealed at rest.
    let instances = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances;
    assert_eq!(instances.len(), 1);
    assert_eq!(instances[0].session_id, session_id);
    assert_eq!(instances[0].status, "active");
    let sealed: Vec<u8> = cx
        .db()
        .await
        .query_one(
            "SELECT tokens_sealed FROM mcp_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        !sealed
            .windows(MOCK_ACCESS_TOKEN.len())
            .any(|w| w == MOCK_ACCESS_TOKEN.as_bytes())
    );
    // The token the exchange obtained opens the protected MCP endpoint.
    let tools = client
        .list_tools(&mcp_url, Some(MOCK_ACCESS_TOKEN))
        .await
        .expect("tools with the token");
    assert!(tools.iter().any(|t| t.name == "echo"));

    // Now the caller's token lists the catalog's tools.
    let listed = owner
        .client
        .mcp_server_with_tools()
        .org_id(org)
        .server_id(id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(listed.tools.iter().any(|t| t.slug == "mock_echo"));

    // Through the gateway: the user's token is added by the service.
    let url = owner
        .client
        .mcp_generate_url()
        .org_id(org)
        .body(GenerateUrl::builder().server_id(id).session_id(session_id))
        .send()
        .await
        .unwrap()
        .into_inner()
        .mcp_url;
    let gateway = url.replacen(API_PUBLIC, &cx.base_url, 1);
    let via = client
        .list_tools(&gateway, None)
        .await
        .expect("tools via the gateway");
    assert!(via.iter().any(|t| t.name == "echo"));
    // The provider expires the access token: a 401 refreshes silently and
    // the call goes through with the new token.
    let control = workspace_tests::http();
    control
        .post(format!("{}/oauth/expire", peer.base))
        .json(&json!({"token": MOCK_ACCESS_TOKEN}))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    assert!(
        client
            .list_tools(&mcp_url, Some(MOCK_ACCESS_TOKEN))
            .await
            .is_err()
    );
    let via = client
        .list_tools(&gateway, None)
        .await
        .expect("tools after a silent refresh");
    assert!(via.iter().any(|t| t.name == "echo"));
    let sealed_after: Vec<u8> = cx
        .db()
        .await
        .query_one(
            "SELECT tokens_sealed FROM mcp_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_ne!(sealed_after, sealed, "the refreshed tokens are stored");
    // The provider revokes the grant: the instance needs a new
    // authorization instead of failing silently.
    control
        .post(format!("{}/oauth/revoke", peer.base))
        .json(&json!({"refresh_token": "mcp-refresh-001"}))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    let path = reqwest::Url::parse(&gateway).unwrap().path().to_string();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}});
    let (s, c) = raw(&cx.base_url, None, Method::POST, &path, &[], Some(init)).await;
    assert_eq!((s, c.as_str()), (409, "mcp_instance_not_active"));
    let status = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances[0]
        .status
        .clone();
    assert_eq!(status, "needs_reauth");

    // Replaying the callback creates nothing.
    let replay = http.get(&callback).send().await.unwrap();
    assert_eq!(replay.status().as_u16(), 303);
    let location = replay.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(query_of(&location)["error"], "invalid_state");
    let count: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM mcp_instances", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 1);

    // A provider error fails the pending session and redirects with it.
    let start = owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(id))
        .send()
        .await
        .unwrap()
        .into_inner();
    let state = query_of(&start.redirect_url)["state"].clone();
    let denied = http
        .get(format!("{}/api/mcp/callback", cx.base_url))
        .query(&[("error", "access_denied"), ("state", state.as_str())])
        .send()
        .await
        .unwrap();
    let location = denied.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(query_of(&location)["error"], "access_denied");
    let status: String = cx
        .db()
        .await
        .query_one(
            "SELECT status FROM mcp_sessions WHERE id = $1",
            &[&start.id.parse::<Uuid>().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "failed");
    // Still one registration: the stored client was reused.
    let clients: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM mcp_oauth_clients", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(clients, 1);

    // Deleting the instance removes the session and its tokens.
    owner
        .client
        .mcp_delete_instance()
        .org_id(org)
        .instance_id(instances[0].id)
        .send()
        .await
        .unwrap();
    let left: i64 = cx
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM mcp_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    cx.teardown().await;
}

/// Posts to the playground; the status and the stream's items.
/// The servers Intelligent Discovery recommends for `content`.
async fn discovered(cx: &TestContext, token: &str, org: Uuid, content: &str) -> Vec<Uuid> {
    let (status, items) = playground(cx, token, org, json!({ "content": content })).await;
    assert_eq!(status, 200, "{items:?}");
    items[0]["mcp"]["server_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().parse::<Uuid>().unwrap())
        .collect()
}

async fn playground(
    cx: &TestContext,
    token: &str,
    org: Uuid,
    body: serde_json::Value,
) -> (u16, Vec<serde_json::Value>) {
    let response = workspace_tests::http()
        .post(format!("{}/api/mcp_playground/chat", cx.base_url))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(token)
        .json(&body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    if status != 200 {
        return (status, vec![response.json().await.unwrap_or_default()]);
    }
    (status, workspace_tests::sse::json_of(response).await)
}

#[tokio::test]
async fn mcp_playground_discovers_calls_tools_and_streams_errors() {
    let peer = Everything::start().await;
    let cx = context(
        "mcp_playground_discovers_calls_tools_and_streams_errors",
        vec![
            server("Everything", "everything", &peer.url, McpAuth::None),
            server("Dead", "dead", "http://127.0.0.1:9/mcp", McpAuth::None),
        ],
        10,
    )
    .await;
    let owner = cx.user("mcp-playground").await;
    let org = owner.personal_org().await;
    let servers = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    let everything = servers.iter().find(|s| s.name == "Everything").unwrap().id;
    // Caches the tools, which discovery ranks by.
    owner
        .client
        .mcp_server_with_tools()
        .org_id(org)
        .server_id(everything)
        .send()
        .await
        .unwrap();

    // Intelligent Discovery: the server whose tools match is recommended.
    let (status, items) = playground(
        &cx,
        &owner.token,
        org,
        json!({"content": "Please echo this message back"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0]["mcp"]["server_ids"], json!([everything]));
    assert_eq!(items[0]["message"], "");
    assert!(items[0]["tool"].is_null());
    assert_eq!(items[1], json!({"message": "DONE", "tool": null}));

    // Direct mode: the model calls the instance's tool over MCP.
    owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(everything))
        .send()
        .await
        .unwrap();
    let instance = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances[0]
        .id;
    let (status, items) = playground(
        &cx,
        &owner.token,
        org,
        json!({
            "content": "/tool everything_echo {\"message\": \"hi playground\"}",
            "mcp_instance_ids": [instance],
            "model": "offline-dev-model",
        }),
    )
    .await;
    assert_eq!(status, 200);
    let started = &items[0]["tool"];
    assert_eq!(started["name"], "everything_echo");
    assert_eq!(started["input"], json!({"message": "hi playground"}));
    assert!(started["output"].is_null());
    assert_eq!(items[0]["message"], "");
    let done = &items[1]["tool"];
    assert_eq!(done["id"], started["id"]);
    assert_eq!(done["successful"], true);
    assert!(done["error"].is_null());
    assert!(
        done["output"].to_string().contains("hi playground"),
        "{done}"
    );
    let text: String = items[2..items.len() - 1]
        .iter()
        .map(|i| i["message"].as_str().unwrap().to_string())
        .collect();
    assert!(text.contains("hi playground"), "{text}");
    assert_eq!(
        items.last().unwrap(),
        &json!({"message": "DONE", "tool": null})
    );

    // Validation before the stream.
    let (status, body) = playground(
        &cx,
        &owner.token,
        org,
        json!({"content": "x", "mcp_instance_ids": [instance], "model": "llama-3"}),
    )
    .await;
    assert_eq!(
        (status, body[0]["error_code"].as_str()),
        (400, Some("invalid_model"))
    );
    let (status, body) = playground(
        &cx,
        &owner.token,
        org,
        json!({"content": "x", "mcp_instance_ids": [Uuid::new_v4()]}),
    )
    .await;
    assert_eq!(
        (status, body[0]["error_code"].as_str()),
        (404, Some("not_found"))
    );

    // The server is gone: an error item ends the stream (no hang).
    drop(peer);
    let (status, items) = playground(
        &cx,
        &owner.token,
        org,
        json!({"content": "/tool everything_echo {}", "mcp_instance_ids": [instance],
               "model": "offline-dev-model"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(
        items[0]["error"].as_str().unwrap().contains("MCP"),
        "{items:?}"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn mcp_oauth_with_a_preregistered_confidential_client() {
    let peer = MockOauth::start(API_PUBLIC).await;
    let mcp_url = format!("{}/mcp", peer.base);
    let mut entry = server("Pre", "pre", &mcp_url, McpAuth::Oauth);
    entry.client_id = Some("preregistered".into());
    entry.client_secret = Some("preregistered-secret".into());
    entry.scopes = vec!["mcp:read".into(), "mcp:tools".into()];
    let cx = context(
        "mcp_oauth_with_a_preregistered_confidential_client",
        vec![entry],
        10,
    )
    .await;
    let owner = cx.user("mcp-prereg").await;
    let org = owner.personal_org().await;
    let id = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    let start = owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(id))
        .send()
        .await
        .unwrap()
        .into_inner();
    let q = query_of(&start.redirect_url);
    assert_eq!(q["client_id"], "preregistered");
    assert_eq!(q["scope"], "mcp:read mcp:tools");
    let http = workspace_tests::browser();
    let approved = http.get(&start.redirect_url).send().await.unwrap();
    let back = approved.headers()["location"].to_str().unwrap().to_string();
    let landed = http
        .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
        .send()
        .await
        .unwrap();
    let location = landed.headers()["location"].to_str().unwrap().to_string();
    assert!(!query_of(&location).contains_key("error"), "{location}");
    // No dynamic registration happened.
    let clients: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM mcp_oauth_clients", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(clients, 0);
    let tools = owner
        .client
        .mcp_server_with_tools()
        .org_id(org)
        .server_id(id)
        .send()
        .await
        .unwrap()
        .into_inner()
        .tools;
    assert!(tools.iter().any(|t| t.name == "echo"));
    cx.teardown().await;
}

/// Against a strict authorization server that accepts exactly one
/// token-endpoint client authentication method and rotates refresh tokens
/// (`workspace_tests::strict_oauth`), for each method: the code exchange,
/// the refresh and the RFC 7009 revocation authenticate with the declared
/// method; two concurrent requests with an expiring access token, one per
/// server instance on the same database, make exactly one refresh request
/// (the PostgreSQL lock) and both use the new token; deleting the instance
/// revokes the refresh token with its `token_type_hint`.
#[tokio::test]
async fn mcp_token_auth_methods_refresh_lock_and_revocation() {
    use workspace_tests::strict_oauth::StrictOauth;
    for method in ["client_secret_basic", "client_secret_post", "none"] {
        // The exchange's tokens expire in 30 s: every use refreshes first
        // (within a minute of expiry); refreshed ones last an hour.
        let peer = StrictOauth::start(method, 30).await;
        let servers = vec![server("Strict", "strict", &peer.mcp_url(), McpAuth::Oauth)];
        let adjust = |c: &mut workspace_server::config::Config| {
            c.mcp.frontend_url = FRONTEND.to_string();
            c.mcp.api_public_url = API_PUBLIC.to_string();
            c.mcp_servers = servers.clone();
            c.features.mcp_sessions = 10;
        };
        let cx = TestContext::with_config(&format!("mcp_token_auth_{method}"), adjust).await;
        let second = cx.second_instance(adjust).await;
        let owner = cx.user("mcp-strict").await;
        let org = owner.personal_org().await;
        let id = owner
            .client
            .mcp_list_servers()
            .org_id(org)
            .send()
            .await
            .unwrap()
            .into_inner()
            .servers[0]
            .id;
        let start = owner
            .client
            .mcp_connect_account()
            .org_id(org)
            .body(ConnectAccount::builder().server_id(id))
            .send()
            .await
            .unwrap()
            .into_inner();
        let (_, secret) = peer.client().expect("registered");
        assert_eq!(secret.is_some(), method != "none", "{method}");
        let back = peer.approve(&start.redirect_url).await;
        let http = workspace_tests::browser();
        let landed = http
            .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
            .send()
            .await
            .unwrap();
        let location = landed.headers()["location"].to_str().unwrap().to_string();
        assert!(
            !query_of(&location).contains_key("error"),
            "{method}: {location} {:?}",
            peer.seen()
        );
        assert_eq!(peer.seen().exchanges, 1, "{method}");
        let session_id: Uuid = start.id.parse().unwrap();
        let url = owner
            .client
            .mcp_generate_url()
            .org_id(org)
            .body(GenerateUrl::builder().server_id(id).session_id(session_id))
            .send()
            .await
            .unwrap()
            .into_inner()
            .mcp_url;
        let path = reqwest::Url::parse(&url).unwrap().path().to_string();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}});
        let post = |base: String| {
            let (path, init) = (path.clone(), init.clone());
            async move {
                workspace_tests::http()
                    .post(format!("{base}{path}"))
                    .header("accept", "application/json, text/event-stream")
                    .json(&init)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        let (a, b) = tokio::join!(
            post(cx.base_url.clone()),
            post(format!("http://{}", second.local_addr()))
        );
        let seen = peer.seen();
        assert_eq!((a, b), (200, 200), "{method}: {seen:?}");
        assert!(seen.rejected.is_empty(), "{method}: {seen:?}");
        assert_eq!(
            seen.refreshes, 1,
            "{method}: one refresh for both: {seen:?}"
        );
        // Both requests carried the refreshed token (the exchange issued
        // `at-2`, the refresh `at-3`).
        assert_eq!(seen.bearers, vec!["at-3", "at-3"], "{method}");
        // Fresh now: no more refreshes.
        assert_eq!(post(cx.base_url.clone()).await, 200);
        assert_eq!(peer.seen().refreshes, 1, "{method}");

        // Deleting the instance revokes the (rotated) refresh token.
        let instance = owner
            .client
            .mcp_list_instances()
            .org_id(org)
            .send()
            .await
            .unwrap()
            .into_inner()
            .instances[0]
            .id;
        owner
            .client
            .mcp_delete_instance()
            .org_id(org)
            .instance_id(instance)
            .send()
            .await
            .unwrap();
        let seen = peer.seen();
        assert_eq!(
            seen.revocations,
            vec![("rt-3".to_string(), Some("refresh_token".to_string()))],
            "{method}: {seen:?}"
        );
        assert!(seen.rejected.is_empty(), "{method}: {seen:?}");
        second.shutdown().await.unwrap();
        cx.teardown().await;
    }
}

/// Intelligent Discovery by meaning with the local embedding model: a
/// request sharing no word with any server's name or tools still ranks the
/// right server first; an unrelated request recommends nothing.
#[tokio::test]
async fn mcp_discovery_ranks_by_meaning() {
    workspace_tests::ensure_local_model().await;
    let cx = context(
        "mcp_discovery_ranks_by_meaning",
        vec![
            server(
                "Weather",
                "weather",
                "http://127.0.0.1:9/weather",
                McpAuth::None,
            ),
            server(
                "Calendar",
                "calendar",
                "http://127.0.0.1:9/calendar",
                McpAuth::None,
            ),
            server("Files", "files", "http://127.0.0.1:9/files", McpAuth::None),
        ],
        10,
    )
    .await;
    let owner = cx.user("mcp-discovery").await;
    let org = owner.personal_org().await;
    let servers = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    let id = |name: &str| servers.iter().find(|s| s.name == name).unwrap().id;
    // The servers are not reachable: their tool lists are cached as if
    // they had been listed.
    let tools = [
        (
            "Weather",
            json!([{"name": "get_forecast", "description": "Returns the forecast for a city: temperature, precipitation and wind.", "input_schema": {"type": "object"}}]),
        ),
        (
            "Calendar",
            json!([{"name": "create_event", "description": "Schedules an appointment in the user's agenda.", "input_schema": {"type": "object"}}]),
        ),
        (
            "Files",
            json!([{"name": "read_file", "description": "Reads a document from the drive.", "input_schema": {"type": "object"}}]),
        ),
    ];
    let db = cx.db().await;
    for (name, tools) in tools {
        db.execute(
            "INSERT INTO mcp_tool_cache (server_id, url, tools) \
             SELECT id, url, $2 FROM mcp_servers WHERE name = $1",
            &[&name, &tools],
        )
        .await
        .unwrap();
    }
    let ranked = |content: &'static str| discovered(&cx, &owner.token, org, content);
    // No shared words (3+ letters) with any server: word matching would
    // recommend nothing. The first request loads the model; on a busy
    // machine it may take longer than the embedding budget and be answered
    // by words while the model finishes loading.
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let rain = loop {
        let rain = ranked("Will it rain in Paris tomorrow?").await;
        if !rain.is_empty() || std::time::Instant::now() > deadline {
            break rain;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert_eq!(rain.first(), Some(&id("Weather")), "{rain:?}");
    let meeting = ranked("Book a meeting with Bob next Tuesday").await;
    assert_eq!(meeting.first(), Some(&id("Calendar")), "{meeting:?}");
    let unrelated = ranked("Bonjour").await;
    assert!(unrelated.is_empty(), "{unrelated:?}");
    cx.teardown().await;
}

/// Pagination hints: a tool output's `nextPageToken` is remembered per
/// (user, instance, tool) and a later request asking for more continues
/// from it; the last page forgets it.
#[tokio::test]
async fn mcp_playground_remembers_pagination_hints() {
    use workspace_tests::mcp_pager::{McpPager, PAGER_ESTIMATE};
    let pager = McpPager::start().await;
    let cx = context(
        "mcp_playground_remembers_pagination_hints",
        vec![server("Pager", "pager", &pager.url(), McpAuth::None)],
        10,
    )
    .await;
    let owner = cx.user("mcp-pager").await;
    let org = owner.personal_org().await;
    let id = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(id))
        .send()
        .await
        .unwrap();
    let instance = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances[0]
        .id;
    let db = cx.db().await;
    let hint = || async {
        db.query_opt(
            "SELECT tool, next_page_token, result_size_estimate FROM mcp_pagination_hints \
             WHERE instance_id = $1",
            &[&instance],
        )
        .await
        .unwrap()
        .map(|r| {
            (
                r.get::<_, String>(0),
                r.get::<_, String>(1),
                r.get::<_, Option<i64>>(2),
            )
        })
    };
    let call = |content: &'static str| {
        let (cx, token) = (&cx, owner.token.clone());
        async move {
            let (status, items) = playground(
                cx,
                &token,
                org,
                json!({"content": content, "mcp_instance_ids": [instance],
                       "model": "offline-dev-model"}),
            )
            .await;
            assert_eq!(status, 200, "{items:?}");
            let done = items
                .iter()
                .find(|i| i["tool"]["successful"] == true)
                .unwrap_or_else(|| panic!("a completed tool call: {items:?}"));
            done["tool"]["output"].clone()
        }
    };

    // The first page: its token is remembered.
    let output = call("/tool pager_list_messages {}").await;
    assert_eq!(output["structuredContent"]["nextPageToken"], "page-2");
    assert_eq!(
        hint().await,
        Some((
            "list_messages".into(),
            "page-2".into(),
            Some(PAGER_ESTIMATE)
        ))
    );
    // Asking for more: the model calls the tool without a pageToken and
    // the remembered one is filled in.
    let output = call("/tool pager_list_messages {\"label\": \"more\"}").await;
    assert_eq!(output["structuredContent"]["messages"], json!(["m3", "m4"]));
    assert_eq!(
        pager.calls().last().unwrap(),
        &json!({"label": "more", "pageToken": "page-2"})
    );
    assert_eq!(hint().await.unwrap().1, "page-3");
    let output = call("/tool pager_list_messages {\"label\": \"more\"}").await;
    assert_eq!(output["structuredContent"]["messages"], json!(["m5"]));
    // The last page forgets the hint.
    assert_eq!(hint().await, None);
    // Without a word asking for more, nothing is filled in.
    call("/tool pager_list_messages {}").await;
    call("/tool pager_list_messages {\"label\": \"inbox\"}").await;
    assert_eq!(pager.calls().last().unwrap(), &json!({"label": "inbox"}));
    assert_eq!(hint().await.unwrap().1, "page-2");
    cx.teardown().await;
}

#[tokio::test]
async fn mcp_discovery_asks_a_configured_model_first() {
    use workspace_server::config::{ModelConfig, ProviderKind};
    use workspace_tests::fake_provider::{FakeProvider, Reply};
    let fake = FakeProvider::with_default(Reply::openai_text(&["[2]"])).await;
    let base_url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("mcp_discovery_asks_a_configured_model_first", |c| {
        c.mcp.frontend_url = FRONTEND.to_string();
        c.mcp.api_public_url = API_PUBLIC.to_string();
        c.mcp_servers = vec![
            server(
                "Weather",
                "weather",
                "http://127.0.0.1:9/weather",
                McpAuth::None,
            ),
            server(
                "Calendar",
                "calendar",
                "http://127.0.0.1:9/calendar",
                McpAuth::None,
            ),
            server("Files", "files", "http://127.0.0.1:9/files", McpAuth::None),
        ];
        c.models.push(ModelConfig {
            name: "gpt-rank".into(),
            provider: Some(ProviderKind::Openai),
            upstream_model: None,
            base_url: Some(base_url),
            api_key: Some("rank-key".into()),
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
    let owner = cx.user("mcp-model-discovery").await;
    let org = owner.personal_org().await;
    let servers = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers;
    let id = |name: &str| servers.iter().find(|s| s.name == name).unwrap().id;
    cx.db()
        .await
        .execute(
            "INSERT INTO mcp_tool_cache (server_id, url, tools) \
             SELECT id, url, $1 FROM mcp_servers WHERE name = 'Weather'",
            &[&json!([{"name": "get_forecast", "description": "Returns the forecast for a city.", "input_schema": {"type": "object"}}])],
        )
        .await
        .unwrap();
    let ranked = |content: &'static str| discovered(&cx, &owner.token, org, content);

    // The model (the first configured one) gets the numbered catalog and
    // the message; its pick is the recommendation, whatever words say.
    let picked = ranked("Which one reads my weather documents?").await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let messages = requests[0].messages();
    assert_eq!(
        messages[1],
        (
            "user".to_string(),
            "Which one reads my weather documents?".to_string()
        )
    );
    let system = &messages[0].1;
    assert!(
        system.contains("get forecast: Returns the forecast for a city."),
        "{system}"
    );
    let second = system
        .lines()
        .find_map(|l| l.strip_prefix("2: "))
        .expect("a numbered catalog");
    let name = second.split(' ').next().unwrap();
    assert_eq!(picked, vec![id(name)], "{system}");

    // `[]`: nothing is recommended.
    fake.set_default(Reply::openai_text(&["[]"]));
    assert_eq!(
        ranked("Which one reads my weather documents?").await,
        Vec::<Uuid>::new()
    );

    // An answer that is not a list of catalog numbers, or a failing model:
    // ranked by meaning or words instead (Weather shares "weather").
    fake.set_default(Reply::openai_text(&["The weather server, I think."]));
    assert_eq!(
        ranked("weather forecast for Oslo").await.first(),
        Some(&id("Weather"))
    );
    fake.set_default(Reply::openai_text(&["[7]"]));
    assert_eq!(
        ranked("weather forecast for Oslo").await.first(),
        Some(&id("Weather"))
    );
    fake.set_default(Reply::error(400, "bad request"));
    assert_eq!(
        ranked("weather forecast for Oslo").await.first(),
        Some(&id("Weather"))
    );
    cx.teardown().await;
}

/// Where the spec lists no `org_id` (the MCP catalog and instances, the
/// playground, bulk chat deletion), it is optional: without it the caller's
/// personal organization is used, with it the given one. An
/// unauthenticated call is `401`, never a `400` about a missing parameter.
#[tokio::test]
async fn org_id_is_optional_where_the_spec_lists_none() {
    let cx = context("mcp_personal_org", Vec::new(), 5).await;
    let ada = cx.user("personal-ada").await;
    let bob = cx.user("personal-bob").await;
    let personal = ada.personal_org().await;
    let nil = Uuid::nil().to_string();
    let id_only = |name: &'static str| vec![(name, nil.clone())];
    // (method, path, query, body)
    type Call<'a> = (
        Method,
        &'a str,
        Vec<(&'a str, String)>,
        Option<serde_json::Value>,
    );
    let calls: Vec<Call> = vec![
        (Method::GET, "/api/mcp/list_servers", vec![], None),
        (
            Method::GET,
            "/api/mcp/server_with_tools",
            id_only("server_id"),
            None,
        ),
        (
            Method::POST,
            "/api/mcp/connect_account",
            vec![],
            Some(json!({"server_id": nil})),
        ),
        (
            Method::POST,
            "/api/mcp/generate_url",
            vec![],
            Some(json!({"server_id": nil, "session_id": nil})),
        ),
        (
            Method::POST,
            "/api/mcp_playground/chat",
            vec![],
            Some(json!({"content": "hi"})),
        ),
        (
            Method::POST,
            "/api/chat/bulk_delete_sessions",
            vec![],
            Some(json!({"chat_ids": [nil]})),
        ),
        (
            Method::PUT,
            "/api/mcp/instance",
            id_only("instance_id"),
            Some(json!({"name": "x"})),
        ),
        (
            Method::DELETE,
            "/api/mcp/instance",
            id_only("instance_id"),
            None,
        ),
    ];
    for (method, path, query, body) in &calls {
        let (status, code) = raw(
            &cx.base_url,
            None,
            method.clone(),
            path,
            query,
            body.clone(),
        )
        .await;
        assert_eq!(status, 401, "{method} {path} without a token: {code}");
        // Authenticated, without org_id: never a 400 about org_id.
        let (status, code) = raw(
            &cx.base_url,
            Some(&ada.token),
            method.clone(),
            path,
            query,
            body.clone(),
        )
        .await;
        assert!(
            !(status == 400 && code == "invalid_request"),
            "{method} {path} without org_id: {status} {code}"
        );
        assert!(status < 500, "{method} {path}: {status} {code}");
    }

    // The catalog without org_id is the personal organization's.
    let (status, without) = workspace_tests::req(
        &cx.base_url,
        &ada.token,
        Method::GET,
        "/api/mcp/list_servers",
        &[],
        None,
    )
    .await;
    assert_eq!(status, 200, "{without}");
    let (_, with) = workspace_tests::req(
        &cx.base_url,
        &ada.token,
        Method::GET,
        "/api/mcp/list_servers",
        &[("org_id", personal.to_string())],
        None,
    )
    .await;
    assert_eq!(without, with);

    // Bulk deletion without org_id deletes the caller's chats of their
    // personal organization.
    let (status, chat) = workspace_tests::req(
        &cx.base_url,
        &ada.token,
        Method::POST,
        "/api/chat",
        &[("org_id", personal.to_string())],
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 201, "{chat}");
    let (status, deleted) = workspace_tests::req(
        &cx.base_url,
        &ada.token,
        Method::POST,
        "/api/chat/bulk_delete_sessions",
        &[],
        Some(json!({"chat_ids": [chat["id"]]})),
    )
    .await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted["deleted"], 1, "{deleted}");

    // With org_id, the given organization as before: Bob is no member of
    // Ada's.
    let (status, _) = raw(
        &cx.base_url,
        Some(&bob.token),
        Method::GET,
        "/api/mcp/list_servers",
        &[("org_id", personal.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 403);
    cx.teardown().await;
}

/// RFC 9207 against a strict authorization server that announces
/// `authorization_response_iss_parameter_supported` and sends `iss` in its
/// authorization responses: with the right issuer the whole flow works
/// (callback, the gateway used with the user's tokens, a refresh, the
/// revocation on delete); a wrong issuer (a mix-up attack) or a missing one
/// ends at the frontend with `error=issuer_mismatch` and no token
/// exchanged. (The callback dropped `iss`, and every login with such a
/// provider failed with `token_exchange_failed`.)
#[tokio::test]
async fn mcp_oauth_with_issuer_identification() {
    use workspace_tests::strict_oauth::{Iss, StrictOauth};
    for iss in [Iss::Right, Iss::Wrong, Iss::Missing] {
        let peer = StrictOauth::start("client_secret_basic", 30).await;
        peer.identify_issuer(iss);
        let servers = vec![server("Strict", "strict", &peer.mcp_url(), McpAuth::Oauth)];
        let cx = context(&format!("mcp_iss_{iss:?}"), servers, 10).await;
        let owner = cx.user("mcp-iss").await;
        let org = owner.personal_org().await;
        let id = owner
            .client
            .mcp_list_servers()
            .org_id(org)
            .send()
            .await
            .unwrap()
            .into_inner()
            .servers[0]
            .id;
        let start = owner
            .client
            .mcp_connect_account()
            .org_id(org)
            .body(ConnectAccount::builder().server_id(id))
            .send()
            .await
            .unwrap()
            .into_inner();
        let back = peer.approve(&start.redirect_url).await;
        let carried = query_of(&back);
        assert_eq!(carried.contains_key("iss"), iss != Iss::Missing, "{back}");
        let landed = workspace_tests::browser()
            .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
            .send()
            .await
            .unwrap();
        let location = landed.headers()["location"].to_str().unwrap().to_string();
        let landed = query_of(&location);
        if iss != Iss::Right {
            assert_eq!(
                landed.get("error").map(String::as_str),
                Some("issuer_mismatch"),
                "{iss:?}: {location}"
            );
            assert_eq!(peer.seen().exchanges, 0, "{iss:?}: no code exchanged");
            cx.teardown().await;
            continue;
        }
        assert!(
            !landed.contains_key("error"),
            "{location} {:?}",
            peer.seen()
        );
        assert_eq!(peer.seen().exchanges, 1);
        // The gateway, with the user's tokens: the first use refreshes them
        // (the exchanged ones expire in 30 s).
        let session_id: Uuid = start.id.parse().unwrap();
        let url = owner
            .client
            .mcp_generate_url()
            .org_id(org)
            .body(GenerateUrl::builder().server_id(id).session_id(session_id))
            .send()
            .await
            .unwrap()
            .into_inner()
            .mcp_url;
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}});
        let status = workspace_tests::http()
            .post(url.replacen(API_PUBLIC, &cx.base_url, 1))
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap()
            .status();
        let seen = peer.seen();
        assert_eq!(status, 200, "{seen:?}");
        assert_eq!(seen.refreshes, 1, "{seen:?}");
        assert_eq!(seen.bearers, vec!["at-3"], "{seen:?}");
        // Deleting the instance revokes the grant.
        let instance = owner
            .client
            .mcp_list_instances()
            .org_id(org)
            .send()
            .await
            .unwrap()
            .into_inner()
            .instances[0]
            .id;
        owner
            .client
            .mcp_delete_instance()
            .org_id(org)
            .instance_id(instance)
            .send()
            .await
            .unwrap();
        assert_eq!(peer.seen().revocations.len(), 1, "{:?}", peer.seen());
        cx.teardown().await;
    }
}

/// The whole flow against an OpenID-certified authorization server (panva's
/// `oidc-provider`: dynamic registration, PKCE required, resource
/// indicators with JWT access tokens bound to the MCP server's URL, RFC 9207
/// `iss`) in front of an MCP server that verifies every token: connect,
/// sign-in and consent on the provider's own pages, the callback, the
/// server's tools listed with the user's token, a tool called through the
/// gateway URL by an independent MCP client as the user, the refresh of the
/// 30-second tokens, and revocation when the instance is deleted.
#[tokio::test]
async fn mcp_oauth_with_a_certified_provider() {
    use workspace_tests::mcp_peers::OidcMcp;
    let peer = OidcMcp::start().await;
    let servers = vec![server(
        "Certified",
        "certified",
        &peer.mcp_url,
        McpAuth::Oauth,
    )];
    let cx = context("mcp_oauth_certified", servers, 10).await;
    let owner = cx.user("mcp-certified").await;
    let org = owner.personal_org().await;
    let id = owner
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    // Before connecting, the server lists its tools to nobody.
    let (s, c) = error_of(
        owner
            .client
            .mcp_server_with_tools()
            .org_id(org)
            .server_id(id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (502, "mcp_server_unavailable"));

    let start = owner
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(id))
        .send()
        .await
        .unwrap()
        .into_inner();
    let asked = query_of(&start.redirect_url);
    assert!(
        start.redirect_url.starts_with(&peer.issuer),
        "{}",
        start.redirect_url
    );
    assert_eq!(asked.get("resource"), Some(&peer.mcp_url), "RFC 8707");
    assert_eq!(
        asked.get("code_challenge_method").map(String::as_str),
        Some("S256")
    );
    assert_eq!(peer.count("registered").await, 1, "RFC 7591 registration");

    let back = peer.sign_in(&start.redirect_url, "alice").await;
    let carried = query_of(&back);
    assert_eq!(carried.get("iss"), Some(&peer.issuer), "RFC 9207: {back}");
    assert!(carried.contains_key("code"), "{back}");
    let landed = workspace_tests::browser()
        .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
        .send()
        .await
        .unwrap();
    let location = landed.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with(FRONTEND), "{location}");
    assert!(
        !query_of(&location).contains_key("error"),
        "{location}: {:?}",
        peer.events().await
    );
    assert_eq!(peer.count("issued").await, 1, "{:?}", peer.events().await);

    // The tools, listed with the user's token: the access token expires in
    // 30 s, so its first use refreshes it.
    let tools = owner
        .client
        .mcp_server_with_tools()
        .org_id(org)
        .server_id(id)
        .send()
        .await
        .unwrap()
        .into_inner()
        .tools;
    let mut names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["add", "whoami"]);
    assert!(
        peer.count("refreshed").await >= 1,
        "{:?}",
        peer.events().await
    );
    // (The listing asks without a token first: a server may list its tools
    // to anyone.)
    let refused_before = peer.count("mcp_refused").await;

    // A tool called through the gateway URL by an independent MCP client
    // runs as the user who signed in.
    let session_id: Uuid = start.id.parse().unwrap();
    let gateway = owner
        .client
        .mcp_generate_url()
        .org_id(org)
        .body(GenerateUrl::builder().server_id(id).session_id(session_id))
        .send()
        .await
        .unwrap()
        .into_inner()
        .mcp_url
        .replacen(API_PUBLIC, &cx.base_url, 1);
    let client = workspace_server::mcp::RmcpClient {
        timeout: Duration::from_secs(20),
        log: slog::Logger::root(slog::Discard, slog::o!()),
    };
    let out = client
        .call_tool(&gateway, None, "whoami", serde_json::Map::new())
        .await
        .expect("whoami through the gateway");
    assert!(
        out.result.to_string().contains("subject:alice"),
        "{:?}",
        out.result
    );
    let mut args = serde_json::Map::new();
    args.insert("a".into(), json!(2));
    args.insert("b".into(), json!(40));
    let out = client
        .call_tool(&gateway, None, "add", args)
        .await
        .expect("add through the gateway");
    assert!(out.result.to_string().contains("42"), "{:?}", out.result);
    let events = peer.events().await;
    let calls: Vec<_> = events
        .iter()
        .filter(|e| e["kind"] == "call")
        .map(|e| (e["tool"].as_str().unwrap(), e["subject"].as_str().unwrap()))
        .collect();
    assert_eq!(calls, [("whoami", "alice"), ("add", "alice")], "{events:?}");
    // Every token the service sent was accepted: right audience, issuer,
    // signature and scope, refreshed before it expired.
    assert!(
        !events.iter().any(|e| e["kind"] == "grant_error"),
        "{events:?}"
    );
    assert_eq!(
        peer.count("mcp_refused").await,
        refused_before,
        "{events:?}"
    );

    // Deleting the instance revokes the grant at the provider; the gateway
    // URL stops working.
    let instance = owner
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances[0]
        .id;
    owner
        .client
        .mcp_delete_instance()
        .org_id(org)
        .instance_id(instance)
        .send()
        .await
        .unwrap();
    assert_eq!(peer.count("revoked").await, 1, "{:?}", peer.events().await);
    assert!(client.list_tools(&gateway, None).await.is_err());
    cx.teardown().await;
}
