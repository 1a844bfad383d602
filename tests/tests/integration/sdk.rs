//! The TypeScript SDK (`sdk/typescript`) against a real server: its own
//! tests (`sdk/typescript/test`, Node's test runner) run with this
//! server's URL, a user's token and organization. `cargo xtask test`
//! compiles the SDK first.

use workspace_tests::TestContext;

#[tokio::test]
async fn the_typescript_sdk_works_against_a_real_server() {
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/typescript");
    assert!(
        sdk.join("dist/index.js").exists(),
        "the SDK is not compiled: run `cargo xtask check` (`cargo xtask test` does it first)"
    );
    let cx = TestContext::with_config("sdk_typescript", |c| {
        c.files.max_upload_bytes = 1024 * 1024;
    })
    .await;
    let ada = cx.user("sdk-ada").await;
    let org = ada.personal_org().await;
    let output = tokio::process::Command::new("node")
        .current_dir(&sdk)
        .args([
            "--experimental-websocket",
            "--test",
            "--test-reporter=spec",
            "test/",
        ])
        .env("WORKSPACE_URL", &cx.base_url)
        .env("WORKSPACE_TOKEN", &ada.token)
        .env("WORKSPACE_ORG", org.to_string())
        // For the refresh test's own login (a session of its own).
        .env("WORKSPACE_EMAIL", &ada.email)
        .env("WORKSPACE_PASSWORD", workspace_tests::TEST_PASSWORD)
        .env("NODE_NO_WARNINGS", "1")
        .output()
        .await
        .expect("running node (Node.js 20.19+)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the SDK's tests failed");
    // The runner ran them all (a filter or a syntax slip would run none).
    assert!(stdout.contains("pass 16"), "{stdout}");
    cx.teardown().await;
}
