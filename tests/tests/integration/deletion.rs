//! Organizations and accounts that end (issue #34 item 4).
//!
//! Deleting an organization removes its rows from every tenant table (the
//! tables are found in the catalog: every table with an `organization_id`
//! column, and every table whose foreign key points at one) and its files
//! from the store, revokes its MCP grants at the provider and kills its
//! deployment keys at once, while another organization keeps every row and
//! file. The hostile cases: a deletion while the organization's ingestion
//! job and answer streams run on another instance (they stop, and nothing
//! is re-created); a deletion requested on one instance and carried out by
//! another's worker; a deletion whose worker died mid-way (its lease
//! expires and another instance resumes it). Accounts: refused while the
//! only owner of an organization with members; otherwise gone at once
//! (tokens, login) while what other organizations keep stays; the export
//! holds the account's data, page after page.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::types::{
    self, AccountDeleteRequest, ConnectAccount, DeletionState, GenerateUrl, OrgDeleteRequest,
};
use workspace_client::{ByteStream, Client};
use workspace_server::config::Config;
use workspace_server::mcp::config::{McpAuth, McpServerConfig};
use workspace_tests::strict_oauth::StrictOauth;
use workspace_tests::{TEST_PASSWORD, TestContext, TestUser, error_of, resources};

const FRONTEND: &str = "http://frontend.test";
const API_PUBLIC: &str = "http://api.test";
const MODEL: &str = "all-minilm-l6-v2";

/// Fast answers, a file store of the test's own, no ingestion worker.
fn base(c: &mut Config, store: &Path) {
    c.providers.offline_chunk_delay_ms = 0;
    c.storage.local_dir = Some(store.to_path_buf());
    c.kb.workers = 0;
    c.deletion.poll_interval_ms = 100;
}

fn mcp_server(url: &str) -> McpServerConfig {
    McpServerConfig {
        name: "Strict".to_string(),
        toolkit_name: "Strict".to_string(),
        toolkit_slug: "strict".to_string(),
        toolkit_logo: None,
        url: url.to_string(),
        auth: McpAuth::Oauth,
        client_id: None,
        client_secret: None,
        scopes: Vec::new(),
    }
}

async fn count(db: &tokio_postgres::Client, sql: &str, id: Uuid) -> i64 {
    db.query_one(sql, &[&id])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// The rows of `org` in every table: the organization's own row, every
/// table with an `organization_id` column, and every table without one
/// whose (one-column) foreign key points at one of those, counted through
/// that key (`"child via parent"`). All found in the catalog, so a table
/// added later is counted without changing this test.
async fn rows_of(db: &tokio_postgres::Client, org: Uuid) -> BTreeMap<String, i64> {
    let tenant: Vec<String> = db
        .query(
            "SELECT table_name::text FROM information_schema.columns \
             WHERE table_schema = 'public' AND column_name = 'organization_id' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut rows = BTreeMap::new();
    rows.insert(
        "organizations".to_string(),
        count(db, "SELECT count(*) FROM organizations WHERE id = $1", org).await,
    );
    // The deletion's own record outlives the organization by design, and
    // so does the audit log (append-only; its monthly partitions too).
    let tenant: Vec<String> = tenant
        .into_iter()
        .filter(|t| t != "deletion_jobs" && !t.starts_with("audit_events"))
        .collect();
    for table in &tenant {
        let sql = format!("SELECT count(*) FROM {table} WHERE organization_id = $1");
        rows.insert(table.clone(), count(db, &sql, org).await);
    }
    let edges = db
        .query(
            "SELECT c.conrelid::regclass::text, a.attname::text, c.confrelid::regclass::text, \
                    p.attname::text \
             FROM pg_constraint c \
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] \
             JOIN pg_attribute p ON p.attrelid = c.confrelid AND p.attnum = c.confkey[1] \
             WHERE c.contype = 'f' AND cardinality(c.conkey) = 1 ORDER BY 1, 3",
            &[],
        )
        .await
        .unwrap();
    for edge in edges {
        let (child, column, parent, key): (String, String, String, String) =
            (edge.get(0), edge.get(1), edge.get(2), edge.get(3));
        if tenant.contains(&child) || child == "organizations" || !tenant.contains(&parent) {
            continue;
        }
        let sql = format!(
            "SELECT count(*) FROM {child} x JOIN {parent} p ON x.{column} = p.{key} \
             WHERE p.organization_id = $1"
        );
        rows.insert(format!("{child} via {parent}"), count(db, &sql, org).await);
    }
    rows
}

/// The files under `dir`, at any depth.
fn files_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() { files_under(&path) } else { 1 }
        })
        .sum()
}

fn org_folder(store: &Path, org: Uuid) -> std::path::PathBuf {
    store.join("orgs").join(org.to_string())
}

/// A request to the OpenAI-compatible surface with a deployment key.
async fn completion(base_url: &str, key: &str) -> u16 {
    workspace_tests::http()
        .post(format!("{base_url}/api/agent_deploy/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": "any", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Reads a conversation answer to its end.
async fn drain(stream: ByteStream) -> Vec<Value> {
    let mut reader = workspace_client::sse::SseReader::from_byte_stream(stream);
    let mut events = Vec::new();
    while let Some(Ok(event)) = reader.next().await {
        events.push(event.json::<Value>().expect("a JSON event"));
    }
    events
}

/// What [`fill`] made that the test looks at afterwards.
struct Filled {
    deployment_key: String,
    files: usize,
}

/// Fills `org` with one of everything an organization holds: a
/// conversation with an answer, a chat with an upload and answers, a
/// knowledge base of an upload (its ingestion job queued) with vectors,
/// a tool in a category, an agent using it with a used deployment, a
/// custom role and an invitation.
async fn fill(cx: &TestContext, user: &TestUser, org: Uuid) -> Filled {
    let client = &user.client;
    let model = resources::offline_model(client, org).await;
    let conversation = resources::conversation(client, org, json!({"title": "Plans"})).await;
    let session = client
        .conversation_create_session()
        .org_id(org)
        .body(
            types::ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let stream = client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            types::StreamChatRequest::builder()
                .chat_session_id(session.id)
                .message("hello there".to_string()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!drain(stream).await.is_empty());
    let answered = resources::chat_message(client, org, json!({"content": "hi"})).await;
    let upload = client
        .chat_upload_file(org, Some(answered.chat_id), "notes.txt", b"notes".to_vec())
        .await
        .unwrap()
        .into_inner();
    resources::chat_message(
        client,
        org,
        json!({"content": "about the notes", "chat_id": answered.chat_id,
               "upload_ids": [upload.id]}),
    )
    .await;
    let kb_file = client
        .chat_upload_file(org, None, "kb.txt", b"knowledge".to_vec())
        .await
        .unwrap()
        .into_inner();
    let kb = resources::knowledge_base(
        client,
        org,
        json!({"name": "K", "description": "", "embedding_model": MODEL,
               "sources": [{"type": "file", "config": {"file_ids": [kb_file.id]}}]}),
    )
    .await
    .id;
    // Vectors, as ingestion stores them (no worker runs here).
    let db = cx.db().await;
    let stored = db
        .execute(
            "INSERT INTO kb_chunks (id, organization_id, kb_id, document_id, position, content, \
                 dims, embedding) \
             SELECT gen_random_uuid(), d.organization_id, d.kb_id, d.id, g, 'chunk ' || g, 384, \
                    array_fill(0.25::real, ARRAY[384])::vector \
             FROM kb_documents d, generate_series(0, 4) g WHERE d.kb_id = $1",
            &[&kb],
        )
        .await
        .unwrap();
    assert_eq!(stored, 5);
    let category = resources::category(client, org, "Math").await;
    let tool = resources::tool(
        client,
        org,
        crate::tools::tool_body("adder", category, crate::tools::ADDER),
    )
    .await;
    let agent = resources::agent(
        client,
        org,
        crate::agents::agent_body(
            model,
            json!([{"tool_id": tool, "config": [{"name": "offset", "value": 100}]}]),
        ),
    )
    .await;
    let (s, tested) = workspace_tests::req(
        &cx.base_url,
        &user.token,
        reqwest::Method::POST,
        "/api/agents/test",
        &[("agent_id", agent.to_string())],
        Some(json!({"message": "hello"})),
    )
    .await;
    assert_eq!(s, 200, "{tested}");
    let deployment =
        resources::deployment(client, agent, json!({"name": "api", "channel": "api"})).await;
    let deployment_key = deployment.api_key.clone();
    assert_eq!(completion(&cx.base_url, &deployment_key).await, 200);
    client
        .roles_create()
        .org_id(org)
        .body(
            types::CreateRoleRequest::builder()
                .name("Reviewer".to_string())
                .hierarchy_level(5)
                .permission_ids(Vec::new()),
        )
        .send()
        .await
        .unwrap();
    let member_role = user.role_id(org, "member").await;
    client
        .invitations_create()
        .org_id(org)
        .body(
            types::InvitationCreateRequest::builder()
                .email(format!("invitee-{org}@example.com"))
                .role_id(member_role),
        )
        .send()
        .await
        .unwrap();
    Filled {
        deployment_key,
        files: 2,
    }
}

/// Connects `user` to the strict OAuth MCP server in `org`; the gateway
/// URL's path of the instance.
async fn connect_mcp(cx: &TestContext, user: &TestUser, org: Uuid, peer: &StrictOauth) -> String {
    let server = user
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    let start = user
        .client
        .mcp_connect_account()
        .org_id(org)
        .body(ConnectAccount::builder().server_id(server))
        .send()
        .await
        .unwrap()
        .into_inner();
    let back = peer.approve(&start.redirect_url).await;
    let landed = workspace_tests::browser()
        .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
        .send()
        .await
        .unwrap();
    let location = landed.headers()["location"].to_str().unwrap().to_string();
    assert!(!location.contains("error"), "{location}");
    let session: Uuid = start.id.parse().unwrap();
    let url = user
        .client
        .mcp_generate_url()
        .org_id(org)
        .body(GenerateUrl::builder().server_id(server).session_id(session))
        .send()
        .await
        .unwrap()
        .into_inner()
        .mcp_url;
    reqwest::Url::parse(&url).unwrap().path().to_string()
}

/// An MCP `initialize` through a gateway path.
async fn through_gateway(base_url: &str, path: &str) -> u16 {
    workspace_tests::http()
        .post(format!("{base_url}{path}"))
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Creates a (non-personal) organization owned by `user`.
async fn team(user: &TestUser, name: &str) -> Uuid {
    user.client
        .org_create_org()
        .name(name.to_string())
        .send()
        .await
        .unwrap()
        .into_inner()
        .id
}

fn confirm(name: &str) -> types::builder::OrgDeleteRequest {
    OrgDeleteRequest::builder().confirm_name(name.to_string())
}

/// Polls the deletion's status (through `client`, any instance) until it
/// is done.
async fn wait_deleted(client: &Client, org: Uuid, limit: Duration) -> types::OrgDeletion {
    let started = Instant::now();
    loop {
        let status = client
            .org_deletion_status()
            .org_id(org)
            .send()
            .await
            .unwrap()
            .into_inner();
        assert_ne!(status.state, DeletionState::Failed, "{status:?}");
        if status.state == DeletionState::Done {
            return status;
        }
        assert!(
            started.elapsed() < limit,
            "not deleted in {limit:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every counted table of `rows` is empty.
fn assert_empty(rows: &BTreeMap<String, i64>) {
    let left: Vec<_> = rows.iter().filter(|(_, n)| **n != 0).collect();
    assert!(left.is_empty(), "rows left: {left:?}");
}

#[tokio::test]
async fn deleting_an_organization_removes_its_rows_files_grants_and_keys() {
    let peer = StrictOauth::start("none", 3600).await;
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let url = peer.mcp_url();
    let cx = TestContext::with_config("deletion_rows_files", move |c| {
        base(c, &dir);
        c.mcp.frontend_url = FRONTEND.to_string();
        c.mcp.api_public_url = API_PUBLIC.to_string();
        c.mcp_servers = vec![mcp_server(&url)];
        c.deletion.batch_rows = 2;
    })
    .await;
    let ada = cx.user("del-ada").await;
    let bob = cx.user("del-bob").await;
    let victim = team(&ada, "Acme Labs").await;
    let bystander = bob.personal_org().await;
    let member = ada.role_id(victim, "member").await;
    ada.add_member(victim, bob.id, member).await;
    let filled = fill(&cx, &ada, victim).await;
    let kept = fill(&cx, &bob, bystander).await;
    let ada_gateway = connect_mcp(&cx, &ada, victim, &peer).await;
    let bob_gateway = connect_mcp(&cx, &bob, bystander, &peer).await;
    assert_eq!(through_gateway(&cx.base_url, &ada_gateway).await, 200);

    let db = cx.db().await;
    let before = rows_of(&db, victim).await;
    let kept_before = rows_of(&db, bystander).await;
    // The organization holds something in every kind of table (so that
    // the test can fail).
    for table in [
        "organizations",
        "memberships",
        "roles",
        "role_permissions via roles",
        "invitations",
        "conversations",
        "conversation_sessions",
        "conversation_messages",
        "conversation_stream_events via conversation_messages",
        "chats",
        "chat_messages",
        "chat_stream_events via chat_messages",
        "files",
        "knowledge_bases",
        "kb_sources",
        "kb_documents",
        "kb_jobs",
        "kb_chunks",
        "tool_categories",
        "tools",
        "agents",
        "agent_tools via agents",
        "agent_deployments",
        "deployment_rate_windows via agent_deployments",
        "mcp_sessions",
        "mcp_instances",
        "organization_daily_usage",
    ] {
        assert!(
            before.get(table).copied().unwrap_or(0) > 0,
            "nothing in {table}: {before:?}"
        );
    }
    assert_eq!(before["files"], filled.files as i64);
    assert_eq!(files_under(&org_folder(store.path(), victim)), filled.files);
    let kept_files = files_under(&org_folder(store.path(), bystander));
    assert_eq!(kept_files, kept.files);

    // Refused: a member who is no owner, a wrong name, a personal
    // organization.
    let (status, code) = error_of(
        bob.client
            .org_delete()
            .org_id(victim)
            .body(confirm("Acme Labs"))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "forbidden"));
    let (status, code) = error_of(
        ada.client
            .org_delete()
            .org_id(victim)
            .body(confirm("acme labs"))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "confirmation_mismatch"));
    let personal = ada.personal_org().await;
    let personal_name = ada
        .client
        .org_list()
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|o| o.id == personal)
        .unwrap()
        .name;
    let (status, code) = error_of(
        ada.client
            .org_delete()
            .org_id(personal)
            .body(confirm(&personal_name))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (409, "personal_organization"));

    let accepted = ada
        .client
        .org_delete()
        .org_id(victim)
        .body(confirm("Acme Labs"))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let accepted = accepted.into_inner();
    assert_eq!(accepted.organization_id, victim);
    assert_eq!(accepted.organization_name, "Acme Labs");

    // Unusable at once: the key, the gateway, every operation, the lists.
    assert_eq!(completion(&cx.base_url, &filled.deployment_key).await, 401);
    assert_eq!(through_gateway(&cx.base_url, &ada_gateway).await, 404);
    let (status, _) = error_of(ada.client.org_features().org_id(victim).send().await);
    assert_eq!(status, 403);
    let listed = ada.client.org_list().send().await.unwrap().into_inner();
    assert!(listed.iter().all(|o| o.id != victim), "{listed:?}");
    let me = bob.client.users_me().send().await.unwrap().into_inner();
    assert!(me.organizations.iter().all(|o| o.id != victim));
    // Only the requester follows it.
    let (status, _) = error_of(bob.client.org_deletion_status().org_id(victim).send().await);
    assert_eq!(status, 404);

    let done = wait_deleted(&ada.client, victim, Duration::from_secs(60)).await;
    assert_eq!(done.step, "done");
    assert_eq!(done.grants_revoked, 1, "{done:?}");
    assert_eq!(done.grants_unrevoked, 0, "{done:?}");
    assert_eq!(done.files_deleted, filled.files as i64, "{done:?}");
    assert!(done.rows_deleted > 50, "{done:?}");
    assert!(done.finished_at.is_some());

    // Every row and file of the organization is gone; the other
    // organization has every one of its own.
    assert_empty(&rows_of(&db, victim).await);
    assert_eq!(rows_of(&db, bystander).await, kept_before);
    assert!(!org_folder(store.path(), victim).exists());
    assert_eq!(
        files_under(&org_folder(store.path(), bystander)),
        kept_files
    );
    // The grant was revoked at the provider (one revocation: the other
    // organization's grant works on).
    let seen = peer.seen();
    assert_eq!(seen.revocations.len(), 1, "{seen:?}");
    assert_eq!(seen.revocations[0].1.as_deref(), Some("refresh_token"));
    assert_eq!(through_gateway(&cx.base_url, &bob_gateway).await, 200);
    assert_eq!(completion(&cx.base_url, &kept.deployment_key).await, 200);
    cx.teardown().await;
}

/// A web server that accepts a request and answers it only when told to
/// (`release`), telling when a request arrived (`fetched`) and when it
/// answered (`served`).
struct HeldSite {
    addr: std::net::SocketAddr,
    release: tokio::sync::watch::Sender<bool>,
    fetched: tokio::sync::mpsc::UnboundedReceiver<()>,
    served: tokio::sync::mpsc::UnboundedReceiver<()>,
    task: tokio::task::JoinHandle<()>,
}

impl HeldSite {
    async fn start() -> HeldSite {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, released) = tokio::sync::watch::channel(false);
        let (fetched_tx, fetched) = tokio::sync::mpsc::unbounded_channel();
        let (served_tx, served) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (fetched_tx, served_tx) = (fetched_tx.clone(), served_tx.clone());
                let mut released = released.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let _ = fetched_tx.send(());
                    let _ = released.wait_for(|r| *r).await;
                    let body = "<html><head><title>Held</title></head><body><p>A page \
                        that arrived after its organization was deleted.</p></body></html>";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                    let _ = served_tx.send(());
                });
            }
        });
        HeldSite {
            addr,
            release,
            fetched,
            served,
            task,
        }
    }
}

impl Drop for HeldSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A chat answer being generated: its reader.
async fn chat_stream(client: &Client, org: Uuid) -> workspace_client::sse::SseReader {
    let stream = client
        .chat_send_message()
        .org_id(org)
        .body(
            types::SendMessageRequest::builder()
                .content("Write an essay about rivers, mountains and seas".to_string()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    workspace_client::sse::SseReader::from_byte_stream(stream)
}

/// The rest of a stream's events, within `limit`.
async fn rest(reader: &mut workspace_client::sse::SseReader, limit: Duration) -> Vec<Value> {
    tokio::time::timeout(limit, async {
        let mut events = Vec::new();
        while let Some(Ok(event)) = reader.next().await {
            events.push(event.json::<Value>().unwrap());
        }
        events
    })
    .await
    .unwrap_or_else(|_| panic!("the stream did not end within {limit:?}"))
}

/// The hostile case of the issue: the organization is deleted (through
/// another instance) while its ingestion job runs and its answers stream
/// on the first. The answers stop at once (a chat answer ends `stopped`,
/// a conversation answer ends too), the job is cancelled, and when the
/// job's fetch answers after all, its worker writes nothing: no row of the
/// organization exists again.
#[tokio::test]
async fn deleting_while_ingestion_and_streams_run_on_another_instance() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let mut site = HeldSite::start().await;
    let cx = TestContext::with_config("deletion_while_running", {
        let dir = dir.clone();
        move |c| {
            base(c, &dir);
            c.providers.offline_chunk_delay_ms = 150;
            c.kb.workers = 1;
            c.kb.poll_interval_ms = 100;
            c.fetch.allow_private_networks = true;
            c.deletion.workers = 0;
        }
    })
    .await;
    let other = cx
        .second_instance(|c| {
            base(c, &dir);
            c.deletion.workers = 1;
        })
        .await;
    let other_url = format!("http://{}", other.local_addr());
    let ada = cx.user("busy-ada").await;
    let org = team(&ada, "Busy").await;
    let kb = resources::knowledge_base(
        &ada.client,
        org,
        json!({"name": "Web", "description": "", "embedding_model": MODEL,
               "sources": [{"type": "web", "config": {"urls": [format!("http://{}/page", site.addr)]}}]}),
    )
    .await
    .id;
    tokio::time::timeout(Duration::from_secs(60), site.fetched.recv())
        .await
        .expect("the worker fetches the page")
        .unwrap();
    let db = cx.db().await;
    let state: String = db
        .query_one("SELECT state FROM kb_jobs WHERE kb_id = $1", &[&kb])
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "running");

    // Two answers streaming on the first instance.
    let mut chat = chat_stream(&ada.client, org).await;
    for _ in 0..3 {
        chat.next().await.unwrap().unwrap();
    }
    let model = resources::offline_model(&ada.client, org).await;
    let conversation = resources::conversation(&ada.client, org, json!({"title": "Long"})).await;
    let session = ada
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            types::ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let stream = ada
        .client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            types::StreamChatRequest::builder()
                .chat_session_id(session.id)
                .message("Write an essay about rivers, mountains and seas".to_string()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let mut talk = workspace_client::sse::SseReader::from_byte_stream(stream);
    for _ in 0..3 {
        talk.next().await.unwrap().unwrap();
    }

    // Deleted through the other instance.
    let through_other = resources::client_for(&other_url, &ada.token);
    let requested = Instant::now();
    through_other
        .org_delete()
        .org_id(org)
        .body(confirm("Busy"))
        .send()
        .await
        .unwrap();
    // The first instance refuses the organization at once.
    let (status, _) = error_of(ada.client.org_features().org_id(org).send().await);
    assert_eq!(status, 403);
    // Both answers end within a moment, the chat answer as stopped.
    let events = rest(&mut chat, Duration::from_secs(10)).await;
    let last = events.last().expect("a last event");
    assert_eq!(last["type"], "end", "{events:?}");
    assert_eq!(last["finish_reason"], "stopped", "{last}");
    rest(&mut talk, Duration::from_secs(10)).await;
    let stopped_in = requested.elapsed();
    eprintln!("both answers ended {stopped_in:?} after the deletion was requested");
    assert!(stopped_in < Duration::from_secs(5), "{stopped_in:?}");

    wait_deleted(&through_other, org, Duration::from_secs(60)).await;
    // The job's fetch answers now: its worker must write nothing.
    site.release.send_replace(true);
    tokio::time::timeout(Duration::from_secs(10), site.served.recv())
        .await
        .expect("the page is served")
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_empty(&rows_of(&db, org).await);
    let jobs: i64 = db
        .query_one("SELECT count(*) FROM kb_jobs WHERE kb_id = $1", &[&kb])
        .await
        .unwrap()
        .get(0);
    assert_eq!(jobs, 0);
    assert_eq!(files_under(&org_folder(store.path(), org)), 0);
    // The worker is alive and idle (it left the job, it did not crash).
    let running: i64 = db
        .query_one("SELECT count(*) FROM kb_jobs WHERE state = 'running'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(running, 0);
    other.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A deletion requested on an instance without deletion workers is
/// carried out by another instance's worker, and followed from the
/// first.
#[tokio::test]
async fn a_deletion_requested_on_one_instance_is_carried_out_by_another() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let cx = TestContext::with_config("deletion_two_instances", {
        let dir = dir.clone();
        move |c| {
            base(c, &dir);
            c.deletion.workers = 0;
        }
    })
    .await;
    let ada = cx.user("two-ada").await;
    let org = team(&ada, "Elsewhere").await;
    let answered = resources::chat_message(&ada.client, org, json!({"content": "hi"})).await;
    ada.client
        .chat_upload_file(org, Some(answered.chat_id), "a.txt", b"a".to_vec())
        .await
        .unwrap();
    let accepted = ada
        .client
        .org_delete()
        .org_id(org)
        .body(confirm("Elsewhere"))
        .send()
        .await
        .unwrap()
        .into_inner();
    // Nobody works on it here.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting = ada
        .client
        .org_deletion_status()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(waiting.state, DeletionState::Queued, "{waiting:?}");
    assert_eq!(waiting.job_id, accepted.job_id);
    let worker = cx
        .second_instance(|c| {
            base(c, &dir);
            c.deletion.workers = 1;
        })
        .await;
    let done = wait_deleted(&ada.client, org, Duration::from_secs(60)).await;
    assert_eq!(done.attempts, 1, "{done:?}");
    assert_eq!(done.files_deleted, 1, "{done:?}");
    assert_empty(&rows_of(&cx.db().await, org).await);
    assert_eq!(files_under(&org_folder(store.path(), org)), 0);
    worker.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A deletion whose worker died mid-way (its lease held by a worker id
/// nobody has, at the `chat_messages` step) is taken over by another
/// instance once the lease expires, resumed at its step, and still leaves
/// nothing: what the steps it skipped would have deleted goes with the
/// organization's row and the sweep of its folder.
#[tokio::test]
async fn an_interrupted_deletion_resumes_on_another_instance() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let cx = TestContext::with_config("deletion_resumes", {
        let dir = dir.clone();
        move |c| {
            base(c, &dir);
            c.deletion.workers = 0;
        }
    })
    .await;
    let ada = cx.user("resume-ada").await;
    let org = team(&ada, "Interrupted").await;
    for i in 0..3 {
        let answered =
            resources::chat_message(&ada.client, org, json!({"content": format!("m{i}")})).await;
        ada.client
            .chat_upload_file(org, Some(answered.chat_id), "f.txt", b"f".to_vec())
            .await
            .unwrap();
    }
    let accepted = ada
        .client
        .org_delete()
        .org_id(org)
        .body(confirm("Interrupted"))
        .send()
        .await
        .unwrap()
        .into_inner();
    let db = cx.db().await;
    let lease = Duration::from_secs(5);
    let claimed_at = Instant::now();
    let claimed = db
        .execute(
            "UPDATE deletion_jobs SET state = 'running', attempts = 1, step = 'chat_messages', \
                 locked_by = gen_random_uuid(), \
                 locked_until = now() + make_interval(secs => $2) \
             WHERE id = $1",
            &[&accepted.job_id, &lease.as_secs_f64()],
        )
        .await
        .unwrap();
    assert_eq!(claimed, 1);
    let worker = cx
        .second_instance(|c| {
            base(c, &dir);
            c.deletion.workers = 1;
            c.deletion.lease_secs = 3;
        })
        .await;
    // Not taken before the dead worker's lease expired.
    let held = ada
        .client
        .org_deletion_status()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    if claimed_at.elapsed() < lease - Duration::from_secs(1) {
        assert_eq!((held.state, held.attempts), (DeletionState::Running, 1));
    }
    let done = wait_deleted(&ada.client, org, Duration::from_secs(60)).await;
    assert_eq!(done.attempts, 2, "the takeover is the second attempt");
    assert_empty(&rows_of(&db, org).await);
    assert_eq!(files_under(&org_folder(store.path(), org)), 0);
    assert_eq!(done.files_deleted, 3, "swept from the folder: {done:?}");
    worker.shutdown().await.unwrap();
    cx.teardown().await;
}

/// Waits until the deletion job `job` is done.
async fn wait_job(db: &tokio_postgres::Client, job: Uuid) {
    let started = Instant::now();
    loop {
        let state: String = db
            .query_one("SELECT state FROM deletion_jobs WHERE id = $1", &[&job])
            .await
            .unwrap()
            .get(0);
        if state == "done" {
            return;
        }
        assert_ne!(state, "failed");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "job {job} is {state}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `POST /api/users/me/delete` as `user`.
async fn delete(
    user: &TestUser,
    password: &str,
) -> Result<
    workspace_client::ResponseValue<types::AccountDeletion>,
    workspace_client::Error<types::Error>,
> {
    user.client
        .users_delete_me()
        .body(AccountDeleteRequest::builder().password(password.to_string()))
        .send()
        .await
}

#[tokio::test]
async fn an_account_is_deleted_only_when_no_organization_needs_it() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let cx = TestContext::with_config("deletion_accounts", move |c| base(c, &dir)).await;
    let ada = cx.user("acct-ada").await;
    let bob = cx.user("acct-bob").await;
    let cyd = cx.user("acct-cyd").await;

    // Ada alone owns "Crew", where Bob is a member: refused, naming it.
    let crew = team(&ada, "Crew").await;
    let member = ada.role_id(crew, "member").await;
    ada.add_member(crew, bob.id, member).await;
    let (status, code) = error_of(delete(&ada, "not my password").await);
    assert_eq!((status, code.as_str()), (403, "invalid_password"));
    let refused = delete(&ada, TEST_PASSWORD).await.unwrap_err();
    let workspace_client::Error::ErrorResponse(refused) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        (refused.status().as_u16(), refused.error_code.as_str()),
        (409, "sole_owner")
    );
    assert!(refused.message.contains("\"Crew\""), "{}", refused.message);
    // Nothing changed.
    assert!(ada.client.users_me().send().await.is_ok());
    assert!(bob.client.org_features().org_id(crew).send().await.is_ok());

    // Cyd: a member of Bob's "Shared" (where she talks), the only member of
    // "Solo", and her personal organization.
    let shared = team(&bob, "Shared").await;
    let admin = bob.role_id(shared, "admin").await;
    bob.add_member(shared, cyd.id, admin).await;
    let conversation =
        resources::conversation(&cyd.client, shared, json!({"title": "Cyd's plan"})).await;
    let model = resources::offline_model(&cyd.client, shared).await;
    let session = cyd
        .client
        .conversation_create_session()
        .org_id(shared)
        .body(
            types::ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let stream = cyd
        .client
        .conversation_stream_chat()
        .org_id(shared)
        .body(
            types::StreamChatRequest::builder()
                .chat_session_id(session.id)
                .message("my idea".to_string()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    drain(stream).await;
    let private = resources::chat_message(&cyd.client, shared, json!({"content": "private"})).await;
    cyd.client
        .chat_upload_file(shared, Some(private.chat_id), "mine.txt", b"mine".to_vec())
        .await
        .unwrap();
    let solo = team(&cyd, "Solo").await;
    resources::chat_message(&cyd.client, solo, json!({"content": "alone"})).await;
    let personal = cyd.personal_org().await;

    let accepted = delete(&cyd, TEST_PASSWORD).await.unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let accepted = accepted.into_inner();
    let mut deleted: Vec<Uuid> = accepted
        .organizations
        .iter()
        .map(|o| o.organization_id)
        .collect();
    deleted.sort();
    let mut expected = vec![solo, personal];
    expected.sort();
    assert_eq!(deleted, expected, "{accepted:?}");
    // Gone at once: her token, her password; the address is free again.
    let (status, _) = error_of(cyd.client.users_me().send().await);
    assert_eq!(status, 401);
    let (status, _) = error_of(cyd.client.org_features().org_id(shared).send().await);
    assert_eq!(status, 401);
    let (status, code) = error_of(
        cx.anon()
            .auth_login()
            .body(
                types::LoginRequest::builder()
                    .email(cyd.email.clone())
                    .password(TEST_PASSWORD.to_string()),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (401, "invalid_credentials"));
    let listed = bob
        .client
        .users_list()
        .org_id(shared)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed.users.iter().all(|u| u.email != cyd.email),
        "{listed:?}"
    );

    let db = cx.db().await;
    wait_job(&db, accepted.job_id).await;
    for org in &accepted.organizations {
        wait_job(&db, org.job_id).await;
        assert_empty(&rows_of(&db, org.organization_id).await);
        assert_eq!(
            files_under(&org_folder(store.path(), org.organization_id)),
            0
        );
    }
    let users: i64 = db
        .query_one("SELECT count(*) FROM users WHERE id = $1", &[&cyd.id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(users, 0, "the account's row is deleted");
    // Shared keeps its conversation and messages, without their author;
    // her private chat and its upload are gone.
    let kept: Vec<(Option<Uuid>, String)> = db
        .query(
            "SELECT created_by, role FROM conversation_messages WHERE conversation_id = $1",
            &[&conversation.id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(kept.len() >= 2, "{kept:?}");
    assert!(kept.iter().all(|(by, _)| by.is_none()), "{kept:?}");
    let chats: i64 = db
        .query_one(
            "SELECT count(*) FROM chats WHERE id = $1",
            &[&private.chat_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(chats, 0);
    let shared_files = files_under(&org_folder(store.path(), shared));
    assert_eq!(shared_files, 0, "the private chat's upload went with it");
    assert!(
        bob.client
            .org_features()
            .org_id(shared)
            .send()
            .await
            .is_ok()
    );
    // The address signs up anew, as a new account.
    let again = cx.user("acct-cyd").await;
    assert_ne!(again.id, cyd.id);
    cx.teardown().await;
}

#[tokio::test]
async fn the_export_holds_the_accounts_data_page_after_page() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let cx = TestContext::with_config("deletion_export", move |c| base(c, &dir)).await;
    let ada = cx.user("export-ada").await;
    let bob = cx.user("export-bob").await;
    let personal = ada.personal_org().await;
    let shared = team(&bob, "Bob's team").await;
    let member = bob.role_id(shared, "member").await;
    bob.add_member(shared, ada.id, member).await;

    let answered =
        resources::chat_message(&ada.client, personal, json!({"content": "first words"})).await;
    let upload = ada
        .client
        .chat_upload_file(
            personal,
            Some(answered.chat_id),
            "report.txt",
            b"report".to_vec(),
        )
        .await
        .unwrap()
        .into_inner();
    // A long chat: more messages than several export pages.
    let db = cx.db().await;
    let lines: Vec<(&str, String)> = (1..=230)
        .map(|g| {
            (
                if g % 2 == 0 { "USER" } else { "MODEL" },
                format!("line {g}"),
            )
        })
        .collect();
    workspace_tests::fixtures::append_chat_messages(&db, personal, answered.chat_id, None, &lines)
        .await;
    let conversation =
        resources::conversation(&ada.client, shared, json!({"title": "Team plan"})).await;
    let model = resources::offline_model(&ada.client, shared).await;
    let session = ada
        .client
        .conversation_create_session()
        .org_id(shared)
        .body(
            types::ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let stream = ada
        .client
        .conversation_stream_chat()
        .org_id(shared)
        .body(
            types::StreamChatRequest::builder()
                .chat_session_id(session.id)
                .message("our plan".to_string()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    drain(stream).await;
    // Bob's chat is not Ada's.
    resources::chat_message(&bob.client, shared, json!({"content": "bob only"})).await;

    let response = ada.client.users_export().send().await.unwrap();
    let headers = response.headers().clone();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let export = response.into_inner();
    assert_eq!(export.format, "workspace.account-export");
    assert_eq!(export.version, 1);
    assert_eq!(export.profile.id, ada.id);
    assert_eq!(export.profile.email, ada.email);
    let orgs: Vec<Uuid> = export
        .memberships
        .iter()
        .map(|m| m.organization_id)
        .collect();
    assert_eq!(orgs, vec![personal, shared]);
    assert!(export.memberships[0].is_personal);
    assert_eq!(export.memberships[1].role_name, "member");
    assert_eq!(export.chats.len(), 1, "{:?}", export.chats);
    let chat = &export.chats[0];
    assert_eq!(chat.id, answered.chat_id);
    // The answered message and its answer, then the 230 lines in order.
    assert_eq!(chat.messages.len(), 232);
    assert_eq!(chat.messages[0].content, "first words");
    let lines: Vec<&str> = chat.messages[2..]
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    let expected: Vec<String> = (1..=230).map(|g| format!("line {g}")).collect();
    assert_eq!(lines, expected);
    assert_eq!(export.conversations.len(), 1);
    let talk = &export.conversations[0];
    assert_eq!(talk.id, conversation.id);
    assert_eq!(talk.organization_id, shared);
    assert!(talk.messages.len() >= 2);
    assert_eq!(talk.messages[0].content, "our plan");
    assert!(talk.messages[0].by_me);
    assert_eq!(talk.messages[1].role, "assistant");
    assert_eq!(export.uploads.len(), 1);
    let listed = &export.uploads[0];
    assert_eq!(
        (listed.id, listed.filename.as_str(), listed.file_size),
        (upload.id, "report.txt", 6)
    );
    assert_eq!(listed.chat_id, Some(answered.chat_id));
    // The raw document is one JSON value (nothing before or after it).
    let raw = workspace_tests::http()
        .get(format!("{}/api/users/me/export", cx.base_url))
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&raw).expect("one JSON document");
    assert_eq!(value["chats"][0]["messages"].as_array().unwrap().len(), 232);
    cx.teardown().await;
}

/// Every foreign key to an organization or an account says what becomes
/// of its rows when that goes (cascade, or set null): a reference added
/// without one would hold every deletion back.
#[tokio::test]
async fn every_reference_to_an_organization_or_account_lets_it_go() {
    let cx = TestContext::new("deletion_references").await;
    let db = cx.db().await;
    let references = db
        .query(
            "SELECT conrelid::regclass::text || '.' || conname, confdeltype::text \
             FROM pg_constraint \
             WHERE contype = 'f' AND confrelid IN ('organizations'::regclass, 'users'::regclass) \
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    assert!(references.len() > 30, "{} references", references.len());
    let blocking: Vec<String> = references
        .iter()
        .filter(|r| !["c", "n"].contains(&r.get::<_, String>(1).as_str()))
        .map(|r| r.get(0))
        .collect();
    assert!(
        blocking.is_empty(),
        "references without ON DELETE: {blocking:?}"
    );
    cx.teardown().await;
}

/// Figures, not a check (run with `cargo xtask test -- --run-ignored
/// only deletion::measure --no-capture`): how long deleting an
/// organization of 20,000 vectors, 20,000 chat messages and 20,000
/// conversation messages takes in batches of `deletion.batch_rows`, and
/// how much the process grows while it streams a 40 MB export (read as a
/// stream, counted and dropped).
#[tokio::test]
#[ignore]
async fn measure_large_deletion_and_export() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let cx = TestContext::with_config("deletion_measure", move |c| base(c, &dir)).await;
    let ada = cx.user("measure-ada").await;
    let org = team(&ada, "Big").await;
    let file = ada
        .client
        .chat_upload_file(org, None, "k.txt", b"k".to_vec())
        .await
        .unwrap()
        .into_inner();
    let kb = resources::knowledge_base(
        &ada.client,
        org,
        json!({"name": "K", "description": "", "embedding_model": MODEL,
               "sources": [{"type": "file", "config": {"file_ids": [file.id]}}]}),
    )
    .await
    .id;
    let answered = resources::chat_message(&ada.client, org, json!({"content": "hi"})).await;
    let conversation = resources::conversation(&ada.client, org, json!({"title": "T"})).await;
    let model = resources::offline_model(&ada.client, org).await;
    let session = ada
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            types::ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let db = cx.db().await;
    let n = 20_000;
    let started = Instant::now();
    db.execute(
        "INSERT INTO kb_chunks (id, organization_id, kb_id, document_id, position, content, \
             dims, embedding) \
         SELECT gen_random_uuid(), d.organization_id, d.kb_id, d.id, g, 'chunk ' || g, 384, \
                array_fill((g % 97)::real / 97, ARRAY[384])::vector \
         FROM kb_documents d, generate_series(1, $2) g WHERE d.kb_id = $1",
        &[&kb, &n],
    )
    .await
    .unwrap();
    let padding = "x".repeat(2000);
    let lines: Vec<(&str, String)> = (1..=n).map(|g| ("USER", format!("{padding}{g}"))).collect();
    workspace_tests::fixtures::append_chat_messages(&db, org, answered.chat_id, None, &lines).await;
    db.execute(
        "INSERT INTO conversation_messages (id, organization_id, conversation_id, session_id, \
             role, content, created_by) \
         SELECT gen_random_uuid(), $1, $2, $3, 'user', 'm' || g, $5 \
         FROM generate_series(1, $4) g",
        &[&org, &conversation.id, &session.id, &n, &ada.id],
    )
    .await
    .unwrap();
    eprintln!("filled in {:?}", started.elapsed());

    // The export: about 40 MB, read as a stream and dropped.
    let pid = std::process::id();
    let rss_before = workspace_tests::proc_status_kb(pid, "VmRSS:");
    let started = Instant::now();
    let mut response = workspace_tests::http()
        .get(format!("{}/api/users/me/export", cx.base_url))
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap();
    let mut bytes = 0usize;
    let mut peak = rss_before;
    while let Some(chunk) = response.chunk().await.unwrap() {
        bytes += chunk.len();
        peak = peak.max(workspace_tests::proc_status_kb(pid, "VmRSS:"));
    }
    eprintln!(
        "export: {bytes} bytes in {:?}; resident before {rss_before} KB, peak {peak} KB \
         (+{} KB)",
        started.elapsed(),
        peak - rss_before
    );
    assert!(bytes > 40_000_000);
    assert!(
        (peak - rss_before) * 1024.0 < bytes as f64 / 2.0,
        "the export was held in memory"
    );

    let started = Instant::now();
    ada.client
        .org_delete()
        .org_id(org)
        .body(confirm("Big"))
        .send()
        .await
        .unwrap();
    let requested = started.elapsed();
    let done = wait_deleted(&ada.client, org, Duration::from_secs(600)).await;
    eprintln!(
        "deletion: requested in {requested:?}, done in {:?}: {} rows in batches of 1000, {} files",
        started.elapsed(),
        done.rows_deleted,
        done.files_deleted
    );
    assert_empty(&rows_of(&db, org).await);
    cx.teardown().await;
}
