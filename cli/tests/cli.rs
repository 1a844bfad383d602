//! The CLI binary against a real server: sign up, log in (token stored in
//! the profile), `me`, and errors with non-zero exit codes.

use std::process::{Command, Output};
use workspace_tests::TestContext;

struct Cli {
    url: String,
    config_dir: std::path::PathBuf,
}

impl Cli {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_workspace"))
            .args(args)
            .env("WORKSPACE_URL", &self.url)
            .env("WORKSPACE_CONFIG_DIR", &self.config_dir)
            .env_remove("WORKSPACE_TOKEN")
            .env_remove("WORKSPACE_PASSWORD")
            .env_remove("WORKSPACE_PROFILE")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("running the CLI");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    }
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[tokio::test]
async fn signup_login_me() {
    let cx = TestContext::new("cli_signup_login_me").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let cli = Cli {
        url: cx.base_url.clone(),
        config_dir: dir.clone(),
    };
    let cli = std::sync::Arc::new(cli);

    let run = |args: Vec<&'static str>, stdin: Option<&'static str>| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || cli.run(&args, stdin))
    };

    // Not logged in: `me` fails with a clear message and exit code 1.
    let out = run(vec!["me"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("401 unauthenticated"), "{stderr}");

    let created = json(
        &run(
            vec![
                "auth",
                "signup",
                "--email",
                "cli@example.com",
                "--first-name",
                "Cli",
                "--last-name",
                "User",
                "--password",
                "correct horse battery",
            ],
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(created["email"], "cli@example.com");

    // A wrong password: exit code 1 and the API's error code.
    let out = run(
        vec!["auth", "login", "--email", "cli@example.com"],
        Some("wrong password\n"),
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_credentials"));

    // The password from stdin; the token goes to the profile file.
    json(
        &run(
            vec!["auth", "login", "--email", "cli@example.com"],
            Some("correct horse battery\n"),
        )
        .await
        .unwrap(),
    );
    let stored = std::fs::read_to_string(dir.join("credentials.toml")).unwrap();
    assert!(stored.contains("token = "));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("credentials.toml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let me = json(&run(vec!["me"], None).await.unwrap());
    assert_eq!(me["email"], "cli@example.com");
    assert_eq!(me["organizations"][0]["role_name"], "owner");

    let status = json(&run(vec!["auth", "status"], None).await.unwrap());
    assert_eq!(status["logged_in"], true);
    json(&run(vec!["system", "ready"], None).await.unwrap());

    // Usage errors exit with 2.
    let out = run(vec!["no-such-command"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(2));

    run(vec!["auth", "logout"], None).await.unwrap();
    let out = run(vec!["me"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(1));

    let _ = std::fs::remove_dir_all(&dir);
    cx.teardown().await;
}

/// `workspace conversation list|create|create-session` (generated) and
/// `workspace conversation chat` (hand-written, streams the answer).
#[tokio::test]
async fn conversation_commands_and_streamed_chat() {
    let cx = TestContext::with_config("cli_conversation_chat", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let user = cx.user("clichat").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let base_url = cx.base_url.clone();
    let token = user.token.clone();
    let run = move |args: Vec<String>| {
        let (url, token, dir) = (base_url.clone(), token.clone(), dir.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_workspace"))
                .args(&args)
                .env("WORKSPACE_URL", url)
                .env("WORKSPACE_CONFIG_DIR", dir)
                .env("WORKSPACE_TOKEN", token)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let me = user.client.users_me().send().await.unwrap().into_inner();
    let org = me.organizations[0].id.to_string();

    let models = json(
        &run(args(&["models", "list", "--org-id", &org]))
            .await
            .unwrap(),
    );
    let model = models[0]["id"].as_str().unwrap().to_string();
    let conv = json(
        &run(args(&[
            "conversation",
            "create",
            "--org-id",
            &org,
            "--title",
            "from the cli",
        ]))
        .await
        .unwrap(),
    );
    let conv = conv["id"].as_str().unwrap().to_string();
    let session = json(
        &run(args(&[
            "conversation",
            "create-session",
            "--org-id",
            &org,
            "--conversation-id",
            &conv,
            "--model-id",
            &model,
        ]))
        .await
        .unwrap(),
    );
    let session = session["id"].as_str().unwrap().to_string();
    let out = run(args(&[
        "conversation",
        "chat",
        "--org-id",
        &org,
        "--chat-session-id",
        &session,
        "--message",
        "hello from the shell",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("hello from the shell"), "{text}");
    assert!(text.contains("offline-dev-model"), "{text}");

    let out = run(args(&[
        "conversation",
        "chat",
        "--org-id",
        &org,
        "--chat-session-id",
        &uuid::Uuid::new_v4().to_string(),
        "--message",
        "x",
    ]))
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404 not_found"));
    cx.teardown().await;
}
