//! `cargo xtask bench tree`: reading a big chat tree's active path (issue
//! #35). Not a test.
//!
//! One server instance in this process. Beside 2,000 other chats of 100
//! messages (200,000 rows: the measured chats are a small part of the
//! table, as in a used service), two chats of 10,000 messages with
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
//! - the active path's statements alone (the server's own SQL, prepared on
//!   one connection, pipelined: `active_path_sql` and
//!   `active_path_feedback_sql`, the caller's ratings): p50, p99; beside
//!   it the single statement it replaced (`before p50`: ratings joined to
//!   every row, sorted by PostgreSQL);
//! - `GET /api/chat` end to end (authorization, the chat, its path and
//!   uploads pipelined in one round trip, JSON): p50, p99, bytes.
//!
//! Each series runs on its own, one read after the other.
//!
//! `TREE_EXPLAIN=1` prints the statement's plan for each chat.

use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_tests::TestContext;

const MESSAGES: usize = 10_000;
const BRANCHES: usize = 500;
const QUESTION_BYTES: usize = 200;
const ANSWER_BYTES: usize = 1_000;
/// Other chats in the table (as in a service that has been used): the
/// two measured chats are a small part of it, as a real chat is, so the
/// planner sees the table a real database has.
const BACKGROUND_CHATS: i32 = 2_000;
const BACKGROUND_MESSAGES: i32 = 100;

/// The active-path statement before it was made lean (for the side-by-side
/// column `before p50`).
const PATH_SQL_BEFORE: &str = "SELECT m.id, m.chat_id, m.role, m.content, \
     m.parent_message_id, m.model_id, m.agent_id, m.prompt_data, m.metadata, m.status, \
     m.created_at, m.sibling_index, m.siblings, m.previous_sibling_id, m.next_sibling_id, \
     f.rating, f.comment, f.tags, f.created_at, f.updated_at \
     FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
     LEFT JOIN message_feedback f ON f.chat_message_id = m.id AND f.user_id = $2 \
     WHERE c.organization_id = $1 AND c.user_id = $2 AND c.id = $3 \
       AND m.chat_id = $3 AND m.on_path \
     ORDER BY m.depth";

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
    siblings: i32,
    previous: Option<Uuid>,
    next: Option<Uuid>,
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
                siblings: 2,
                previous: None,
                next: None,
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
                    siblings: 1,
                    previous: None,
                    next: None,
                    children: i32::from(k + 1 < below),
                    on_path: false,
                });
                above = nodes.len() - 1;
            }
        }
        let older = branched.then(|| nodes.len() - 1 - below);
        nodes.push(Node {
            id: Uuid::new_v4(),
            parent,
            depth: depth as i32,
            sibling_index: if branched { 2 } else { 1 },
            siblings: if branched { 2 } else { 1 },
            previous: older.map(|i| nodes[i].id),
            next: None,
            children: i32::from(depth + 1 < path_len),
            on_path: true,
        });
        let at = nodes.len() - 1;
        if let Some(i) = older {
            nodes[i].next = Some(nodes[at].id);
        }
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
        let siblings: Vec<i32> = batch.iter().map(|n| n.siblings).collect();
        let previous: Vec<Option<Uuid>> = batch.iter().map(|n| n.previous).collect();
        let next: Vec<Option<Uuid>> = batch.iter().map(|n| n.next).collect();
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
                 parent_message_id, depth, sibling_index, children, on_path, siblings, \
                 previous_sibling_id, next_sibling_id) \
             SELECT u.id, $1, $2, u.role, u.content, u.parent, u.depth, u.pos, u.children, \
                 u.on_path, u.siblings, u.prev, u.next \
             FROM unnest($3::uuid[], $4::text[], $5::text[], $6::uuid[], $7::int[], $8::int[], \
                 $9::int[], $10::bool[], $11::int[], $12::uuid[], $13::uuid[]) \
                 AS u(id, role, content, parent, depth, pos, children, on_path, siblings, prev, \
                      next)",
            &[
                &org, &chat, &ids, &roles, &texts, &parents, &depths, &positions, &children,
                &on_path, &siblings, &previous, &next,
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

/// `BACKGROUND_CHATS` single-branch chats of `BACKGROUND_MESSAGES`
/// messages each.
async fn background(cx: &TestContext, org: Uuid, user: Uuid) {
    let db = cx.db().await;
    db.execute(
        "INSERT INTO chats (id, organization_id, user_id, title, roots) \
         SELECT gen_random_uuid(), $1, $2, 'other ' || g, 1 FROM generate_series(1, $3) g",
        &[&org, &user, &BACKGROUND_CHATS],
    )
    .await
    .expect("other chats");
    db.execute(
        "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, depth, \
             sibling_index, children, on_path) \
         SELECT gen_random_uuid(), $1, c.id, CASE WHEN g % 2 = 0 THEN 'USER' ELSE 'MODEL' END, \
             repeat('other chat text ', 25), g, 1, 1, true \
         FROM chats c, generate_series(0, $2 - 1) g WHERE c.title LIKE 'other %'",
        &[&org, &BACKGROUND_MESSAGES],
    )
    .await
    .expect("other messages");
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
    background(&cx, org, me).await;
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
    let feedback = db
        .prepare(workspace_server::db::datastore::chat::active_path_feedback_sql())
        .await
        .expect("prepare the ratings");
    let statement_before = db.prepare(PATH_SQL_BEFORE).await.expect("prepare");
    let http = reqwest::Client::new();
    println!(
        "chat trees of {MESSAGES} messages with {BRANCHES} branches \
         ({QUESTION_BYTES}-byte questions, {ANSWER_BYTES}-byte answers), {rounds} reads each"
    );
    println!(
        "{:<6} {:>6} | {:>10} {:>10} {:>12} | {:>10} {:>10} {:>10}",
        "chat", "path", "sql p50", "sql p99", "before p50", "GET p50", "GET p99", "GET bytes"
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
        // The statement alone, then the GET alone: interleaved, each read
        // met the other's leftovers (the server still freeing a 1 MB
        // answer, the client's buffers) and the statement measured 6 ms
        // instead of its 3.8.
        let mut sql = Vec::new();
        for round in 0..warmup + rounds {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&org, &me, &chat];
            let started = Instant::now();
            let (rows, _ratings) =
                tokio::join!(db.query(&statement, &params), db.query(&feedback, &params));
            let took = started.elapsed();
            assert_eq!(rows.expect("the path").len(), path_len, "the active path");
            if round >= warmup {
                sql.push(took);
            }
        }
        // The statement as it was before (ratings joined to every row, the
        // chat's id on every row, sorted by PostgreSQL), side by side.
        let mut before = Vec::new();
        for round in 0..warmup + rounds {
            let started = Instant::now();
            db.query(&statement_before, &[&org, &me, &chat])
                .await
                .expect("the path as before");
            if round >= warmup {
                before.push(started.elapsed());
            }
        }
        let mut get = Vec::new();
        let mut bytes = 0;
        for round in 0..warmup + rounds {
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
                get.push(took_get);
                bytes = body.len();
            }
        }
        println!(
            "{:<6} {:>6} | {:>8.2}ms {:>8.2}ms {:>10.2}ms | {:>8.2}ms {:>8.2}ms {:>10}",
            name,
            path_len,
            percentile(&sql, 50.0),
            percentile(&sql, 99.0),
            percentile(&before, 50.0),
            percentile(&get, 50.0),
            percentile(&get, 99.0),
            bytes
        );
    }
    cx.teardown().await;
}
