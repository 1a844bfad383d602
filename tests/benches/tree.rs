//! `cargo xtask bench tree`: reading a big chat tree's active path (issue
//! #35). Not a test.
//!
//! One server instance in this process. Two chats of 10,000 messages with
//! 500 branches each are stored beforehand (straight into the database,
//! with the tree's columns as the server keeps them, then `VACUUM
//! ANALYZE`), questions of `QUESTION_BYTES` and answers of `ANSWER_BYTES`:
//! - `deep`: an active path of 9,500 messages; 500 of its questions have an
//!   older version (a one-message branch);
//! - `wide`: an active path of 1,000 messages; each of its 500 questions
//!   has an older version with 17 messages below it.
//!
//! Prints per chat, after `TREE_WARMUP` (20) reads, over `TREE_ROUNDS`
//! (200) reads one at a time:
//! - the active-path statement alone (the server's own SQL,
//!   `active_path_sql`, prepared on one connection): p50, p99, rows;
//! - `GET /api/chat` end to end (authorization, the chat, its path and
//!   uploads pipelined in one round trip, JSON): p50, p99, bytes.
//!
//! `TREE_EXPLAIN=1` prints the statement's plan for each chat.

use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_tests::TestContext;

const MESSAGES: usize = 10_000;
const BRANCHES: usize = 500;
const QUESTION_BYTES: usize = 200;
const ANSWER_BYTES: usize = 1_000;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}

/// One stored message.
struct Node {
    id: Uuid,
    parent: Option<Uuid>,
    depth: i32,
    sibling_index: i32,
    children: i32,
    on_path: bool,
}

fn text(depth: i32, bytes: usize) -> String {
    let mut t = format!("message at depth {depth}: ");
    while t.len() < bytes {
        t.push_str("the quick brown fox jumps over the lazy dog ");
    }
    t.truncate(bytes);
    t
}

/// A path of `path_len` messages; the first `BRANCHES` questions (even
/// depths) each get an older sibling with `below` messages under it.
fn tree(path_len: usize, below: usize) -> Vec<Node> {
    let mut nodes: Vec<Node> = Vec::with_capacity(MESSAGES);
    let mut path: Vec<usize> = Vec::with_capacity(path_len);
    for depth in 0..path_len {
        let parent = path.last().map(|&i| nodes[i].id);
        let branched = depth % 2 == 0 && depth / 2 < BRANCHES;
        if branched {
            // The older version first (sibling 1), then its chain.
            nodes.push(Node {
                id: Uuid::new_v4(),
                parent,
                depth: depth as i32,
                sibling_index: 1,
                children: i32::from(below > 0),
                on_path: false,
            });
            let mut above = nodes.len() - 1;
            for k in 0..below {
                nodes.push(Node {
                    id: Uuid::new_v4(),
                    parent: Some(nodes[above].id),
                    depth: (depth + 1 + k) as i32,
                    sibling_index: 1,
                    children: i32::from(k + 1 < below),
                    on_path: false,
                });
                above = nodes.len() - 1;
            }
        }
        nodes.push(Node {
            id: Uuid::new_v4(),
            parent,
            depth: depth as i32,
            sibling_index: if branched { 2 } else { 1 },
            children: i32::from(depth + 1 < path_len),
            on_path: true,
        });
        let at = nodes.len() - 1;
        if let Some(&p) = path.last() {
            nodes[p].children += i32::from(branched);
        }
        path.push(at);
    }
    assert_eq!(nodes.len(), MESSAGES, "the chat's size");
    nodes
}

async fn store(cx: &TestContext, org: Uuid, user: Uuid, nodes: &[Node]) -> Uuid {
    let db = cx.db().await;
    let chat = Uuid::new_v4();
    let roots = nodes.iter().filter(|n| n.parent.is_none()).count() as i32;
    db.execute(
        "INSERT INTO chats (id, organization_id, user_id, title, roots) \
         VALUES ($1, $2, $3, 'tree', $4)",
        &[&chat, &org, &user, &roots],
    )
    .await
    .expect("the chat");
    for batch in nodes.chunks(2_000) {
        let ids: Vec<Uuid> = batch.iter().map(|n| n.id).collect();
        let parents: Vec<Option<Uuid>> = batch.iter().map(|n| n.parent).collect();
        let depths: Vec<i32> = batch.iter().map(|n| n.depth).collect();
        let positions: Vec<i32> = batch.iter().map(|n| n.sibling_index).collect();
        let children: Vec<i32> = batch.iter().map(|n| n.children).collect();
        let on_path: Vec<bool> = batch.iter().map(|n| n.on_path).collect();
        let roles: Vec<&str> = batch
            .iter()
            .map(|n| if n.depth % 2 == 0 { "USER" } else { "MODEL" })
            .collect();
        let texts: Vec<String> = batch
            .iter()
            .map(|n| {
                let bytes = if n.depth % 2 == 0 {
                    QUESTION_BYTES
                } else {
                    ANSWER_BYTES
                };
                text(n.depth, bytes)
            })
            .collect();
        db.execute(
            "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, \
                 parent_message_id, depth, sibling_index, children, on_path) \
             SELECT u.id, $1, $2, u.role, u.content, u.parent, u.depth, u.pos, u.children, \
                 u.on_path \
             FROM unnest($3::uuid[], $4::text[], $5::text[], $6::uuid[], $7::int[], $8::int[], \
                 $9::int[], $10::bool[]) \
                 AS u(id, role, content, parent, depth, pos, children, on_path)",
            &[
                &org, &chat, &ids, &roles, &texts, &parents, &depths, &positions, &children,
                &on_path,
            ],
        )
        .await
        .expect("the messages");
    }
    let leaf = nodes
        .iter()
        .filter(|n| n.on_path)
        .max_by_key(|n| n.depth)
        .map(|n| n.id);
    db.execute(
        "UPDATE chats SET leaf_id = $2 WHERE id = $1",
        &[&chat, &leaf],
    )
    .await
    .expect("the leaf");
    chat
}

fn percentile(values: &[Duration], p: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (v.len() as f64 - 1.0)).round() as usize;
    v[rank.min(v.len() - 1)]
}

async fn bench() {
    let warmup: usize = std::env::var("TREE_WARMUP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let rounds: usize = std::env::var("TREE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let cx = TestContext::new("bench_tree").await;
    let ada = cx.user("bench").await;
    let org = ada.personal_org().await;
    let me = ada.client.users_me().send().await.unwrap().into_inner().id;
    let shapes = [
        ("deep", MESSAGES - BRANCHES, 0usize),
        (
            "wide",
            2 * BRANCHES,
            (MESSAGES - 2 * BRANCHES) / BRANCHES - 1,
        ),
    ];
    let mut chats = Vec::new();
    for (name, path_len, below) in shapes {
        chats.push((
            name,
            path_len,
            store(&cx, org, me, &tree(path_len, below)).await,
        ));
    }
    let db = cx.db().await;
    db.batch_execute("VACUUM ANALYZE chats, chat_messages")
        .await
        .expect("vacuum");
    let statement = db
        .prepare(workspace_server::db::datastore::chat::active_path_sql())
        .await
        .expect("prepare");
    let http = reqwest::Client::new();
    println!(
        "chat trees of {MESSAGES} messages with {BRANCHES} branches \
         ({QUESTION_BYTES}-byte questions, {ANSWER_BYTES}-byte answers), {rounds} reads each"
    );
    println!(
        "{:<6} {:>6} | {:>10} {:>10} | {:>10} {:>10} {:>10}",
        "chat", "path", "sql p50", "sql p99", "GET p50", "GET p99", "GET bytes"
    );
    for (name, path_len, chat) in chats {
        if std::env::var_os("TREE_EXPLAIN").is_some() {
            let sql = format!(
                "EXPLAIN (ANALYZE, BUFFERS) {}",
                workspace_server::db::datastore::chat::active_path_sql()
            );
            for row in db.query(&sql, &[&org, &me, &chat]).await.expect("explain") {
                println!("  {}", row.get::<_, String>(0));
            }
        }
        let mut sql = Vec::new();
        let mut get = Vec::new();
        let mut bytes = 0;
        for round in 0..warmup + rounds {
            let started = Instant::now();
            let rows = db
                .query(&statement, &[&org, &me, &chat])
                .await
                .expect("the path");
            let took = started.elapsed();
            assert_eq!(rows.len(), path_len, "the active path");
            let started = Instant::now();
            let body = http
                .get(format!("{}/api/chat", cx.base_url))
                .bearer_auth(&ada.token)
                .query(&[("org_id", org.to_string()), ("chat_id", chat.to_string())])
                .send()
                .await
                .expect("GET /api/chat")
                .bytes()
                .await
                .expect("the body");
            let took_get = started.elapsed();
            if round >= warmup {
                sql.push(took);
                get.push(took_get);
                bytes = body.len();
            }
        }
        println!(
            "{:<6} {:>6} | {:>8.2}ms {:>8.2}ms | {:>8.2}ms {:>8.2}ms {:>10}",
            name,
            path_len,
            percentile(&sql, 50.0),
            percentile(&sql, 99.0),
            percentile(&get, 50.0),
            percentile(&get, 99.0),
            bytes
        );
    }
    cx.teardown().await;
}
