//! Knowledge bases and chat uploads: CRUD with the spec's shapes, sources
//! (credentials write-only and sealed), documents, isolation of every
//! id-addressed operation, uploads (sniffing, limits, gates, signed
//! downloads) on the local store.

use serde_json::{Value, json};
use uuid::Uuid;
use workspace_client::types;
use workspace_tests::{TestContext, TestUser, req};

const MODEL: &str = "all-minilm-l6-v2";

async fn create_kb(
    user: &TestUser,
    org: Uuid,
    name: &str,
    sources: Vec<types::SourceInput>,
) -> Uuid {
    user.client
        .kb_create()
        .org_id(org)
        .body(
            types::KbCreate::builder()
                .name(name.to_string())
                .description("about things".to_string())
                .embedding_model(MODEL.to_string())
                .sources(sources),
        )
        .send()
        .await
        .expect("kb_create")
        .into_inner()
        .id
}

#[tokio::test]
async fn knowledge_base_lifecycle() {
    // No workers: documents stay as added, so their states can be checked.
    let cx = TestContext::with_config("kb_lifecycle", |c| c.kb.workers = 0).await;
    let ada = cx.user("kb-ada").await;
    let org = ada.personal_org().await;

    // Without sources there is nothing to ingest: ready at once.
    let created = ada
        .client
        .kb_create()
        .org_id(org)
        .body(
            types::KbCreate::builder()
                .name("  Handbook  ".to_string())
                .description("policies".to_string())
                .embedding_model(MODEL.to_string())
                .sources(Vec::new()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.name, "Handbook");
    assert_eq!(created.org_id, org);
    assert_eq!(created.status, types::KbStatus::Ready);
    // The model's published name, in its own case, names the same model;
    // the knowledge base keeps the canonical name.
    let published = ada
        .client
        .kb_create()
        .org_id(org)
        .body(
            types::KbCreate::builder()
                .name("Published".to_string())
                .description(String::new())
                .embedding_model("all-MiniLM-L6-v2".to_string())
                .sources(Vec::new()),
        )
        .send()
        .await
        .expect("the published model name is accepted")
        .into_inner();
    let (status, detail) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/get",
        &[("kb_id", published.id.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["embedding_model"], MODEL);
    let (status, _) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::DELETE,
        "/api/kb/delete",
        &[("kb_id", published.id.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 200);

    // With sources: processing; documents are listed at once for web.
    let (status, body) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::POST,
        "/api/kb/create",
        &[("org_id", org.to_string())],
        Some(json!({
            "name": "Docs",
            "description": "",
            "embedding_model": MODEL,
            "sources": [
                {"type": "web", "config": {"urls": ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]}},
                {"type": "object_store", "config": {
                    "bucket_name": "my-bucket", "prefix": "docs/",
                    "cloud_access_key_id": "AKIASECRETID", "cloud_secret_access_key": "very-secret-key",
                    "cloud_region": "us-east-1", "endpoint_url": "http://127.0.0.1:9"}}
            ]
        })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "processing");
    let kb: Uuid = body["id"].as_str().unwrap().parse().unwrap();

    // The detail shows sources without credentials.
    let (status, detail) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/get",
        &[("kb_id", kb.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 200);
    let text = detail.to_string();
    assert!(
        !text.contains("very-secret-key") && !text.contains("AKIASECRETID"),
        "{text}"
    );
    assert_eq!(detail["embedding_model"], MODEL);
    assert_eq!(detail["sources"].as_array().unwrap().len(), 2);
    assert_eq!(detail["sources"][0]["type"], "web");
    assert_eq!(detail["sources"][0]["document_count"], 2);
    assert_eq!(detail["sources"][1]["config"]["bucket_name"], "my-bucket");
    assert_eq!(detail["sources"][1]["status"], "processing");
    assert_eq!(detail["document_count"], 2);

    // The credentials are sealed at rest.
    let (db, conn) = tokio_postgres::connect(&cx.db_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let row = db
        .query_one(
            "SELECT config::text, sealed_credentials FROM kb_sources WHERE type = 'object_store'",
            &[],
        )
        .await
        .unwrap();
    let config: String = row.get(0);
    let sealed: Vec<u8> = row.get(1);
    assert!(!config.contains("secret") && !config.contains("AKIA"));
    assert!(!String::from_utf8_lossy(&sealed).contains("very-secret-key"));

    // List, with status and document_count; paging bounded.
    let list = ada
        .client
        .kb_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].id, kb);
    assert_eq!(list[0].document_count, 2);
    assert_eq!(list[0].status, types::KbStatus::Processing);
    let (status, body) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/list",
        &[("org_id", org.to_string()), ("limit", "101".into())],
        None,
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (400, Some("invalid_pagination"))
    );

    // Update.
    let updated = ada
        .client
        .kb_update()
        .kb_id(kb)
        .body(types::KbUpdate::builder().description(Some("new".parse().unwrap())))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (updated.name.as_str(), updated.description.as_str()),
        ("Docs", "new")
    );

    // Documents: a page with the total.
    let page = ada
        .client
        .kb_list_documents()
        .kb_id(kb)
        .limit(1)
        .page(2)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (page.total, page.page, page.limit, page.documents.len()),
        (2, 2, 1, 1)
    );
    let doc = &page.documents[0];
    assert_eq!(doc.url.as_deref(), Some("http://127.0.0.1:9/b"));
    assert_eq!(doc.status, types::DocumentStatus::Pending);

    // Ingestion status counts.
    let progress = ada
        .client
        .kb_ingestion_status()
        .kb_id(kb)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(progress.documents_total, 2);
    assert_eq!(progress.sources.len(), 2);

    // Add a source; delete a document.
    let added = ada
        .client
        .kb_add_source()
        .kb_id(kb)
        .body(types::SourceInput::Web(types::WebSourceConfig {
            urls: vec!["https://example.com/x".to_string()],
        }))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(added.kb_id, kb);
    assert_eq!(added.type_, types::SourceType::Web);
    ada.client
        .kb_delete_document()
        .kb_id(kb)
        .document_id(doc.id)
        .send()
        .await
        .unwrap();
    let (status, body) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::DELETE,
        "/api/kb/delete_document",
        &[
            ("kb_id", kb.to_string()),
            ("document_id", doc.id.to_string()),
        ],
        None,
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (404, Some("not_found"))
    );

    // Validation.
    for (body, code) in [
        (
            json!({"name": "", "description": "", "embedding_model": MODEL, "sources": []}),
            "invalid_name",
        ),
        (
            json!({"name": "x", "description": "", "embedding_model": "nope", "sources": []}),
            "unknown_embedding_model",
        ),
        (
            json!({"name": "x", "description": "", "embedding_model": MODEL,
                "sources": [{"type": "web", "config": {"urls": ["file:///etc/passwd"]}}]}),
            "invalid_source",
        ),
        (
            json!({"name": "x", "description": "", "embedding_model": MODEL,
                "sources": [{"type": "file", "config": {"file_ids": [Uuid::new_v4()]}}]}),
            "invalid_source",
        ),
    ] {
        let (status, answer) = req(
            &cx.base_url,
            &ada.token,
            reqwest::Method::POST,
            "/api/kb/create",
            &[("org_id", org.to_string())],
            Some(body.clone()),
        )
        .await;
        assert_eq!(
            (status, answer["error_code"].as_str()),
            (400, Some(code)),
            "{body}"
        );
    }

    // Delete removes everything.
    let deleted = ada
        .client
        .kb_delete()
        .kb_id(kb)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(deleted.success);
    let left: i64 = db
        .query_one(
            "SELECT (SELECT count(*) FROM kb_documents) + (SELECT count(*) FROM kb_sources) \
                  + (SELECT count(*) FROM kb_jobs)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    let (status, _) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/get",
        &[("kb_id", kb.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 404);
    cx.teardown().await;
}

/// Every operation addressed by a knowledge base id answers 404 to a
/// member of another organization, and changes nothing.
#[tokio::test]
async fn knowledge_bases_are_isolated() {
    let cx = TestContext::new("kb_isolation").await;
    let ada = cx.user("kb-iso-ada").await;
    let eve = cx.user("kb-iso-eve").await;
    let org = ada.personal_org().await;
    let kb = create_kb(
        &ada,
        org,
        "Private",
        vec![types::SourceInput::Web(types::WebSourceConfig {
            urls: vec!["http://127.0.0.1:9/p".to_string()],
        })],
    )
    .await;
    let doc = ada
        .client
        .kb_list_documents()
        .kb_id(kb)
        .send()
        .await
        .unwrap()
        .into_inner()
        .documents[0]
        .id;
    use reqwest::Method as M;
    let q = vec![("kb_id", kb.to_string())];
    let qd = vec![("kb_id", kb.to_string()), ("document_id", doc.to_string())];
    // (method, path, query, body)
    type Call<'a> = (M, &'a str, Vec<(&'a str, String)>, Option<Value>);
    let calls: Vec<Call> = vec![
        (M::GET, "/api/kb/get", q.clone(), None),
        (
            M::PUT,
            "/api/kb/update",
            q.clone(),
            Some(json!({"name": "pwned"})),
        ),
        (M::DELETE, "/api/kb/delete", q.clone(), None),
        (
            M::POST,
            "/api/kb/add_source",
            q.clone(),
            Some(json!({"type": "web", "config": {"urls": ["http://x.test/"]}})),
        ),
        (M::GET, "/api/kb/list_documents", q.clone(), None),
        (M::POST, "/api/kb/retry_document", qd.clone(), None),
        (M::DELETE, "/api/kb/delete_document", qd, None),
        (
            M::POST,
            "/api/kb/search",
            q.clone(),
            Some(json!({"query": "x"})),
        ),
        (
            M::POST,
            "/api/kb/query",
            q.clone(),
            Some(json!({"query": "x"})),
        ),
        (M::GET, "/api/kb/ingestion_status", q.clone(), None),
    ];
    for (method, path, query, body) in calls {
        let (status, answer) = req(&cx.base_url, &eve.token, method, path, &query, body).await;
        assert_eq!(
            (status, answer["error_code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    // A document id of another knowledge base is not found through one's own.
    let eve_org = eve.personal_org().await;
    let own = create_kb(&eve, eve_org, "Mine", Vec::new()).await;
    let (status, _) = req(
        &cx.base_url,
        &eve.token,
        M::DELETE,
        "/api/kb/delete_document",
        &[("kb_id", own.to_string()), ("document_id", doc.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 404);
    // Lists never show the other organization's knowledge bases.
    let list = eve
        .client
        .kb_list()
        .org_id(eve_org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.iter().map(|k| k.id).collect::<Vec<_>>(), vec![own]);
    // Nothing changed.
    let detail = ada
        .client
        .kb_get()
        .kb_id(kb)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            detail.name.as_str(),
            detail.sources.len(),
            detail.document_count
        ),
        ("Private", 1, 1)
    );
    cx.teardown().await;
}

#[tokio::test]
async fn uploads_are_sniffed_limited_and_downloadable() {
    let cx = TestContext::with_config("kb_uploads", |c| {
        c.files.max_upload_bytes = 100_000;
    })
    .await;
    let ada = cx.user("up-ada").await;
    let eve = cx.user("up-eve").await;
    let org = ada.personal_org().await;

    let text = "Quarterly numbers are up.\n".repeat(100);
    let upload = ada
        .client
        .chat_upload_file(org, None, "../notes.md", text.clone().into_bytes())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(upload.filename, "notes.md");
    assert_eq!(upload.content_type, "text/markdown");
    assert_eq!(upload.file_size, text.len() as i64);
    // The signed link downloads it without a token.
    let response = reqwest::get(&upload.url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/markdown");
    assert_eq!(response.text().await.unwrap(), text);
    // A tampered link does not.
    let tampered = upload.url.replace("expires=", "expires=1");
    assert_eq!(reqwest::get(&tampered).await.unwrap().status(), 403);
    let expiry: i64 = upload
        .url
        .split("expires=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let lifetime = expiry - chrono::Utc::now().timestamp();
    assert!(
        (7 * 86400 - 60..=7 * 86400).contains(&lifetime),
        "{lifetime}"
    );

    // The type comes from the content: a PDF named .txt is a PDF, an
    // executable is refused whatever its name.
    let pdf = ada
        .client
        .chat_upload_file(
            org,
            None,
            "x.txt",
            b"%PDF-1.4\n%\xe2\xe3\n1 0 obj\n".to_vec(),
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(pdf.content_type, "application/pdf");
    let refused = ada
        .client
        .chat_upload_file(
            org,
            None,
            "notes.txt",
            b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(415));

    // Over the limit: 413.
    let big = ada
        .client
        .chat_upload_file(org, None, "big.txt", vec![b'a'; 100_001])
        .await
        .unwrap_err();
    assert_eq!(big.status().map(|s| s.as_u16()), Some(413));

    // A non-member cannot upload to the organization.
    let forbidden = eve
        .client
        .chat_upload_file(org, None, "x.txt", b"hi".to_vec())
        .await
        .unwrap_err();
    assert_eq!(forbidden.status().map(|s| s.as_u16()), Some(403));

    // Uploads become documents of a file source, in their organization only.
    let kb = create_kb(
        &ada,
        org,
        "Files",
        vec![types::SourceInput::File(types::FileSourceConfig {
            file_ids: vec![upload.id],
        })],
    )
    .await;
    let docs = ada
        .client
        .kb_list_documents()
        .kb_id(kb)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(docs.documents[0].file_id, Some(upload.id));
    assert_eq!(docs.documents[0].title, "notes.md");
    assert_eq!(docs.documents[0].size_bytes, Some(text.len() as i64));
    let eve_org = eve.personal_org().await;
    let (status, body) = req(
        &cx.base_url,
        &eve.token,
        reqwest::Method::POST,
        "/api/kb/create",
        &[("org_id", eve_org.to_string())],
        Some(
            json!({"name": "steal", "description": "", "embedding_model": MODEL,
                    "sources": [{"type": "file", "config": {"file_ids": [upload.id]}}]}),
        ),
    )
    .await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (400, Some("invalid_source"))
    );
    cx.teardown().await;
}

#[tokio::test]
async fn upload_gates_are_respected() {
    let cx = TestContext::with_config("kb_upload_gates", |c| {
        c.features.chat_uploads = false;
    })
    .await;
    let ada = cx.user("gate-ada").await;
    let org = ada.personal_org().await;
    let error = ada
        .client
        .chat_upload_file(org, None, "x.txt", b"hello".to_vec())
        .await
        .unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(403));
    cx.teardown().await;
}

/// Generated PDF, DOCX and XLSX documents pass the upload's sniffing as
/// their real types, land in the local store, and their text extracts
/// (the parsers run on the stored bytes, read back through the signed
/// link).
#[tokio::test]
async fn generated_documents_upload_and_extract() {
    use workspace_server::extract::{Budget, extract, fixtures};
    let cx = TestContext::new("kb_extract_uploads").await;
    let ada = cx.user("ex-ada").await;
    let org = ada.personal_org().await;
    // Parsed as the server parses them: in its extraction worker.
    let budget = Budget::from_config(&workspace_server::kb_config::FilesConfig {
        extraction_worker: workspace_tests::server_binary(),
        ..Default::default()
    });
    let cases: [(&str, Vec<u8>, &str, &str); 3] = [
        (
            "report.pdf",
            fixtures::pdf("The zorblax reactor needs coolant"),
            "application/pdf",
            "The zorblax reactor needs coolant",
        ),
        (
            "memo.docx",
            fixtures::docx(&["Quokkas live on Rottnest Island", "Second paragraph"]),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "Quokkas live on Rottnest Island\nSecond paragraph",
        ),
        (
            "prices.xlsx",
            fixtures::xlsx("Prices", &[&["item", "cost"], &["widget", "42"]]),
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "widget\t42",
        ),
    ];
    for (name, bytes, content_type, expected) in cases {
        let upload = ada
            .client
            .chat_upload_file(org, None, name, bytes)
            .await
            .unwrap()
            .into_inner();
        assert_eq!(upload.content_type, content_type, "{name}");
        let stored = reqwest::get(&upload.url)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let text = extract(&upload.content_type, stored, budget.clone())
            .await
            .unwrap();
        assert!(text.contains(expected), "{name}: {text:?}");
    }
    cx.teardown().await;
}

/// A search of a knowledge base without chunks answers at once while the
/// local model is not there: the search does not start loading (nor
/// downloading) a model to embed a query it will not use.
#[tokio::test]
async fn an_empty_knowledge_base_is_searched_without_the_model() {
    let models = tempfile::tempdir().expect("a temporary directory");
    let dir = models.path().join("all-minilm-l6-v2");
    let model_dir = dir.clone();
    // No workers: nothing provisions the model in the background either.
    let cx = TestContext::with_config("kb_empty_search", move |c| {
        c.kb.workers = 0;
        c.kb.local_model_dir = Some(model_dir.clone());
    })
    .await;
    let ada = cx.user("empty-search-ada").await;
    let org = ada.personal_org().await;
    let kb = create_kb(&ada, org, "Empty", Vec::new()).await;
    let started = std::time::Instant::now();
    let (status, found) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::POST,
        "/api/kb/search",
        &[("kb_id", kb.to_string())],
        Some(json!({"query": "where is the lighthouse?"})),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["results"], json!([]));
    assert!(
        took < std::time::Duration::from_secs(2),
        "an empty search waited {took:?}"
    );
    // Nothing was provisioned into (or next to) the model's directory.
    assert!(!dir.exists(), "the model directory was created");
    assert_eq!(
        std::fs::read_dir(models.path()).unwrap().count(),
        0,
        "something was unpacked beside the model directory"
    );
}
