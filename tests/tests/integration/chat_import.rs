//! Chat export and import: files of ChatGPT, Open WebUI,
//! Claude and LibreChat and this service's own export become the caller's
//! chats with their trees (branches, the active path); the JSON export
//! reads back into the same tree; Markdown shows the active path; the
//! exports stream; hostile files (other formats, broken trees, cycles,
//! huge messages, too many messages, deep nesting, oversized bodies,
//! another user's ids) are refused or reported. Each format's thinking
//! becomes the answer's reasoning, never its content, bounded like a live
//! answer's, and travels through the JSON export. Imports run on one
//! instance and are read on another.

use futures::TryStreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;
use workspace_client::types::{
    ChatExportDocument, ChatExportFormat, ChatImportFormat, ChatImportResult, ChatImportSource,
    ChatRole, ImportSkipReason,
};
use workspace_client::{ByteStream, Client, ResponseValue};
use workspace_tests::{TestContext, TestUser, error_of, resources};

const MIB: usize = 1024 * 1024;

async fn import(
    client: &Client,
    org: Uuid,
    format: ChatImportFormat,
    file: &Value,
) -> ChatImportResult {
    client
        .chat_import()
        .org_id(org)
        .format(format)
        .body(serde_json::to_vec(file).unwrap())
        .send()
        .await
        .unwrap_or_else(|e| panic!("import: {e:?}"))
        .into_inner()
}

async fn import_error(client: &Client, org: Uuid, body: Vec<u8>) -> (u16, String) {
    error_of(client.chat_import().org_id(org).body(body).send().await)
}

async fn bytes_of(response: ResponseValue<ByteStream>) -> Vec<u8> {
    response
        .into_inner()
        .into_inner()
        .try_fold(Vec::new(), |mut all, chunk| async move {
            all.extend_from_slice(&chunk);
            Ok(all)
        })
        .await
        .expect("the whole export")
}

async fn export_json(
    client: &Client,
    org: Uuid,
    chat: Option<Uuid>,
) -> (Vec<u8>, ChatExportDocument) {
    let response = match chat {
        Some(chat) => client.chat_export(org, chat, ChatExportFormat::Json).await,
        None => client.chat_export_all(org, ChatExportFormat::Json).await,
    }
    .expect("export");
    let disposition = response.headers()["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with("attachment; filename="),
        "{disposition}"
    );
    let bytes = bytes_of(response).await;
    let doc = serde_json::from_slice(&bytes).expect("a ChatExportDocument");
    (bytes, doc)
}

/// One message of a chat as stored, with its tree columns.
#[derive(Debug, Clone)]
struct Stored {
    id: Uuid,
    parent: Option<Uuid>,
    role: String,
    content: String,
    depth: i32,
    sibling_index: i32,
    children: i32,
    on_path: bool,
    model_id: Option<Uuid>,
    metadata: Value,
    reasoning: Option<String>,
}

/// The chat's messages in creation order, after checking that its tree
/// columns agree with its parents (depth, positions among siblings,
/// children counts, the path from the leaf, the first messages).
async fn stored_tree(cx: &TestContext, chat: Uuid) -> Vec<Stored> {
    let db = cx.db().await;
    let rows = db
        .query(
            "SELECT id, parent_message_id, role, content, depth, sibling_index, children, \
                 on_path, model_id, metadata, reasoning, selected_at \
             FROM chat_messages WHERE chat_id = $1 ORDER BY seq",
            &[&chat],
        )
        .await
        .unwrap();
    let messages: Vec<Stored> = rows
        .iter()
        .map(|r| Stored {
            id: r.get("id"),
            parent: r.get("parent_message_id"),
            role: r.get("role"),
            content: r.get("content"),
            depth: r.get("depth"),
            sibling_index: r.get("sibling_index"),
            children: r.get("children"),
            on_path: r.get("on_path"),
            model_id: r.get("model_id"),
            metadata: r.get("metadata"),
            reasoning: r.get("reasoning"),
        })
        .collect();
    let by_id: HashMap<Uuid, &Stored> = messages.iter().map(|m| (m.id, m)).collect();
    let mut positions: HashMap<Option<Uuid>, Vec<i32>> = HashMap::new();
    for m in &messages {
        match m.parent {
            None => assert_eq!(m.depth, 0),
            Some(p) => {
                let parent = by_id.get(&p).expect("the parent is in the chat");
                assert_eq!(m.depth, parent.depth + 1);
                // A parent is stored before its children.
                assert!(
                    messages.iter().position(|x| x.id == p)
                        < messages.iter().position(|x| x.id == m.id)
                );
            }
        }
        positions.entry(m.parent).or_default().push(m.sibling_index);
        let children = messages.iter().filter(|c| c.parent == Some(m.id)).count();
        assert_eq!(m.children as usize, children, "children of {}", m.content);
    }
    for list in positions.values() {
        let expected: Vec<i32> = (1..=list.len() as i32).collect();
        assert_eq!(
            list, &expected,
            "positions among siblings in creation order"
        );
    }
    let chat_row = db
        .query_one("SELECT leaf_id, roots FROM chats WHERE id = $1", &[&chat])
        .await
        .unwrap();
    let leaf: Option<Uuid> = chat_row.get("leaf_id");
    let roots: i32 = chat_row.get("roots");
    assert_eq!(roots as usize, positions.get(&None).map_or(0, Vec::len));
    let mut path = Vec::new();
    let mut at = leaf;
    while let Some(id) = at {
        path.push(id);
        at = by_id[&id].parent;
    }
    for m in &messages {
        assert_eq!(m.on_path, path.contains(&m.id), "on_path of {}", m.content);
    }
    if let Some(leaf) = leaf {
        assert_eq!(by_id[&leaf].children, 0, "the leaf is a leaf");
    }
    messages
}

/// The active path's contents, first to last, from the stored columns.
async fn stored_path(cx: &TestContext, chat: Uuid) -> Vec<String> {
    cx.db()
        .await
        .query(
            "SELECT content FROM chat_messages WHERE chat_id = $1 AND on_path ORDER BY depth",
            &[&chat],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// `GET /api/chat`'s messages: the active path, first to last.
async fn api_messages(client: &Client, org: Uuid, chat: Uuid) -> Vec<String> {
    client
        .chat_get()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .expect("chat_get")
        .into_inner()
        .messages
        .into_iter()
        .map(|m| m.content)
        .collect()
}

/// A ChatGPT `conversations.json` entry: root (no message) → system →
/// question → two answers (a regeneration: a branch); the second answer →
/// a tool call, a tool result, a hidden message → a follow-up → its
/// answer, the current node.
fn chatgpt_conversation(title: &str) -> Value {
    let message = |id: &str, role: &str, text: &str, extra: Value| {
        let mut m = json!({
            "id": id,
            "author": {"role": role, "name": null, "metadata": {}},
            "create_time": 1_700_000_000.0 + id.len() as f64,
            "update_time": null,
            "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully",
            "end_turn": true,
            "weight": 1.0,
            "metadata": {"model_slug": "gpt-4o"},
            "recipient": "all"
        });
        if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                m.insert(k.clone(), v.clone());
            }
        }
        m
    };
    let node = |id: &str, message: Value, parent: Option<&str>, children: &[&str]| json!({"id": id, "message": message, "parent": parent, "children": children});
    json!({
        "title": title,
        "create_time": 1_700_000_000.5,
        "update_time": 1_700_000_900.25,
        "conversation_id": format!("conv-{title}"),
        "current_node": "a2",
        "default_model_slug": "gpt-4o",
        "is_archived": false,
        "mapping": {
            "root": node("root", Value::Null, None, &["sys"]),
            "sys": node("sys", message("sys", "system", "You are ChatGPT", json!({})), Some("root"), &["q1"]),
            "q1": node("q1", message("q1", "user", "What is 2+2?", json!({"metadata": {}})), Some("sys"), &["a1", "a1b"]),
            "a1": node("a1", message("a1", "assistant", "4", json!({})), Some("q1"), &[]),
            "a1b": node("a1b", message("a1b", "assistant", "Four.", json!({})), Some("q1"), &["call"]),
            "call": node("call", message("call", "assistant", "search()", json!({"recipient": "browser", "content": {"content_type": "code", "text": "search()"}})), Some("a1b"), &["tool"]),
            "tool": node("tool", message("tool", "tool", "results", json!({})), Some("call"), &["hidden"]),
            "hidden": node("hidden", message("hidden", "user", "context", json!({"metadata": {"is_visually_hidden_from_conversation": true}})), Some("tool"), &["q2"]),
            "q2": node("q2", message("q2", "user", "And 3+3?", json!({"metadata": {}})), Some("hidden"), &["a2"]),
            "a2": node("a2", message("a2", "assistant", "6", json!({"metadata": {"model_slug": "offline-dev-model"}})), Some("q2"), &[])
        }
    })
}

#[tokio::test]
async fn chatgpt_branches_and_the_active_path_across_two_instances() {
    let cx = TestContext::new("chat_import_chatgpt").await;
    let other = cx.second_instance(|_| {}).await;
    let other_url = format!("http://{}", other.local_addr());
    let ada = cx.user("import-ada").await;
    let org = ada.personal_org().await;
    let offline = resources::offline_model(&ada.client, org).await;

    let result = import(
        &ada.client,
        org,
        ChatImportFormat::Auto,
        &json!([chatgpt_conversation("Arithmetic")]),
    )
    .await;
    assert_eq!(result.format, ChatImportSource::Chatgpt);
    assert!(result.skipped.is_empty(), "{:?}", result.skipped);
    let imported = &result.imported[0];
    assert_eq!(imported.title, "Arithmetic");
    assert_eq!(imported.messages, 5);
    // root, the system message, the tool call and result, the hidden one.
    assert_eq!(imported.messages_left_out, 5);
    assert_eq!(imported.source_id.as_deref(), Some("conv-Arithmetic"));
    let chat = imported.chat_id;

    // The tree: both answers under the question, the follow-up under the
    // second answer (through the left-out nodes), the path to `a2`.
    let tree = stored_tree(&cx, chat).await;
    let contents: Vec<&str> = tree.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["What is 2+2?", "4", "Four.", "And 3+3?", "6"]);
    let q1 = &tree[0];
    assert_eq!(
        (q1.role.as_str(), q1.parent, q1.children),
        ("USER", None, 2)
    );
    assert_eq!((tree[1].parent, tree[1].sibling_index), (Some(q1.id), 1));
    assert_eq!((tree[2].parent, tree[2].sibling_index), (Some(q1.id), 2));
    assert_eq!(tree[3].parent, Some(tree[2].id));
    assert_eq!(tree[4].role, "MODEL");
    assert_eq!(
        stored_path(&cx, chat).await,
        ["What is 2+2?", "Four.", "And 3+3?", "6"]
    );
    // Models: ours by name, else none; the original name kept.
    assert_eq!(tree[1].model_id, None);
    assert_eq!(
        tree[1].metadata,
        json!({"imported_from": "chatgpt", "model": "gpt-4o", "source_id": "a1"})
    );
    assert_eq!(tree[4].model_id, Some(offline));
    assert_eq!(tree[0].metadata["model"], Value::Null);
    // Every message is complete; times come from the file.
    let db = cx.db().await;
    let row = db
        .query_one(
            "SELECT c.user_id, c.organization_id, c.created_at, c.updated_at, \
                 bool_and(m.status = 'complete') AS complete \
             FROM chats c JOIN chat_messages m ON m.chat_id = c.id WHERE c.id = $1 \
             GROUP BY c.id",
            &[&chat],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Uuid>("user_id"), ada.id);
    assert_eq!(row.get::<_, Uuid>("organization_id"), org);
    assert!(row.get::<_, bool>("complete"));
    let created: chrono::DateTime<chrono::Utc> = row.get("created_at");
    assert_eq!(created.timestamp(), 1_700_000_000);

    // Read on the other instance: the chat, its path in order.
    let on_other = resources::client_for(&other_url, &ada.token);
    let shown = api_messages(&on_other, org, chat).await;
    assert_eq!(shown, ["What is 2+2?", "Four.", "And 3+3?", "6"]);
    let listed = on_other
        .chat_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed
            .iter()
            .any(|c| c.id == chat && c.title == "Arithmetic")
    );

    // Markdown, from the other instance: the active path, verbatim.
    let markdown = bytes_of(
        on_other
            .chat_export(org, chat, ChatExportFormat::Markdown)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        String::from_utf8(markdown).unwrap(),
        "# Arithmetic\n\n### User\n\nWhat is 2+2?\n\n### Assistant (gpt-4o)\n\nFour.\n\n\
         ### User\n\nAnd 3+3?\n\n### Assistant (offline-dev-model)\n\n6\n\n"
    );
    other.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn open_webui_claude_and_librechat_files() {
    let cx = TestContext::new("chat_import_others").await;
    let ada = cx.user("formats-ada").await;
    let org = ada.personal_org().await;

    // Open WebUI: the tree of `history`, the leaf `currentId` (an edited
    // question: two user siblings).
    let owui = json!([{
        "id": "owui-1", "user_id": "someone-else", "title": "Colours",
        "created_at": 1_710_000_000, "updated_at": 1_710_000_500, "archived": true,
        "chat": {
            "title": "Colours", "models": ["llama3"],
            "history": {
                "currentId": "a2",
                "messages": {
                    "u1": {"id": "u1", "parentId": null, "childrenIds": ["a1"], "role": "user", "content": "Sky colour?", "timestamp": 1_710_000_001},
                    "a1": {"id": "a1", "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "Blue.", "model": "llama3", "timestamp": 1_710_000_002},
                    "u2": {"id": "u2", "parentId": null, "childrenIds": ["a2"], "role": "user", "content": "Grass colour?", "timestamp": 1_710_000_003},
                    "a2": {"id": "a2", "parentId": "u2", "childrenIds": [], "role": "assistant", "content": "Green.", "model": "llama3", "timestamp": 1_710_000_004}
                }
            },
            "messages": []
        }
    }]);
    let result = import(&ada.client, org, ChatImportFormat::Openwebui, &owui).await;
    assert_eq!(result.format, ChatImportSource::Openwebui);
    let chat = result.imported[0].chat_id;
    let tree = stored_tree(&cx, chat).await;
    assert_eq!(tree.len(), 4);
    assert_eq!(
        tree.iter().filter(|m| m.parent.is_none()).count(),
        2,
        "two first messages"
    );
    assert_eq!(stored_path(&cx, chat).await, ["Grass colour?", "Green."]);
    assert_eq!(tree[1].metadata["model"], "llama3");
    let status: String = cx
        .db()
        .await
        .query_one("SELECT status FROM chats WHERE id = $1", &[&chat])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "ARCHIVED");

    // Claude: with parent uuids (an edit: two answers to one question;
    // the newest is the leaf) and without (one branch in order).
    let claude = json!([
        {"uuid": "c-1", "name": "Poem", "created_at": "2024-05-01T10:00:00Z",
         "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "Write a haiku", "content": [{"type": "text", "text": "Write a haiku"}],
             "created_at": "2024-05-01T10:00:01Z", "parent_message_uuid": "00000000-0000-4000-8000-000000000000"},
            {"uuid": "m2", "sender": "assistant", "text": "", "content": [{"type": "text", "text": "Old pond"}, {"type": "tool_use", "name": "x"}],
             "created_at": "2024-05-01T10:00:02Z", "parent_message_uuid": "m1"},
            {"uuid": "m3", "sender": "assistant", "text": "Frog jumps", "content": [],
             "created_at": "2024-05-01T10:00:09Z", "parent_message_uuid": "m1"}
         ]},
        {"uuid": "c-2", "name": "", "chat_messages": [
            {"uuid": "x1", "sender": "human", "text": "hi"},
            {"uuid": "x2", "sender": "assistant", "text": "hello"},
            {"uuid": "x3", "sender": "human", "text": "bye"}
        ]}
    ]);
    let result = import(&ada.client, org, ChatImportFormat::Auto, &claude).await;
    assert_eq!(result.format, ChatImportSource::Claude);
    assert_eq!(result.imported.len(), 2, "{:?}", result.skipped);
    let branched = result.imported[0].chat_id;
    let tree = stored_tree(&cx, branched).await;
    assert_eq!(tree[0].children, 2);
    assert_eq!(tree[1].content, "Old pond");
    assert_eq!(
        stored_path(&cx, branched).await,
        ["Write a haiku", "Frog jumps"]
    );
    let linear = result.imported[1].chat_id;
    assert_eq!(result.imported[1].title, "Imported chat");
    assert_eq!(stored_path(&cx, linear).await, ["hi", "hello", "bye"]);
    assert_eq!(stored_tree(&cx, linear).await[2].depth, 2);

    // LibreChat: by parentMessageId from the nil root; `isCreatedByUser`.
    let libre = json!({
        "conversationId": "lc-1", "title": "Recipes", "endpoint": "openAI", "model": "gpt-4o-mini",
        "messages": [
            {"messageId": "l1", "parentMessageId": "00000000-0000-0000-0000-000000000000", "sender": "User", "isCreatedByUser": true, "text": "Pancakes?", "createdAt": "2024-06-01T08:00:00.000Z"},
            {"messageId": "l2", "parentMessageId": "l1", "sender": "GPT-4", "isCreatedByUser": false, "text": "", "content": [{"type": "text", "text": {"value": "Flour, eggs, milk."}}], "createdAt": "2024-06-01T08:00:05.000Z"}
        ]
    });
    let result = import(&ada.client, org, ChatImportFormat::Auto, &libre).await;
    assert_eq!(result.format, ChatImportSource::Librechat);
    let chat = result.imported[0].chat_id;
    assert_eq!(
        stored_path(&cx, chat).await,
        ["Pancakes?", "Flour, eggs, milk."]
    );
    let tree = stored_tree(&cx, chat).await;
    assert_eq!(
        (tree[0].role.as_str(), tree[1].role.as_str()),
        ("USER", "MODEL")
    );
    assert_eq!(tree[1].metadata["model"], "gpt-4o-mini");
    cx.teardown().await;
}

/// What a chat's tree is, without its ids: each message's content, role,
/// parent's content, position among siblings and whether it is on the
/// path, in order.
fn shape(
    doc_chat: &workspace_client::types::ExportedChat,
) -> Vec<(String, String, Option<String>, bool)> {
    let by_id: HashMap<Uuid, &workspace_client::types::ExportedMessage> =
        doc_chat.messages.iter().map(|m| (m.id, m)).collect();
    let mut path = Vec::new();
    let mut at = doc_chat.leaf_id;
    while let Some(id) = at {
        path.push(id);
        at = by_id[&id].parent_id;
    }
    doc_chat
        .messages
        .iter()
        .map(|m| {
            (
                m.content.clone(),
                format!("{:?}", m.role),
                m.parent_id.map(|p| by_id[&p].content.clone()),
                path.contains(&m.id),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_json_export_imports_back_into_the_same_tree() {
    let cx = TestContext::new("chat_import_round_trip").await;
    let ada = cx.user("trip-ada").await;
    let org = ada.personal_org().await;
    let first = import(
        &ada.client,
        org,
        ChatImportFormat::Auto,
        &json!([chatgpt_conversation("Trip")]),
    )
    .await;
    let chat = first.imported[0].chat_id;
    // Settings and status travel too.
    ada.client
        .chat_update()
        .org_id(org)
        .chat_id(chat)
        .body(
            serde_json::from_value::<workspace_client::types::ChatWrite>(json!({
                "status": "ARCHIVED",
                "settings": {"temperature": 0.25, "max_tokens": 300}
            }))
            .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let (bytes, doc) = export_json(&ada.client, org, Some(chat)).await;
    assert_eq!(doc.format, "workspace.chat.v1");
    assert_eq!(doc.org_id, org);
    assert_eq!(doc.chats.len(), 1);
    let exported = &doc.chats[0];
    assert_eq!(exported.messages.len(), 5);
    assert_eq!(
        exported.messages[4].model_name.as_deref(),
        Some("offline-dev-model")
    );
    assert_eq!(exported.messages[1].model_name.as_deref(), Some("gpt-4o"));
    assert!(
        exported
            .messages
            .iter()
            .all(|m| m.created_at.timestamp() >= 1_700_000_000)
    );

    let again = ada
        .client
        .chat_import()
        .org_id(org)
        .body(bytes)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.format, ChatImportSource::Workspace);
    let copy = again.imported[0].chat_id;
    assert_ne!(copy, chat);
    stored_tree(&cx, copy).await;
    let (_, doc2) = export_json(&ada.client, org, Some(copy)).await;
    let copied = &doc2.chats[0];
    assert_eq!(shape(copied), shape(exported));
    assert_eq!(copied.title, exported.title);
    assert_eq!(copied.status, exported.status);
    assert_eq!(
        serde_json::to_value(&copied.settings).unwrap(),
        json!({"temperature": 0.25, "max_tokens": 300})
    );
    assert_eq!(
        serde_json::to_value(&copied.settings).unwrap(),
        serde_json::to_value(&exported.settings).unwrap()
    );
    assert_eq!(copied.created_at, exported.created_at);
    let times = |c: &workspace_client::types::ExportedChat| {
        c.messages
            .iter()
            .map(|m| (m.created_at, m.model_id, m.model_name.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(times(copied), times(exported));
    // New ids everywhere.
    for m in &copied.messages {
        assert!(exported.messages.iter().all(|e| e.id != m.id));
    }
    cx.teardown().await;
}

#[tokio::test]
async fn files_of_other_formats_broken_trees_and_bounds() {
    let cx = TestContext::new("chat_import_hostile").await;
    let ada = cx.user("hostile-ada").await;
    let org = ada.personal_org().await;
    let client = &ada.client;

    // Not a chat export: 400 naming the formats expected.
    let account = json!({"format": "workspace.account-export", "version": 1, "chats": []});
    for (file, code) in [
        (
            serde_json::to_vec(&account).unwrap(),
            "unrecognized_import_format",
        ),
        (
            br#"{"hello": "world"}"#.to_vec(),
            "unrecognized_import_format",
        ),
        (br#"[1, 2, 3]"#.to_vec(), "unrecognized_import_format"),
        (b"name,age\nada,36\n".to_vec(), "invalid_import_file"),
        (b"\xff\xfe garbage".to_vec(), "invalid_import_file"),
        (b"[]".to_vec(), "empty_import"),
    ] {
        assert_eq!(
            import_error(client, org, file).await,
            (400, code.to_string())
        );
    }
    let refused = client
        .chat_import()
        .org_id(org)
        .body(serde_json::to_vec(&account).unwrap())
        .send()
        .await
        .unwrap_err();
    let message = match refused {
        workspace_client::Error::ErrorResponse(r) => r.message.clone(),
        other => panic!("{other:?}"),
    };
    for name in [
        "workspace.chat.v1",
        "ChatGPT",
        "Open WebUI",
        "Claude",
        "LibreChat",
    ] {
        assert!(message.contains(name), "{message}");
    }
    // The wrong format named: 400 too.
    let chatgpt = json!([chatgpt_conversation("x")]);
    let wrong = client
        .chat_import()
        .org_id(org)
        .format(ChatImportFormat::Claude)
        .body(serde_json::to_vec(&chatgpt).unwrap())
        .send()
        .await;
    assert_eq!(error_of(wrong), (400, "unrecognized_import_format".into()));

    // Deep nesting: refused as such (documented: deeper than 128 levels is
    // `invalid_import_file`) wherever it sits, the server unharmed.
    let deep = format!(
        r#"[{{"title":"t","mapping":{{}},"x":{}{}}}]"#,
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    assert_eq!(
        import_error(client, org, deep.into_bytes()).await,
        (400, "invalid_import_file".into())
    );
    let only_brackets = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    assert_eq!(
        import_error(client, org, only_brackets.into_bytes()).await,
        (400, "invalid_import_file".into())
    );
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(129), "}".repeat(129));
    assert_eq!(
        import_error(client, org, deep_object.into_bytes()).await,
        (400, "invalid_import_file".into())
    );

    // A half-broken file: what is sound is imported, the rest reported.
    let mut cycle = chatgpt_conversation("Cycle");
    cycle["mapping"]["q1"]["parent"] = json!("a2");
    cycle["mapping"]["root"]["children"] = json!([]);
    let mut dangling = chatgpt_conversation("Dangling");
    dangling["mapping"]["q2"]["parent"] = json!("nowhere");
    let mut huge = chatgpt_conversation("Huge");
    huge["mapping"]["a1"]["message"]["content"]["parts"] = json!(["x".repeat(10 * MIB)]);
    let file = json!([
        chatgpt_conversation("Sound"),
        {"title": "Wrong types", "mapping": {"a": 5}, "create_time": "yesterday", "current_node": ["no"]},
        {"title": "No mapping object", "mapping": "nope"},
        cycle,
        dangling,
        huge,
        {"title": "Empty", "mapping": {}},
        {"something": "else"},
        chatgpt_conversation("Also sound")
    ]);
    let result = import(client, org, ChatImportFormat::Auto, &file).await;
    let titles: Vec<&str> = result.imported.iter().map(|c| c.title.as_str()).collect();
    assert_eq!(titles, ["Sound", "Also sound"]);
    assert_eq!(
        result.imported.iter().map(|c| c.index).collect::<Vec<_>>(),
        [0, 8]
    );
    let skipped: Vec<(u32, ImportSkipReason)> =
        result.skipped.iter().map(|s| (s.index, s.reason)).collect();
    assert_eq!(
        skipped,
        [
            (1, ImportSkipReason::NoMessages),
            (2, ImportSkipReason::InvalidChat),
            (3, ImportSkipReason::BrokenTree),
            (4, ImportSkipReason::BrokenTree),
            (5, ImportSkipReason::MessageTooLarge),
            (6, ImportSkipReason::NoMessages),
            (7, ImportSkipReason::InvalidChat),
        ]
    );
    assert!(
        result.skipped[2].message.contains("cycle"),
        "{:?}",
        result.skipped[2]
    );
    assert!(result.skipped[3].message.contains("not in the chat"));
    assert_eq!(result.skipped[4].title.as_deref(), Some("Huge"));
    assert_eq!(
        result.skipped[1].title.as_deref(),
        Some("No mapping object")
    );
    let count: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM chats WHERE user_id = $1", &[&ada.id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 2, "nothing of the skipped chats was written");

    // Too many messages or chats: refused before anything is written.
    let many: Vec<Value> = (0..100_001)
        .map(|i| json!({"sender": if i % 2 == 0 { "human" } else { "assistant" }, "text": "a"}))
        .collect();
    let file = json!([{"uuid": "big", "name": "Big", "chat_messages": many}]);
    assert_eq!(
        import_error(client, org, serde_json::to_vec(&file).unwrap()).await,
        (400, "import_limits_exceeded".into())
    );
    let chats: Vec<Value> = (0..1001)
        .map(
            |i| json!({"uuid": i.to_string(), "chat_messages": [{"sender": "human", "text": "a"}]}),
        )
        .collect();
    assert_eq!(
        import_error(client, org, serde_json::to_vec(&chats).unwrap()).await,
        (400, "import_limits_exceeded".into())
    );
    // Exactly at the limit of chats is fine.
    let chats: Vec<Value> = (0..1000)
        .map(
            |i| json!({"uuid": i.to_string(), "chat_messages": [{"sender": "human", "text": "a"}]}),
        )
        .collect();
    let result = import(client, org, ChatImportFormat::Auto, &json!(chats)).await;
    assert_eq!(result.imported.len(), 1000);
    cx.teardown().await;
}

/// Sends a request head (and `body`) on a raw connection; the status of
/// the answer, read before the rest of the body is sent.
async fn raw_status(cx: &TestContext, head: String, body: &[u8]) -> u16 {
    let addr = cx.base_url.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let body = body.to_vec();
    let writer = tokio::spawn(async move {
        let _ = write.write_all(head.as_bytes()).await;
        let _ = write.write_all(&body).await;
        // Kept open: the server answers without the rest.
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let n = read.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without an answer");
            answer.extend_from_slice(&buf[..n]);
            if let Some(end) = answer.iter().position(|b| *b == b'\n') {
                let line = String::from_utf8_lossy(&answer[..end]);
                return line
                    .split_whitespace()
                    .nth(1)
                    .unwrap()
                    .parse::<u16>()
                    .unwrap();
            }
        }
    })
    .await
    .expect("an answer before the body was all sent");
    writer.abort();
    status
}

#[tokio::test]
async fn oversized_bodies_are_refused_before_they_are_read() {
    let cx = TestContext::new("chat_import_size").await;
    let ada = cx.user("size-ada").await;
    let org = ada.personal_org().await;
    let path = format!("/api/chat/import?org_id={org}");
    let auth = format!("Authorization: Bearer {}\r\n", ada.token);

    // A declared length over 50 MiB: 413 at once, from the headers.
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        60 * MIB
    );
    assert_eq!(raw_status(&cx, head, b"[").await, 413);

    // Chunked, without a length: 413 once the bytes pass the limit (the
    // rest is never sent).
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    let mut body = Vec::new();
    let chunk = vec![b' '; MIB];
    for _ in 0..51 {
        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        body.extend_from_slice(&chunk);
        body.extend_from_slice(b"\r\n");
    }
    assert_eq!(raw_status(&cx, head, &body).await, 413);

    // A form: the part `file` is read; over 50 MiB, 413.
    let form = |file: &[u8]| {
        let mut body = b"--b0undary\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n\
              --b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.json\"\r\n\
              Content-Type: application/json\r\n\r\n"
            .to_vec();
        body.extend_from_slice(file);
        body.extend_from_slice(b"\r\n--b0undary--\r\n");
        body
    };
    let send_form = |body: Vec<u8>| {
        workspace_tests::http()
            .post(format!("{}{path}", cx.base_url))
            .bearer_auth(&ada.token)
            .header("Content-Type", "multipart/form-data; boundary=b0undary")
            .body(body)
            .send()
    };
    let file = serde_json::to_vec(&json!([chatgpt_conversation("Form")])).unwrap();
    let answer = send_form(form(&file)).await.unwrap();
    assert_eq!(answer.status(), 200);
    let result: ChatImportResult = answer.json().await.unwrap();
    assert_eq!(result.imported[0].title, "Form");
    let mut large = vec![b' '; IMPORT_MAX];
    large.extend_from_slice(b"[]");
    let answer = send_form(form(&large)).await.unwrap();
    assert_eq!(answer.status(), 413);
    let error: Value = answer.json().await.unwrap();
    assert_eq!(error["error_code"], "file_too_large");
    let answer = send_form(
        b"--b0undary\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--b0undary--\r\n"
            .to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 400);

    // Exactly 50 MiB is read (and then judged).
    let mut padded = serde_json::to_vec(&json!([chatgpt_conversation("Padded")])).unwrap();
    padded.resize(IMPORT_MAX, b' ');
    let result = ada
        .client
        .chat_import()
        .org_id(org)
        .body(padded)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(result.imported[0].title, "Padded");
    cx.teardown().await;
}

const IMPORT_MAX: usize = 50 * MIB;

#[tokio::test]
async fn a_file_naming_another_users_ids_creates_only_the_callers_chats() {
    let cx = TestContext::new("chat_import_ids").await;
    let ada = cx.user("ids-ada").await;
    let bob = cx.user("ids-bob").await;
    let org = ada.personal_org().await;
    let bob_org = bob.personal_org().await;
    let bobs = import(
        &bob.client,
        bob_org,
        ChatImportFormat::Auto,
        &json!([chatgpt_conversation("Bob's")]),
    )
    .await
    .imported[0]
        .chat_id;
    let (_, doc) = export_json(&bob.client, bob_org, Some(bobs)).await;
    let bob_tree = stored_tree(&cx, bobs).await;

    // Bob's export, ids and all, imported by Ada into her organization.
    let mut file = serde_json::to_value(&doc).unwrap();
    file["chats"][0]["title"] = json!("Hijack");
    file["chats"][0]["user_id"] = json!(bob.id);
    file["chats"][0]["messages"][0]["content"] = json!("replaced?");
    let result = import(&ada.client, org, ChatImportFormat::Workspace, &file).await;
    let new = result.imported[0].chat_id;
    assert_ne!(new, bobs);
    let db = cx.db().await;
    let owner: (Uuid, Uuid) = db
        .query_one(
            "SELECT user_id, organization_id FROM chats WHERE id = $1",
            &[&new],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(owner, (ada.id, org));
    // Bob's chat is untouched; no id of his is reused.
    let after = stored_tree(&cx, bobs).await;
    assert_eq!(
        after
            .iter()
            .map(|m| (m.id, m.content.clone()))
            .collect::<Vec<_>>(),
        bob_tree
            .iter()
            .map(|m| (m.id, m.content.clone()))
            .collect::<Vec<_>>()
    );
    let ada_ids: Vec<Uuid> = stored_tree(&cx, new).await.iter().map(|m| m.id).collect();
    assert!(
        ada_ids
            .iter()
            .all(|id| bob_tree.iter().all(|m| m.id != *id))
    );
    let title: String = db
        .query_one("SELECT title FROM chats WHERE id = $1", &[&bobs])
        .await
        .unwrap()
        .get(0);
    assert_eq!(title, "Bob's");
    // Bob still sees only his own chat; Ada cannot export Bob's.
    let bob_list = bob.client.chat_list().org_id(bob_org).send().await.unwrap();
    assert_eq!(bob_list.len(), 1);
    let (status, code) = error_of(
        ada.client
            .chat_export(org, bobs, ChatExportFormat::Json)
            .await
            .map(|_| ()),
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));
    // Nor import into Bob's organization.
    let (status, _) = error_of(
        ada.client
            .chat_import()
            .org_id(bob_org)
            .body(b"[]".to_vec())
            .send()
            .await,
    );
    assert_eq!(status, 403);
    cx.teardown().await;
}

async fn user_chats(cx: &TestContext, user: &TestUser, org: Uuid, n: usize) -> Vec<Uuid> {
    let chats: Vec<Value> = (0..n)
        .map(|i| {
            json!({"uuid": format!("c{i}"), "name": format!("Chat {i}"), "chat_messages": [
                {"sender": "human", "text": format!("question {i}")},
                {"sender": "assistant", "text": format!("answer {i}")}
            ]})
        })
        .collect();
    let result = import(&user.client, org, ChatImportFormat::Claude, &json!(chats)).await;
    let _ = cx;
    result.imported.iter().map(|c| c.chat_id).collect()
}

#[tokio::test]
async fn export_all_streams_every_chat_of_the_caller() {
    let cx = TestContext::new("chat_export_all").await;
    let ada = cx.user("all-ada").await;
    let bob = cx.user("all-bob").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    // More chats than a page (100), and a member's chat in the same
    // organization that is not Ada's.
    let mut mine = user_chats(&cx, &ada, org, 230).await;
    let bobs = user_chats(&cx, &bob, org, 1).await;

    let response = ada
        .client
        .chat_export_all(org, ChatExportFormat::Json)
        .await
        .unwrap();
    assert!(
        response.headers().get("content-length").is_none(),
        "streamed, not sized up front"
    );
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let bytes = bytes_of(response).await;
    let doc: ChatExportDocument = serde_json::from_slice(&bytes).unwrap();
    let mut exported: Vec<Uuid> = doc.chats.iter().map(|c| c.id).collect();
    exported.sort();
    mine.sort();
    assert_eq!(exported, mine);
    assert!(!exported.contains(&bobs[0]));
    assert!(doc.chats.iter().all(|c| c.messages.len() == 2));
    assert!(
        doc.chats
            .iter()
            .all(|c| c.leaf_id == Some(c.messages[1].id))
    );

    // Markdown of them all: each chat's path, separated.
    let markdown = String::from_utf8(
        bytes_of(
            ada.client
                .chat_export_all(org, ChatExportFormat::Markdown)
                .await
                .unwrap(),
        )
        .await,
    )
    .unwrap();
    assert_eq!(markdown.matches("\n---\n\n").count(), 229);
    assert_eq!(markdown.matches("### User\n\n").count(), 230);
    assert!(
        markdown.contains("# Chat 17\n\n### User\n\nquestion 17\n\n### Assistant\n\nanswer 17\n\n")
    );

    // The whole export imports back: 230 more chats.
    let again = ada
        .client
        .chat_import()
        .org_id(org)
        .body(bytes)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.imported.len(), 230);
    cx.teardown().await;
}

#[tokio::test]
async fn an_imported_message_of_a_user_role_is_a_question() {
    // Roles map exactly: a file cannot make a user's message the
    // model's or the other way round.
    let cx = TestContext::new("chat_import_roles").await;
    let ada = cx.user("roles-ada").await;
    let org = ada.personal_org().await;
    let result = import(
        &ada.client,
        org,
        ChatImportFormat::Auto,
        &json!([chatgpt_conversation("Roles")]),
    )
    .await;
    let chat = result.imported[0].chat_id;
    let detail = ada
        .client
        .chat_get()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .unwrap()
        .into_inner();
    let q = detail
        .messages
        .iter()
        .find(|m| m.content == "What is 2+2?")
        .unwrap();
    assert_eq!(q.role, ChatRole::User);
    assert_eq!(q.parent_message_id, None);
    assert_eq!(q.agent_id, None);
    let a = detail.messages.iter().find(|m| m.content == "6").unwrap();
    assert_eq!(a.role, ChatRole::Model);
    assert_eq!(a.metadata["imported_from"], "chatgpt");
    cx.teardown().await;
}

/// A node of a ChatGPT `mapping` whose message is `role`'s with `content`
/// (`Value::Null`: a node without a message).
fn gpt_node(
    id: &str,
    parent: Option<&str>,
    children: &[&str],
    role: &str,
    content: Value,
) -> Value {
    let message = if content.is_null() {
        Value::Null
    } else {
        json!({
            "id": id,
            "author": {"role": role, "name": null, "metadata": {}},
            "create_time": 1_720_000_000.0 + id.len() as f64,
            "content": content,
            "status": "finished_successfully",
            "weight": 1.0,
            "metadata": {"model_slug": "o3"},
            "recipient": "all",
            "channel": null
        })
    };
    json!({"id": id, "message": message, "parent": parent, "children": children})
}

/// A ChatGPT conversation of a reasoning model: the question, then (as
/// ChatGPT writes them) a `thoughts` node, a `reasoning_recap` node and the
/// answer; and a regenerated answer on a second branch with thoughts of
/// its own.
fn chatgpt_reasoning_conversation() -> Value {
    let text = |t: &str| json!({"content_type": "text", "parts": [t]});
    let thoughts = |summary: &str, content: &str| {
        json!({"content_type": "thoughts", "thoughts": [
            {"summary": summary, "content": content, "chunks": [], "finished": true}
        ], "source_analysis_msg_id": "x"})
    };
    let recap = json!({"content_type": "reasoning_recap", "content": "Thought for 12 seconds"});
    json!([{
        "title": "Thinking", "conversation_id": "conv-thinking", "current_node": "a",
        "create_time": 1_720_000_000.0, "update_time": 1_720_000_100.0,
        "mapping": {
            "root": gpt_node("root", None, &["q"], "system", Value::Null),
            "q": gpt_node("q", Some("root"), &["t", "t2"], "user", text("What is 2+2?")),
            "t": gpt_node("t", Some("q"), &["r"], "assistant",
                thoughts("Adding numbers", "The user asks for 2+2. That is 4.")),
            "r": gpt_node("r", Some("t"), &["a"], "assistant", recap.clone()),
            "a": gpt_node("a", Some("r"), &[], "assistant", text("4")),
            "t2": gpt_node("t2", Some("q"), &["r2"], "assistant",
                thoughts("Checking", "Still 4.")),
            "r2": gpt_node("r2", Some("t2"), &["a2"], "assistant", recap),
            "a2": gpt_node("a2", Some("r2"), &[], "assistant", text("Four."))
        }
    }])
}

/// `(content, reasoning)` of each stored message, in creation order.
async fn stored_reasoning(cx: &TestContext, chat: Uuid) -> Vec<(String, Option<String>)> {
    stored_tree(cx, chat)
        .await
        .into_iter()
        .map(|m| (m.content, m.reasoning))
        .collect()
}

fn said(content: &str, reasoning: Option<&str>) -> (String, Option<String>) {
    (content.to_string(), reasoning.map(str::to_string))
}

#[tokio::test]
async fn chat_import_thinking_of_each_format_becomes_the_answers_reasoning() {
    let cx = TestContext::new("chat_import_reasoning").await;
    let ada = cx.user("reasoning-ada").await;
    let org = ada.personal_org().await;
    let client = &ada.client;

    // ChatGPT: the thoughts go to the answer below them (each branch its
    // own), the recap is dropped; the messages are the ones people saw.
    let result = import(
        client,
        org,
        ChatImportFormat::Chatgpt,
        &chatgpt_reasoning_conversation(),
    )
    .await;
    let imported = &result.imported[0];
    assert_eq!(imported.messages, 3, "the question and its two answers");
    assert_eq!(
        imported.messages_left_out, 5,
        "root, two thoughts, two recaps"
    );
    let chat = imported.chat_id;
    assert_eq!(
        stored_reasoning(&cx, chat).await,
        [
            said("What is 2+2?", None),
            said(
                "4",
                Some("**Adding numbers**\n\nThe user asks for 2+2. That is 4.")
            ),
            said("Four.", Some("**Checking**\n\nStill 4.")),
        ]
    );
    let tree = stored_tree(&cx, chat).await;
    assert_eq!(
        (tree[1].parent, tree[2].parent),
        (Some(tree[0].id), Some(tree[0].id))
    );
    assert_eq!(stored_path(&cx, chat).await, ["What is 2+2?", "4"]);
    // The chat as the API shows it: the reasoning apart from the answer.
    let shown: Vec<(String, Option<String>)> = client
        .chat_get()
        .org_id(org)
        .chat_id(chat)
        .send()
        .await
        .unwrap()
        .into_inner()
        .messages
        .into_iter()
        .map(|m| (m.content, m.reasoning))
        .collect();
    assert_eq!(
        shown,
        [
            said("What is 2+2?", None),
            said(
                "4",
                Some("**Adding numbers**\n\nThe user asks for 2+2. That is 4.")
            ),
        ]
    );

    // Open WebUI: the `<details type="reasoning">` block (quoted and
    // escaped as Open WebUI writes it) leaves the content; an older
    // `<think>` block too.
    let owui = json!([{
        "id": "owui-r", "title": "Sky",
        "chat": {"history": {"currentId": "a", "messages": {
            "u": {"id": "u", "parentId": null, "childrenIds": ["a"], "role": "user", "content": "Sky colour?"},
            "a": {"id": "a", "parentId": "u", "childrenIds": ["u2"], "role": "assistant", "model": "qwq",
                  "content": "<details type=\"reasoning\" done=\"true\" duration=\"3\">\n<summary>Thought for 3 seconds</summary>\n&gt; Rayleigh scattering &amp; short\n&gt; wavelengths &lt;500 nm.\n</details>\nBlue."},
            "u2": {"id": "u2", "parentId": "a", "childrenIds": ["a2"], "role": "user", "content": "At night?"},
            "a2": {"id": "a2", "parentId": "u2", "childrenIds": [], "role": "assistant",
                   "content": "<think>\nNo sun.\n</think>\n\nBlack."}
        }}, "messages": []}
    }]);
    let result = import(client, org, ChatImportFormat::Auto, &owui).await;
    assert_eq!(result.format, ChatImportSource::Openwebui);
    assert_eq!(
        stored_reasoning(&cx, result.imported[0].chat_id).await,
        [
            said("Sky colour?", None),
            said(
                "Blue.",
                Some("Rayleigh scattering & short\nwavelengths <500 nm.")
            ),
            said("At night?", None),
            said("Black.", Some("No sun.")),
        ]
    );

    // Claude: `thinking` blocks are reasoning, `text` blocks the content.
    let claude = json!([{"uuid": "c-r", "name": "Greeting", "chat_messages": [
        {"uuid": "m1", "sender": "human", "text": "Hi", "content": [{"type": "text", "text": "Hi"}]},
        {"uuid": "m2", "sender": "assistant", "text": "Hello!", "content": [
            {"type": "thinking", "thinking": "A greeting; greet back.", "summaries": [], "cut_off": false},
            {"type": "text", "text": "Hello!"}
        ]}
    ]}]);
    let result = import(client, org, ChatImportFormat::Auto, &claude).await;
    assert_eq!(result.format, ChatImportSource::Claude);
    assert_eq!(
        stored_reasoning(&cx, result.imported[0].chat_id).await,
        [
            said("Hi", None),
            said("Hello!", Some("A greeting; greet back."))
        ]
    );

    // LibreChat: `think` parts are reasoning.
    let libre = json!({"conversationId": "lc-r", "title": "Plan", "messages": [
        {"messageId": "l1", "parentMessageId": "00000000-0000-0000-0000-000000000000", "isCreatedByUser": true, "text": "Plan a trip"},
        {"messageId": "l2", "parentMessageId": "l1", "isCreatedByUser": false, "text": "", "content": [
            {"type": "think", "think": "Ask where first."},
            {"type": "text", "text": "Where to?"}
        ]}
    ]});
    let result = import(client, org, ChatImportFormat::Auto, &libre).await;
    assert_eq!(result.format, ChatImportSource::Librechat);
    assert_eq!(
        stored_reasoning(&cx, result.imported[0].chat_id).await,
        [
            said("Plan a trip", None),
            said("Where to?", Some("Ask where first."))
        ]
    );

    // A 1 MiB thinking block is cut to 256 KiB at a character boundary;
    // the answer is kept whole.
    let long = "ü".repeat(MIB / 2);
    let claude = json!([{"uuid": "c-long", "name": "Long", "chat_messages": [
        {"sender": "human", "text": "Think hard"},
        {"sender": "assistant", "content": [
            {"type": "thinking", "thinking": long},
            {"type": "text", "text": "Done."}
        ]}
    ]}]);
    let result = import(client, org, ChatImportFormat::Auto, &claude).await;
    assert!(result.skipped.is_empty(), "{:?}", result.skipped);
    let stored = stored_reasoning(&cx, result.imported[0].chat_id).await;
    assert_eq!(stored[1].0, "Done.");
    let reasoning = stored[1].1.as_deref().expect("the reasoning");
    assert_eq!(reasoning.len(), 256 * 1024);
    assert!(reasoning.chars().all(|c| c == 'ü'));
    cx.teardown().await;
}

#[tokio::test]
async fn chat_import_reasoning_survives_the_json_export() {
    let cx = TestContext::new("chat_import_reasoning_trip").await;
    let ada = cx.user("reasoning-trip-ada").await;
    let org = ada.personal_org().await;
    let client = &ada.client;
    let result = import(
        client,
        org,
        ChatImportFormat::Auto,
        &chatgpt_reasoning_conversation(),
    )
    .await;
    let chat = result.imported[0].chat_id;
    let before = stored_reasoning(&cx, chat).await;

    // JSON: `reasoning` on every message, null on the question (present
    // on the wire as null, not left out).
    let (bytes, typed) = export_json(client, org, Some(chat)).await;
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["format"], "workspace.chat.v1");
    for m in doc["chats"][0]["messages"].as_array().unwrap() {
        assert!(m.as_object().unwrap().contains_key("reasoning"), "{m}");
    }
    let exported: Vec<(String, Option<String>)> = typed.chats[0]
        .messages
        .iter()
        .map(|m| (m.content.clone(), m.reasoning.clone()))
        .collect();
    assert_eq!(exported, before);

    // Markdown: the reasoning folded before the answer.
    let markdown = String::from_utf8(
        bytes_of(
            client
                .chat_export(org, chat, ChatExportFormat::Markdown)
                .await
                .unwrap(),
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        markdown,
        "# Thinking\n\n### User\n\nWhat is 2+2?\n\n### Assistant (o3)\n\n<details>\n\
         <summary>Reasoning</summary>\n\n**Adding numbers**\n\nThe user asks for 2+2. That is \
         4.\n\n</details>\n\n4\n\n"
    );

    // The export imports back with its reasoning.
    let again = import(client, org, ChatImportFormat::Workspace, &doc).await;
    assert_eq!(again.format, ChatImportSource::Workspace);
    assert_eq!(
        stored_reasoning(&cx, again.imported[0].chat_id).await,
        before
    );

    // An export written before answers had reasoning still imports.
    let mut older = doc.clone();
    for m in older["chats"][0]["messages"].as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("reasoning");
    }
    let old = import(client, org, ChatImportFormat::Auto, &older).await;
    let stored = stored_reasoning(&cx, old.imported[0].chat_id).await;
    assert_eq!(
        stored,
        before
            .iter()
            .map(|(c, _)| (c.clone(), None))
            .collect::<Vec<_>>()
    );
    cx.teardown().await;
}
