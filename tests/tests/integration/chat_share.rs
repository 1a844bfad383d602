//! Share links of chats (issue #35): a snapshot of the active path read
//! without an account, unchanged when the chat goes on; revoked on every
//! instance at once; private to the chat's owner; nothing of the prompt
//! (knowledge-base excerpts, uploads) nor any id in it; rate limited per
//! address across instances; gone with the chat or the account; only the
//! token's hash stored.

use serde_json::{Value, json};
use uuid::Uuid;
use workspace_server::config::Config;
use workspace_tests::{TestContext, TestUser, error_of, http};

fn fast(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 0;
    c.providers.retry_backoff_ms = 5;
}

/// A chat of `user` with one answered message; its id.
async fn chat_with_answer(user: &TestUser, org: Uuid, content: &str) -> Uuid {
    workspace_tests::resources::chat_message(&user.client, org, json!({"content": content}))
        .await
        .chat_id
}

/// Another answered message in `chat`.
async fn go_on(user: &TestUser, org: Uuid, chat: Uuid, content: &str) {
    workspace_tests::resources::chat_message(
        &user.client,
        org,
        json!({"chat_id": chat, "content": content}),
    )
    .await;
}

async fn share(
    user: &TestUser,
    org: Uuid,
    chat: Uuid,
) -> workspace_client::types::ChatShareCreated {
    user.client
        .chat_share_create()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .expect("chat/share")
        .into_inner()
}

/// `GET /api/shared` without credentials at `base`: status, headers, JSON.
async fn read_raw(base: &str, token: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = http()
        .get(format!("{base}/api/shared"))
        .query(&[("token", token)])
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or_default())
}

fn assert_reader_headers(headers: &reqwest::header::HeaderMap) {
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["x-robots-tag"], "noindex");
}

/// The keys of a JSON object, sorted.
fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// Only the documented keys, at every level.
fn assert_only_documented_keys(snapshot: &Value) {
    assert_eq!(keys(snapshot), ["created_at", "messages", "title"]);
    for message in snapshot["messages"].as_array().unwrap() {
        assert_eq!(
            keys(message),
            ["content", "created_at", "model", "role", "status"]
        );
    }
}

#[tokio::test]
async fn a_share_link_is_a_snapshot_read_without_an_account() {
    let cx = TestContext::with_config("share_snapshot", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let chat = chat_with_answer(&ada, org, "Where is the lighthouse?").await;
    let created = share(&ada, org, chat).await;
    assert_eq!(created.chat_id, chat);
    assert_eq!(created.message_count, 2);
    assert!(created.token.starts_with("wsshare_"), "{}", created.token);
    assert_eq!(created.path, format!("/share/{}", created.token));
    assert_eq!(created.url, format!("{}{}", cx.base_url, created.path));

    // Read with the generated client's anonymous client.
    let shared = cx
        .anon()
        .chat_shared()
        .token(created.token.clone())
        .send()
        .await
        .expect("the link reads without an account")
        .into_inner();
    assert_eq!(shared.title, created.title);
    assert_eq!(shared.messages.len(), 2);
    assert_eq!(shared.messages[0].content, "Where is the lighthouse?");
    assert_eq!(
        shared.messages[0].role,
        workspace_client::types::ChatRole::User
    );
    assert_eq!(shared.messages[0].model, None);
    assert_eq!(
        shared.messages[1].model.as_deref(),
        Some("offline-dev-model")
    );
    assert!(shared.messages[1].content.contains("lighthouse"));
    let (s, headers, raw) = read_raw(&cx.base_url, &created.token).await;
    assert_eq!(s, 200);
    assert_reader_headers(&headers);
    assert_only_documented_keys(&raw);

    // The chat goes on (and is renamed): the snapshot does not.
    go_on(&ada, org, chat, "And the harbour?").await;
    ada.client
        .chat_update()
        .org_id(org)
        .chat_id(chat)
        .body(workspace_client::types::ChatWrite::builder().title(Some("Renamed".parse().unwrap())))
        .send()
        .await
        .unwrap();
    let (s, _, again) = read_raw(&cx.base_url, &created.token).await;
    assert_eq!(s, 200);
    assert_eq!(again["messages"], raw["messages"]);
    assert_eq!(again["title"], raw["title"]);
    // A new link snapshots the path as it is now.
    let newer = share(&ada, org, chat).await;
    assert_eq!(newer.message_count, 4);
    assert_eq!(newer.title, "Renamed");
    assert_ne!(newer.token, created.token);

    // The owner's list: newest first, views counted, never a token.
    let (s, _, listed) = {
        let response = http()
            .get(format!("{}/api/chat/shares/list", cx.base_url))
            .bearer_auth(&ada.token)
            .query(&[("org_id", org.to_string())])
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, (), response.json::<Value>().await.unwrap())
    };
    assert_eq!(s, 200);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], newer.id.to_string());
    assert_eq!(listed[1]["views"], 3);
    assert_eq!(listed[1]["revoked_at"], Value::Null);
    for item in listed {
        assert_eq!(
            keys(item),
            [
                "chat_id",
                "created_at",
                "id",
                "message_count",
                "revoked_at",
                "title",
                "views"
            ]
        );
    }
    let of_chat = ada
        .client
        .chat_shares_list()
        .org_id(org)
        .chat_id(Uuid::new_v4())
        .send()
        .await
        .unwrap();
    assert!(of_chat.is_empty());

    // Only the token's SHA-256 is stored, nowhere the token itself.
    let db = cx.db().await;
    let rows = db
        .query(
            "SELECT token_hash, row_to_json(s)::text FROM chat_shares s ORDER BY created_at",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    use sha2::Digest;
    let hash: Vec<u8> = rows[0].get(0);
    assert_eq!(
        hash,
        sha2::Sha256::digest(created.token.as_bytes()).to_vec()
    );
    for row in &rows {
        let text: String = row.get(1);
        for token in [&created.token, &newer.token] {
            let secret = token.trim_start_matches("wsshare_");
            assert!(!text.contains(secret), "a token is stored: {text}");
        }
    }

    // The page of the link: served by the server, with the token page's
    // headers (no Referer, no cache, not indexed) and its script.
    let page = http()
        .get(format!("{}{}", cx.base_url, created.path))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert_reader_headers(page.headers());
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(page.text().await.unwrap().contains("/share.js"));
    let script = http()
        .get(format!("{}/share.js", cx.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    assert!(script.text().await.unwrap().contains("/api/shared?token="));
    // The logs never show the token (the page's path nor the query).
    let log = std::fs::read_to_string(&cx.log_path).unwrap_or_default();
    assert!(
        !log.contains(created.token.trim_start_matches("wsshare_")),
        "the token is in the log"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn a_revoked_link_is_not_found_at_once_on_every_instance() {
    let cx = TestContext::with_config("share_revoke", fast).await;
    let second = cx.second_instance(fast).await;
    let second_url = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let chat = chat_with_answer(&ada, org, "hello").await;
    let created = share(&ada, org, chat).await;
    let (s, _, _) = read_raw(&second_url, &created.token).await;
    assert_eq!(s, 200, "any instance reads the link");

    ada.client
        .chat_share_revoke()
        .org_id(org)
        .share_id(created.id)
        .send()
        .await
        .expect("revoke");
    let (s, headers, gone) = read_raw(&second_url, &created.token).await;
    assert_eq!(s, 404, "{gone}");
    assert_eq!(gone["error_code"], "not_found");
    assert_reader_headers(&headers);
    // The same answer for an unknown and for a malformed token: no oracle.
    let unknown = format!("wsshare_{}", "A".repeat(43));
    for token in [unknown.as_str(), "garbage", ""] {
        let (s, headers, body) = read_raw(&cx.base_url, token).await;
        assert_eq!(s, 404, "{token}: {body}");
        assert_eq!(body["error_code"], gone["error_code"]);
        assert_eq!(body["message"], gone["message"]);
        assert_reader_headers(&headers);
    }
    let anon = error_of(
        cx.anon()
            .chat_shared()
            .token(created.token.clone())
            .send()
            .await,
    );
    assert_eq!(anon, (404, "not_found".to_string()));

    // Revoked: listed with its time, snapshot erased; revoking again 404.
    let listed = ada
        .client
        .chat_shares_list()
        .org_id(org)
        .send()
        .await
        .unwrap();
    assert!(listed[0].revoked_at.is_some());
    let db = cx.db().await;
    let snapshot: Value = db
        .query_one(
            "SELECT snapshot FROM chat_shares WHERE id = $1",
            &[&created.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(snapshot, json!([]));
    let again = error_of(
        ada.client
            .chat_share_revoke()
            .org_id(org)
            .share_id(created.id)
            .send()
            .await,
    );
    assert_eq!(again, (404, "not_found".to_string()));
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn only_the_owner_shares_lists_and_revokes() {
    let cx = TestContext::with_config("share_owner", fast).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.personal_org().await;
    let bob_org = bob.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    let chat = chat_with_answer(&ada, org, "private").await;

    // Bob, a member of the organization, and in his own organization.
    for o in [org, bob_org] {
        let e = error_of(
            bob.client
                .chat_share_create()
                .org_id(o)
                .chat_id(chat)
                .send()
                .await,
        );
        assert_eq!(e, (404, "not_found".to_string()));
    }
    let unknown = error_of(
        ada.client
            .chat_share_create()
            .org_id(org)
            .chat_id(Uuid::new_v4())
            .send()
            .await,
    );
    assert_eq!(unknown, (404, "not_found".to_string()));
    let created = share(&ada, org, chat).await;
    let listed = bob
        .client
        .chat_shares_list()
        .org_id(org)
        .send()
        .await
        .unwrap();
    assert!(listed.is_empty(), "bob lists none of ada's links");
    let e = error_of(
        bob.client
            .chat_share_revoke()
            .org_id(org)
            .share_id(created.id)
            .send()
            .await,
    );
    assert_eq!(e, (404, "not_found".to_string()));
    let (s, _, _) = read_raw(&cx.base_url, &created.token).await;
    assert_eq!(s, 200, "bob's attempt revoked nothing");

    // A member removed from the organization: his links stop at once
    // (bob shares his own chat in ada's organization, ada removes him).
    let bob_chat = chat_with_answer(&bob, org, "bob's").await;
    let bob_share = share(&bob, org, bob_chat).await;
    assert_eq!(read_raw(&cx.base_url, &bob_share.token).await.0, 200);
    ada.client
        .users_remove()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users/remove");
    assert_eq!(read_raw(&cx.base_url, &bob_share.token).await.0, 404);
    cx.teardown().await;
}

#[tokio::test]
async fn the_snapshot_holds_no_prompt_data_nor_ids() {
    use workspace_tests::fake_provider::{FakeProvider, Reply};
    let fake = FakeProvider::with_default(Reply::openai_text(&["Noted", "."])).await;
    let url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("share_no_prompt", move |c| {
        fast(c);
        c.models.push(workspace_server::config::ModelConfig {
            name: "fake".into(),
            provider: Some(workspace_server::config::ProviderKind::OpenaiCompatible),
            upstream_model: Some("fake-upstream".into()),
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
        });
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let model = ada
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|m| m.name == "fake")
        .unwrap()
        .id;
    let upload = ada
        .client
        .chat_upload_file(
            org,
            None,
            "facts.md",
            b"# Facts\nThe password is swordfish.".to_vec(),
        )
        .await
        .unwrap()
        .into_inner();
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({"name": "kb", "description": "", "embedding_model": "all-minilm-l6-v2", "sources": []}),
    )
    .await
    .id;
    let answered = workspace_tests::resources::chat_message(
        &ada.client,
        org,
        json!({"content": "What is the password?", "model_id": model,
               "upload_ids": [upload.id], "knowledge_base_ids": [kb]}),
    )
    .await;
    let chat = answered.chat_id;
    // The prompt carried the upload's text, and the chat keeps its prompt
    // data and ids.
    let sent = fake.requests();
    assert!(
        sent.iter()
            .any(|r| r.messages().iter().any(|(_, c)| c.contains("swordfish"))),
        "the upload went into the prompt"
    );
    let view = ada
        .client
        .chat_get()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!view.messages[1].prompt_data.is_null());

    let created = share(&ada, org, chat).await;
    let (s, _, snapshot) = read_raw(&cx.base_url, &created.token).await;
    assert_eq!(s, 200);
    assert_only_documented_keys(&snapshot);
    let text = snapshot.to_string();
    let ids = [
        upload.id,
        kb,
        chat,
        answered.message_id,
        view.messages[0].id,
        ada.id,
        org,
        model,
    ];
    for id in ids {
        assert!(!text.contains(&id.to_string()), "{id} in {text}");
    }
    for word in [
        "swordfish",
        "facts.md",
        "prompt_data",
        "metadata",
        "sources",
        "upload",
        "ada@example.com",
    ] {
        assert!(!text.contains(word), "{word:?} in {text}");
    }
    assert_eq!(snapshot["messages"][0]["content"], "What is the password?");
    assert_eq!(snapshot["messages"][1]["content"], "Noted.");
    assert_eq!(snapshot["messages"][1]["model"], "fake");
    // And so for what is stored.
    let stored: String = cx
        .db()
        .await
        .query_one("SELECT snapshot::text FROM chat_shares", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!stored.contains("swordfish") && !stored.contains(&upload.id.to_string()));
    cx.teardown().await;
}

#[tokio::test]
async fn reading_links_is_rate_limited_per_address_across_instances() {
    let limited = |c: &mut Config| {
        fast(c);
        c.rate_limits.shared_chat_per_address = 3;
        c.rate_limits.window_secs = 60;
    };
    let cx = TestContext::with_config("share_rate_limit", limited).await;
    let second = cx.second_instance(limited).await;
    let second_url = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let chat = chat_with_answer(&ada, org, "hi").await;
    let created = share(&ada, org, chat).await;
    // Found or not, every read counts: two guesses and one read on the
    // first instance, then the second instance refuses.
    assert_eq!(read_raw(&cx.base_url, "wsshare_guess").await.0, 404);
    assert_eq!(read_raw(&cx.base_url, "another guess").await.0, 404);
    assert_eq!(read_raw(&cx.base_url, &created.token).await.0, 200);
    let (retry, code) = workspace_tests::too_many_requests(
        http()
            .get(format!("{second_url}/api/shared"))
            .query(&[("token", created.token.as_str())]),
    )
    .await;
    assert_eq!(code, "rate_limited");
    assert!((1..=120).contains(&retry), "{retry}");
    let (s, headers, _) = read_raw(&cx.base_url, &created.token).await;
    assert_eq!(s, 429);
    assert_reader_headers(&headers);
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn deleting_the_chat_or_the_account_ends_the_link() {
    let cx = TestContext::with_config("share_deletion", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let db = cx.db().await;

    // The chat deleted: the link is gone with it (cascade).
    let chat = chat_with_answer(&ada, org, "soon gone").await;
    let created = share(&ada, org, chat).await;
    ada.client
        .chat_delete_session()
        .session_id(chat)
        .send()
        .await
        .expect("delete_session");
    assert_eq!(read_raw(&cx.base_url, &created.token).await.0, 404);
    let left: i64 = db
        .query_one(
            "SELECT count(*) FROM chat_shares WHERE chat_id = $1",
            &[&chat],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);

    // Marked DELETED (kept until deleted for good): not read either.
    let chat = chat_with_answer(&ada, org, "hidden").await;
    let hidden = share(&ada, org, chat).await;
    ada.client
        .chat_update()
        .org_id(org)
        .chat_id(chat)
        .body(
            workspace_client::types::ChatWrite::builder()
                .status(Some(workspace_client::types::ChatStatus::Deleted)),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(read_raw(&cx.base_url, &hidden.token).await.0, 404);

    // The account deleted: its links stop at once, before the deletion
    // job reaches the rows, and go with the account.
    let eve = cx.user("eve").await;
    let eve_org = eve.personal_org().await;
    let eve_chat = chat_with_answer(&eve, eve_org, "eve's").await;
    let eve_share = share(&eve, eve_org, eve_chat).await;
    assert_eq!(read_raw(&cx.base_url, &eve_share.token).await.0, 200);
    eve.client
        .users_delete_me()
        .body(
            workspace_client::types::AccountDeleteRequest::builder()
                .password(workspace_tests::TEST_PASSWORD.to_string()),
        )
        .send()
        .await
        .expect("users/me/delete");
    assert_eq!(read_raw(&cx.base_url, &eve_share.token).await.0, 404);
    let mut gone = false;
    for _ in 0..100 {
        let n: i64 = db
            .query_one(
                "SELECT count(*) FROM chat_shares WHERE user_id = $1",
                &[&eve.id],
            )
            .await
            .unwrap()
            .get(0);
        if n == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "the account's links went with it");
    cx.teardown().await;
}

#[tokio::test]
async fn snapshots_are_bounded() {
    let cx = TestContext::with_config("share_bounds", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let db = cx.db().await;

    // A chat without messages: nothing to share.
    let empty = ada
        .client
        .chat_create()
        .org_id(org)
        .body(workspace_client::types::ChatWrite::builder())
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let e = error_of(
        ada.client
            .chat_share_create()
            .org_id(org)
            .chat_id(empty)
            .send()
            .await,
    );
    assert_eq!(e, (409, "nothing_to_share".to_string()));

    // More than 1 MiB of text on the path.
    let chat = chat_with_answer(&ada, org, "big").await;
    db.execute(
        "UPDATE chat_messages SET content = repeat('x', 1048577) \
         WHERE chat_id = $1 AND role = 'MODEL'",
        &[&chat],
    )
    .await
    .unwrap();
    let e = error_of(
        ada.client
            .chat_share_create()
            .org_id(org)
            .chat_id(chat)
            .send()
            .await,
    );
    assert_eq!(e, (409, "share_too_large".to_string()));

    // More than 500 messages on the path.
    let chat = chat_with_answer(&ada, org, "long").await;
    db.execute(
        "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, depth, \
             sibling_index, on_path) \
         SELECT gen_random_uuid(), $1, $2, 'USER', 'more', 1 + g, 1, true \
         FROM generate_series(1, 499) g",
        &[&org, &chat],
    )
    .await
    .unwrap();
    let e = error_of(
        ada.client
            .chat_share_create()
            .org_id(org)
            .chat_id(chat)
            .send()
            .await,
    );
    assert_eq!(e, (409, "share_too_large".to_string()));
    // Exactly 500 is fine.
    db.execute(
        "DELETE FROM chat_messages WHERE chat_id = $1 AND depth = 500",
        &[&chat],
    )
    .await
    .unwrap();
    assert_eq!(share(&ada, org, chat).await.message_count, 500);

    // At most 100 live links per user and organization; revoking frees one.
    let small = chat_with_answer(&ada, org, "small").await;
    let mut last = None;
    for _ in 0..99 {
        last = Some(share(&ada, org, small).await);
    }
    let e = error_of(
        ada.client
            .chat_share_create()
            .org_id(org)
            .chat_id(small)
            .send()
            .await,
    );
    assert_eq!(e, (409, "too_many_shares".to_string()));
    ada.client
        .chat_share_revoke()
        .org_id(org)
        .share_id(last.unwrap().id)
        .send()
        .await
        .unwrap();
    share(&ada, org, small).await;
    cx.teardown().await;
}

/// The snapshot is the chat's active path: after an edit only the edited
/// branch, after switching back the earlier one; a link keeps the path it
/// was made with.
#[tokio::test]
async fn the_snapshot_is_the_active_path() {
    use workspace_tests::resources::{chat_edit, chat_message};
    let cx = TestContext::with_config("share_active_path", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let one = chat_message(&ada.client, org, json!({"content": "one"})).await;
    let chat = one.chat_id;
    let two = chat_message(&ada.client, org, json!({"chat_id": chat, "content": "two"})).await;
    chat_edit(
        &ada.client,
        org,
        json!({"message_id": two.question_id, "content": "two, edited"}),
    )
    .await;
    let contents = |v: &Value| -> Vec<String> {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "USER")
            .map(|m| m["content"].as_str().unwrap().to_string())
            .collect()
    };
    let edited = share(&ada, org, chat).await;
    assert_eq!(edited.message_count, 4);
    let (_, _, snapshot) = read_raw(&cx.base_url, &edited.token).await;
    assert_eq!(contents(&snapshot), ["one", "two, edited"]);

    ada.client
        .chat_switch_branch()
        .org_id(org)
        .chat_id(chat)
        .body(workspace_client::types::SwitchBranchRequest::builder().message_id(two.question_id))
        .send()
        .await
        .expect("chat/switch_branch");
    let earlier = share(&ada, org, chat).await;
    let (_, _, snapshot) = read_raw(&cx.base_url, &earlier.token).await;
    assert_eq!(contents(&snapshot), ["one", "two"]);
    assert!(
        snapshot["messages"][3]["content"]
            .as_str()
            .unwrap()
            .contains("\"two\""),
        "the answer of that branch: {snapshot}"
    );
    let (_, _, again) = read_raw(&cx.base_url, &edited.token).await;
    assert_eq!(
        contents(&again),
        ["one", "two, edited"],
        "links keep their path"
    );
    cx.teardown().await;
}

/// The link's page in a real browser (headless Chromium through
/// `examples/web/test/share.test.mjs`): the snapshot shown as text, no
/// console error under the page's Content-Security-Policy, no `Referer`
/// on its API call, and a revoked link said to be gone. Saves a
/// screenshot to `target/share-page.png`.
#[tokio::test]
async fn the_share_page_shows_the_snapshot_in_a_browser() {
    use std::path::Path;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let web = root.join("examples/web");
    assert!(
        web.join("node_modules/playwright-core").exists(),
        "run `cargo xtask test` (it installs examples/web's packages)"
    );
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("Debian's chromium (apt-get install chromium; .ci/run installs it)");
    let cx = TestContext::with_config("share_page_browser", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let chat = chat_with_answer(
        &ada,
        org,
        "<img src=x onerror=\"window.pwned=1\">Where is the lighthouse?",
    )
    .await;
    ada.client
        .chat_update()
        .org_id(org)
        .chat_id(chat)
        .body(
            workspace_client::types::ChatWrite::builder()
                .title(Some("Shared trip".parse().unwrap())),
        )
        .send()
        .await
        .unwrap();
    let live = share(&ada, org, chat).await;
    let revoked = share(&ada, org, chat).await;
    ada.client
        .chat_share_revoke()
        .org_id(org)
        .share_id(revoked.id)
        .send()
        .await
        .unwrap();
    let output = tokio::process::Command::new("node")
        .current_dir(&web)
        .args(["--test", "--test-reporter=spec", "test/share.test.mjs"])
        .env("SHARE_URL", &live.url)
        .env("REVOKED_URL", &revoked.url)
        .env("CHROMIUM", chromium)
        .env("SCREENSHOT", root.join("target/share-page.png"))
        .output()
        .await
        .expect("running node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the browser test failed");
    assert!(stdout.contains("pass 2"), "{stdout}");
    cx.teardown().await;
}
