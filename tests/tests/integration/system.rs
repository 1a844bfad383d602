//! Health and readiness probes.

use workspace_tests::TestContext;

#[tokio::test]
async fn healthz_and_readyz() {
    let cx = TestContext::new("healthz_and_readyz").await;
    let client = cx.anon();
    assert_eq!(
        client.healthz().send().await.unwrap().into_inner().status,
        "ok"
    );
    assert_eq!(
        client.readyz().send().await.unwrap().into_inner().status,
        "ok"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn readyz_reports_an_unreachable_database() {
    let cx = TestContext::new("readyz_unreachable").await;
    // Terminate the server's connections and forbid new ones.
    let admin = cx.admin_db().await;
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {} WITH ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = '{}' AND pid <> pg_backend_pid()",
            cx.database, cx.database
        ))
        .await
        .unwrap();
    drop(admin);
    let response = reqwest::get(format!("{}/readyz", cx.base_url))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error_code"], "database_unavailable");
    // No internals leak.
    assert_eq!(body["message"], "service unavailable");
    // Liveness does not depend on the database.
    assert_eq!(
        cx.anon().healthz().send().await.unwrap().status().as_u16(),
        200
    );
    cx.teardown().await;
}

#[tokio::test]
async fn secrets_in_query_strings_stay_out_of_the_logs() {
    let cx = TestContext::new("log_redaction").await;
    let secret = "s3cr3t-invitation-token-value";
    let validation = cx
        .anon()
        .invitations_validate()
        .token(secret)
        .send()
        .await
        .unwrap();
    assert!(!validation.valid);
    // The request's log line may be written just after the response.
    let mut log = String::new();
    for _ in 0..50 {
        log = std::fs::read_to_string(&cx.log_path).unwrap();
        if log.contains("/api/invitations/validate?") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        log.contains("/api/invitations/validate?token=[redacted]"),
        "{log}"
    );
    assert!(!log.contains(secret), "the token leaked into the log");
    cx.teardown().await;
}

/// PostgreSQL text cannot hold NUL: any free-text field carrying one is a
/// 400, never a 500 (found by the contract fuzz).
#[tokio::test]
async fn nul_characters_are_a_client_error() {
    let cx = TestContext::new("nul_characters").await;
    let user = cx.user("nul").await;
    let org = user.personal_org().await;
    let got = workspace_tests::raw(
        &cx.base_url,
        Some(&user.token),
        reqwest::Method::POST,
        "/api/roles/create",
        &[("org_id", org.to_string())],
        Some(serde_json::json!({
            "name": "ok", "description": "a\u{0}b", "hierarchy_level": 1, "permission_ids": []
        })),
    )
    .await;
    assert_eq!(got, (400, "invalid_request".to_string()));
    cx.teardown().await;
}

/// `GET /api/system/outbox`: a system administrator reads the e-mails the
/// default mailer kept (newest first, `limit` bounded); anyone else gets
/// 403.
#[tokio::test]
async fn system_admins_read_the_outbox() {
    let cx = TestContext::with_config("system_outbox", |c| {
        c.auth.system_admins = vec!["outbox-root@example.com".into()];
    })
    .await;
    let root = cx.user("outbox-root").await;
    let ada = cx.user("outbox-ada").await;
    let org = ada.personal_org().await;
    let member = ada.role_id(org, "member").await;
    let http = workspace_tests::http();
    let url = |path: &str| format!("{}{path}", cx.base_url);
    for email in ["first@example.com", "second@example.com"] {
        let r = http
            .post(url("/api/invitations/create"))
            .query(&[("org_id", org.to_string())])
            .bearer_auth(&ada.token)
            .json(&serde_json::json!({"email": email, "role_id": member}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }
    let read = |token: String, limit: &'static str| {
        let http = http.clone();
        let url = url("/api/system/outbox");
        async move {
            let r = http
                .get(url)
                .query(&[("limit", limit)])
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (status, page) = read(root.token.clone(), "1").await;
    assert_eq!(status, 200, "{page}");
    let emails = page["emails"].as_array().unwrap();
    assert_eq!(emails.len(), 1);
    assert_eq!(emails[0]["to_address"], "second@example.com");
    assert_eq!(emails[0]["kind"], "invitation");
    assert!(
        emails[0]["body_text"].as_str().unwrap().contains("token="),
        "{page}"
    );
    let (_, page) = read(root.token.clone(), "20").await;
    assert_eq!(page["emails"].as_array().unwrap().len(), 2);
    let (status, body) = read(root.token.clone(), "0").await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (400, Some("invalid_pagination"))
    );
    let (status, body) = read(ada.token.clone(), "5").await;
    assert_eq!(
        (status, body["error_code"].as_str()),
        (403, Some("forbidden"))
    );
    cx.teardown().await;
}
