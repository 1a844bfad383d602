//! A chat's messages form a tree (issue #35): editing a question and
//! regenerating an answer make siblings, the chat shows its active path
//! with each message's place among its siblings, switching moves the
//! path, and the model is sent the active path only (as a fake
//! OpenAI-compatible provider receives it). Two instances share the tree;
//! concurrent edits keep it whole.

use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use uuid::Uuid;
use workspace_client::Client;
use workspace_server::config::{Config, ModelConfig, ProviderKind};
use workspace_tests::fake_provider::FakeProvider;
use workspace_tests::resources::{self, chat_edit, chat_message, chat_regenerate};
use workspace_tests::{TestContext, error_of, req};

fn configure(fake_url: String) -> impl FnOnce(&mut Config) + Clone {
    move |c: &mut Config| {
        c.providers.offline_chunk_delay_ms = 0;
        c.providers.retry_backoff_ms = 5;
        c.models.insert(
            0,
            ModelConfig {
                name: "fake".into(),
                provider: Some(ProviderKind::OpenaiCompatible),
                upstream_model: None,
                base_url: Some(fake_url),
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
            },
        );
    }
}

async fn fake_model(client: &Client, org: Uuid) -> Uuid {
    client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|m| m.name == "fake")
        .expect("the fake model")
        .id
}

/// The chat's active path as `GET /api/chat` shows it.
async fn path(client: &Client, org: Uuid, chat: Uuid) -> Vec<Value> {
    let detail = client
        .chat_get()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .expect("chat/get")
        .into_inner();
    serde_json::to_value(detail).unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn ids(path: &[Value]) -> Vec<Uuid> {
    path.iter()
        .map(|m| m["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

fn id(v: &Value, field: &str) -> Option<Uuid> {
    v[field].as_str().map(|s| s.parse().unwrap())
}

/// `(sibling_position, sibling_count)` of a path message.
fn place(m: &Value) -> (u64, u64) {
    (
        m["sibling_position"].as_u64().unwrap(),
        m["sibling_count"].as_u64().unwrap(),
    )
}

async fn switch(client: &Client, org: Uuid, chat: Uuid, message: Uuid) -> Vec<Value> {
    let detail = client
        .chat_switch_branch()
        .org_id(org)
        .chat_id(chat)
        .body(workspace_client::types::SwitchBranchRequest::builder().message_id(message))
        .send()
        .await
        .expect("chat/switch_branch")
        .into_inner();
    serde_json::to_value(detail).unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// The messages the provider received last, `(role, content)`.
fn last_sent(fake: &FakeProvider) -> Vec<(String, String)> {
    fake.requests().last().expect("a request").messages()
}

fn turn(role: &str, content: &str) -> (String, String) {
    (role.to_string(), content.to_string())
}

#[tokio::test]
async fn edit_regenerate_and_switch_walk_the_tree_on_two_instances() {
    let fake = FakeProvider::start().await;
    let setup = configure(format!("{}/v1", fake.base_url()));
    let cx = TestContext::with_config("chat_tree", setup.clone()).await;
    let second = cx.second_instance(setup).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let on_second = resources::client_for(&format!("http://{}", second.local_addr()), &ada.token);
    let model = fake_model(&ada.client, org).await;

    let one = chat_message(
        &ada.client,
        org,
        json!({"content": "one", "model_id": model}),
    )
    .await;
    let chat = one.chat_id;
    let answer = one.text();
    let two = chat_message(
        &ada.client,
        org,
        json!({"content": "two", "chat_id": chat, "model_id": model}),
    )
    .await;
    let before = path(&ada.client, org, chat).await;
    assert_eq!(
        ids(&before),
        vec![
            one.question_id,
            one.message_id,
            two.question_id,
            two.message_id
        ]
    );
    assert!(before.iter().all(|m| place(m) == (1, 1)), "{before:?}");
    assert_eq!(id(&before[1], "parent_message_id"), Some(one.question_id));

    // An edit on the second instance: a sibling question and its answer;
    // the model sees the path above the edited question, then the new text.
    let edited = chat_edit(
        &on_second,
        org,
        json!({"message_id": two.question_id, "content": "two, edited"}),
    )
    .await;
    assert_eq!(edited.chat_id, chat);
    assert_ne!(edited.question_id, two.question_id);
    assert_eq!(
        last_sent(&fake),
        vec![
            turn("user", "one"),
            turn("assistant", &answer),
            turn("user", "two, edited")
        ]
    );
    let p = path(&ada.client, org, chat).await;
    assert_eq!(
        ids(&p),
        vec![
            one.question_id,
            one.message_id,
            edited.question_id,
            edited.message_id
        ]
    );
    assert_eq!(place(&p[2]), (2, 2));
    assert_eq!(id(&p[2], "previous_sibling_id"), Some(two.question_id));
    assert_eq!(id(&p[2], "next_sibling_id"), None);
    assert_eq!(id(&p[2], "parent_message_id"), Some(one.message_id));
    assert_eq!(p[2]["content"], "two, edited");
    assert_eq!(p[2]["metadata"]["edited_from"], json!(two.question_id));
    assert_eq!(place(&p[3]), (1, 1));

    // A regeneration: a sibling answer to the same question, asked with
    // the same history and question.
    let again = chat_regenerate(&ada.client, org, json!({"message_id": edited.message_id})).await;
    assert_eq!(again.question_id, edited.question_id);
    assert_eq!(
        last_sent(&fake),
        vec![
            turn("user", "one"),
            turn("assistant", &answer),
            turn("user", "two, edited")
        ]
    );
    let p = path(&on_second, org, chat).await;
    assert_eq!(ids(&p)[3], again.message_id);
    assert_eq!(place(&p[3]), (2, 2));
    assert_eq!(id(&p[3], "previous_sibling_id"), Some(edited.message_id));
    assert_eq!(
        p[3]["metadata"]["regenerated_from"],
        json!(edited.message_id)
    );
    assert_eq!(
        p[3]["model_id"],
        json!(model),
        "the answer's model by default"
    );

    // Switching: back to the first version (and what was below it) ...
    let p = switch(&on_second, org, chat, two.question_id).await;
    assert_eq!(
        ids(&p),
        vec![
            one.question_id,
            one.message_id,
            two.question_id,
            two.message_id
        ]
    );
    assert_eq!(place(&p[2]), (1, 2));
    assert_eq!(id(&p[2], "next_sibling_id"), Some(edited.question_id));
    // ... and forth: the edited question shows the answer last shown.
    let p = switch(&ada.client, org, chat, edited.question_id).await;
    assert_eq!(ids(&p)[3], again.message_id);
    let p = switch(&ada.client, org, chat, edited.message_id).await;
    assert_eq!(ids(&p)[2..], [edited.question_id, edited.message_id]);
    assert_eq!(ids(&path(&on_second, org, chat).await), ids(&p));

    // Sending continues from the shown leaf; the model sees that path.
    let three = chat_message(
        &on_second,
        org,
        json!({"content": "three", "chat_id": chat}),
    )
    .await;
    assert_eq!(
        last_sent(&fake),
        vec![
            turn("user", "one"),
            turn("assistant", &answer),
            turn("user", "two, edited"),
            turn("assistant", &edited.text()),
            turn("user", "three"),
        ]
    );
    let p = path(&ada.client, org, chat).await;
    assert_eq!(
        ids(&p),
        vec![
            one.question_id,
            one.message_id,
            edited.question_id,
            edited.message_id,
            three.question_id,
            three.message_id
        ]
    );

    // Editing the first message makes a second first message.
    let first = chat_edit(
        &ada.client,
        org,
        json!({"message_id": one.question_id, "content": "one, again"}),
    )
    .await;
    assert_eq!(last_sent(&fake), vec![turn("user", "one, again")]);
    let p = path(&ada.client, org, chat).await;
    assert_eq!(ids(&p), vec![first.question_id, first.message_id]);
    assert_eq!(place(&p[0]), (2, 2));
    assert_eq!(id(&p[0], "parent_message_id"), None);
    assert_eq!(id(&p[0], "previous_sibling_id"), Some(one.question_id));
    // Back to the first root: its whole branch as last shown.
    let p = switch(&ada.client, org, chat, one.question_id).await;
    assert_eq!(ids(&p).len(), 6);
    assert_eq!(ids(&p)[5], three.message_id);

    // The chat lists and deletes as before, with every branch.
    let listed = ada
        .client
        .chat_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.len(), 1);
    let stored: i64 = cx
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM chat_messages WHERE chat_id = $1",
            &[&chat],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 11, "every version is kept");
    tree_is_whole(&cx, chat).await;
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// The stored tree's invariants: each message's depth is its parent's + 1,
/// `children` counts its children, sibling positions are 1..n, the path is
/// the leaf and its ancestors.
async fn tree_is_whole(cx: &TestContext, chat: Uuid) {
    let db = cx.db().await;
    let rows = db
        .query(
            "SELECT id, parent_message_id, depth, sibling_index, children, on_path, siblings, \
                 previous_sibling_id, next_sibling_id \
             FROM chat_messages WHERE chat_id = $1",
            &[&chat],
        )
        .await
        .unwrap();
    let (leaf, roots): (Option<Uuid>, i32) = {
        let r = db
            .query_one("SELECT leaf_id, roots FROM chats WHERE id = $1", &[&chat])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    let by_id: HashMap<Uuid, &tokio_postgres::Row> =
        rows.iter().map(|r| (r.get::<_, Uuid>("id"), r)).collect();
    let mut siblings: HashMap<Option<Uuid>, Vec<(i32, Uuid)>> = HashMap::new();
    for r in &rows {
        let parent: Option<Uuid> = r.get("parent_message_id");
        let depth: i32 = r.get("depth");
        match parent {
            Some(p) => assert_eq!(by_id[&p].get::<_, i32>("depth") + 1, depth),
            None => assert_eq!(depth, 0),
        }
        siblings
            .entry(parent)
            .or_default()
            .push((r.get("sibling_index"), r.get("id")));
    }
    for (parent, mut group) in siblings {
        group.sort();
        let positions: Vec<i32> = group.iter().map(|(p, _)| *p).collect();
        assert_eq!(
            positions,
            (1..=positions.len() as i32).collect::<Vec<_>>(),
            "sibling positions under {parent:?}"
        );
        for (i, (_, id)) in group.iter().enumerate() {
            let row = by_id[id];
            assert_eq!(row.get::<_, i32>("siblings"), group.len() as i32);
            let previous: Option<Uuid> = row.get("previous_sibling_id");
            let next: Option<Uuid> = row.get("next_sibling_id");
            assert_eq!(previous, i.checked_sub(1).map(|j| group[j].1));
            assert_eq!(next, group.get(i + 1).map(|g| g.1));
        }
        match parent {
            Some(p) => assert_eq!(by_id[&p].get::<_, i32>("children"), positions.len() as i32),
            None => assert_eq!(roots, positions.len() as i32),
        }
    }
    let mut on_path: Vec<Uuid> = Vec::new();
    let mut at = leaf;
    while let Some(id) = at {
        on_path.push(id);
        at = by_id[&id].get("parent_message_id");
    }
    let mut flagged: Vec<Uuid> = rows
        .iter()
        .filter(|r| r.get::<_, bool>("on_path"))
        .map(|r| r.get("id"))
        .collect();
    flagged.sort();
    on_path.sort();
    assert_eq!(flagged, on_path, "the path is the leaf and its ancestors");
}

#[tokio::test]
async fn concurrent_edits_and_switches_on_two_instances_keep_one_tree() {
    let fake = FakeProvider::start().await;
    let setup = configure(format!("{}/v1", fake.base_url()));
    let cx = TestContext::with_config("chat_tree_race", setup.clone()).await;
    let second = cx.second_instance(setup).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let on_second = resources::client_for(&format!("http://{}", second.local_addr()), &ada.token);
    let one = chat_message(&ada.client, org, json!({"content": "one"})).await;
    let chat = one.chat_id;
    let two = chat_message(&ada.client, org, json!({"content": "two", "chat_id": chat})).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let client = if i % 2 == 0 {
            ada.client.clone()
        } else {
            on_second.clone()
        };
        let (q, a, q1) = (two.question_id, two.message_id, one.question_id);
        tasks.push(tokio::spawn(async move {
            match i % 4 {
                0 => {
                    chat_edit(
                        &client,
                        org,
                        json!({"message_id": q, "content": format!("edit {i}")}),
                    )
                    .await;
                }
                1 => {
                    chat_regenerate(&client, org, json!({"message_id": a})).await;
                }
                2 => {
                    switch(&client, org, chat, q1).await;
                }
                _ => {
                    chat_message(
                        &client,
                        org,
                        json!({"content": format!("more {i}"), "chat_id": chat}),
                    )
                    .await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    tree_is_whole(&cx, chat).await;
    let p = path(&ada.client, org, chat).await;
    for pair in p.windows(2) {
        assert_eq!(id(&pair[1], "parent_message_id"), id(&pair[0], "id"));
    }
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn edits_and_regenerations_are_checked_and_counted() {
    let cx = TestContext::with_config("chat_tree_rules", |c| {
        c.providers.offline_chunk_delay_ms = 0;
        c.features.daily_chat_limit = 3;
    })
    .await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.personal_org().await;
    let base = cx.base_url.clone();
    let one = chat_message(&ada.client, org, json!({"content": "one"})).await;
    let other = chat_message(&ada.client, org, json!({"content": "elsewhere"})).await;
    let q = [("org_id", org.to_string())];

    // The wrong kind of message.
    let (status, body) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/edit_message",
        &q,
        Some(json!({"message_id": one.message_id, "content": "x"})),
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (400, Some("not_a_question"))
    );
    let (status, body) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/regenerate",
        &q,
        Some(json!({"message_id": one.question_id})),
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (400, Some("not_an_answer"))
    );
    let (status, body) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/edit_message",
        &q,
        Some(json!({"message_id": one.question_id, "content": "  "})),
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (400, Some("invalid_message"))
    );

    // Another user's messages and another chat's message are not found.
    let bob_org = bob.personal_org().await;
    for (path, body) in [
        (
            "/api/chat/edit_message",
            json!({"message_id": one.question_id, "content": "mine"}),
        ),
        (
            "/api/chat/regenerate",
            json!({"message_id": one.message_id}),
        ),
    ] {
        let (status, _) = req(
            &base,
            &bob.token,
            Method::POST,
            path,
            &[("org_id", bob_org.to_string())],
            Some(body),
        )
        .await;
        assert_eq!(status, 404, "{path}");
    }
    let switched = ada
        .client
        .chat_switch_branch()
        .org_id(org)
        .chat_id(one.chat_id)
        .body(workspace_client::types::SwitchBranchRequest::builder().message_id(other.message_id))
        .send()
        .await;
    assert_eq!(error_of(switched).0, 404);
    let switched = bob
        .client
        .chat_switch_branch()
        .org_id(bob_org)
        .chat_id(one.chat_id)
        .body(workspace_client::types::SwitchBranchRequest::builder().message_id(one.message_id))
        .send()
        .await;
    assert_eq!(error_of(switched).0, 404);

    // The daily limit (3): two sends and one regeneration; then nothing
    // more, and a refused edit leaves no trace.
    chat_regenerate(&ada.client, org, json!({"message_id": one.message_id})).await;
    let (status, body) = req(
        &base,
        &ada.token,
        Method::POST,
        "/api/chat/edit_message",
        &q,
        Some(json!({"message_id": one.question_id, "content": "over"})),
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (429, Some("daily_chat_limit_exceeded"))
    );
    let p = path(&ada.client, org, one.chat_id).await;
    assert_eq!(p.len(), 2);
    assert_eq!(place(&p[0]), (1, 1), "the refused edit stored nothing");
    assert_eq!(place(&p[1]), (2, 2));
    cx.teardown().await;
}

#[tokio::test]
async fn existing_chats_become_single_branches_with_every_message() {
    // A database as release 0.3 (migration V33) left it.
    let admin = workspace_tests::admin_url().unwrap();
    let name = format!("ws_upgrade_{}", Uuid::new_v4().simple());
    let (admin_db, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin_db
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let url = workspace_tests::url_for(&admin, &name).unwrap();
    let tls = workspace_server::db::tls(None).unwrap();
    workspace_server::db::migrate_to(&url, &tls, 33)
        .await
        .unwrap();
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let (user, org) = (Uuid::new_v4(), Uuid::new_v4());
    let (linear, stray, empty) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    db.execute(
        "INSERT INTO users (id, email, email_normalized, first_name, last_name) \
         VALUES ($1, 'old@example.com', 'old@example.com', 'Old', 'User')",
        &[&user],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO organizations (id, name, slug) VALUES ($1, 'Old', 'old')",
        &[&org],
    )
    .await
    .unwrap();
    for chat in [linear, stray, empty] {
        db.execute(
            "INSERT INTO chats (id, organization_id, user_id, title) VALUES ($1, $2, $3, 'old')",
            &[&chat, &org, &user],
        )
        .await
        .unwrap();
    }
    // A chat as 0.3 wrote it: each message the child of the one before.
    let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    for (i, id) in ids.iter().enumerate() {
        let parent = i.checked_sub(1).map(|p| ids[p]);
        db.execute(
            "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, \
                 parent_message_id) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                id,
                &org,
                &linear,
                &if i % 2 == 0 { "USER" } else { "MODEL" },
                &format!("message {i}"),
                &parent,
            ],
        )
        .await
        .unwrap();
    }
    // A message naming a parent in another chat (never written, but not
    // refused before): it becomes a first message.
    let orphan = Uuid::new_v4();
    db.execute(
        "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, \
             parent_message_id) VALUES ($1, $2, $3, 'USER', 'stray', $4)",
        &[&orphan, &org, &stray, &ids[0]],
    )
    .await
    .unwrap();

    workspace_server::db::migrate(&url, &tls).await.unwrap();

    let rows = db
        .query(
            "SELECT id, parent_message_id, depth, sibling_index, children, on_path \
             FROM chat_messages WHERE chat_id = $1 ORDER BY seq",
            &[&linear],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 5, "every message kept");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.get::<_, Uuid>("id"), ids[i]);
        assert_eq!(r.get::<_, i32>("depth"), i as i32);
        assert_eq!(r.get::<_, i32>("sibling_index"), 1);
        assert_eq!(r.get::<_, i32>("children"), if i < 4 { 1 } else { 0 });
        assert!(r.get::<_, bool>("on_path"));
    }
    let chats = db
        .query(
            "SELECT id, leaf_id, roots FROM chats WHERE id = ANY($1)",
            &[&vec![linear, stray, empty]],
        )
        .await
        .unwrap();
    let of = |id: Uuid| {
        chats
            .iter()
            .find(|r| r.get::<_, Uuid>("id") == id)
            .map(|r| {
                (
                    r.get::<_, Option<Uuid>>("leaf_id"),
                    r.get::<_, i32>("roots"),
                )
            })
            .unwrap()
    };
    assert_eq!(of(linear), (Some(ids[4]), 1));
    assert_eq!(of(stray), (Some(orphan), 1));
    assert_eq!(of(empty), (None, 0));
    let stray_row = db
        .query_one(
            "SELECT parent_message_id, depth, on_path FROM chat_messages WHERE id = $1",
            &[&orphan],
        )
        .await
        .unwrap();
    assert_eq!(stray_row.get::<_, Option<Uuid>>(0), None);
    assert_eq!(stray_row.get::<_, i32>(1), 0);
    assert!(stray_row.get::<_, bool>(2));
    drop(db);
    admin_db
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
}
