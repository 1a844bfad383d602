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
