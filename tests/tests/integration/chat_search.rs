//! Search across one's chats, pinned chats and folders (issue #35): every
//! script (German, Russian, Japanese and Chinese without spaces, emoji),
//! ranking (titles above messages), escaped highlights, cursor paging,
//! privacy (another user's chats in the same organization, another
//! organization's), folders (names unique per user case-insensitively in
//! every script, moves, deletion moving chats out, another user's folder
//! 404), pins first in the list, and two server instances on one database.

use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;
use workspace_client::Client;
use workspace_client::types;
use workspace_server::config::Config;
use workspace_tests::{TestContext, error_of, raw, req};

fn fast(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 0;
}

/// A chat titled `title` (created through the API) holding `messages`.
/// The messages are written with SQL, alternately the user's and the
/// model's, as first messages off the active path: the search reads every
/// message of a chat whatever its branch, and this keeps these tests
/// apart from the message writers (`send_message`, edits), which issue #35
/// rewrites at the same time.
async fn chat_with(
    cx: &TestContext,
    client: &Client,
    org: Uuid,
    title: &str,
    messages: &[&str],
) -> Uuid {
    let chat = client
        .chat_create()
        .org_id(org)
        .body(types::ChatWrite::builder().title(Some(title.try_into().unwrap())))
        .send()
        .await
        .expect("chat_create")
        .into_inner()
        .id;
    let db = cx.db().await;
    let messages: Vec<(&str, String)> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (if i % 2 == 0 { "USER" } else { "MODEL" }, m.to_string()))
        .collect();
    workspace_tests::fixtures::append_chat_messages(&db, org, chat, None, &messages).await;
    chat
}

/// One page of `q`.
async fn search(client: &Client, org: Uuid, q: &str) -> types::ChatSearchPage {
    client
        .chat_search()
        .org_id(org)
        .q(q)
        .send()
        .await
        .unwrap_or_else(|e| panic!("chat_search {q:?}: {e:?}"))
        .into_inner()
}

fn chats(page: &types::ChatSearchPage) -> Vec<Uuid> {
    page.results.iter().map(|r| r.chat_id).collect()
}

#[tokio::test]
async fn search_finds_every_script_ranks_titles_first_and_escapes_snippets() {
    let cx = TestContext::with_config("chat_search_scripts", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let c = &ada.client;

    let de = chat_with(
        &cx,
        c,
        org,
        "Reise",
        &["Grüße aus München, die Straße ist lang"],
    )
    .await;
    let ru = chat_with(&cx, c, org, "Заметки", &["Привет, мир! Как дела?"]).await;
    let ja = chat_with(&cx, c, org, "旅行", &["東京の天気は晴れです"]).await;
    let zh = chat_with(&cx, c, org, "菜单", &["北京烤鸭很好吃"]).await;
    let party = chat_with(&cx, c, org, "Party", &["Launch day 🎉🚀 at noon, 50% off"]).await;
    let xss = chat_with(
        &cx,
        c,
        org,
        "XSS",
        &["look: <script>alert('x')</script> & done"],
    )
    .await;
    let by_title = chat_with(&cx, c, org, "Budget planning 2026", &["nothing to see"]).await;
    let by_body = chat_with(&cx, c, org, "Misc", &["the budget is tight this year"]).await;

    // Written through the first instance, searched through a second one.
    let second = cx.second_instance(fast).await;
    let c2 = workspace_tests::resources::client_for(
        &format!("http://{}", second.local_addr()),
        &ada.token,
    );

    for (q, want) in [
        // German, either case, parts of words.
        ("grüße", de),
        ("MÜNCHEN", de),
        ("Münch", de),
        ("straße", de),
        // Russian in another case, and as words in another order.
        ("ПРИВЕТ", ru),
        ("мир привет", ru),
        ("дел", ru),
        // Japanese and Chinese: no spaces between words.
        ("天気", ja),
        ("晴れ", ja),
        ("烤鸭", zh),
        // Emoji, and LIKE's wildcards taken literally.
        ("🎉", party),
        ("50%", party),
        // Words of a message in any order.
        ("tight budget", by_body),
    ] {
        let page = search(&c2, org, q).await;
        assert_eq!(chats(&page), vec![want], "{q}: {page:?}");
        let hit = &page.results[0];
        assert!(hit.message_id.is_some(), "{q}: {hit:?}");
        assert!(hit.snippet.contains("<mark>"), "{q}: {}", hit.snippet);
    }
    let page = search(&c2, org, "天気").await;
    assert!(
        page.results[0]
            .snippet
            .contains("東京の<mark>天気</mark>は晴れ"),
        "{}",
        page.results[0].snippet
    );
    let page = search(&c2, org, "ПРИВЕТ").await;
    assert!(
        page.results[0]
            .snippet
            .contains("<mark>Привет</mark>, мир!"),
        "{}",
        page.results[0].snippet
    );
    // `_` is no wildcard either: nothing has "a_b".
    assert!(search(&c2, org, "a_b").await.results.is_empty());
    assert!(search(&c2, org, "%").await.results.len() == 1);

    // A title match ranks above a message match.
    let page = search(&c2, org, "budget").await;
    assert_eq!(chats(&page), vec![by_title, by_body], "{page:?}");
    assert!(page.results[0].title_match && !page.results[1].title_match);
    assert_eq!(page.results[0].message_id, None);
    assert_eq!(
        page.results[0].title_highlight,
        "<mark>Budget</mark> planning 2026"
    );
    assert_eq!(page.results[0].snippet, page.results[0].title_highlight);
    assert!(
        page.results[1]
            .snippet
            .contains("the <mark>budget</mark> is tight"),
        "{}",
        page.results[1].snippet
    );

    // Markup in a message comes back escaped; only the marks are markup.
    let page = search(&c2, org, "script").await;
    assert_eq!(chats(&page), vec![xss]);
    let snippet = &page.results[0].snippet;
    assert!(!snippet.contains("<script"), "{snippet}");
    assert!(
        snippet.contains(
            "&lt;<mark>script</mark>&gt;alert(&#39;x&#39;)&lt;/<mark>script</mark>&gt; &amp; done"
        ),
        "{snippet}"
    );
    let page = search(&c2, org, "<script>").await;
    assert_eq!(chats(&page), vec![xss]);
    assert!(
        page.results[0]
            .snippet
            .contains("<mark>&lt;script&gt;</mark>"),
        "{}",
        page.results[0].snippet
    );

    // Nothing found; and web-search syntax never fails.
    for q in ["zzqqxx", "\"unclosed", "-budget", "or", "a:*|b", "\\'"] {
        let page = search(&c2, org, q).await;
        assert!(page.next_cursor.is_none(), "{q}");
        if q == "zzqqxx" || q == "-budget" {
            assert!(page.results.is_empty(), "{q}: {page:?}");
        }
    }

    // Bounds: a clear 400 for each (sent raw: the client checks them too).
    let base = second.local_addr().to_string();
    let url = format!("http://{base}");
    let q = |v: &str| vec![("org_id", org.to_string()), ("q", v.to_string())];
    for (query, code) in [
        (q(""), "invalid_query"),
        (q("   \n\t"), "invalid_query"),
        (q(&"x".repeat(201)), "invalid_query"),
        (q("a\0b"), "invalid_query"),
        (
            vec![
                ("org_id", org.to_string()),
                ("q", "x".into()),
                ("limit", "0".into()),
            ],
            "invalid_pagination",
        ),
        (
            vec![
                ("org_id", org.to_string()),
                ("q", "x".into()),
                ("limit", "51".into()),
            ],
            "invalid_pagination",
        ),
        (
            vec![
                ("org_id", org.to_string()),
                ("q", "x".into()),
                ("cursor", "not-a-cursor".into()),
            ],
            "invalid_cursor",
        ),
    ] {
        let (status, got) = raw(
            &url,
            Some(&ada.token),
            Method::GET,
            "/api/chat/search",
            &query,
            None,
        )
        .await;
        assert_eq!((status, got.as_str()), (400, code), "{query:?}");
    }
    // 200 characters of Cyrillic are within bounds.
    let (status, _) = req(
        &url,
        &ada.token,
        Method::GET,
        "/api/chat/search",
        &q(&"ж".repeat(200)),
        None,
    )
    .await;
    assert_eq!(status, 200);

    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn search_pages_by_cursor_and_finds_only_the_callers_chats() {
    let cx = TestContext::with_config("chat_search_privacy", fast).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let eve = cx.user("eve").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    let eve_org = eve.personal_org().await;

    let mut mine = Vec::new();
    for i in 0..5 {
        mine.push(chat_with(&cx, &ada.client, org, &format!("Nebula {i}"), &["hello"]).await);
    }
    // Bob's chat in the same organization, and Eve's in hers.
    let bobs = chat_with(&cx, &bob.client, org, "Nebula of Bob", &["nebula secret"]).await;
    let eves = chat_with(
        &cx,
        &eve.client,
        eve_org,
        "Nebula of Eve",
        &["nebula secret"],
    )
    .await;

    // Pages of two, each result once, ending with a null cursor.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut request = ada.client.chat_search().org_id(org).q("nebula").limit(2);
        if let Some(c) = &cursor {
            request = request.cursor(c.clone());
        }
        let page = request.send().await.unwrap().into_inner();
        pages += 1;
        assert!(page.results.len() <= 2);
        seen.extend(chats(&page));
        match page.next_cursor {
            Some(next) => {
                // The cursor belongs to its query.
                let (status, code) = raw(
                    &cx.base_url,
                    Some(&ada.token),
                    Method::GET,
                    "/api/chat/search",
                    &[
                        ("org_id", org.to_string()),
                        ("q", "other".into()),
                        ("cursor", next.clone()),
                    ],
                    None,
                )
                .await;
                assert_eq!((status, code.as_str()), (400, "invalid_cursor"));
                cursor = Some(next);
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 5, "{seen:?}");
    let mut want = mine.clone();
    want.sort();
    assert_eq!(sorted, want);
    assert!(!seen.contains(&bobs) && !seen.contains(&eves));

    // "secret" is only in Bob's and Eve's chats: Ada finds nothing.
    assert!(search(&ada.client, org, "secret").await.results.is_empty());
    assert_eq!(chats(&search(&bob.client, org, "secret").await), vec![bobs]);
    assert_eq!(
        chats(&search(&eve.client, eve_org, "secret").await),
        vec![eves]
    );
    // Ada in Eve's organization: not a member.
    let (status, _) = error_of(
        ada.client
            .chat_search()
            .org_id(eve_org)
            .q("secret")
            .send()
            .await,
    );
    assert!(status == 403 || status == 404, "{status}");

    // DELETED chats only when asked for.
    ada.client
        .chat_update()
        .org_id(org)
        .chat_id(mine[0])
        .body(types::ChatWrite::builder().status(Some(types::ChatStatus::Deleted)))
        .send()
        .await
        .unwrap();
    let page = ada
        .client
        .chat_search()
        .org_id(org)
        .q("nebula")
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.results.len(), 4);
    assert!(!chats(&page).contains(&mine[0]));
    let page = ada
        .client
        .chat_search()
        .org_id(org)
        .q("nebula")
        .status(types::ChatStatus::Deleted)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(chats(&page), vec![mine[0]]);

    // Messages off the active path (another branch) are searched too: a
    // question edited, then the branch switched back to the original.
    let original = ada
        .client
        .chat_get()
        .org_id(org)
        .chat_id(mine[1])
        .send()
        .await
        .unwrap()
        .into_inner()
        .messages[0]
        .id;
    workspace_tests::resources::chat_edit(
        &ada.client,
        org,
        json!({"message_id": original,
               "content": "an edited question about quasars"}),
    )
    .await;
    ada.client
        .chat_switch_branch()
        .org_id(org)
        .chat_id(mine[1])
        .body(types::SwitchBranchRequest::builder().message_id(original))
        .send()
        .await
        .unwrap();
    assert_eq!(
        chats(&search(&ada.client, org, "quasar").await),
        vec![mine[1]]
    );

    cx.teardown().await;
}

async fn folder(client: &Client, org: Uuid, name: &str) -> types::ChatFolder {
    client
        .chat_folders_create()
        .org_id(org)
        .body(types::ChatFolderWrite::builder().name(name))
        .send()
        .await
        .unwrap_or_else(|e| panic!("create folder {name}: {e:?}"))
        .into_inner()
}

async fn list(client: &Client, org: Uuid, folder: Option<Uuid>, pinned: Option<bool>) -> Vec<Uuid> {
    let mut request = client.chat_list().org_id(org);
    if let Some(f) = folder {
        request = request.folder_id(f);
    }
    if let Some(p) = pinned {
        request = request.pinned(p);
    }
    request
        .send()
        .await
        .unwrap()
        .into_inner()
        .iter()
        .map(|c| c.id)
        .collect()
}

async fn put_chat(
    client: &Client,
    org: Uuid,
    chat: Uuid,
    body: Value,
) -> Result<(), (u16, String)> {
    let body: types::ChatWrite = serde_json::from_value(body).unwrap();
    match client
        .chat_update()
        .org_id(org)
        .chat_id(chat)
        .body(body)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => Err(error_of::<()>(Err(e))),
    }
}

#[tokio::test]
async fn folders_are_private_and_deleting_one_moves_its_chats_out() {
    let cx = TestContext::with_config("chat_folders", fast).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    let c = &ada.client;
    let second = cx.second_instance(fast).await;
    let c2 = workspace_tests::resources::client_for(
        &format!("http://{}", second.local_addr()),
        &ada.token,
    );

    // Create, list (on the other instance), names unique case-insensitively
    // in every script.
    let work = folder(c, org, "  Work  ").await;
    assert_eq!(work.name, "Work");
    assert_eq!(work.chat_count, 0);
    let projects = folder(c, org, "Проекты").await;
    for taken in ["work", "WORK", "ПРОЕКТЫ", "проекты"] {
        let (status, code) = error_of(
            c.chat_folders_create()
                .org_id(org)
                .body(types::ChatFolderWrite::builder().name(taken))
                .send()
                .await,
        );
        assert_eq!(
            (status, code.as_str()),
            (409, "folder_name_taken"),
            "{taken}"
        );
    }
    for (name, code) in [("   ", "invalid_name"), (&*"n".repeat(101), "invalid_name")] {
        let (status, got) = raw(
            &cx.base_url,
            Some(&ada.token),
            Method::POST,
            "/api/chat/folders",
            &[("org_id", org.to_string())],
            Some(json!({"name": name})),
        )
        .await;
        assert_eq!((status, got.as_str()), (400, code), "{name:?}");
    }
    let listed = c2
        .chat_folders_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        vec!["Work", "Проекты"]
    );

    // Rename: to a taken name 409, to its own name in another case 200.
    let rename = |id: Uuid, name: &'static str| {
        c.chat_folders_rename()
            .org_id(org)
            .folder_id(id)
            .body(types::ChatFolderWrite::builder().name(name))
            .send()
    };
    let (status, code) = error_of(rename(work.id, "проекты").await);
    assert_eq!((status, code.as_str()), (409, "folder_name_taken"));
    assert_eq!(rename(work.id, "WORK").await.unwrap().name, "WORK");
    assert_eq!(rename(work.id, "Job").await.unwrap().name, "Job");

    // Chats into the folder: at creation, by PUT, by move.
    let a = c
        .chat_create()
        .org_id(org)
        .body(
            types::ChatWrite::builder()
                .title(Some("a".try_into().unwrap()))
                .folder_id(Some(work.id)),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let b = chat_with(&cx, c, org, "b", &["folded answer"]).await;
    let d = chat_with(&cx, c, org, "d", &[]).await;
    let before = c
        .chat_get()
        .org_id(org)
        .chat_id(b)
        .send()
        .await
        .unwrap()
        .into_inner();
    put_chat(c, org, b, json!({"folder_id": work.id}))
        .await
        .unwrap();
    let after = c
        .chat_get()
        .org_id(org)
        .chat_id(b)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.folder_id, Some(work.id));
    // Organizing a chat does not make it recent.
    assert_eq!(after.updated_at, before.updated_at);
    let moved = c2
        .chat_folders_move()
        .org_id(org)
        .body(
            types::ChatMoveRequest::builder()
                .chat_ids(vec![d, d])
                .folder_id(Some(projects.id)),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(moved.moved, 1);
    let mut in_work = list(c, org, Some(work.id), None).await;
    in_work.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(in_work, want);
    assert_eq!(list(c, org, Some(projects.id), None).await, vec![d]);
    // Search within a folder.
    let page = c
        .chat_search()
        .org_id(org)
        .q("folded")
        .folder_id(work.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(chats(&page), vec![b]);
    assert_eq!(page.results[0].folder_id, Some(work.id));
    assert!(
        c.chat_search()
            .org_id(org)
            .q("folded")
            .folder_id(projects.id)
            .send()
            .await
            .unwrap()
            .into_inner()
            .results
            .is_empty()
    );

    // Bob's folder is not Ada's: 404 for every use, and not listed.
    let bobs = folder(&bob.client, org, "Work").await; // his own names
    let (status, code) = put_chat(c, org, a, json!({"folder_id": bobs.id}))
        .await
        .unwrap_err();
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let (status, code) = error_of(
        c.chat_folders_move()
            .org_id(org)
            .body(
                types::ChatMoveRequest::builder()
                    .chat_ids(vec![a])
                    .folder_id(Some(bobs.id)),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let (status, _) = error_of(rename(bobs.id, "Mine").await);
    assert_eq!(status, 404);
    let (status, _) = error_of(
        c.chat_folders_delete()
            .org_id(org)
            .folder_id(bobs.id)
            .send()
            .await,
    );
    assert_eq!(status, 404);
    let (status, code) = error_of(
        c.chat_create()
            .org_id(org)
            .body(types::ChatWrite::builder().folder_id(Some(bobs.id)))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "unknown_folder"));
    // Nor can Bob move Ada's chats into his folder (all or nothing).
    let (status, _) = error_of(
        bob.client
            .chat_folders_move()
            .org_id(org)
            .body(
                types::ChatMoveRequest::builder()
                    .chat_ids(vec![a])
                    .folder_id(Some(bobs.id)),
            )
            .send()
            .await,
    );
    assert_eq!(status, 404);
    assert!(list(c, org, Some(bobs.id), None).await.is_empty());
    let names: Vec<String> = c
        .chat_folders_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(names, vec!["Job", "Проекты"]);
    assert_eq!(
        bob.client
            .chat_folders_list()
            .org_id(org)
            .send()
            .await
            .unwrap()
            .len(),
        1
    );

    // Out of any folder with a null folder_id.
    c.chat_folders_move()
        .org_id(org)
        .body(
            types::ChatMoveRequest::builder()
                .chat_ids(vec![d])
                .folder_id(None),
        )
        .send()
        .await
        .unwrap();
    assert!(list(c, org, Some(projects.id), None).await.is_empty());

    // Deleting a folder moves its chats out; they stay.
    let counted = c
        .chat_folders_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(counted[0].chat_count, 2);
    let deleted = c2
        .chat_folders_delete()
        .org_id(org)
        .folder_id(work.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.chats_moved, 2);
    for chat in [a, b] {
        let shown = c.chat_get().org_id(org).chat_id(chat).send().await.unwrap();
        assert_eq!(shown.folder_id, None);
    }
    let (status, _) = error_of(
        c.chat_folders_delete()
            .org_id(org)
            .folder_id(work.id)
            .send()
            .await,
    );
    assert_eq!(status, 404);

    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn pinned_chats_come_first_in_the_list() {
    let cx = TestContext::with_config("chat_pins", fast).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let c = &ada.client;
    let second = cx.second_instance(fast).await;
    let c2 = workspace_tests::resources::client_for(
        &format!("http://{}", second.local_addr()),
        &ada.token,
    );

    let one = chat_with(&cx, c, org, "one", &[]).await;
    let two = chat_with(&cx, c, org, "two", &[]).await;
    let three = chat_with(&cx, c, org, "three", &[]).await;
    // Most recently updated first.
    assert_eq!(list(c, org, None, None).await, vec![three, two, one]);

    put_chat(c, org, one, json!({"pinned": true}))
        .await
        .unwrap();
    assert_eq!(list(&c2, org, None, None).await, vec![one, three, two]);
    let shown = c2.chat_get().org_id(org).chat_id(one).send().await.unwrap();
    assert!(shown.pinned);
    let pinned_at = shown.pinned_at.expect("pinned_at");
    // Pinning again keeps pinned_at; the most recently pinned comes first.
    put_chat(c, org, one, json!({"pinned": true}))
        .await
        .unwrap();
    put_chat(c, org, two, json!({"pinned": true}))
        .await
        .unwrap();
    assert_eq!(list(c, org, None, None).await, vec![two, one, three]);
    let shown = c.chat_get().org_id(org).chat_id(one).send().await.unwrap();
    assert_eq!(shown.pinned_at, Some(pinned_at));
    assert_eq!(list(c, org, None, Some(true)).await, vec![two, one]);
    assert_eq!(list(c, org, None, Some(false)).await, vec![three]);
    // A change to an unpinned chat does not pass the pinned ones.
    put_chat(c, org, three, json!({"title": "three, renamed"}))
        .await
        .unwrap();
    assert_eq!(list(c, org, None, None).await, vec![two, one, three]);
    // Unpinned: back among the others by recency; the listed session says
    // so.
    put_chat(c, org, two, json!({"pinned": false}))
        .await
        .unwrap();
    let sessions = c.chat_list().org_id(org).send().await.unwrap().into_inner();
    assert_eq!(
        sessions.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![one, three, two]
    );
    assert!(sessions[0].pinned && sessions[0].pinned_at.is_some());
    assert!(!sessions[2].pinned && sessions[2].pinned_at.is_none());
    // Pinned at creation; search results say it too.
    let four = c
        .chat_create()
        .org_id(org)
        .body(
            types::ChatWrite::builder()
                .title(Some("four".try_into().unwrap()))
                .pinned(Some(true)),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    assert_eq!(list(c, org, None, Some(true)).await, vec![four, one]);
    let page = search(c, org, "four").await;
    assert!(page.results[0].pinned);

    second.shutdown().await.unwrap();
    cx.teardown().await;
}
