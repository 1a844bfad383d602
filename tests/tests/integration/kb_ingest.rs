//! Knowledge-base ingestion, search and answers with the real pieces: the
//! uploads' local store, PDF/DOCX/Markdown extraction, the durable job
//! workers, the local all-MiniLM-L6-v2 embedder (candle), hybrid search in
//! PostgreSQL, and a model answer citing its sources (a local provider
//! speaking the OpenAI protocol).

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_tests::{TestContext, TestUser, req};

const MODEL: &str = "all-minilm-l6-v2";

async fn upload(user: &TestUser, org: Uuid, name: &str, bytes: Vec<u8>) -> Uuid {
    user.client
        .chat_upload_file(org, None, name, bytes)
        .await
        .unwrap_or_else(|e| panic!("uploading {name}: {e}"))
        .into_inner()
        .id
}

/// Polls `ingestion_status` until the knowledge base is `ready`.
async fn wait_ready(cx: &TestContext, user: &TestUser, kb: Uuid, limit: Duration) -> Value {
    let started = Instant::now();
    loop {
        let (status, progress) = req(
            &cx.base_url,
            &user.token,
            reqwest::Method::GET,
            "/api/kb/ingestion_status",
            &[("kb_id", kb.to_string())],
            None,
        )
        .await;
        assert_eq!(status, 200, "{progress}");
        if progress["status"] == "ready" {
            return progress;
        }
        assert!(
            started.elapsed() < limit,
            "ingestion did not finish in {limit:?}: {progress}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn search(cx: &TestContext, user: &TestUser, kb: Uuid, body: Value) -> Vec<Value> {
    let (status, found) = req(
        &cx.base_url,
        &user.token,
        reqwest::Method::POST,
        "/api/kb/search",
        &[("kb_id", kb.to_string())],
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    found["results"].as_array().cloned().unwrap_or_default()
}

const LIGHTHOUSE: &str = "The lighthouse on Carrow Point was built in 1868. Its keeper climbs \
    the spiral stairs every evening to light the lamp, trims the wick and winds the clockwork \
    that turns the lens, so that ships can find the harbour entrance in fog and storms.";
const BAKERY: &str = "Quarterly results of the bakery: bread sales rose by twelve percent, \
    pastry margins fell because butter prices doubled, and the new sourdough line sold out \
    every Saturday morning.";
const ORCHARD: &str = "Apple orchards need pruning in late winter. Remove crossing branches, \
    keep an open centre so that sunlight reaches the fruit, and paint large cuts.";
const RARE: &str = "Maintenance log. The pump seal was replaced with part number \
    QX-7781-ZEPHYR after the pressure test. Next inspection in spring.";

#[tokio::test]
async fn documents_are_ingested_found_and_cited() {
    workspace_tests::ensure_local_model().await;
    let fake = workspace_tests::fake_provider::FakeProvider::with_default(
        workspace_tests::fake_provider::Reply::openai_text(&[
            "The keeper lights the lamp every evening ",
            "[1].",
        ]),
    )
    .await;
    let provider_url = format!("{}/v1", fake.base_url());
    let cx = TestContext::with_config("kb_ingest", move |c| {
        c.kb.poll_interval_ms = 100;
        c.models.push(workspace_server::config::ModelConfig {
            name: "fake".into(),
            provider: Some(workspace_server::config::ProviderKind::OpenaiCompatible),
            upstream_model: Some("fake-upstream".into()),
            base_url: Some(provider_url),
            api_key: Some("sk-test".into()),
            api_key_env: None,
            max_tokens: None,
        });
    })
    .await;
    let ada = cx.user("ingest-ada").await;
    let org = ada.personal_org().await;

    let pdf = upload(
        &ada,
        org,
        "lighthouse.pdf",
        workspace_server::extract::fixtures::pdf(LIGHTHOUSE),
    )
    .await;
    let docx = upload(
        &ada,
        org,
        "bakery.docx",
        workspace_server::extract::fixtures::docx(&[BAKERY]),
    )
    .await;
    let md = upload(
        &ada,
        org,
        "orchard.md",
        format!("# Orchard care\n\n{ORCHARD}\n").into_bytes(),
    )
    .await;
    let txt = upload(&ada, org, "log.txt", RARE.as_bytes().to_vec()).await;
    // An image has no text: that document fails, the others go on.
    let png = upload(
        &ada,
        org,
        "picture.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde".to_vec(),
    )
    .await;

    let started = Instant::now();
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({
            "name": "Handbook", "description": "", "embedding_model": MODEL,
            "sources": [{"type": "file", "config": {"file_ids": [pdf, docx, md, txt, png]}}]
        }),
    )
    .await
    .id;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(180)).await;
    println!("ingested 5 documents in {:?}", started.elapsed());
    assert_eq!(progress["documents_total"], 5, "{progress}");
    assert_eq!(progress["documents_done"], 5, "{progress}");
    assert_eq!(progress["documents_failed"], 1, "{progress}");
    assert_eq!(progress["sources"][0]["status"], "completed", "{progress}");
    // Offered to chats, in the agreed shape {id, name, description,
    // status, document_count}.
    let (status, offered) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/chat/available_knowledge_bases",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    assert_eq!(status, 200, "{offered}");
    let handbook = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == kb.to_string())
        .unwrap_or_else(|| panic!("not offered: {offered}"));
    assert_eq!(handbook["name"], "Handbook");
    assert_eq!(handbook["status"], "ready", "{handbook}");
    assert!(
        handbook["document_count"].as_i64().unwrap() >= 4,
        "{handbook}"
    );

    let (_, page) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/list_documents",
        &[("kb_id", kb.to_string())],
        None,
    )
    .await;
    for doc in page["documents"].as_array().unwrap() {
        if doc["title"] == "picture.png" {
            assert_eq!(doc["status"], "failed", "{doc}");
            assert!(
                doc["error"]
                    .as_str()
                    .unwrap()
                    .contains("cannot be extracted"),
                "{doc}"
            );
        } else {
            assert_eq!(doc["status"], "completed", "{doc}");
            assert!(doc["chunk_count"].as_i64().unwrap() >= 1, "{doc}");
        }
    }

    // A failed document can be retried (it fails again: an image has no
    // text); a completed one cannot.
    let png_doc = pdf_document(&page, "picture.png");
    let retry = |doc: String| {
        let (cx, ada) = (&cx, &ada);
        async move {
            req(
                &cx.base_url,
                &ada.token,
                reqwest::Method::POST,
                "/api/kb/retry_document",
                &[("kb_id", kb.to_string()), ("document_id", doc)],
                None,
            )
            .await
        }
    };
    let (status, body) = retry(png_doc.clone()).await;
    assert_eq!(status, 200, "{body}");
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(60)).await;
    assert_eq!(progress["documents_failed"], 1, "{progress}");
    let (status, body) = retry(pdf_document(&page, "bakery.docx")).await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (409, Some("document_not_failed"))
    );

    // A paraphrased question finds the PDF's chunk first.
    let hits = search(
        &cx,
        &ada,
        kb,
        json!({"query": "who looks after the light tower that guides boats?"}),
    )
    .await;
    assert!(!hits.is_empty());
    assert_eq!(
        hits[0]["document_id"],
        json!(pdf_document(&page, "lighthouse.pdf"))
    );
    assert!(hits[0]["content"].as_str().unwrap().contains("keeper"));
    let score = hits[0]["score"].as_f64().unwrap();
    assert!(score > 0.0 && score <= 1.0, "{score}");
    assert_eq!(hits[0]["metadata"]["title"], "lighthouse.pdf");
    assert_eq!(hits[0]["metadata"]["source_type"], "file");
    // Scores are ordered.
    for pair in hits.windows(2) {
        assert!(pair[0]["score"].as_f64() >= pair[1]["score"].as_f64());
    }

    // A rare keyword finds its chunk first.
    let hits = search(&cx, &ada, kb, json!({"query": "QX-7781-ZEPHYR"})).await;
    assert_eq!(
        hits[0]["document_id"],
        json!(pdf_document(&page, "log.txt"))
    );

    // Filters and the threshold.
    let only_bakery = pdf_document(&page, "bakery.docx");
    let hits = search(
        &cx,
        &ada,
        kb,
        json!({"query": "lighthouse keeper", "filters": {"document_ids": [only_bakery]}}),
    )
    .await;
    assert!(hits.iter().all(|h| h["document_id"] == json!(only_bakery)));
    let hits = search(
        &cx,
        &ada,
        kb,
        json!({"query": "lighthouse keeper", "score_threshold": 1.0}),
    )
    .await;
    assert!(hits.is_empty(), "{hits:?}");
    let hits = search(&cx, &ada, kb, json!({"query": "butter prices", "limit": 1})).await;
    assert_eq!(hits.len(), 1);

    // The answer cites its numbered sources (JSON).
    let (_, models) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/models/list",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    let fake_model = models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "fake")
        .unwrap()["id"]
        .clone();
    let (status, answer) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::POST,
        "/api/kb/query",
        &[("kb_id", kb.to_string())],
        Some(json!({"query": "Who lights the lamp?", "model_id": fake_model, "limit": 3})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["answer"].as_str().unwrap().contains("[1]"),
        "{answer}"
    );
    let sources = answer["sources"].as_array().unwrap();
    assert_eq!(sources[0]["index"], 1);
    assert_eq!(
        sources[0]["document_id"],
        json!(pdf_document(&page, "lighthouse.pdf"))
    );
    // The model was given the numbered excerpts.
    let asked = fake.requests().last().unwrap().messages();
    let prompt = &asked.last().unwrap().1;
    assert!(prompt.contains("[1] lighthouse.pdf"), "{prompt}");
    assert!(
        prompt.contains("Question: Who lights the lamp?"),
        "{prompt}"
    );

    // Streamed: sources, start, content..., end.
    let response = workspace_tests::http()
        .post(format!("{}/api/kb/query", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[("kb_id", kb.to_string())])
        .json(&json!({"query": "Who lights the lamp?", "model_id": fake_model, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let events = workspace_tests::sse::json_of(response).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"sources"), "{kinds:?}");
    assert_eq!(kinds.get(1), Some(&"start"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"), "{kinds:?}");
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "content")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "The keeper lights the lamp every evening [1].");
    // The same stream when the request asks for it with `Accept` alone.
    let response = workspace_tests::http()
        .post(format!("{}/api/kb/query", cx.base_url))
        .bearer_auth(&ada.token)
        .header("Accept", "text/event-stream")
        .query(&[("kb_id", kb.to_string())])
        .json(&json!({"query": "Who lights the lamp?", "model_id": fake_model}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = response.text().await.unwrap();
    assert!(text.contains("data: {\"type\":\"sources\""), "{text}");
    assert!(text.contains("\"type\":\"end\""), "{text}");

    // Chat with the knowledge base: a `sources` event with the excerpts the
    // model was given, the lighthouse chunk first.
    let response = workspace_tests::http()
        .post(format!("{}/api/chat/send_message", cx.base_url))
        .bearer_auth(&ada.token)
        .query(&[("org_id", org.to_string())])
        .json(
            &json!({"content": "Who lights the lamp at the point?", "model_id": fake_model,
            "knowledge_base_ids": [kb]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = workspace_tests::sse::json_of(response).await;
    let sources = events
        .iter()
        .find(|e| e["type"] == "sources")
        .unwrap_or_else(|| panic!("no sources event: {events:?}"));
    assert_eq!(
        sources["sources"][0]["document_id"],
        json!(pdf_document(&page, "lighthouse.pdf")),
        "{sources}"
    );
    assert_eq!(sources["sources"][0]["index"], 1);
    // (Besides the answer, the model is asked for the chat's title.)
    assert!(
        fake.requests().iter().any(|r| r
            .messages()
            .iter()
            .any(|(_, m)| m.contains("Who lights the lamp at the point?") && m.contains("keeper"))),
        "no request carried the excerpts"
    );

    // Deleting a document removes its chunks from search.
    let log_doc = pdf_document(&page, "log.txt");
    let (status, _) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::DELETE,
        "/api/kb/delete_document",
        &[("kb_id", kb.to_string()), ("document_id", log_doc.clone())],
        None,
    )
    .await;
    assert_eq!(status, 200);
    let hits = search(&cx, &ada, kb, json!({"query": "QX-7781-ZEPHYR"})).await;
    assert!(hits.iter().all(|h| h["document_id"] != json!(log_doc)));

    // Nothing of this knowledge base is findable from another organization.
    let eve = cx.user("ingest-eve").await;
    for path in ["/api/kb/search", "/api/kb/query"] {
        let (status, body) = req(
            &cx.base_url,
            &eve.token,
            reqwest::Method::POST,
            path,
            &[("kb_id", kb.to_string())],
            Some(json!({"query": "lighthouse"})),
        )
        .await;
        assert_eq!(
            (status, body["error_code"].as_str()),
            (404, Some("not_found"))
        );
    }
    cx.teardown().await;
}

/// The id of the listed document titled `title`.
fn pdf_document(page: &Value, title: &str) -> String {
    page["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["title"] == title)
        .unwrap_or_else(|| panic!("no document {title}: {page}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A worker that dies mid-job (its lease left behind in the database) does
/// not leave the document stuck: another worker takes the job over once the
/// lease expires, and it completes.
#[tokio::test]
async fn a_crashed_workers_job_is_taken_over() {
    workspace_tests::ensure_local_model().await;
    let cx = TestContext::with_config("kb_takeover", |c| {
        c.kb.workers = 0;
    })
    .await;
    let ada = cx.user("takeover-ada").await;
    let org = ada.personal_org().await;
    let file = upload(&ada, org, "notes.txt", LIGHTHOUSE.as_bytes().to_vec()).await;
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({
            "name": "K", "description": "", "embedding_model": MODEL,
            "sources": [{"type": "file", "config": {"file_ids": [file]}}]
        }),
    )
    .await
    .id;
    // A worker of a dead instance claimed the job: running, lease held by
    // a worker id nobody has, expiring in a moment.
    let db = cx.db().await;
    let claimed = db
        .execute(
            "UPDATE kb_jobs SET state = 'running', attempts = 1, locked_by = gen_random_uuid(), \
                 locked_until = now() + interval '2 seconds' WHERE kb_id = $1",
            &[&kb],
        )
        .await
        .unwrap();
    assert_eq!(claimed, 1);
    // A live instance with workers takes it over after the lease expires.
    let second = cx
        .second_instance(|c| {
            c.kb.poll_interval_ms = 100;
        })
        .await;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(120)).await;
    assert_eq!(progress["documents_done"], 1, "{progress}");
    assert_eq!(progress["documents_failed"], 0, "{progress}");
    let attempts: i32 = db
        .query_one("SELECT attempts FROM kb_jobs WHERE kb_id = $1", &[&kb])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 2, "the takeover is the second attempt");
    let hits = search(&cx, &ada, kb, json!({"query": "lighthouse keeper"})).await;
    assert!(!hits.is_empty());
    second
        .shutdown()
        .await
        .expect("stopping the second instance");
    cx.teardown().await;
}

/// The search statement can use the HNSW index for its vector side (an
/// ordering by a joined row's column instead of the parameter silently
/// rules the index out: every search then scans the whole knowledge base).
#[tokio::test]
async fn the_search_statement_can_use_the_hnsw_index() {
    let cx = TestContext::with_config("kb_plan", |c| c.kb.workers = 0).await;
    let db = cx.db().await;
    for dims in [384, 768, 1024, 1536] {
        let sql = workspace_server::db::datastore::kb::search_sql(dims).unwrap();
        // Make every other way to the ordered rows dear; the plan must then
        // find the index ordering by distance to the parameter.
        db.batch_execute(
            "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off",
        )
        .await
        .unwrap();
        // The simple protocol: the statement keeps its `$n` placeholders.
        let plan: Vec<String> = db
            .simple_query(&format!("EXPLAIN (GENERIC_PLAN) {sql}"))
            .await
            .unwrap()
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            })
            .collect();
        let plan = plan.join("\n");
        assert!(
            plan.contains(&format!("kb_chunks_hnsw_{dims}")),
            "{dims}: no HNSW index scan:\n{plan}"
        );
    }
    cx.teardown().await;
}

const ARTICLE: &str = r#"<html><head><title>Harbour lights</title>
<script>var secretTracker = "TRACKER-XYZ";</script></head>
<body><nav><a href="/">Home</a> <a href="/contact">Contact</a></nav>
<article><h1>Harbour lights</h1>
<p>The harbour master switches on the green and red harbour lights at dusk, so that the
fishing fleet can enter the narrow channel between the two breakwaters safely.</p>
<p>During the winter storms the lights are checked twice a night, and a spare battery is
kept in the watch house beside the slipway.</p></article></body></html>"#;

/// A knowledge base over a local web site (robots.txt obeyed, HTML made
/// readable, redirects followed, 404 permanent, 5xx retried then failed)
/// and an S3 prefix on a signature-checking S3 server; wrong credentials
/// fail the source without showing the secret.
#[tokio::test]
async fn web_pages_and_s3_objects_are_ingested() {
    use workspace_tests::s3::{ACCESS_KEY, LocalS3, SECRET_KEY};
    use workspace_tests::web::{Page, Site};
    workspace_tests::ensure_local_model().await;
    let site = Site::start(vec![
        (
            "/robots.txt",
            Page::ok("text/plain", "User-agent: *\nDisallow: /private/\n"),
        ),
        (
            "/harbour.html",
            Page::ok("text/html; charset=utf-8", ARTICLE),
        ),
        ("/old-harbour", Page::redirect("/harbour.html")),
        (
            "/notes.txt",
            Page::ok(
                "text/plain",
                "Tide tables are posted at the ferry office every Monday.",
            ),
        ),
        ("/private/plans.html", Page::ok("text/html", ARTICLE)),
        ("/boom", Page::status(503)),
    ])
    .await;
    let s3 = LocalS3::start().await;
    s3.put(
        "kb-bucket",
        "docs/ropes.txt",
        b"Mooring ropes must be replaced when the outer strands are frayed.",
    );
    s3.put(
        "kb-bucket",
        "docs/guide/anchors.md",
        b"# Anchors\n\nA fluke anchor holds best in sand and mud.",
    );
    s3.put("kb-bucket", "elsewhere/skip.txt", b"Not under the prefix.");

    let cx = TestContext::with_config("kb_web_s3", |c| {
        c.kb.poll_interval_ms = 100;
        c.kb.max_attempts = 2;
        c.kb.retry_backoff_secs = 1;
        c.fetch.allow_private_networks = true;
    })
    .await;
    let ada = cx.user("web-ada").await;
    let org = ada.personal_org().await;
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({
            "name": "Port", "description": "", "embedding_model": MODEL,
            "sources": [
                {"type": "web", "config": {"urls": [
                    site.url("/old-harbour"), site.url("/notes.txt"),
                    site.url("/private/plans.html"), site.url("/gone"), site.url("/boom")]}},
                {"type": "object_store", "config": {
                    "bucket_name": "kb-bucket", "prefix": "docs/", "cloud_region": "us-east-1",
                    "endpoint_url": s3.endpoint(),
                    "cloud_access_key_id": ACCESS_KEY, "cloud_secret_access_key": SECRET_KEY}}
            ]
        }),
    )
    .await
    .id;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(180)).await;
    assert_eq!(progress["documents_total"], 7, "{progress}");
    assert_eq!(progress["documents_failed"], 3, "{progress}");

    let (_, page) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/list_documents",
        &[("kb_id", kb.to_string()), ("limit", "50".into())],
        None,
    )
    .await;
    let docs = page["documents"].as_array().unwrap();
    let by_url = |suffix: &str| {
        docs.iter()
            .find(|d| {
                d["url"].as_str().is_some_and(|u| u.ends_with(suffix))
                    || d["title"].as_str().is_some_and(|t| t.ends_with(suffix))
            })
            .unwrap_or_else(|| panic!("no document {suffix}: {page}"))
            .clone()
    };
    let harbour = by_url("/old-harbour");
    assert_eq!(harbour["status"], "completed", "{harbour}");
    assert_eq!(harbour["title"], "Harbour lights", "{harbour}");
    assert_eq!(by_url("/notes.txt")["status"], "completed");
    let private = by_url("/private/plans.html");
    assert_eq!(private["status"], "failed");
    assert!(
        private["error"].as_str().unwrap().contains("robots.txt"),
        "{private}"
    );
    let gone = by_url("/gone");
    assert_eq!(gone["status"], "failed");
    assert!(gone["error"].as_str().unwrap().contains("404"), "{gone}");
    let boom = by_url("/boom");
    assert_eq!(boom["status"], "failed");
    assert!(boom["error"].as_str().unwrap().contains("503"), "{boom}");
    assert_eq!(by_url("ropes.txt")["status"], "completed");
    // An object's document is named as the spec says: s3://bucket/key.
    assert_eq!(
        by_url("ropes.txt")["url"],
        "s3://kb-bucket/docs/ropes.txt",
        "{page}"
    );
    assert_eq!(by_url("anchors.md")["status"], "completed");
    assert!(
        !docs.iter().any(|d| d["title"].as_str() == Some("skip.txt")),
        "an object outside the prefix was listed"
    );

    // The readable text, not the script, was indexed; found by meaning.
    let hits = search(
        &cx,
        &ada,
        kb,
        json!({"query": "who turns on the lights for boats entering port?"}),
    )
    .await;
    assert_eq!(hits[0]["document_id"], harbour["id"], "{hits:?}");
    assert_eq!(hits[0]["metadata"]["url"], json!(site.url("/harbour.html")));
    let hits = search(&cx, &ada, kb, json!({"query": "TRACKER-XYZ"})).await;
    assert!(
        hits.iter()
            .all(|h| !h["content"].as_str().unwrap().contains("TRACKER")),
        "{hits:?}"
    );
    let hits = search(&cx, &ada, kb, json!({"query": "frayed mooring ropes"})).await;
    assert_eq!(hits[0]["document_id"], by_url("ropes.txt")["id"]);

    // Wrong credentials: the listing fails for good, the secret unshown.
    let bad = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({
            "name": "Bad", "description": "", "embedding_model": MODEL,
            "sources": [{"type": "object_store", "config": {
                "bucket_name": "kb-bucket", "prefix": "docs/", "cloud_region": "us-east-1",
                "endpoint_url": s3.endpoint(),
                "cloud_access_key_id": ACCESS_KEY, "cloud_secret_access_key": "wrong-secret-value-123"}}]
        }),
    )
    .await
    .id;
    let progress = wait_ready(&cx, &ada, bad, Duration::from_secs(60)).await;
    let source = &progress["sources"][0];
    assert_eq!(source["status"], "failed", "{progress}");
    let error = source["error"].as_str().unwrap();
    assert!(!error.contains("wrong-secret-value-123"), "{error}");
    let log = std::fs::read_to_string(&cx.log_path).unwrap_or_default();
    assert!(!log.contains("wrong-secret-value-123"));
    assert!(!log.contains(SECRET_KEY));
    cx.teardown().await;
}

/// Without `fetch.allow_private_networks`, a web source on a loopback
/// address is refused (the document fails, nothing is fetched).
#[tokio::test]
async fn private_addresses_are_refused_by_default() {
    use workspace_tests::web::{Page, Site};
    let site = Site::start(vec![("/a", Page::ok("text/plain", "internal"))]).await;
    let cx = TestContext::with_config("kb_ssrf", |c| {
        c.kb.poll_interval_ms = 100;
    })
    .await;
    let ada = cx.user("ssrf-ada").await;
    let org = ada.personal_org().await;
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({"name": "K", "description": "", "embedding_model": MODEL,
            "sources": [{"type": "web", "config": {"urls": [site.url("/a")]}}]}),
    )
    .await
    .id;
    let progress = wait_ready(&cx, &ada, kb, Duration::from_secs(60)).await;
    assert_eq!(progress["documents_failed"], 1, "{progress}");
    let (_, page) = req(
        &cx.base_url,
        &ada.token,
        reqwest::Method::GET,
        "/api/kb/list_documents",
        &[("kb_id", kb.to_string())],
        None,
    )
    .await;
    let error = page["documents"][0]["error"].as_str().unwrap().to_string();
    assert!(error.contains("cannot be fetched"), "{error}");
    cx.teardown().await;
}

/// The S3 file store against a signature-checking S3 server: an upload is
/// streamed into the bucket, its `url` is a presigned GET that downloads
/// it without a token (for 7 days), a tampered signature is refused and
/// its text is extracted back from the bucket.
#[tokio::test]
async fn uploads_go_to_s3_with_presigned_links() {
    use workspace_tests::s3::{ACCESS_KEY, LocalS3, SECRET_KEY};
    let s3 = LocalS3::start().await;
    s3.bucket("uploads");
    let endpoint = s3.endpoint();
    let cx = TestContext::with_config("kb_s3_store", move |c| {
        c.storage.backend = workspace_server::kb_config::StorageBackend::S3;
        c.storage.s3 = workspace_server::kb_config::S3Config {
            bucket: "uploads".into(),
            region: "us-east-1".into(),
            endpoint_url: Some(endpoint),
            path_style: true,
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            allow_http: true,
        };
        c.kb.workers = 0;
    })
    .await;
    let ada = cx.user("s3-ada").await;
    let org = ada.personal_org().await;
    let text = "Ledger of the harbour office.\n".repeat(2000);
    let upload = ada
        .client
        .chat_upload_file(org, None, "ledger.txt", text.clone().into_bytes())
        .await
        .expect("upload to S3")
        .into_inner();
    assert_eq!(upload.file_size, text.len() as i64);
    // The object is in the bucket (one file under the bucket's directory).
    let stored: Vec<_> = walk(&s3.root.path().join("uploads"));
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(std::fs::read_to_string(&stored[0]).unwrap(), text);
    // The presigned link downloads it; a tampered one is refused by S3.
    assert!(upload.url.contains("X-Amz-Signature="), "{}", upload.url);
    assert!(
        upload.url.contains("X-Amz-Expires=604800"),
        "{}",
        upload.url
    );
    let response = reqwest::get(&upload.url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), text);
    // One character of the signature changed.
    let (head, signature) = upload.url.split_once("X-Amz-Signature=").unwrap();
    let flipped: String = signature
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i == 0 {
                if c == 'a' { 'b' } else { 'a' }
            } else {
                c
            }
        })
        .collect();
    let tampered = format!("{head}X-Amz-Signature={flipped}");
    assert_eq!(reqwest::get(&tampered).await.unwrap().status(), 403);
    cx.teardown().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if !path.file_name().unwrap().to_string_lossy().starts_with('.') {
            out.push(path);
        }
    }
    out
}

/// A stopping instance claims no new job, and when its grace period ends
/// hands the job it is still running back to the queue: due at once, the
/// attempt not counted, so a rolling deploy neither uses up a document's
/// attempts nor leaves it waiting for a lease to expire.
#[tokio::test]
async fn a_stopping_instance_hands_its_jobs_back() {
    // A web server that accepts and never answers: the job's fetch waits.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, mut fetched) = tokio::sync::mpsc::unbounded_channel();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            let _ = seen.send(());
            held.push(socket);
        }
    });
    let cx = TestContext::with_config("kb_handback", |c| c.kb.workers = 0).await;
    let ada = cx.user("handback-ada").await;
    let org = ada.personal_org().await;
    let kb = workspace_tests::resources::knowledge_base(
        &ada.client,
        org,
        json!({
            "name": "Silent", "description": "", "embedding_model": MODEL,
            "sources": [{"type": "web", "config": {"urls": [format!("http://{addr}/page")]}}]
        }),
    )
    .await
    .id;
    let worker = cx
        .second_instance(|c| {
            c.kb.poll_interval_ms = 100;
            c.fetch.allow_private_networks = true;
            c.http.shutdown_grace_secs = 1;
        })
        .await;
    tokio::time::timeout(Duration::from_secs(60), fetched.recv())
        .await
        .expect("the worker fetches the page")
        .unwrap();
    let db = cx.db().await;
    let running: (String, i32) = {
        let row = db
            .query_one(
                "SELECT state, attempts FROM kb_jobs WHERE kb_id = $1",
                &[&kb],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(running, ("running".to_string(), 1));

    let stopping = Instant::now();
    worker
        .shutdown()
        .await
        .expect("stopping the worker's instance");
    assert!(
        stopping.elapsed() < Duration::from_secs(8),
        "{:?}",
        stopping.elapsed()
    );
    let row = db
        .query_one(
            "SELECT state, attempts, locked_by IS NULL, run_after <= now() \
             FROM kb_jobs WHERE kb_id = $1",
            &[&kb],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, String>(0),
            row.get::<_, i32>(1),
            row.get::<_, bool>(2),
            row.get::<_, bool>(3)
        ),
        ("queued".to_string(), 0, true, true),
        "handed back, due, the attempt not counted"
    );
    silent.abort();
    cx.teardown().await;
}
