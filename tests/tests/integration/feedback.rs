//! Feedback on answers (issue #35): rating chat and conversation answers
//! (rate, change, remove; what cannot be rated), the organization's list
//! for its admins with each filter and its cursor, the CSV and JSON Lines
//! exports (parsed back), who may read them, tenancy, and two server
//! instances on one database.

use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashSet;
use uuid::Uuid;
use workspace_client::{Client, types};
use workspace_server::config::Config;
use workspace_tests::resources::{self, Answered};
use workspace_tests::{TestContext, TestUser, error_of, raw};

fn fast(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 0;
    c.providers.retry_backoff_ms = 5;
}

fn body<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value}"))
}

/// A new chat with one answered question.
async fn chat_answer(client: &Client, org: Uuid, text: &str) -> Answered {
    resources::chat_message(client, org, json!({ "content": text })).await
}

/// `GET /api/chat` of one of the caller's chats.
async fn read_chat(client: &Client, org: Uuid, chat: Uuid) -> types::ChatSessionDetail {
    client
        .chat_get()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .expect("chat_get")
        .into_inner()
}

/// The question of an answered chat message.
fn question_of(answered: &Answered) -> Uuid {
    match answered.events.first() {
        Some(types::ChatStreamEvent::Start(start)) => start.user_message_id,
        other => panic!("no start event: {other:?}"),
    }
}

/// Asks `text` in `session` and reads the answer to its end: the
/// answer's id.
async fn conversation_answer(client: &Client, org: Uuid, session: Uuid, text: &str) -> String {
    let stream = client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            types::StreamChatRequest::builder()
                .chat_session_id(session)
                .message(text.to_string()),
        )
        .send()
        .await
        .expect("stream_chat")
        .into_inner();
    let mut reader = workspace_client::sse::SseReader::from_byte_stream(stream);
    let mut id = None;
    while let Some(event) = reader.next().await {
        match event.expect("the stream").json().expect("an event") {
            types::ConversationStreamEvent::Start(s) => id = Some(s.message_id),
            types::ConversationStreamEvent::End(_) => break,
            types::ConversationStreamEvent::Error(e) => panic!("the answer failed: {e:?}"),
            types::ConversationStreamEvent::Content(_)
            | types::ConversationStreamEvent::Reasoning(_)
            | types::ConversationStreamEvent::Route(_)
            | types::ConversationStreamEvent::Restart(_) => {}
        }
    }
    id.expect("a start event")
}

/// A conversation with one model session on the offline model.
async fn conversation_session(client: &Client, org: Uuid) -> (Uuid, Uuid) {
    let conversation = resources::conversation(client, org, json!({"title": "rated"})).await;
    let model = resources::offline_model(client, org).await;
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
        .expect("create_session")
        .into_inner();
    (conversation.id, session.id)
}

async fn rate_chat(
    client: &Client,
    org: Uuid,
    feedback: Value,
) -> Result<types::MessageFeedback, workspace_client::Error<types::Error>> {
    client
        .chat_feedback_rate()
        .org_id(org)
        .body(body::<types::ChatFeedbackWrite>(feedback))
        .send()
        .await
        .map(|r| r.into_inner())
}

async fn rate_conversation(
    client: &Client,
    org: Uuid,
    feedback: Value,
) -> Result<types::MessageFeedback, workspace_client::Error<types::Error>> {
    client
        .conversation_feedback_rate()
        .org_id(org)
        .body(body::<types::ConversationFeedbackWrite>(feedback))
        .send()
        .await
        .map(|r| r.into_inner())
}

/// Every item of the organization's feedback with `query`'s filters,
/// walking the cursor `limit` at a time; also the number of pages.
async fn list_all(
    base: &str,
    token: &str,
    org: Uuid,
    query: &[(&str, String)],
    limit: u32,
) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut q = vec![("org_id", org.to_string()), ("limit", limit.to_string())];
        q.extend(query.iter().cloned());
        if let Some(c) = &cursor {
            q.push(("cursor", c.clone()));
        }
        let (status, page) =
            workspace_tests::req(base, token, Method::GET, "/api/org/feedback/list", &q, None)
                .await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        let got = page["items"].as_array().unwrap();
        assert!(got.len() <= limit as usize);
        items.extend(got.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(got.len(), limit as usize, "only full pages have a next one");
                cursor = Some(next.to_string());
            }
            None => break,
        }
    }
    (items, pages)
}

/// The ids of `items`, in order.
fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

/// The export's body, with its status and content type.
async fn export(
    base: &str,
    token: &str,
    org: Uuid,
    query: &[(&str, String)],
) -> (u16, String, String) {
    let mut q = vec![("org_id", org.to_string())];
    q.extend(query.iter().cloned());
    let response = workspace_tests::http()
        .get(format!("{base}/api/org/feedback/export"))
        .bearer_auth(token)
        .query(&q)
        .send()
        .await
        .expect("export");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, content_type, response.text().await.expect("body"))
}

/// The rows of a CSV export, read by a CSV parser, as header → value maps.
fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .expect("a header row")
        .iter()
        .map(str::to_string)
        .collect();
    let rows = reader
        .records()
        .map(|r| {
            r.expect("a CSV record")
                .iter()
                .map(str::to_string)
                .collect()
        })
        .collect();
    (header, rows)
}

/// How many ratings the database holds.
async fn count(db: &tokio_postgres::Client) -> i64 {
    db.query_one("SELECT count(*) FROM message_feedback", &[])
        .await
        .unwrap()
        .get(0)
}

const CSV_COLUMNS: [&str; 19] = [
    "id",
    "created_at",
    "updated_at",
    "area",
    "rating",
    "user_id",
    "user_email",
    "user_name",
    "model_id",
    "model_name",
    "chat_id",
    "conversation_id",
    "message_id",
    "knowledge_base_ids",
    "knowledge_base_names",
    "tags",
    "comment",
    "question",
    "answer",
];

#[tokio::test]
async fn people_rate_answers_of_their_chats_and_conversations() {
    let cx = TestContext::with_config("feedback_rate", fast).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let outsider = cx.user("outsider").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;

    let answered = chat_answer(&ada.client, org, "How tall is the tower?").await;
    let answer = answered.message_id;

    // Rate, with a comment and tags (lowercased, each once).
    let rated = rate_chat(
        &ada.client,
        org,
        json!({"message_id": answer, "rating": "up", "comment": "  precise  ",
               "tags": ["Accurate", "accurate", "well_sourced"]}),
    )
    .await
    .unwrap();
    assert_eq!(rated.message_id, answer.to_string());
    assert_eq!(rated.area, types::FeedbackArea::Chat);
    assert_eq!(rated.rating, types::FeedbackRating::Up);
    assert_eq!(rated.comment.as_deref(), Some("precise"));
    assert_eq!(rated.tags, ["accurate", "well_sourced"]);
    assert_eq!(rated.created_at, rated.updated_at);

    // Rating again replaces the whole feedback; created_at stays.
    let changed = rate_chat(
        &ada.client,
        org,
        json!({"message_id": answer, "rating": "down", "comment": "   "}),
    )
    .await
    .unwrap();
    assert_eq!(changed.rating, types::FeedbackRating::Down);
    assert_eq!(changed.comment, None);
    assert!(changed.tags.is_empty());
    assert_eq!(changed.created_at, rated.created_at);
    assert!(changed.updated_at > rated.updated_at);
    let db = cx.db().await;
    assert_eq!(count(&db).await, 1, "one rating per person per answer");

    // Reading the chat shows the rating on the answer, and only there.
    let read = read_chat(&ada.client, org, answered.chat_id).await;
    let shown: Vec<_> = read
        .messages
        .iter()
        .map(|m| (m.id, m.feedback.as_ref().map(|f| f.rating)))
        .collect();
    assert_eq!(
        shown,
        [
            (question_of(&answered), None),
            (answer, Some(types::FeedbackRating::Down))
        ],
        "{read:?}"
    );
    let on_answer = read.messages[1].feedback.as_ref().unwrap();
    assert_eq!(on_answer.message_id, answer.to_string());
    assert_eq!(on_answer.updated_at, changed.updated_at);

    // A question is no answer; another user's answer, or an id of
    // nothing, is not found; so is the answer in another organization.
    assert_eq!(
        error_of(
            rate_chat(
                &ada.client,
                org,
                json!({"message_id": question_of(&answered), "rating": "up"})
            )
            .await
        ),
        (400, "not_an_answer".to_string())
    );
    let bobs = chat_answer(&bob.client, org, "a private question").await;
    for (who, id, in_org) in [
        (&ada, bobs.message_id, org),
        (&bob, answer, org),
        (&ada, Uuid::new_v4(), org),
        (&outsider, answer, outsider.personal_org().await),
    ] {
        assert_eq!(
            error_of(
                rate_chat(
                    &who.client,
                    in_org,
                    json!({"message_id": id, "rating": "up"})
                )
                .await
            ),
            (404, "not_found".to_string()),
        );
        assert_eq!(
            error_of(
                who.client
                    .chat_feedback_delete()
                    .org_id(in_org)
                    .message_id(id)
                    .send()
                    .await
            ),
            (404, "not_found".to_string()),
        );
    }

    // An answer being generated cannot be rated yet (the state is set in
    // the database: the offline model answers at once).
    db.execute(
        "UPDATE chat_messages SET status = 'streaming' WHERE id = $1",
        &[&bobs.message_id],
    )
    .await
    .unwrap();
    assert_eq!(
        error_of(
            rate_chat(
                &bob.client,
                org,
                json!({"message_id": bobs.message_id, "rating": "up"})
            )
            .await
        ),
        (409, "answer_streaming".to_string())
    );
    db.execute(
        "UPDATE chat_messages SET status = 'complete' WHERE id = $1",
        &[&bobs.message_id],
    )
    .await
    .unwrap();

    // Bounds, checked by the server (raw requests: the client checks them
    // too).
    let base = cx.base_url.clone();
    let q = vec![("org_id", org.to_string())];
    for (feedback, code) in [
        (
            json!({"message_id": answer, "rating": "up", "comment": "x".repeat(2001)}),
            "invalid_comment",
        ),
        (
            json!({"message_id": answer, "rating": "up", "tags": vec!["ok"; 11]}),
            "invalid_tags",
        ),
        (
            json!({"message_id": answer, "rating": "up", "tags": ["-lead"]}),
            "invalid_tags",
        ),
        (
            json!({"message_id": answer, "rating": "up", "tags": ["a b"]}),
            "invalid_tags",
        ),
        (
            json!({"message_id": answer, "rating": "up", "tags": ["x".repeat(41)]}),
            "invalid_tags",
        ),
        (
            json!({"message_id": answer, "rating": "up", "tags": ["naïve"]}),
            "invalid_tags",
        ),
        (
            json!({"message_id": answer, "rating": "sideways"}),
            "invalid_request",
        ),
        (
            json!({"message_id": answer, "rating": "up", "extra": 1}),
            "invalid_request",
        ),
        (
            json!({"message_id": answer, "rating": "up", "comment": "nul\u{0}"}),
            "invalid_request",
        ),
    ] {
        assert_eq!(
            raw(
                &base,
                Some(&ada.token),
                Method::POST,
                "/api/chat/feedback",
                &q,
                Some(feedback)
            )
            .await,
            (400, code.to_string())
        );
    }
    let long = rate_chat(
        &ada.client,
        org,
        json!({"message_id": answer, "rating": "up", "comment": "é".repeat(2000),
               "tags": (0..10).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
    )
    .await
    .unwrap();
    assert_eq!(long.tags.len(), 10);

    // Remove; removing again is harmless.
    let removed = ada
        .client
        .chat_feedback_delete()
        .org_id(org)
        .message_id(answer)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(removed.deleted);
    let again = ada
        .client
        .chat_feedback_delete()
        .org_id(org)
        .message_id(answer)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!again.deleted);
    assert_eq!(count(&db).await, 0);
    let read = read_chat(&ada.client, org, answered.chat_id).await;
    assert!(
        read.messages.iter().all(|m| m.feedback.is_none()),
        "{read:?}"
    );

    // Conversations: any member who may write rates any answer, each
    // person once; a user message is no answer.
    let (_, session) = conversation_session(&ada.client, org).await;
    let conv_answer = conversation_answer(&ada.client, org, session, "conversation question").await;
    let by_ada = rate_conversation(
        &ada.client,
        org,
        json!({"message_id": conv_answer, "rating": "up", "tags": ["helpful"]}),
    )
    .await
    .unwrap();
    assert_eq!(by_ada.area, types::FeedbackArea::Conversation);
    let by_bob = rate_conversation(
        &bob.client,
        org,
        json!({"message_id": conv_answer, "rating": "down", "comment": "too long"}),
    )
    .await
    .unwrap();
    assert_eq!(by_bob.message_id, conv_answer);
    let again = rate_conversation(
        &bob.client,
        org,
        json!({"message_id": conv_answer, "rating": "up"}),
    )
    .await
    .unwrap();
    assert_eq!(again.created_at, by_bob.created_at);
    assert_eq!(count(&db).await, 2);
    let user_message: Uuid = db
        .query_one(
            "SELECT id FROM conversation_messages WHERE role = 'user' AND session_id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        error_of(
            rate_conversation(
                &bob.client,
                org,
                json!({"message_id": user_message, "rating": "up"})
            )
            .await
        ),
        (400, "not_an_answer".to_string())
    );
    for (who, id, in_org) in [
        (&ada, "not-a-uuid".to_string(), org),
        (&ada, Uuid::new_v4().to_string(), org),
        (
            &outsider,
            conv_answer.clone(),
            outsider.personal_org().await,
        ),
    ] {
        assert_eq!(
            error_of(
                rate_conversation(
                    &who.client,
                    in_org,
                    json!({"message_id": id, "rating": "up"})
                )
                .await
            ),
            (404, "not_found".to_string())
        );
    }
    // A guest reads conversations but may not write, so may not rate.
    let guest = cx.user("guest").await;
    ada.add_member(org, guest.id, ada.role_id(org, "guest").await)
        .await;
    assert_eq!(
        error_of(
            rate_conversation(
                &guest.client,
                org,
                json!({"message_id": conv_answer, "rating": "up"})
            )
            .await
        )
        .0,
        403
    );
    // Bob removes his own rating only.
    let removed = bob
        .client
        .conversation_feedback_delete()
        .org_id(org)
        .message_id(conv_answer.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(removed.deleted);
    assert_eq!(count(&db).await, 1);

    // Deleting the chat takes its ratings with it.
    rate_chat(
        &ada.client,
        org,
        json!({"message_id": answer, "rating": "up"}),
    )
    .await
    .unwrap();
    assert_eq!(count(&db).await, 2);
    ada.client
        .chat_delete_session()
        .session_id(answered.chat_id)
        .send()
        .await
        .unwrap();
    assert_eq!(count(&db).await, 1);
    cx.teardown().await;
}

/// Everything the admins' list shows of one rating, checked against what
/// was sent.
#[tokio::test]
async fn admins_list_filter_page_and_export_the_feedback() {
    let cx = TestContext::with_config("feedback_admin", fast).await;
    let ada = cx.user("ada").await; // owner
    let bob = cx.user("bob").await; // member
    let dave = cx.user("dave").await; // admin
    let eve = cx.user("eve").await; // a custom role below the admin level
    let carol = cx.user("carol").await; // another organization's owner
    let org = ada.personal_org().await;
    ada.add_member(org, bob.id, ada.role_id(org, "member").await)
        .await;
    ada.add_member(org, dave.id, ada.role_id(org, "admin").await)
        .await;
    let catalog = ada
        .client
        .roles_list_permissions()
        .send()
        .await
        .unwrap()
        .into_inner();
    let permission = |name: &str| catalog.iter().find(|p| p.name == name).unwrap().id;
    let reader = ada
        .client
        .roles_create()
        .org_id(org)
        .body(
            types::CreateRoleRequest::builder()
                .name("reader".to_string())
                .hierarchy_level(30)
                .permission_ids(vec![permission("*:read"), permission("feedback:read")]),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    ada.add_member(org, eve.id, reader.id).await;
    let model = resources::offline_model(&ada.client, org).await;
    let model_name = ada
        .client
        .models_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|m| m.id == model)
        .unwrap()
        .name;

    // Bob's chat answer, given with a knowledge base (named in the
    // answer's metadata: set in the database, as retrieving needs the
    // embedding model), rated up with a formula for a comment.
    let kb = resources::knowledge_base(
        &ada.client,
        org,
        json!({"name": "Handbook", "description": "", "embedding_model": "all-minilm-l6-v2",
               "sources": []}),
    )
    .await;
    let bobs = chat_answer(&bob.client, org, "=1+1 is what?").await;
    let db = cx.db().await;
    db.execute(
        "UPDATE chat_messages SET metadata = metadata || \
             jsonb_build_object('knowledge_base_ids', jsonb_build_array($2::text, $3::text)) \
         WHERE id = $1",
        &[
            &bobs.message_id,
            &kb.id.to_string(),
            &Uuid::nil().to_string(),
        ],
    )
    .await
    .unwrap();
    let injection = "=HYPERLINK(\"http://evil.example/\",\"click\")";
    rate_chat(
        &bob.client,
        org,
        json!({"message_id": bobs.message_id, "rating": "up", "comment": injection,
               "tags": ["Wrong", "slow"]}),
    )
    .await
    .unwrap();
    // Ada's chat answer, rated down.
    let adas = chat_answer(
        &ada.client,
        org,
        "Plain question, with \"quotes\",\nand a line",
    )
    .await;
    rate_chat(
        &ada.client,
        org,
        json!({"message_id": adas.message_id, "rating": "down", "tags": ["wrong"]}),
    )
    .await
    .unwrap();
    // A conversation answer, rated by both.
    let (conversation, session) = conversation_session(&ada.client, org).await;
    conversation_answer(&ada.client, org, session, "first, unrated").await;
    let conv = conversation_answer(&bob.client, org, session, "the rated one").await;
    rate_conversation(
        &bob.client,
        org,
        json!({"message_id": conv, "rating": "down"}),
    )
    .await
    .unwrap();
    rate_conversation(
        &ada.client,
        org,
        json!({"message_id": conv, "rating": "up", "tags": ["ok"]}),
    )
    .await
    .unwrap();

    // The whole list: newest first, each rating with its exchange.
    let base = cx.base_url.clone();
    let (all, pages) = list_all(&base, &dave.token, org, &[], 50).await;
    assert_eq!(pages, 1);
    assert_eq!(all.len(), 4);
    let times: Vec<chrono::DateTime<chrono::Utc>> = all
        .iter()
        .map(|i| i["created_at"].as_str().unwrap().parse().unwrap())
        .collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first");
    let bob_chat = all
        .iter()
        .find(|i| i["message_id"] == bobs.message_id.to_string())
        .unwrap();
    assert_eq!(bob_chat["area"], "chat");
    assert_eq!(bob_chat["chat_id"], bobs.chat_id.to_string());
    assert_eq!(bob_chat["conversation_id"], Value::Null);
    assert_eq!(bob_chat["rating"], "up");
    assert_eq!(bob_chat["tags"], json!(["wrong", "slow"]));
    assert_eq!(bob_chat["comment"], injection);
    assert_eq!(bob_chat["question"], "=1+1 is what?");
    assert_eq!(bob_chat["answer"], bobs.text());
    assert_eq!(bob_chat["model"], json!({"id": model, "name": model_name}));
    assert_eq!(
        bob_chat["knowledge_bases"],
        json!([{"id": kb.id, "name": "Handbook"}, {"id": Uuid::nil(), "name": null}])
    );
    assert_eq!(bob_chat["user"]["id"], bob.id.to_string());
    assert_eq!(bob_chat["user"]["email"], bob.email);
    assert_eq!(bob_chat["user"]["name"], "bob Tester");
    let bob_conv = all
        .iter()
        .find(|i| i["message_id"] == conv && i["user"]["id"] == bob.id.to_string())
        .unwrap();
    assert_eq!(bob_conv["area"], "conversation");
    assert_eq!(bob_conv["conversation_id"], conversation.to_string());
    assert_eq!(bob_conv["chat_id"], Value::Null);
    assert_eq!(bob_conv["question"], "the rated one");
    assert_eq!(bob_conv["knowledge_bases"], json!([]));
    assert_eq!(bob_conv["model"]["id"], model.to_string());
    // The typed client reads the same page.
    let typed = dave
        .client
        .org_feedback_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(typed.items.len(), 4);
    assert_eq!(typed.next_cursor, None);

    // Each filter.
    let filtered = |query: Vec<(&'static str, String)>| {
        let (base, token) = (base.clone(), dave.token.clone());
        async move { ids(&list_all(&base, &token, org, &query, 50).await.0) }
    };
    let expect = |pick: &dyn Fn(&Value) -> bool| -> Vec<String> {
        ids(&all.iter().filter(|i| pick(i)).cloned().collect::<Vec<_>>())
    };
    assert_eq!(
        filtered(vec![("rating", "down".into())]).await,
        expect(&|i| i["rating"] == "down")
    );
    assert_eq!(filtered(vec![("rating", "down".into())]).await.len(), 2);
    assert_eq!(
        filtered(vec![("user_id", bob.id.to_string())]).await,
        expect(&|i| i["user"]["id"] == bob.id.to_string())
    );
    assert_eq!(
        filtered(vec![("area", "conversation".into())]).await,
        expect(&|i| i["area"] == "conversation")
    );
    assert_eq!(filtered(vec![("area", "chat".into())]).await.len(), 2);
    assert_eq!(
        filtered(vec![("tag", "WRONG".into())]).await,
        expect(&|i| i["tags"].as_array().unwrap().contains(&json!("wrong")))
    );
    assert_eq!(filtered(vec![("tag", "WRONG".into())]).await.len(), 2);
    assert_eq!(
        filtered(vec![("model_id", model.to_string())]).await.len(),
        4
    );
    assert!(
        filtered(vec![("model_id", Uuid::new_v4().to_string())])
            .await
            .is_empty()
    );
    // Times: `from` inclusive, `to` exclusive, on when a rating was first
    // given.
    let second = all[1]["created_at"].as_str().unwrap().to_string();
    assert_eq!(
        filtered(vec![("from", second.clone())]).await,
        ids(&all[..2])
    );
    assert_eq!(filtered(vec![("to", second.clone())]).await, ids(&all[2..]));
    assert_eq!(
        filtered(vec![
            ("to", second.clone()),
            ("rating", "up".into()),
            ("area", "chat".into())
        ])
        .await,
        ids(&all[2..])
            .into_iter()
            .filter(|id| expect(&|i| i["rating"] == "up" && i["area"] == "chat").contains(id))
            .collect::<Vec<_>>()
    );

    // The cursor: one item a page, the same items in the same order; a
    // change of a rating meanwhile keeps its place.
    let (paged, pages) = list_all(&base, &dave.token, org, &[], 1).await;
    assert_eq!(pages, 4);
    assert_eq!(ids(&paged), ids(&all));
    let (paged, pages) = list_all(&base, &dave.token, org, &[("area", "chat".into())], 1).await;
    assert_eq!((paged.len(), pages), (2, 2));
    let first = dave
        .client
        .org_feedback_list()
        .org_id(org)
        .limit(std::num::NonZeroU32::new(2).unwrap())
        .send()
        .await
        .unwrap()
        .into_inner();
    rate_chat(
        &ada.client,
        org,
        json!({"message_id": adas.message_id, "rating": "up"}),
    )
    .await
    .unwrap();
    let rest = dave
        .client
        .org_feedback_list()
        .org_id(org)
        .cursor(first.next_cursor.clone().unwrap())
        .send()
        .await
        .unwrap()
        .into_inner();
    let walked: Vec<Uuid> = first
        .items
        .iter()
        .chain(&rest.items)
        .map(|i| i.id)
        .collect();
    assert_eq!(
        walked.iter().map(Uuid::to_string).collect::<Vec<_>>(),
        ids(&all)
    );
    // Bad pages.
    let q = |extra: (&'static str, &str)| {
        vec![("org_id", org.to_string()), (extra.0, extra.1.to_string())]
    };
    for (extra, expected) in [
        (("limit", "0"), "invalid_pagination"),
        (("limit", "201"), "invalid_pagination"),
        (("cursor", "not a cursor"), "invalid_cursor"),
        (("cursor", "AAAA"), "invalid_cursor"),
        (("rating", "meh"), "invalid_request"),
        (("from", "yesterday"), "invalid_request"),
    ] {
        assert_eq!(
            raw(
                &base,
                Some(&dave.token),
                Method::GET,
                "/api/org/feedback/list",
                &q(extra),
                None
            )
            .await,
            (400, expected.to_string()),
            "{extra:?}"
        );
    }

    // Who may read: admins and owners; not a member, nor a role below the
    // admin level even with `feedback:read` and `*:read`; a personal
    // access token with the `feedback:read` scope only.
    assert_eq!(list_all(&base, &ada.token, org, &[], 50).await.0.len(), 4);
    for who in [&bob, &eve] {
        assert_eq!(
            error_of(who.client.org_feedback_list().org_id(org).send().await),
            (403, "forbidden".to_string())
        );
        let (status, _, _) = export(&base, &who.token, org, &[("format", "csv".into())]).await;
        assert_eq!(status, 403);
    }
    let token = |scopes: &[&str]| {
        let client = dave.client.clone();
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        async move {
            client
                .auth_tokens_create()
                .body(
                    types::TokenCreate::builder()
                        .name("feedback".parse::<types::TokenCreateName>().unwrap())
                        .scopes(scopes),
                )
                .send()
                .await
                .unwrap()
                .into_inner()
                .token
        }
    };
    let scoped = token(&["feedback:read"]).await;
    assert_eq!(list_all(&base, &scoped, org, &[], 50).await.0.len(), 4);
    let unscoped = token(&["chats:read"]).await;
    assert_eq!(
        raw(
            &base,
            Some(&unscoped),
            Method::GET,
            "/api/org/feedback/list",
            &q(("limit", "5")),
            None
        )
        .await,
        (403, "insufficient_scope".to_string())
    );

    // Tenancy: another organization's owner sees none of it, in their own
    // organization or in this one.
    let carols = carol.personal_org().await;
    assert!(
        list_all(&base, &carol.token, carols, &[], 50)
            .await
            .0
            .is_empty()
    );
    assert_eq!(
        error_of(carol.client.org_feedback_list().org_id(org).send().await).0,
        403
    );
    let (status, _, body) =
        export(&base, &carol.token, carols, &[("format", "jsonl".into())]).await;
    assert_eq!((status, body.as_str()), (200, ""));

    // CSV: a header row and one row per rating, read back by a CSV
    // parser; quotes, commas and line breaks survive; formulas are
    // neutralised.
    let (status, content_type, text) =
        export(&base, &dave.token, org, &[("format", "csv".into())]).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "text/csv; charset=utf-8");
    assert!(text.ends_with("\r\n"));
    let (header, rows) = csv_rows(&text);
    assert_eq!(header, CSV_COLUMNS);
    assert_eq!(rows.len(), 4);
    let column = |name: &str| CSV_COLUMNS.iter().position(|c| *c == name).unwrap();
    let now: Vec<String> = ids(&list_all(&base, &dave.token, org, &[], 50).await.0);
    assert_eq!(rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(), now);
    let bob_row = rows
        .iter()
        .find(|r| r[column("message_id")] == bobs.message_id.to_string())
        .unwrap();
    assert_eq!(bob_row[column("comment")], format!("'{injection}"));
    assert_eq!(bob_row[column("question")], "'=1+1 is what?");
    assert_eq!(bob_row[column("tags")], "wrong;slow");
    assert_eq!(
        bob_row[column("knowledge_base_ids")],
        format!("{};{}", kb.id, Uuid::nil())
    );
    assert_eq!(bob_row[column("knowledge_base_names")], "Handbook;");
    assert_eq!(bob_row[column("user_email")], bob.email);
    assert_eq!(bob_row[column("model_name")], model_name);
    assert_eq!(bob_row[column("area")], "chat");
    let ada_row = rows
        .iter()
        .find(|r| r[column("message_id")] == adas.message_id.to_string())
        .unwrap();
    assert_eq!(
        ada_row[column("question")],
        "Plain question, with \"quotes\",\nand a line"
    );
    assert_eq!(ada_row[column("rating")], "up", "the changed rating");
    // No cell of the export starts a formula.
    for row in &rows {
        for cell in row {
            assert!(!cell.starts_with(['=', '+', '-', '@']), "{cell:?}");
        }
    }
    // Filters apply to the export.
    let (_, _, text) = export(
        &base,
        &dave.token,
        org,
        &[("format", "csv".into()), ("area", "conversation".into())],
    )
    .await;
    assert_eq!(csv_rows(&text).1.len(), 2);

    // JSON Lines: one FeedbackListItem per line, as the list shows them.
    let (status, content_type, text) =
        export(&base, &dave.token, org, &[("format", "jsonl".into())]).await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/jsonl");
    let lines: Vec<types::FeedbackListItem> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a FeedbackListItem"))
        .collect();
    assert_eq!(
        lines.iter().map(|i| i.id.to_string()).collect::<Vec<_>>(),
        now
    );
    let listed: Vec<types::FeedbackListItem> = dave
        .client
        .org_feedback_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(lines, listed);

    // Two instances on one database: rated on the second, listed on the
    // first (and the other way round).
    let second = cx.second_instance(fast).await;
    let second_url = format!("http://{}", second.local_addr());
    let bob_there = resources::client_for(&second_url, &bob.token);
    let there = chat_answer(&bob_there, org, "asked on the second instance").await;
    rate_chat(
        &bob_there,
        org,
        json!({"message_id": there.message_id, "rating": "down", "tags": ["second"]}),
    )
    .await
    .unwrap();
    let (on_first, _) = list_all(&base, &dave.token, org, &[("tag", "second".into())], 50).await;
    assert_eq!(on_first.len(), 1);
    assert_eq!(on_first[0]["message_id"], there.message_id.to_string());
    rate_chat(
        &bob.client,
        org,
        json!({"message_id": there.message_id, "rating": "up"}),
    )
    .await
    .unwrap();
    let (on_second, _) = list_all(
        &second_url,
        &dave.token,
        org,
        &[("user_id", bob.id.to_string())],
        1,
    )
    .await;
    assert_eq!(on_second.len(), 3);
    assert_eq!(on_second[0]["rating"], "up");
    assert_eq!(on_second[0]["tags"], json!([]));
    let (status, _, text) =
        export(&second_url, &dave.token, org, &[("format", "csv".into())]).await;
    assert_eq!(status, 200);
    assert_eq!(csv_rows(&text).1.len(), 5);
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// More ratings than a page of the export (200) and of the list: the
/// export pages through them while it streams, each rating once, in the
/// list's order.
#[tokio::test]
async fn the_export_pages_through_a_large_set() {
    let cx = TestContext::with_config("feedback_export_pages", fast).await;
    let ada: TestUser = cx.user("ada").await;
    let org = ada.personal_org().await;
    let answered = chat_answer(&ada.client, org, "the question of many answers").await;
    // 450 more answers to the same question (inserted in the database,
    // off the active path, as copies of the first: 450 generated answers
    // would only slow the test), each rated through the API.
    let db = cx.db().await;
    let answers: Vec<Uuid> = db
        .query(
            "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, \
                 parent_message_id, model_id, depth, sibling_index) \
             SELECT gen_random_uuid(), m.organization_id, m.chat_id, m.role, \
                 'answer number ' || n, m.parent_message_id, m.model_id, m.depth, \
                 m.sibling_index \
             FROM chat_messages m, generate_series(1, 450) n WHERE m.id = $1 \
             RETURNING id",
            &[&answered.message_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    use futures::StreamExt;
    futures::stream::iter(answers.iter().enumerate())
        .for_each_concurrent(8, |(n, id)| {
            let client = ada.client.clone();
            async move {
                let tag = if n % 3 == 0 { "third" } else { "other" };
                rate_chat(
                    &client,
                    org,
                    json!({"message_id": id, "rating": if n % 2 == 0 { "up" } else { "down" },
                           "comment": format!("-{n}"), "tags": [tag]}),
                )
                .await
                .unwrap();
            }
        })
        .await;

    let base = cx.base_url.clone();
    let (listed, pages) = list_all(&base, &ada.token, org, &[], 200).await;
    assert_eq!((listed.len(), pages), (450, 3));
    let listed = ids(&listed);
    assert_eq!(listed.iter().collect::<HashSet<_>>().len(), 450);

    let (status, _, text) = export(&base, &ada.token, org, &[("format", "csv".into())]).await;
    assert_eq!(status, 200);
    let (_, rows) = csv_rows(&text);
    assert_eq!(
        rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        listed
    );
    assert!(
        rows.iter().all(|r| r[16].starts_with("'-")),
        "comments neutralised"
    );

    let (status, _, text) = export(&base, &ada.token, org, &[("format", "jsonl".into())]).await;
    assert_eq!(status, 200);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ids(&lines), listed);
    let (status, _, text) = export(
        &base,
        &ada.token,
        org,
        &[
            ("format", "jsonl".into()),
            ("tag", "third".into()),
            ("rating", "up".into()),
        ],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        text.lines().count(),
        (0..450).filter(|n| n % 3 == 0 && n % 2 == 0).count()
    );
    cx.teardown().await;
}
