//! Hostile uploads (issue #21): files of a few kilobytes built to make a
//! naive parser allocate gigabytes. The server parses them in its
//! memory-limited extraction worker; whatever a file does there, the
//! server stays up, the file or document ends with a clear error, other
//! requests go on, and a failed ingestion job is not retried. Hostile
//! documents in a knowledge base (JSON and HTML nested 100,000 deep, a
//! slow-loris site, a `Content-Length` lie) each reach a final state
//! within a minute while a plain document queued after them is ingested.

use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_server::extract::{Budget, ExtractError, Isolation, fixtures};
use workspace_tests::sse::NumberedReader;
use workspace_tests::{TestContext, http, raw, req};

const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
const PDF: &str = "application/pdf";

fn worker() -> std::path::PathBuf {
    workspace_tests::server_binary().expect(
        "the workspace-server executable (cargo xtask test builds it; \
         else cargo build -p workspace-server)",
    )
}

fn isolated(memory_mib: u64) -> Budget {
    Budget {
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(60),
        isolation: Isolation::Process {
            program: worker(),
            memory_mib,
        },
    }
}

#[tokio::test]
async fn the_worker_parses_what_is_bounded_and_dies_alone_on_the_rest() {
    // The 1.5 KB spreadsheet that aborted the server reads as its two
    // used cells.
    let text = workspace_server::extract::extract(
        XLSX,
        fixtures::hostile_xlsx_dimension().into(),
        isolated(256),
    )
    .await
    .unwrap();
    assert_eq!(text, "# Sheet: Bomb\ntop left\nbottom right");
    // Shared strings inflating to 300 MiB: the worker hits its address
    // space limit and dies; this process gets a clear error.
    let bomb = fixtures::hostile_xlsx_shared_strings(300);
    assert!(bomb.len() < 4 << 20, "{}", bomb.len());
    let err = workspace_server::extract::extract(XLSX, bomb.into(), isolated(256))
        .await
        .unwrap_err();
    assert_eq!(err, ExtractError::TooLarge(256));
    assert!(err.to_string().contains("256 MiB"), "{err}");
    // The same for a PDF stream inflating to 300 MiB.
    let err = workspace_server::extract::extract(
        PDF,
        fixtures::hostile_pdf_stream(300).into(),
        isolated(256),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ExtractError::TooLarge(256) | ExtractError::Corrupt(_)),
        "{err:?}"
    );
    // A page of 200,000 nested elements kept the HTML parsers busy for
    // minutes (and the worker's memory at its limit): it is read in one
    // pass without a tree instead.
    let page = "<div>".repeat(200_000) + "deep" + &"</div>".repeat(200_000);
    let mut budget = isolated(256);
    budget.timeout = Duration::from_secs(10);
    let started = Instant::now();
    let text = workspace_server::extract::extract("text/html", page.into(), budget)
        .await
        .unwrap();
    assert_eq!(text, "deep");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Whatever keeps a worker busy past its deadline, it is killed there
    // (a 300-page PDF given 150 ms).
    let mut budget = isolated(256);
    budget.timeout = Duration::from_millis(150);
    let started = Instant::now();
    let err = workspace_server::extract::extract(
        PDF,
        fixtures::pdf_pages(&fixtures::book(300)).into(),
        budget,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ExtractError::TimedOut(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Ordinary files still parse in the worker.
    let text = workspace_server::extract::extract(
        PDF,
        fixtures::pdf("Quokkas live on Rottnest Island").into(),
        isolated(256),
    )
    .await
    .unwrap();
    assert!(text.contains("Quokkas"), "{text}");
}

async fn upload(cx: &TestContext, token: &str, org: Uuid, name: &str, bytes: Vec<u8>) -> Uuid {
    let client = cx.client_with_token(token);
    client
        .chat_upload_file(org, None, name, bytes)
        .await
        .unwrap_or_else(|e| panic!("uploading {name}: {e}"))
        .into_inner()
        .id
}

#[tokio::test]
async fn hostile_uploads_leave_the_server_up_with_clear_errors() {
    workspace_tests::ensure_local_model().await;
    let cx = TestContext::with_config("hostile_uploads", |c| {
        c.files.extraction_memory_mib = 256;
        c.files.max_extracted_bytes = 64 * 1024;
        c.kb.poll_interval_ms = 100;
    })
    .await;
    let ada = cx.user("hostile-ada").await;
    let org = ada.personal_org().await;
    let t = ada.token.as_str();

    let sheet = upload(
        &cx,
        t,
        org,
        "corners.xlsx",
        fixtures::hostile_xlsx_dimension(),
    )
    .await;
    let strings = upload(
        &cx,
        t,
        org,
        "strings.xlsx",
        fixtures::hostile_xlsx_shared_strings(300),
    )
    .await;
    let pdf = upload(&cx, t, org, "stream.pdf", fixtures::hostile_pdf_stream(300)).await;
    let docx = upload(&cx, t, org, "long.docx", fixtures::hostile_docx(30)).await;
    let good = upload(
        &cx,
        t,
        org,
        "notes.md",
        b"# Notes\n\nThe harbour master keeps the tide tables.\n".to_vec(),
    )
    .await;

    // Chat: every upload goes into one message's prompt; the answer comes.
    let response = http()
        .post(format!("{}/api/chat/send_message", cx.base_url))
        .bearer_auth(t)
        .query(&[("org_id", org.to_string())])
        .json(&json!({"content": "What do these files say?",
                      "upload_ids": [sheet, strings, pdf, docx, good]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = NumberedReader::new(response).collect().await;
    assert_eq!(
        events.last().map(|(_, e)| e["type"].clone()),
        Some(json!("end")),
        "{events:?}"
    );
    let db = cx.db().await;
    let extraction = |id: Uuid| {
        let db = &db;
        async move {
            let row = db
                .query_one(
                    "SELECT extracted_text, extraction_error FROM files WHERE id = $1",
                    &[&id],
                )
                .await
                .unwrap();
            (
                row.get::<_, Option<String>>("extracted_text"),
                row.get::<_, Option<String>>("extraction_error"),
            )
        }
    };
    let (text, _) = extraction(sheet).await;
    assert_eq!(
        text.as_deref(),
        Some("# Sheet: Bomb\ntop left\nbottom right")
    );
    let (text, error) = extraction(strings).await;
    assert_eq!(text, None);
    assert!(
        error.as_deref().unwrap_or_default().contains("256 MiB"),
        "{error:?}"
    );
    // The offline model reads PDFs: this one went whole (its page tree
    // read, its streams never inflated), not as text; its extraction is
    // tried by the knowledge base below.
    let answer: String = events
        .iter()
        .filter(|(_, e)| e["type"] == "content")
        .filter_map(|(_, e)| e["content"].as_str())
        .collect();
    assert!(answer.contains("a PDF (stream.pdf, 1 pages)"), "{answer}");
    let (text, error) = extraction(pdf).await;
    assert!(text.is_none() && error.is_none(), "{text:?} {error:?}");
    // 30 MiB of inflated DOCX text, kept to the budget.
    let (text, error) = extraction(docx).await;
    assert_eq!(text.map(|t| t.len()), Some(64 * 1024), "{error:?}");

    // Knowledge base: each hostile document fails once, for good; the
    // good one is ingested.
    let kb = workspace_tests::resources::knowledge_base(
        &workspace_tests::resources::client_for(&cx.base_url, t),
        org,
        json!({
            "name": "Hostile", "description": "", "embedding_model": "all-minilm-l6-v2",
            "sources": [{"type": "file", "config": {"file_ids": [strings, pdf, good]}}]
        }),
    )
    .await
    .id;
    // Bypass the remembered extraction: the jobs parse the files again.
    db.execute(
        "UPDATE files SET extracted_text = NULL, extraction_error = NULL WHERE id = ANY($1)",
        &[&vec![strings, pdf]],
    )
    .await
    .unwrap();
    let started = Instant::now();
    let progress = loop {
        let (status, progress) = req(
            &cx.base_url,
            t,
            Method::GET,
            "/api/kb/ingestion_status",
            &[("kb_id", kb.to_string())],
            None,
        )
        .await;
        assert_eq!(status, 200, "{progress}");
        if progress["status"] == "ready" {
            break progress;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "{progress}");
        // Other requests are served meanwhile.
        let (status, _) = req(&cx.base_url, t, Method::GET, "/api/users/me", &[], None).await;
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(progress["documents_failed"], 2, "{progress}");
    let (_, page) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/kb/list_documents",
        &[("kb_id", kb.to_string())],
        None,
    )
    .await;
    for doc in page["documents"].as_array().unwrap() {
        match doc["title"].as_str().unwrap() {
            "notes.md" => assert_eq!(doc["status"], "completed", "{doc}"),
            _ => {
                assert_eq!(doc["status"], "failed", "{doc}");
                assert!(
                    !doc["error"].as_str().unwrap_or_default().is_empty(),
                    "{doc}"
                );
            }
        }
    }
    let attempts: Vec<i32> = db
        .query("SELECT attempts FROM kb_jobs WHERE kb_id = $1", &[&kb])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(attempts.iter().all(|a| *a <= 1), "retried: {attempts:?}");

    let (status, _) = raw(&cx.base_url, None, Method::GET, "/readyz", &[], None).await;
    assert_eq!(status, 200);
    cx.teardown().await;
}

/// The hostile documents of a knowledge base each reach a final state
/// within 60 s (most within seconds), once: a JSON file of about 400 KB
/// nested 100,000 deep (read as its values), an HTML page nested 100,000
/// deep (read without a tree), a JSON page as deep served as text, a
/// slow-loris page (stopped at the fetch
/// deadline), a `Content-Length` lie closed early and one held open; and a
/// plain document added after them is ingested meanwhile.
#[tokio::test]
async fn hostile_documents_settle_within_a_minute_while_the_queue_moves_on() {
    use workspace_tests::hostile_peers::HostileSite;
    use workspace_tests::web::{Page, Site};
    workspace_tests::ensure_local_model().await;
    let hostile = HostileSite::start().await;
    let depth = 100_000;
    let deep_html = "<html><head><title>Deep page</title></head><body>".to_string()
        + &"<div>".repeat(depth)
        + "The keeper's log lies at the bottom of the page."
        + &"</div>".repeat(depth)
        + "</body></html>";
    // A JSON document as deep, served by a web site as text.
    let deep_served =
        "[".repeat(depth) + "\"Fog horns sound every thirty seconds.\"" + &"]".repeat(depth);
    let site = Site::start(vec![
        ("/deep.html", Page::ok("text/html", deep_html)),
        ("/deep-served", Page::ok("text/plain", deep_served)),
    ])
    .await;
    let cx = TestContext::with_config("hostile_documents", |c| {
        c.kb.poll_interval_ms = 100;
        c.fetch.allow_private_networks = true;
        // Small deadlines keep the test short; the defaults are 30 s.
        c.fetch.timeout_secs = 3;
        c.files.extraction_timeout_secs = 10;
    })
    .await;
    let ada = cx.user("hostile-docs-ada").await;
    let org = ada.personal_org().await;
    let t = ada.token.as_str();
    let deep_json = "{\"a\":[".repeat(depth / 2)
        + "\"The lantern room sits above the keeper's quarters.\""
        + &"]}".repeat(depth / 2);
    assert!(deep_json.len() > 300_000, "{}", deep_json.len());
    let json_file = upload(&cx, t, org, "deep.json", deep_json.into_bytes()).await;
    let client = workspace_tests::resources::client_for(&cx.base_url, t);
    let started = Instant::now();
    let kb = workspace_tests::resources::knowledge_base(
        &client,
        org,
        json!({
            "name": "Hostile documents", "description": "", "embedding_model": "all-minilm-l6-v2",
            "sources": [
                {"type": "file", "config": {"file_ids": [json_file]}},
                {"type": "web", "config": {"urls": [
                    site.url("/deep.html"), site.url("/deep-served"), hostile.url("/slow"),
                    hostile.url("/lie-close"), hostile.url("/lie-open")]}}
            ]
        }),
    )
    .await
    .id;
    let plain_file = upload(
        &cx,
        t,
        org,
        "plain.txt",
        b"The harbour master keeps the tide tables in the ferry office.".to_vec(),
    )
    .await;
    let plain_kb = workspace_tests::resources::knowledge_base(
        &client,
        org,
        json!({
            "name": "Plain", "description": "", "embedding_model": "all-minilm-l6-v2",
            "sources": [{"type": "file", "config": {"file_ids": [plain_file]}}]
        }),
    )
    .await
    .id;

    // Each document's final state, and when it was first seen.
    let mut settled: std::collections::BTreeMap<String, (Duration, serde_json::Value)> =
        Default::default();
    while settled.len() < 7 {
        for kb in [kb, plain_kb] {
            for doc in documents(&client, kb).await {
                let name = doc["url"]
                    .as_str()
                    .and_then(|u| u.rsplit('/').next())
                    .or(doc["title"].as_str())
                    .unwrap_or_default()
                    .to_string();
                if matches!(doc["status"].as_str(), Some("completed" | "failed")) {
                    settled
                        .entry(name)
                        .or_insert_with(|| (started.elapsed(), doc.clone()));
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not settled within 60 s: {settled:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (name, (at, doc)) in &settled {
        println!("{name}: {} after {at:?}: {}", doc["status"], doc["error"]);
    }
    let doc = |name: &str| settled[name].1.clone();
    assert_eq!(doc("plain.txt")["status"], "completed");
    assert_eq!(
        doc("deep.json")["status"],
        "completed",
        "{}",
        doc("deep.json")
    );
    assert_eq!(
        doc("deep.html")["status"],
        "completed",
        "{}",
        doc("deep.html")
    );
    let served = doc("deep-served");
    assert_eq!(served["status"], "completed", "{served}");
    let failed = |name: &str, says: &str| {
        let d = doc(name);
        assert_eq!(d["status"], "failed", "{d}");
        let error = d["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{name}: {error}");
    };
    failed("slow", "too slowly");
    failed("lie-close", "Content-Length");
    failed("lie-open", "too slowly");
    // The plain document did not wait for the hostile ones' deadlines
    // beyond one fetch deadline.
    assert!(
        settled["plain.txt"].0 < Duration::from_secs(30),
        "{:?}",
        settled["plain.txt"].0
    );
    // The nested texts were read: their words are found.
    let query: workspace_client::types::KbSearchRequest =
        serde_json::from_value(json!({"query": "lantern room keeper's quarters"}))
            .expect("a search request");
    let found = client
        .kb_search()
        .kb_id(kb)
        .body(query)
        .send()
        .await
        .expect("searching")
        .into_inner();
    assert!(
        found
            .results
            .iter()
            .any(|hit| hit.content.contains("a: The lantern room")),
        "{found:?}"
    );
    // Every failure was final at its first attempt.
    let db = cx.db().await;
    let attempts: Vec<i32> = db
        .query("SELECT attempts FROM kb_jobs WHERE kb_id = $1", &[&kb])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(attempts.iter().all(|a| *a == 1), "retried: {attempts:?}");
    cx.teardown().await;
}

/// An attempt that outlives `kb.job_timeout_secs` is stopped there and its
/// document fails with that reason, at once and for good.
#[tokio::test]
async fn an_attempt_past_its_deadline_fails_its_document() {
    use workspace_tests::hostile_peers::HostileSite;
    let hostile = HostileSite::start().await;
    let cx = TestContext::with_config("hostile_job_deadline", |c| {
        c.kb.poll_interval_ms = 100;
        c.kb.job_timeout_secs = 2;
        c.fetch.allow_private_networks = true;
    })
    .await;
    let ada = cx.user("deadline-ada").await;
    let org = ada.personal_org().await;
    let t = ada.token.as_str();
    let client = workspace_tests::resources::client_for(&cx.base_url, t);
    let started = Instant::now();
    let kb = workspace_tests::resources::knowledge_base(
        &client,
        org,
        json!({
            "name": "Deadline", "description": "", "embedding_model": "all-minilm-l6-v2",
            "sources": [{"type": "web", "config": {"urls": [hostile.url("/lie-open")]}}]
        }),
    )
    .await
    .id;
    let doc = loop {
        let docs = documents(&client, kb).await;
        if let Some(doc) = docs.iter().find(|d| d["status"] == "failed") {
            break doc.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{docs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let error = doc["error"].as_str().unwrap_or_default();
    assert!(error.contains("longer than 2 s"), "{error}");
    assert!(error.contains("kb.job_timeout_secs"), "{error}");
    cx.teardown().await;
}

/// The documents of `kb`, as JSON.
async fn documents(client: &workspace_client::Client, kb: Uuid) -> Vec<serde_json::Value> {
    let page = client
        .kb_list_documents()
        .kb_id(kb)
        .send()
        .await
        .expect("listing documents")
        .into_inner();
    page.documents
        .iter()
        .map(|d| serde_json::to_value(d).expect("a document as JSON"))
        .collect()
}
