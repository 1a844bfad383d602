//! The example page (`examples/web`, built only on the TypeScript SDK) in
//! headless Chromium, served from another origin than the API: its own
//! test (`examples/web/test/browser.test.mjs`, playwright-core driving
//! Debian's `chromium`) signs up, chats, follows live titles, asks about a
//! file through a knowledge base, reloads mid-answer, checks that a page
//! on a refused origin is blocked, and restarts a server executable under
//! the page (SIGTERM, started again on its port): the live channel comes
//! back by itself (issue #33). The screenshot of the finished
//! conversation goes to `target/examples-web.png`. The API reference
//! (`/docs`) is loaded the same way with the network restricted to the
//! server (`examples/web/test/docs.test.mjs`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::AsyncBufReadExt;
use workspace_tests::TestContext;

/// Starts `examples/web/serve.mjs` on a free port; the child and its port.
async fn serve(web: &Path) -> (tokio::process::Child, u16) {
    let mut child = tokio::process::Command::new("node")
        .current_dir(web)
        .args(["serve.mjs", "0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("running node");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = lines
        .next_line()
        .await
        .expect("reading serve.mjs")
        .expect("serve.mjs prints its port");
    let port = line
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected line {line:?}"));
    (child, port)
}

fn chromium() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("Debian's chromium (apt-get install chromium; .ci/run installs it)")
}

#[tokio::test]
async fn the_example_page_works_in_a_real_browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let web = root.join("examples/web");
    assert!(
        root.join("sdk/typescript/dist/index.js").exists()
            && web.join("node_modules/playwright-core").exists(),
        "run `cargo xtask test` (it compiles the SDK and installs examples/web's packages)"
    );
    let (_page, page_port) = serve(&web).await;
    let (_refused, refused_port) = serve(&web).await;
    let page = format!("http://127.0.0.1:{page_port}");
    let cx = TestContext::with_config("web_example", |c| {
        c.http.cors_allowed_origins = vec![page.clone()];
        // Long enough answers to reload in the middle of one.
        c.providers.offline_chunk_delay_ms = 40;
    })
    .await;
    // The server executable the restart test stops and starts again, on
    // the same database, with a short drain window (no balancer here).
    let binary = workspace_tests::server_binary()
        .expect("the workspace-server executable (cargo xtask test builds it)");
    let restart_port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port();
    let restart_dir = tempfile::tempdir().expect("a temporary directory");
    let restart_config = restart_dir.path().join("restarted.toml");
    std::fs::write(
        &restart_config,
        format!(
            "bind_address = \"127.0.0.1:{restart_port}\"\n\
             [database]\nurl = {:?}\npool_size = 4\n\
             {}\
             [http]\ndrain_secs = 0.3\ncors_allowed_origins = [{page:?}]\n",
            cx.db_url,
            workspace_tests::keys_toml()
        ),
    )
    .expect("writing the restarted server's configuration");
    let screenshot = root.join("target/examples-web.png");
    let _ = std::fs::remove_file(&screenshot);
    let output = tokio::process::Command::new("node")
        .current_dir(&web)
        .args(["--test", "--test-reporter=spec", "test/browser.test.mjs"])
        .env("API_URL", &cx.base_url)
        .env("PAGE_URL", &page)
        .env(
            "REFUSED_PAGE_URL",
            format!("http://127.0.0.1:{refused_port}"),
        )
        .env("CHROMIUM", chromium())
        .env("SCREENSHOT", &screenshot)
        .env("SERVER_BIN", &binary)
        .env("WORKSPACE_DATA_DIR", workspace_tests::data_root())
        .env("SERVER_CONFIG", &restart_config)
        .env(
            "RESTART_API_URL",
            format!("http://127.0.0.1:{restart_port}"),
        )
        .output()
        .await
        .expect("running node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the browser test failed");
    assert!(stdout.contains("pass 4"), "{stdout}");
    assert!(
        screenshot.exists(),
        "no screenshot at {}",
        screenshot.display()
    );
    cx.teardown().await;
}

/// `/docs` (reached from `/`) renders, and asks no host but the server: no
/// remote logo, no telemetry (issue #24).
#[tokio::test]
async fn the_docs_page_asks_no_other_host() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let web = root.join("examples/web");
    assert!(
        web.join("node_modules/playwright-core").exists(),
        "run `cargo xtask test` (it installs examples/web's packages)"
    );
    let cx = TestContext::new("web_docs").await;
    let output = tokio::process::Command::new("node")
        .current_dir(&web)
        .args(["--test", "--test-reporter=spec", "test/docs.test.mjs"])
        .env("API_URL", &cx.base_url)
        .env("CHROMIUM", chromium())
        .output()
        .await
        .expect("running node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the docs page test failed");
    assert!(stdout.contains("pass 1"), "{stdout}");
    cx.teardown().await;
}

/// On a fresh server (no `mail.public_url`), the link of an invitation
/// e-mail points at the server itself, answers `200` with the acceptance
/// page, and the page accepts the invitation in a real browser
/// (`examples/web/test/invite.test.mjs`); the invitee then logs in.
#[tokio::test]
async fn the_invitation_link_answers_and_accepts() {
    use workspace_tests::fixtures::{create_body, outbox, role_id};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let web = root.join("examples/web");
    assert!(
        web.join("node_modules/playwright-core").exists(),
        "run `cargo xtask test` (it installs examples/web's packages)"
    );
    let cx = TestContext::new("web_invite_link").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let member = role_id(&db, org, "member").await;
    owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("bob-web@example.com", member))
        .send()
        .await
        .unwrap();
    let mails = outbox(&db, "bob-web@example.com").await;
    let body = &mails.last().expect("the invitation e-mail").1;
    let start = body.find("http").expect("a link");
    let link: String = body[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    let expected = format!("{}/invite/accept?token=", cx.base_url);
    assert!(link.starts_with(&expected), "{link} (expected {expected}…)");

    // Carol already has an account: her invitation joins it.
    let carol = cx.user("carol-web").await;
    owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body(&carol.email, member))
        .send()
        .await
        .unwrap();
    let mails = outbox(&db, &carol.email).await;
    let body = &mails.last().expect("carol's invitation e-mail").1;
    let start = body.find("http").expect("a link");
    let existing_link: String = body[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();

    let http = reqwest::Client::new();
    let page = http.get(&link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    assert!(page.text().await.unwrap().contains("/invite/accept.js"));
    let script = http
        .get(format!("{}/invite/accept.js", cx.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    assert!(
        script
            .text()
            .await
            .unwrap()
            .contains("/api/auth/signup_invite")
    );

    let output = tokio::process::Command::new("node")
        .current_dir(&web)
        .args(["--test", "--test-reporter=spec", "test/invite.test.mjs"])
        .env("INVITE_URL", &link)
        .env("EXISTING_INVITE_URL", &existing_link)
        .env("CHROMIUM", chromium())
        .output()
        .await
        .expect("running node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the browser test failed");
    assert!(stdout.contains("pass 2"), "{stdout}");
    // Carol is a member now, under her own names.
    let carol_orgs = carol.client.org_list().send().await.unwrap().into_inner();
    assert!(carol_orgs.iter().any(|o| o.id == org), "{carol_orgs:?}");

    let login = cx
        .anon()
        .auth_login()
        .body(
            workspace_client::types::LoginRequest::builder()
                .email("bob-web@example.com".to_string())
                .password("a long enough pass phrase".to_string()),
        )
        .send()
        .await;
    assert!(login.is_ok(), "the invitee logs in: {login:?}");
    cx.teardown().await;
}
