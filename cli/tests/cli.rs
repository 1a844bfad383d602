//! The CLI binary against a real server: sign up, log in (token stored in
//! the profile), `me`, and errors with non-zero exit codes.

use std::process::{Command, Output};
use workspace_tests::TestContext;

struct Cli {
    url: String,
    config_dir: std::path::PathBuf,
}

impl Cli {
    /// The CLI with this server and profile directory, no credentials from
    /// the environment, every stream piped.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_workspace"));
        command
            .args(args)
            .env("WORKSPACE_URL", &self.url)
            .env("WORKSPACE_CONFIG_DIR", &self.config_dir)
            .env_remove("WORKSPACE_TOKEN")
            .env_remove("WORKSPACE_PASSWORD")
            .env_remove("WORKSPACE_PROFILE")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut child = self.command(args).spawn().expect("running the CLI");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// Runs the CLI with its stdout already closed by the reader, so its
    /// first write meets a broken pipe.
    fn run_into_closed_pipe(&self, args: &[&str]) -> Output {
        let mut child = self
            .command(args)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("running the CLI");
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    }
}

/// SIGPIPE's number on Linux (the tests do not depend on libc).
fn libc_sigpipe() -> i32 {
    13
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
    assert!(
        stderr.contains("not logged in: run workspace auth login --email EMAIL"),
        "{stderr}"
    );

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

    // A reader that stops early (`workspace me | grep -q …`, `| head -1`):
    // the CLI ends quietly as coreutils do (SIGPIPE), no panic on stderr.
    let closed = {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || cli.run_into_closed_pipe(&["me"]))
    }
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(closed.status.signal(), Some(libc_sigpipe()), "{stderr}");
    }

    // Table output for people.
    let out = run(vec!["org", "list", "--format", "table"], None)
        .await
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") && header.contains("ROLE"),
        "{table}"
    );
    assert!(table.contains("owner"), "{table}");
    let out = run(vec!["roles", "list-permissions", "--format", "table"], None)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("kb:read"));

    let status = json(&run(vec!["auth", "status"], None).await.unwrap());
    assert_eq!(status["logged_in"], true);
    json(&run(vec!["system", "ready"], None).await.unwrap());

    // Usage errors exit with 2.
    let out = run(vec!["no-such-command"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(2));

    run(vec!["auth", "logout"], None).await.unwrap();
    let out = run(vec!["me"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    // After `auth logout`, the 401 says how to log in again.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("401 unauthenticated")
            && stderr.contains("not logged in: run workspace auth login"),
        "{stderr}"
    );

    let _ = std::fs::remove_dir_all(&dir);
    cx.teardown().await;
}

/// Every invitation and user-list command of the CLI, JSON and table output.
#[tokio::test]
async fn invitations_and_users_commands() {
    let cx = TestContext::new("cli_invitations").await;
    cx.user("owner").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let cli = std::sync::Arc::new(Cli {
        url: cx.base_url.clone(),
        config_dir: dir.clone(),
    });
    let run = |args: Vec<String>, stdin: Option<String>| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli.run(&args, stdin.as_deref())
        })
    };
    let args = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();

    json(
        &run(
            args("auth login --email owner@example.com"),
            Some(format!("{}\n", workspace_tests::TEST_PASSWORD)),
        )
        .await
        .unwrap(),
    );
    let me = json(&run(args("me"), None).await.unwrap());
    let org = me["organizations"][0]["id"].as_str().unwrap().to_string();
    let db = cx.db().await;
    let role: uuid::Uuid = db
        .query_one(
            "SELECT id FROM roles WHERE organization_id = $1::text::uuid AND name = 'member'",
            &[&org],
        )
        .await
        .unwrap()
        .get(0);

    let created = json(
        &run(
            args(&format!(
                "invitations create --org-id {org} --email cli-invitee@example.com --role-id {role} --message hello"
            )),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(created["status"], "pending");
    let id = created["id"].as_str().unwrap().to_string();
    let token = created["token"].as_str().unwrap().to_string();

    let listed = json(
        &run(args(&format!("invitations list --org-id {org}")), None)
            .await
            .unwrap(),
    );
    assert_eq!(listed[0]["id"], id.as_str());
    let out = run(
        args(&format!("invitations list --org-id {org} --format table")),
        None,
    )
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains("cli-invitee@example.com") && table.contains("owner Tester"),
        "{table}"
    );

    let got = json(
        &run(args(&format!("invitations get --invitation-id {id}")), None)
            .await
            .unwrap(),
    );
    assert_eq!(got["message"], "hello");
    let valid = json(
        &run(args(&format!("invitations validate --token={token}")), None)
            .await
            .unwrap(),
    );
    assert_eq!(valid["valid"], true);
    let resent = json(
        &run(
            args(&format!("invitations resend --invitation-id {id}")),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(resent["success"], true);
    let token: String = {
        let body: String = db
            .query_one(
                "SELECT body_text FROM email_outbox ORDER BY created_at DESC LIMIT 1",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let start = body.find("token=").unwrap() + 6;
        body[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect()
    };
    let account = json(
        &run(
            args(&format!(
                "auth signup-invite --profile invitee --invite-token={token} --first-name Cli --last-name Invitee --password correct-horse-battery"
            )),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(account["email"], "cli-invitee@example.com");
    // The token went to the profile (as `login` stores it), not stdout.
    assert!(account.get("access_token").is_none(), "{account}");
    let invitee = json(&run(args("me --profile invitee"), None).await.unwrap());
    assert_eq!(invitee["email"], "cli-invitee@example.com");
    let owner = json(&run(args("me"), None).await.unwrap());
    assert_eq!(owner["email"], "owner@example.com");

    // Bulk creation from a JSON file, shown as a table.
    let body_file = dir.join("bulk.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &body_file,
        serde_json::json!({"invitations": [
            {"email": "b1@example.com", "role_id": role},
            {"email": "broken", "role_id": role}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = run(
        vec![
            "invitations".into(),
            "bulk-create".into(),
            "--org-id".into(),
            org.clone(),
            "--json-body".into(),
            body_file.display().to_string(),
            "--format".into(),
            "table".into(),
        ],
        None,
    )
    .await
    .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        table.contains("b1@example.com") && table.contains("invalid_email"),
        "{table}"
    );
    let b1: String = db
        .query_one(
            "SELECT id::text FROM invitations WHERE email = 'b1@example.com'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let revoked = json(
        &run(
            args(&format!("invitations revoke --invitation-id {b1}")),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(revoked["success"], true);

    let invited = json(
        &run(
            args(&format!(
                "users invite --org-id {org} --email grace@example.com --first-name Grace --last-name Hopper --role member"
            )),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(invited["full_name"], "Grace Hopper");
    let grace_role: uuid::Uuid = db
        .query_one(
            "SELECT m.role_id FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE u.email = 'grace@example.com'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(grace_role, role, "the role named member");

    let users = json(
        &run(
            args(&format!("users list --org-id {org} --limit 5 --offset 0")),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(users["total"], 3);
    let out = run(
        args(&format!("users list --org-id {org} --format table")),
        None,
    )
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("STATUS"),
        "{table}"
    );
    assert!(
        lines[3].contains("grace@example.com") && lines[3].contains("pending"),
        "{table}"
    );
    assert_eq!(lines.last().copied(), Some("total: 3"));

    // One flag name for a role, `--role` (`--role-id` stays an alias), by
    // name (any case) or id; an unknown name lists the organization's roles.
    let by_name = json(
        &run(
            args(&format!(
                "invitations create --org-id {org} --email ada2@example.com --role Member"
            )),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(
        by_name["role"]["id"],
        role.to_string().as_str(),
        "{by_name}"
    );
    let out = run(
        args(&format!(
            "invitations create --org-id {org} --email ada3@example.com --role nobody"
        )),
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no role named \"nobody\"") && stderr.contains("member"),
        "{stderr}"
    );
    let out = run(
        args(&format!(
            "users invite --org-id {org} --email lin@example.com --first-name Lin --last-name Ye --role-id {role}"
        )),
        None,
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let help = run(args("invitations create --help"), None).await.unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    assert!(
        help.contains("--role <ROLE>") && !help.contains("--role-id"),
        "{help}"
    );

    // Errors: exit 1 with the code.
    let out = run(
        args(&format!("invitations revoke --invitation-id {b1}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("409 invitation_not_pending"));

    // An address that already has an account joins with its password
    // alone, and is told so (not "signed up"); without the names a new
    // account cannot be made.
    let known = cx.user("cli-known").await;
    let invited = json(
        &run(
            args(&format!(
                "invitations create --org-id {org} --email {} --role member",
                known.email
            )),
            None,
        )
        .await
        .unwrap(),
    );
    let known_token = invited["token"].as_str().unwrap().to_string();
    let mut accept = args(&format!(
        "auth signup-invite --profile known --invite-token={known_token} --password"
    ));
    accept.push(workspace_tests::TEST_PASSWORD.to_string());
    let out = run(accept, None).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("your account joined"), "{stderr}");
    assert!(!stderr.contains("signed up"), "{stderr}");
    let joined = json(&out);
    assert_eq!(joined["id"], known.id.to_string());
    assert_eq!(
        joined["first_name"], "cli-known",
        "the account keeps its names"
    );
    let fresh = json(
        &run(
            args(&format!(
                "invitations create --org-id {org} --email cli-new@example.com --role member"
            )),
            None,
        )
        .await
        .unwrap(),
    );
    let out = run(
        args(&format!(
            "auth signup-invite --profile fresh --invite-token={} --password correct-horse-battery",
            fresh["token"].as_str().unwrap()
        )),
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--first-name and --last-name"),
        "{out:?}"
    );
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

    // `conversation resume`: the stored answer's stream again, whole, and
    // after its second event only what follows.
    let messages = json(
        &run(args(&[
            "conversation",
            "messages",
            "--org-id",
            &org,
            "--conversation-id",
            &conv,
        ]))
        .await
        .unwrap(),
    );
    let answer = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the answer")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let resume = |after: Option<&str>| {
        let mut a = args(&[
            "conversation",
            "resume",
            "--org-id",
            &org,
            "--message-id",
            &answer,
        ]);
        if let Some(after) = after {
            a.extend(args(&["--last-event-id", after]));
        }
        run(a)
    };
    let out = resume(None).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let whole = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(whole.trim_end(), text.trim_end(), "the same answer");
    let out = resume(Some("2")).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let rest = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        rest.len() < whole.len() && whole.ends_with(&rest),
        "{rest:?} of {whole:?}"
    );

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

#[tokio::test]
async fn chat_commands() {
    let cx = TestContext::with_config("cli_chat", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let user = cx.user("clichats").await;
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

    let created = json(
        &run(args(&["chat", "create", "--org-id", &org]))
            .await
            .unwrap(),
    );
    let chat = created["id"].as_str().unwrap().to_string();
    let renamed = json(
        &run(args(&[
            "chat",
            "rename",
            "--org-id",
            &org,
            "--chat-id",
            &chat,
            "Trip",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(renamed["id"], chat.as_str());
    json(
        &run(args(&[
            "chat",
            "archive",
            "--org-id",
            &org,
            "--chat-id",
            &chat,
        ]))
        .await
        .unwrap(),
    );
    let listed = json(
        &run(args(&[
            "chat", "list", "--org-id", &org, "--status", "ARCHIVED",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(listed[0]["title"], "Trip");

    // send with a file: streamed to stdout, ids on stderr.
    let file = std::env::temp_dir().join(format!("notes-{}.txt", uuid::Uuid::new_v4()));
    std::fs::write(&file, "the tide comes in at noon").unwrap();
    let out = run(args(&[
        "chat",
        "send",
        "--org-id",
        &org,
        "--chat-id",
        &chat,
        "--file",
        file.to_str().unwrap(),
        "when is the tide?",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the tide comes in at noon"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("chat {chat} message ")), "{err}");

    // send with a photo and a reasoning effort: the offline model sees the
    // image (downscaled) and its thinking goes to stderr, apart from the
    // answer on stdout.
    let photo = std::env::temp_dir().join(format!("photo-{}.png", uuid::Uuid::new_v4()));
    std::fs::write(&photo, tiny_png(3000, 40)).unwrap();
    let out = run(args(&[
        "chat",
        "send",
        "--org-id",
        &org,
        "--file",
        photo.to_str().unwrap(),
        "--reasoning-effort",
        "low",
        "What is in the picture?",
    ]))
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    // Downscaled to 1,568 pixels on the long edge.
    assert!(
        text.contains("Attached: an image (image/jpeg, 1568x2"),
        "{text}"
    );
    assert!(!text.contains("Thinking"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("thinking: Thinking with low effort"), "{err}");

    // `chat prompt TEXT`: three suggestions, streamed, nothing stored.
    let out = run(args(&[
        "chat",
        "prompt",
        "--org-id",
        &org,
        "tides and the moon",
    ]))
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "{out:?}"
    );

    // `mcp playground MESSAGE` without instances: the service looks for
    // servers that would help (none here) and says so as a JSON line on
    // stderr; the stream ends normally.
    let out = run(args(&[
        "mcp",
        "playground",
        "--org-id",
        &org,
        "--model",
        "offline-dev-model",
        "hello, playground",
    ]))
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let line: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stderr).lines().next().unwrap()).unwrap();
    assert_eq!(line["mcp"]["server_ids"], serde_json::json!([]), "{out:?}");

    // A new chat gets a title while its answer streams: on a terminal,
    // where stdout and stderr share the screen, `title: …` is a line of
    // its own, never glued to the answer.
    let merged = {
        let (url, token) = (cx.base_url.clone(), user.token.clone());
        let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
        let org = org.clone();
        tokio::task::spawn_blocking(move || {
            Command::new("bash")
                .arg("-c")
                .arg("\"$0\" chat send --org-id \"$1\" 'name the tides of the moon' 2>&1")
                .arg(env!("CARGO_BIN_EXE_workspace"))
                .arg(org)
                .env("WORKSPACE_URL", url)
                .env("WORKSPACE_CONFIG_DIR", dir)
                .env("WORKSPACE_TOKEN", token)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    assert!(merged.status.success(), "{merged:?}");
    let merged = String::from_utf8_lossy(&merged.stdout);
    let title_lines: Vec<&str> = merged.lines().filter(|l| l.contains("title: ")).collect();
    assert_eq!(title_lines.len(), 1, "one title line:\n{merged}");
    assert!(title_lines[0].starts_with("title: "), "{merged}");
    let shown = json(
        &run(args(&[
            "chat",
            "show",
            "--org-id",
            &org,
            "--chat-id",
            &chat,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(shown["messages"].as_array().unwrap().len(), 2);
    assert_eq!(shown["uploads"].as_array().unwrap().len(), 1);

    // edit and regenerate stream like send; switch-branch shows a version.
    let question = shown["messages"][0]["id"].as_str().unwrap().to_string();
    let out = run(args(&[
        "chat",
        "edit",
        "--org-id",
        &org,
        "--message-id",
        &question,
        "when is the tide, really?",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let edited = json(
        &run(args(&[
            "chat",
            "show",
            "--org-id",
            &org,
            "--chat-id",
            &chat,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(
        edited["messages"][0]["content"],
        "when is the tide, really?"
    );
    assert_eq!(edited["messages"][0]["sibling_position"], 2);
    let answer = edited["messages"][1]["id"].as_str().unwrap().to_string();
    let out = run(args(&[
        "chat",
        "regenerate",
        "--org-id",
        &org,
        "--message-id",
        &answer,
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
    let switched = json(
        &run(args(&[
            "chat",
            "switch-branch",
            "--org-id",
            &org,
            "--chat-id",
            &chat,
            "--message-id",
            &question,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(switched["messages"][0]["id"], question.as_str());
    assert_eq!(
        switched["messages"][0]["next_sibling_id"],
        edited["messages"][0]["id"]
    );

    // transcribe without a configured service: exit 1 with the code.
    let out = run(args(&[
        "chat",
        "transcribe",
        "--org-id",
        &org,
        file.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("transcription_unavailable"));

    json(
        &run(args(&["chat", "delete", "--session-id", &chat]))
            .await
            .unwrap(),
    );
    let out = run(args(&[
        "chat",
        "show",
        "--org-id",
        &org,
        "--chat-id",
        &chat,
    ]))
    .await
    .unwrap();
    assert!(!out.status.success());
    let _ = std::fs::remove_file(&file);
    cx.teardown().await;
}

/// `chat search QUERY` prints a table (JSON with `--format json`); `chat
/// pin`; `chat folders create|list|move|delete` (issue #35).
#[tokio::test]
async fn chat_search_pin_and_folder_commands() {
    let cx = TestContext::new("cli_chat_search").await;
    let user = cx.user("clisearch").await;
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let org = user.personal_org().await;
    let org_s = org.to_string();
    let chat = json(
        &run(strings(&[
            "chat",
            "create",
            "--org-id",
            &org_s,
            "--title",
            "Quarterly budget",
        ]))
        .await
        .unwrap(),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    // A message, written with SQL (the message writers are being rewritten
    // meanwhile; the search reads any message).
    let chat_id: uuid::Uuid = chat.parse().unwrap();
    cx.db()
        .await
        .execute(
            "INSERT INTO chat_messages (id, organization_id, chat_id, role, content, depth, \
                 sibling_index) VALUES ($1, $2, $3, 'USER', $4, 0, 1)",
            &[
                &uuid::Uuid::new_v4(),
                &org,
                &chat_id,
                &"Привет мир <b>bold</b>\nsecond line",
            ],
        )
        .await
        .unwrap();

    let out = run(strings(&["chat", "search", "--org-id", &org_s, "ПРИВЕТ"]))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("CHAT") && lines[0].contains("SNIPPET"),
        "{table}"
    );
    assert!(lines[1].starts_with(&chat), "{table}");
    assert!(
        lines[1].contains("user") && lines[1].contains("[Привет] мир <b>bold</b> second line"),
        "{table}"
    );
    assert_eq!(lines.len(), 2, "{table}");
    let page = json(
        &run(strings(&[
            "--format", "json", "chat", "search", "--org-id", &org_s, "budget",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(page["results"][0]["chat_id"], chat.as_str());
    assert_eq!(page["results"][0]["title_match"], true);
    let none = run(strings(&["chat", "search", "--org-id", &org_s, "zzqqxx"]))
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&none.stdout), "no chats found\n");
    let bad = run(strings(&[
        "chat", "search", "--org-id", &org_s, "x", "--limit", "0",
    ]))
    .await
    .unwrap();
    assert_eq!(bad.status.code(), Some(2));

    json(
        &run(strings(&[
            "chat",
            "pin",
            "--org-id",
            &org_s,
            "--chat-id",
            &chat,
        ]))
        .await
        .unwrap(),
    );
    let listed = json(
        &run(strings(&[
            "chat", "list", "--org-id", &org_s, "--pinned", "true",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(listed[0]["id"], chat.as_str());
    assert_eq!(listed[0]["pinned"], true);

    let folder = json(
        &run(strings(&[
            "chat", "folders", "create", "--org-id", &org_s, "--name", "Finance",
        ]))
        .await
        .unwrap(),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let body = std::env::temp_dir().join(format!("move-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(
        &body,
        serde_json::json!({"chat_ids": [chat], "folder_id": folder}).to_string(),
    )
    .unwrap();
    let moved = json(
        &run(strings(&[
            "chat",
            "folders",
            "move",
            "--org-id",
            &org_s,
            "--json-body",
            body.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(moved["moved"], 1);
    let out = run(strings(&[
        "--format", "table", "chat", "folders", "list", "--org-id", &org_s,
    ]))
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.lines().nth(1).unwrap().contains("Finance  1"),
        "{table}"
    );
    let deleted = json(
        &run(strings(&[
            "chat",
            "folders",
            "delete",
            "--org-id",
            &org_s,
            "--folder-id",
            &folder,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(deleted["chats_moved"], 1);
    let _ = std::fs::remove_file(&body);
    cx.teardown().await;
}

#[tokio::test]
async fn deployments_commands_and_invoke() {
    let cx = TestContext::with_config("cli_deployments", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let user = cx.user("clideploy").await;
    let me = user.client.users_me().send().await.unwrap().into_inner();
    let org = me.organizations[0].id;
    let http = reqwest::Client::new();
    let api = |path: &str| format!("{}{path}", cx.base_url);
    let models: serde_json::Value = http
        .get(api("/api/models/list"))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(&user.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agent: serde_json::Value = http
        .post(api("/api/agents"))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(&user.token)
        .json(
            &serde_json::json!({"name": "cli", "description": "", "agent_type": "chat",
            "model_id": models[0]["id"], "params": {"system_prompt": "Be brief"}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agent_id = agent["id"].as_str().unwrap().to_string();
    http.post(api("/api/agents/test"))
        .query(&[("agent_id", &agent_id)])
        .bearer_auth(&user.token)
        .json(&serde_json::json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    let deployment: serde_json::Value = http
        .post(api("/api/agent_deploy/create"))
        .query(&[("agent_id", &agent_id)])
        .bearer_auth(&user.token)
        .json(&serde_json::json!({"name": "cli", "channel": "api"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = deployment["api_key"].as_str().unwrap().to_string();

    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let (base_url, token) = (cx.base_url.clone(), user.token.clone());
    let run = move |args: Vec<String>, stdin: Option<String>| {
        let (url, token, dir) = (base_url.clone(), token.clone(), dir.clone());
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut child = Command::new(env!("CARGO_BIN_EXE_workspace"))
                .args(&args)
                .env("WORKSPACE_URL", url)
                .env("WORKSPACE_CONFIG_DIR", dir)
                .env("WORKSPACE_TOKEN", token)
                .env_remove("WORKSPACE_DEPLOYMENT_KEY")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut input = child.stdin.take().unwrap();
            if let Some(text) = stdin {
                input.write_all(text.as_bytes()).unwrap();
            }
            drop(input);
            child.wait_with_output().unwrap()
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let list = json(
        &run(
            args(&["deployments", "list", "--agent-id", &agent_id]),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(list[0]["name"], "cli");
    assert!(list[0].get("api_key").is_none());

    // The answer streams to stdout; the message comes from stdin.
    let out = run(
        args(&["deployments", "invoke", "--key", &key]),
        Some("say something\n".to_string()),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());

    // `deployments models`: the OpenAI-compatible list, with the key.
    let out = run(args(&["deployments", "models", "--key", &key]), None)
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let models = json(&out);
    assert_eq!(models["object"], "list", "{models}");
    assert_eq!(models["data"].as_array().unwrap().len(), 1, "{models}");
    let out = run(
        args(&["deployments", "models", "--key", "wsk_live_nope"]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    // A wrong key: a clear error and a non-zero exit.
    let out = run(
        args(&[
            "deployments",
            "invoke",
            "--key",
            "wsk_live_nope",
            "--message",
            "hi",
        ]),
        None,
    )
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid_api_key"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cx.teardown().await;
}

/// A CLI runner with the user's token in WORKSPACE_TOKEN and no stdin.
fn token_runner(
    base_url: String,
    token: String,
) -> impl Fn(Vec<String>) -> tokio::task::JoinHandle<Output> + Clone {
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    move |args: Vec<String>| {
        let (url, token, dir) = (base_url.clone(), token.clone(), dir.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_workspace"))
                .args(&args)
                .env("WORKSPACE_URL", url)
                .env("WORKSPACE_CONFIG_DIR", dir)
                .env("WORKSPACE_TOKEN", token)
                .env_remove("WORKSPACE_PROFILE")
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        })
    }
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn kb_create_from_folder_search_and_query() {
    let cx = TestContext::new("cli_kb").await;
    let user = cx.user("clikb").await;
    let org = user.personal_org().await.to_string();
    let run = token_runner(cx.base_url.clone(), user.token.clone());

    let folder = std::env::temp_dir().join(format!("workspace-kb-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(folder.join("nested")).unwrap();
    std::fs::write(
        folder.join("a.txt"),
        "Alpha notes.\nThe lighthouse keeper.\n",
    )
    .unwrap();
    std::fs::write(folder.join("b.txt"), "Beta notes about zebras.\n").unwrap();
    std::fs::write(folder.join(".hidden"), "skipped").unwrap();
    std::fs::write(folder.join("nested/c.txt"), "not recursive").unwrap();
    let from = folder.to_string_lossy().into_owned();

    // --no-wait --id-only: only the id on stdout.
    let out = run(strings(&[
        "kb",
        "create",
        "--org-id",
        &org,
        "--name",
        "Notes",
        "--from",
        &from,
        "--no-wait",
        "--id-only",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kb_id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    uuid::Uuid::parse_str(&kb_id).expect("only the id");

    // The knowledge base holds one file source with the two visible files.
    let kb = json(
        &run(strings(&["kb", "get", "--kb-id", &kb_id]))
            .await
            .unwrap(),
    );
    assert_eq!(kb["name"], "Notes");
    assert_eq!(kb["sources"].as_array().unwrap().len(), 1);
    assert_eq!(kb["sources"][0]["type"], "file");
    assert_eq!(
        kb["sources"][0]["config"]["file_ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let documents = json(
        &run(strings(&["kb", "list-documents", "--kb-id", &kb_id]))
            .await
            .unwrap(),
    );
    let listed = documents["documents"].as_array().expect("documents");
    assert!(listed.len() <= 2, "{documents}");
    for d in listed {
        assert!(["a.txt", "b.txt"].contains(&d["title"].as_str().unwrap()));
    }

    // Following the ingestion: ready (a worker ingested it) or a timeout
    // with a message and exit code 1; the JSON is printed either way.
    let out = run(strings(&[
        "kb",
        "create",
        "--org-id",
        &org,
        "--name",
        "Waited",
        "--from",
        &from,
        "--timeout",
        "2",
    ]))
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(created["name"], "Waited");
    if out.status.success() {
        assert_eq!(created["status"], "ready", "{created}");
    } else {
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr.contains("timed out") || stderr.contains("documents failed"),
            "{stderr}"
        );
    }

    // Search: valid JSON with --json (no chunks yet: no results).
    let out = run(strings(&[
        "kb", "search", "--kb-id", &kb_id, "zebras", "--json",
    ]))
    .await
    .unwrap();
    if out.status.success() {
        let found: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(found["results"].is_array(), "{found}");
    } else {
        // Chunks exist before retrieval lands: the server's 503.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("search_unavailable"), "{stderr}");
    }
    // An empty knowledge base (the generated command, any source type):
    // no results, shown readably.
    let body = folder.join("empty-kb.json");
    std::fs::write(
        &body,
        r#"{"name":"Empty","description":"","embedding_model":"all-minilm-l6-v2","sources":[]}"#,
    )
    .unwrap();
    let empty = json(
        &run(strings(&[
            "kb",
            "create-raw",
            "--org-id",
            &org,
            "--json-body",
            &body.to_string_lossy(),
        ]))
        .await
        .unwrap(),
    );
    let empty_id = empty["id"].as_str().unwrap().to_string();
    let out = run(strings(&["kb", "search", "--kb-id", &empty_id, "zebras"]))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no results");
    let found = json(
        &run(strings(&[
            "kb", "search", "--kb-id", &empty_id, "zebras", "--json",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(found["results"], serde_json::json!([]));

    // Query on an empty knowledge base: an answer without sources, streamed
    // or not; on an unknown one, the server's error and exit code 1.
    let out = run(strings(&[
        "kb",
        "query",
        "--kb-id",
        &empty_id,
        "What about zebras?",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("[1]"));
    let answer = json(
        &run(strings(&[
            "kb",
            "query",
            "--kb-id",
            &empty_id,
            "What about zebras?",
            "--no-stream",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(answer["sources"], serde_json::json!([]));
    let unknown = uuid::Uuid::new_v4().to_string();
    for extra in [None, Some("--no-stream")] {
        let mut args = strings(&["kb", "query", "--kb-id", &unknown, "What about zebras?"]);
        args.extend(extra.map(str::to_string));
        let out = run(args).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("not_found"), "{stderr}");
    }

    // Usage errors: an empty folder.
    let none = folder.join("nested-empty");
    std::fs::create_dir_all(&none).unwrap();
    let out = run(strings(&[
        "kb",
        "create",
        "--org-id",
        &org,
        "--name",
        "None",
        "--from",
        &none.to_string_lossy(),
    ]))
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&folder).ok();
}

#[tokio::test]
async fn expired_tokens_say_how_to_log_in_again() {
    let cx = TestContext::with_config("cli_token_expired", |c| {
        c.auth.token_lifetime_secs = 1;
    })
    .await;
    let user = cx.user("cliexpired").await;
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    // Past the lifetime and the server's 5 s leeway.
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    let out = run(strings(&["auth", "status"])).await.unwrap();
    let status = json(&out);
    assert_eq!(status["expired"], true, "{status}");
    assert_eq!(status["logged_in"], false);
    assert!(status["expires_at"].is_string());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expired: run workspace auth login"));
    let out = run(strings(&["me"])).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("401 token_expired"), "{stderr}");
    assert!(
        stderr.contains("expired: run workspace auth login"),
        "{stderr}"
    );
    cx.teardown().await;
}

/// The value of `key = "…"` in the credentials file.
fn stored(dir: &std::path::Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("credentials.toml")).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key} = \"")))
        .map(|v| v.trim_end_matches('"').to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_renews_its_access_token_and_logout_revokes_the_session() {
    let cx = TestContext::with_config("cli_sessions", |c| {
        c.auth.token_lifetime_secs = 1;
    })
    .await;
    let user = cx.user("clisession").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let cli = std::sync::Arc::new(Cli {
        url: cx.base_url.clone(),
        config_dir: dir.clone(),
    });
    let run = |args: Vec<&'static str>| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || cli.run(&args, None))
    };
    let login = tokio::task::block_in_place(|| {
        cli.run(
            &["auth", "login", "--email", &user.email],
            Some(&format!("{}\n", workspace_tests::TEST_PASSWORD)),
        )
    });
    let logged_in = json(&login);
    assert!(logged_in["session_id"].is_string(), "{logged_in}");
    let first_refresh = stored(&dir, "refresh_token").expect("a stored refresh token");
    assert!(first_refresh.starts_with("wsr_"));

    // Past the access token's lifetime (and the server's 5 s leeway): two
    // commands at once renew it, one after the other (a refresh token
    // presented twice would revoke the session), and both succeed.
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    let status = json(&run(vec!["auth", "status"]).await.unwrap());
    assert_eq!(status["expired"], true, "{status}");
    assert_eq!(status["renewable"], true);
    assert_eq!(status["logged_in"], true);
    let (a, b) = tokio::join!(run(vec!["me"]), run(vec!["me"]));
    assert_eq!(json(&a.unwrap())["email"], user.email);
    assert_eq!(json(&b.unwrap())["email"], user.email);
    let renewed = stored(&dir, "refresh_token").unwrap();
    assert_ne!(renewed, first_refresh);

    // A token the server refuses although it has not expired by its own
    // clock: renewed after the refusal, and the command runs again.
    let text = std::fs::read_to_string(dir.join("credentials.toml")).unwrap();
    let token = stored(&dir, "token").unwrap();
    std::fs::write(
        dir.join("credentials.toml"),
        text.replace(&format!("token = \"{token}\""), "token = \"not.a.jwt\""),
    )
    .unwrap();
    let me = json(&run(vec!["me"]).await.unwrap());
    assert_eq!(me["email"], user.email);
    assert_ne!(stored(&dir, "token").unwrap(), "not.a.jwt");

    // The sessions, the CLI's marked current.
    let out = run(vec!["auth", "sessions", "--format", "table"])
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.starts_with("ID") && table.contains("true"), "{table}");
    assert_eq!(table.lines().count(), 3, "{table}");

    // Logout revokes the session on the server: a copy of its tokens is
    // refused afterwards.
    let access = stored(&dir, "token").unwrap();
    let refresh = stored(&dir, "refresh_token").unwrap();
    let out = run(vec!["auth", "logout"]).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("revoked on the server"), "{stderr}");
    assert!(stored(&dir, "token").is_none());
    assert!(stored(&dir, "refresh_token").is_none());
    let refused = cx
        .anon()
        .auth_refresh()
        .body(workspace_client::types::RefreshRequest::builder().refresh_token(refresh))
        .send()
        .await;
    assert_eq!(
        workspace_tests::error_of(refused),
        (401, "session_revoked".to_string())
    );
    let refused = cx.client_with_token(&access).users_me().send().await;
    let (status, _) = workspace_tests::error_of(refused);
    assert_eq!(status, 401);
    let _ = std::fs::remove_dir_all(&dir);
    cx.teardown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_password_from_closed_stdin_is_a_usage_error() {
    let cx = TestContext::new("cli_empty_password").await;
    let cli = Cli {
        url: cx.base_url.clone(),
        config_dir: std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4())),
    };
    for stdin in [None, Some("\n")] {
        let out = tokio::task::block_in_place(|| {
            cli.run(&["auth", "login", "--email", "nobody@example.com"], stdin)
        });
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("empty password"), "{stderr}");
    }
    cx.teardown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_messages_lose_one_newline_and_tables_escape() {
    let cx = TestContext::with_config("cli_stdin_newline", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let user = cx.user("clinewline").await;
    let org = user.personal_org().await.to_string();
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let models = json(
        &run(strings(&["models", "list", "--org-id", &org]))
            .await
            .unwrap(),
    );
    let model = models[0]["id"].as_str().unwrap().to_string();
    let id = |a: &[&str]| {
        let run = run.clone();
        let a = strings(a);
        async move {
            let out = run(a).await.unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        }
    };
    // --id-only / -q on generated create commands.
    let conv = id(&[
        "conversation",
        "create",
        "--org-id",
        &org,
        "--title",
        "x",
        "-q",
    ])
    .await;
    uuid::Uuid::parse_str(&conv).expect("only the id");
    let session = id(&[
        "conversation",
        "create-session",
        "--org-id",
        &org,
        "--conversation-id",
        &conv,
        "--model-id",
        &model,
        "--id-only",
    ])
    .await;
    uuid::Uuid::parse_str(&session).expect("only the id");

    let base_url = cx.base_url.clone();
    let token = user.token.clone();
    let (org2, session2) = (org.clone(), session.clone());
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_workspace"))
            .args([
                "conversation",
                "chat",
                "--org-id",
                &org2,
                "--chat-session-id",
                &session2,
            ])
            .env("WORKSPACE_URL", base_url)
            .env("WORKSPACE_TOKEN", token)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"line one\nline two\n\n").unwrap();
        drop(input);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let messages = json(
        &run(strings(&[
            "conversation",
            "messages",
            "--org-id",
            &org,
            "--conversation-id",
            &conv,
        ]))
        .await
        .unwrap(),
    );
    let first = &messages["messages"][0];
    assert_eq!(first["role"], "user", "{messages}");
    assert_eq!(first["content"], "line one\nline two\n");
    // The table shows it on one row, escaped.
    let out = run(strings(&[
        "conversation",
        "messages",
        "--org-id",
        &org,
        "--conversation-id",
        &conv,
        "--format",
        "table",
    ]))
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("line one\\nline two\\n"), "{table}");
    assert!(!table.lines().any(|l| l.trim() == "line two"), "{table}");
    cx.teardown().await;
}

#[tokio::test]
async fn unreachable_server_help_and_completions() {
    let cli = Cli {
        url: "http://127.0.0.1:1".to_string(),
        config_dir: std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4())),
    };
    let out = cli.run(&["system", "health"], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot reach the server at http://127.0.0.1:1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("is workspace-server running? (WORKSPACE_URL / --url)"),
        "{stderr}"
    );

    for (shell, marker) in [
        ("bash", "_workspace()"),
        ("zsh", "#compdef workspace"),
        ("fish", "complete -c workspace"),
    ] {
        let out = cli.run(&["completions", shell], None);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains(marker),
            "{shell}: {}",
            &script[..script.len().min(200)]
        );
        assert!(script.contains("signup"), "{shell}");
    }

    // Group listings: one line per command; the full text in its own help.
    let out = cli.run(&["auth", "--help"], None);
    let listing = String::from_utf8_lossy(&out.stdout);
    let signup = listing
        .lines()
        .find(|l| l.trim_start().starts_with("signup "))
        .expect("signup listed");
    assert!(signup.contains("Create an account."), "{listing}");
    assert!(!listing.contains("Password policy"), "{listing}");
    let out = cli.run(&["auth", "signup", "--help"], None);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Password policy"), "{help}");
    assert!(!help.contains("XXX"), "{help}");
    assert!(help.contains("Print an example JSON body"), "{help}");
    // Consistent verbs: `org create` beside `org create-org`.
    let out = cli.run(&["org", "--help"], None);
    assert!(String::from_utf8_lossy(&out.stdout).contains("[alias: create]"));
    let out = cli.run(&["org", "create", "--help"], None);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--id-only"));
}

/// `kb create --from DIR` uploads a folder and follows the ingestion (a
/// failed document makes it exit 1 and is named), `kb search` prints
/// readable hits or JSON, `kb query` streams an answer and its numbered
/// sources, `--id-only` prints only the id, and errors exit non-zero with
/// the server's message.
#[tokio::test]
async fn kb_commands() {
    workspace_tests::ensure_local_model().await;
    let cx = TestContext::with_config("cli_kb", |c| {
        c.providers.offline_chunk_delay_ms = 0;
        c.kb.poll_interval_ms = 100;
    })
    .await;
    let user = cx.user("clikb").await;
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

    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("lighthouse.txt"),
        "The keeper climbs the lighthouse stairs every evening to light the lamp.",
    )
    .unwrap();
    std::fs::write(
        folder.path().join("bakery.md"),
        "# Bakery\n\nSourdough loaves sold out every Saturday morning.",
    )
    .unwrap();
    std::fs::write(folder.path().join(".hidden"), "skipped").unwrap();
    let out = run(args(&[
        "kb",
        "create",
        "--org-id",
        &org,
        "--name",
        "Folder",
        "--from",
        folder.path().to_str().unwrap(),
        "--id-only",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kb = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(uuid::Uuid::parse_str(&kb).is_ok(), "{kb:?}");
    // Ready when `create` returned: two documents, both ingested.
    let status = json(
        &run(args(&["kb", "ingestion-status", "--kb-id", &kb]))
            .await
            .unwrap(),
    );
    assert_eq!(status["status"], "ready", "{status}");
    assert_eq!(status["documents_total"], 2, "{status}");
    assert_eq!(status["documents_failed"], 0, "{status}");

    let out = run(args(&[
        "kb",
        "search",
        "--kb-id",
        &kb,
        "who lights the lamp?",
    ]))
    .await
    .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        text.lines().next().unwrap().contains("lighthouse.txt"),
        "{text}"
    );
    let found = json(
        &run(args(&[
            "kb",
            "search",
            "--kb-id",
            &kb,
            "sourdough",
            "--json",
            "--limit",
            "1",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(found["results"].as_array().unwrap().len(), 1);
    assert_eq!(found["results"][0]["metadata"]["title"], "bakery.md");

    // A streamed answer (the offline model repeats the numbered excerpts),
    // then the sources.
    let out = run(args(&[
        "kb",
        "query",
        "--kb-id",
        &kb,
        "Who lights the lamp?",
    ]))
    .await
    .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("offline-dev-model"), "{text}");
    assert!(text.contains("Sources:\n[1] lighthouse.txt"), "{text}");
    let answer = json(
        &run(args(&[
            "kb",
            "query",
            "--kb-id",
            &kb,
            "Who?",
            "--no-stream",
        ]))
        .await
        .unwrap(),
    );
    assert!(answer["sources"].is_array(), "{answer}");

    // A folder with a file that cannot be ingested: exit 1, named.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("ok.txt"), "Fine text.").unwrap();
    std::fs::write(
        bad.path().join("pixel.png"),
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde",
    )
    .unwrap();
    let out = run(args(&[
        "kb",
        "create",
        "--org-id",
        &org,
        "--name",
        "Bad",
        "--from",
        bad.path().to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("failed: pixel.png"), "{err}");
    assert!(err.contains("1 of 2 documents failed"), "{err}");

    // `chat upload FILE` streams the file (a progress bar on terminals).
    let note = folder.path().join("lighthouse.txt");
    let uploaded = json(
        &run(args(&[
            "chat",
            "upload",
            "--org-id",
            &org,
            note.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(uploaded["filename"], "lighthouse.txt");
    assert_eq!(uploaded["content_type"], "text/plain");
    assert_eq!(uploaded["file_size"], 72);
    // `files download LINK` fetches it back through the signed link.
    let copy = folder.path().join("copy.txt");
    let out = run(args(&[
        "files",
        "download",
        uploaded["url"].as_str().unwrap(),
        "--output",
        copy.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&note).unwrap());
    let tampered = uploaded["url"]
        .as_str()
        .unwrap()
        .replace("signature=", "signature=0");
    let out = run(args(&["files", "download", &tampered])).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid_signature"),
        "{out:?}"
    );
    let exe = std::env::temp_dir().join(format!("prog-{}.bin", uuid::Uuid::new_v4()));
    std::fs::write(&exe, b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0").unwrap();
    let out = run(args(&[
        "chat",
        "upload",
        "--org-id",
        &org,
        exe.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("415 unsupported_file_type"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Errors: the server's message, non-zero.
    let out = run(args(&[
        "kb",
        "search",
        "--kb-id",
        &uuid::Uuid::new_v4().to_string(),
        "x",
    ]))
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("404 not_found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cx.teardown().await;
}

/// The README's quickstart script (`scripts/quickstart.sh`) runs green
/// against a real server with the CLI on PATH, as a newcomer pastes it on a
/// fresh install: the first account administers it (it reads the outbox),
/// `./notes` is made by the commands themselves.
#[tokio::test]
async fn quickstart_script_runs() {
    workspace_tests::ensure_local_model().await;
    let cx = TestContext::with_config("cli_quickstart", |c| {
        c.providers.offline_chunk_delay_ms = 0;
        c.kb.poll_interval_ms = 100;
        // As on a fresh embedded install (the default there).
        c.auth.first_account_admin = Some(true);
    })
    .await;
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_workspace"))
        .parent()
        .unwrap()
        .to_path_buf();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("quickstart.sh");
    let config_dir = std::env::temp_dir().join(format!("workspace-qs-{}", uuid::Uuid::new_v4()));
    let work_dir = tempfile::tempdir().unwrap();
    let cwd = work_dir.path().to_path_buf();
    let url = cx.base_url.clone();
    let link = format!("{url}/invite/accept?token=");
    let out = tokio::task::spawn_blocking(move || {
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg(script)
            .current_dir(cwd)
            .env("PATH", path)
            .env("WORKSPACE_URL", url)
            .env("WORKSPACE_CONFIG_DIR", config_dir)
            .env_remove("WORKSPACE_TOKEN")
            .env_remove("WORKSPACE_PROFILE")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // `me`, the invitation, and the invitation e-mail read from the
    // outbox by the first account.
    assert!(
        stdout.contains("\"email\": \"ada@example.com\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("\"email\": \"bob@example.com\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("\"to_address\": \"bob@example.com\""),
        "the outbox: {stdout}"
    );
    // The e-mail's link is the server's own acceptance page (no
    // `mail.public_url`), and Bob accepted under his own profile: Ada's
    // login was kept (the later commands ran as her).
    assert!(stdout.contains(&link), "the link: {stdout}");
    assert!(
        stderr.contains("signed up and joined Acme; tokens saved to profile \"bob\""),
        "{stderr}"
    );
    // `chat send --kb` names the documents it cited, as `kb query` does.
    assert!(
        stderr.contains("Sources:\n[1] ") && stderr.contains(".txt (score "),
        "{stderr}"
    );
    assert!(stdout.contains("You said"), "the model's answer: {stdout}");
    assert!(stdout.contains("lighthouse.txt"), "{stdout}");
    assert!(stdout.trim_end().ends_with("quickstart done"), "{stdout}");
    assert!(work_dir.path().join("notes/bakery.txt").is_file());
    cx.teardown().await;
}

/// The README's quickstart block is, character for character, the lines
/// of `scripts/quickstart.sh` between its markers (the script the test
/// above runs).
#[test]
fn the_readme_quickstart_is_the_script() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = std::fs::read_to_string(root.join("scripts/quickstart.sh")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let begin = script
        .find("# quickstart: begin\n")
        .expect("the begin marker")
        + "# quickstart: begin\n".len();
    let end = script.find("# quickstart: end\n").expect("the end marker");
    let commands = &script[begin..end];
    let block = format!("```sh\n{commands}```\n");
    assert!(
        readme.contains(&block),
        "README.md has no ```sh block equal to scripts/quickstart.sh's quickstart:\n{block}"
    );
    // Pastable in any shell: no comment lines (zsh's default treats `#`
    // as a word).
    assert!(
        commands
            .lines()
            .all(|l| !l.contains(" #") && !l.starts_with('#')),
        "{commands}"
    );
}

/// `mcp connect`: prints the authorization URL, waits for the callback
/// (the browser's part is done here with an HTTP client against the real
/// OAuth peer) and prints the active instance; without a callback it
/// stops at `--timeout` with exit code 3.
#[tokio::test]
async fn mcp_connect_prints_the_url_and_waits_for_the_callback() {
    use std::io::{BufRead, Read};
    use workspace_server::mcp::config::{McpAuth, McpServerConfig};
    use workspace_tests::mcp_peers::MockOauth;
    const API_PUBLIC: &str = "http://api.test";
    let peer = MockOauth::start(API_PUBLIC).await;
    let mcp_url = peer.mcp_url();
    let cx = TestContext::with_config("cli_mcp_connect", |c| {
        c.mcp.frontend_url = "http://frontend.test".to_string();
        c.mcp.api_public_url = API_PUBLIC.to_string();
        c.features.mcp_sessions = 10;
        c.mcp_servers = vec![McpServerConfig {
            name: "Mock".to_string(),
            toolkit_name: "Mock".to_string(),
            toolkit_slug: "mock".to_string(),
            toolkit_logo: None,
            url: mcp_url,
            auth: McpAuth::Oauth,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
        }];
    })
    .await;
    let user = cx.user("climcp").await;
    let org = user.personal_org().await;
    let server = user
        .client
        .mcp_list_servers()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .servers[0]
        .id;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let spawn = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_workspace"))
            .args(["mcp", "connect", &server.to_string(), "--org-id"])
            .arg(org.to_string())
            .args(["--interval", "1"])
            .args(extra)
            .env("WORKSPACE_URL", &cx.base_url)
            .env("WORKSPACE_CONFIG_DIR", &dir)
            .env("WORKSPACE_TOKEN", &user.token)
            .env_remove("WORKSPACE_PROFILE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("running the CLI")
    };

    let mut child = spawn(&["--flow-type", "cli", "--timeout", "60"]);
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (url, mut stdout) = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        (line.trim().to_string(), stdout)
    })
    .await
    .unwrap();
    assert!(
        url.starts_with(&format!("{}/authorize?", peer.base)),
        "the first line is the authorization URL: {url:?}"
    );
    // The browser: the provider approves and sends it to the callback.
    let back = peer.approve(&url).await;
    assert!(back.starts_with(&format!("{API_PUBLIC}/api/mcp/callback?")));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let landed = http
        .get(back.replacen(API_PUBLIC, &cx.base_url, 1))
        .send()
        .await
        .unwrap();
    assert_eq!(landed.status().as_u16(), 303);
    let (status, rest, stderr) = tokio::task::spawn_blocking(move || {
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (child.wait().unwrap(), rest, stderr)
    })
    .await
    .unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert!(stderr.contains("Open the URL above"), "{stderr}");
    let instance: serde_json::Value = serde_json::from_str(&rest).expect("the instance as JSON");
    assert_eq!(instance["status"], "active");
    assert_eq!(instance["server_id"], server.to_string());
    assert_eq!(instance["name"], "Mock");
    let listed = user
        .client
        .mcp_list_instances()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner()
        .instances;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id.to_string(), instance["id"].as_str().unwrap());

    // Nobody opens the URL: exit code 3 at the timeout.
    let started = std::time::Instant::now();
    let child = spawn(&["--timeout", "2"]);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no callback within 2 s"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cx.teardown().await;
}

/// The membership lifecycle from the CLI: `users suspend|reactivate|remove`
/// (the users list shows the states), `org rename`, `org transfer` and
/// `org leave`, with their natural names in `org --help`.
#[tokio::test]
async fn membership_lifecycle_commands() {
    let cx = TestContext::new("cli_members").await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let carol = cx.user("carol").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let cli = std::sync::Arc::new(Cli {
        url: cx.base_url.clone(),
        config_dir: dir.clone(),
    });
    let run = |args: Vec<String>| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli.run(&args, None)
        })
    };
    let args = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let login = {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || {
            cli.run(
                &["auth", "login", "--email", "ada@example.com"],
                Some(&format!("{}\n", workspace_tests::TEST_PASSWORD)),
            )
        })
    };
    json(&login.await.unwrap());
    let org = ada
        .client
        .org_create_org()
        .name("Acme".to_string())
        .send()
        .await
        .unwrap()
        .id;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    ada.add_member(org, carol.id, member).await;

    let help = run(args("org --help")).await.unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    for command in ["leave", "rename", "transfer"] {
        assert!(help.contains(command), "org {command}: {help}");
    }

    let suspended = json(
        &run(args(&format!(
            "users suspend --org-id {org} --user-id {}",
            bob.id
        )))
        .await
        .unwrap(),
    );
    assert_eq!(suspended["status"], "suspended");
    let table = run(args(&format!(
        "users list --org-id {org} --include-suspended true --format table"
    )))
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(table.contains("suspended"), "{table}");
    let active = json(
        &run(args(&format!(
            "users reactivate --org-id {org} --user-id {}",
            bob.id
        )))
        .await
        .unwrap(),
    );
    assert_eq!(active["status"], "active");
    let removed = json(
        &run(args(&format!(
            "users remove --org-id {org} --user-id {}",
            carol.id
        )))
        .await
        .unwrap(),
    );
    assert!(removed["message"].as_str().unwrap().contains("removed"));

    let mut rename = args(&format!("org rename --org-id {org} --name"));
    rename.push("Acme Corporation".to_string());
    let renamed = json(&run(rename).await.unwrap());
    assert_eq!(renamed["name"], "Acme Corporation");

    // The last owner cannot leave: a non-zero exit with the error_code.
    let out = run(args(&format!("org leave --org-id {org}")))
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("last_owner"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let transferred = json(
        &run(args(&format!(
            "org transfer --org-id {org} --user-id {}",
            bob.id
        )))
        .await
        .unwrap(),
    );
    assert_eq!(transferred["user_role"]["role_name"], "admin");
    let left = json(
        &run(args(&format!("org leave --org-id {org}")))
            .await
            .unwrap(),
    );
    assert!(left["message"].as_str().unwrap().contains("left"));
    let _ = std::fs::remove_dir_all(&dir);
    cx.teardown().await;
}

/// `org delete --confirm NAME [--wait]`, `account export` (to a file and to
/// stdout) and `account delete` (which forgets the stored token).
#[tokio::test]
async fn org_delete_and_account_export_and_delete() {
    let cx = TestContext::with_config("cli_deletion", |c| c.deletion.poll_interval_ms = 100).await;
    let user = cx.user("cli-leaver").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let cli = std::sync::Arc::new(Cli {
        url: cx.base_url.clone(),
        config_dir: dir.clone(),
    });
    let run = |args: Vec<String>, stdin: Option<&'static str>| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli.run(&args, stdin)
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    json(
        &run(
            args(&["auth", "login", "--email", &user.email]),
            Some("correct horse battery staple\n"),
        )
        .await
        .unwrap(),
    );
    let org = json(
        &run(args(&["org", "create", "--name", "Doomed"]), None)
            .await
            .unwrap(),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run(
        args(&["org", "delete", "--org-id", &org, "--confirm", "doomed"]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("400 confirmation_mismatch"), "{stderr}");
    let done = json(
        &run(
            args(&[
                "org",
                "delete",
                "--org-id",
                &org,
                "--confirm",
                "Doomed",
                "--wait",
            ]),
            None,
        )
        .await
        .unwrap(),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["organization_name"], "Doomed");

    let file = dir.join("me.json");
    let out = run(
        args(&["account", "export", "--output", file.to_str().unwrap()]),
        None,
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(exported["profile"]["email"], user.email.as_str());
    assert_eq!(
        json(&run(args(&["account", "export"]), None).await.unwrap())["format"],
        "workspace.account-export"
    );

    let out = run(args(&["account", "delete"]), Some("not it\n"))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("403 invalid_password"));
    let deleted = json(
        &run(
            args(&["account", "delete"]),
            Some("correct horse battery staple\n"),
        )
        .await
        .unwrap(),
    );
    assert_eq!(deleted["organizations"].as_array().unwrap().len(), 1);
    let stored = std::fs::read_to_string(dir.join("credentials.toml")).unwrap();
    assert!(!stored.contains("token = "), "{stored}");
    let out = run(args(&["me"]), None).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    cx.teardown().await;
}

/// The README's admin story (`scripts/admin-story.sh`) runs exactly as the
/// README writes it: an owner logs in with the CLI and makes the service
/// account; every command after that runs with its token only.
#[tokio::test]
async fn the_admin_story_runs_as_the_readme_writes_it() {
    workspace_tests::ensure_local_model().await;
    let cx = TestContext::with_config("cli_admin_story", |c| {
        c.kb.poll_interval_ms = 100;
    })
    .await;
    let owner = cx.user("story-owner").await;
    let org = owner
        .client
        .org_create_org()
        .name("Acme".to_string())
        .send()
        .await
        .unwrap()
        .id;
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_workspace"))
        .parent()
        .unwrap()
        .to_path_buf();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("admin-story.sh");
    let config_dir = std::env::temp_dir().join(format!("workspace-admin-{}", uuid::Uuid::new_v4()));
    let work_dir = tempfile::tempdir().unwrap();
    let cwd = work_dir.path().to_path_buf();
    let url = cx.base_url.clone();
    let email = owner.email.clone();
    let out = tokio::task::spawn_blocking(move || {
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg(script)
            .current_dir(cwd)
            .env("PATH", path)
            .env("WORKSPACE_URL", url)
            .env("WORKSPACE_CONFIG_DIR", config_dir)
            .env("ADMIN_EMAIL", email)
            .env("WORKSPACE_PASSWORD", workspace_tests::TEST_PASSWORD)
            .env("ORG", org.to_string())
            .env_remove("WORKSPACE_TOKEN")
            .env_remove("WORKSPACE_PROFILE")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // `me` is the service account; the invitation was made; the search
    // found the handbook; the account lists itself.
    assert!(stdout.contains("\"first_name\": \"admin-bot\""), "{stdout}");
    assert!(
        stdout.contains("\"email\": \"carol@example.com\""),
        "{stdout}"
    );
    assert!(stdout.contains("fifth of each month"), "{stdout}");
    assert!(stdout.contains("\"role_name\": \"admin\""), "{stdout}");
    // The account holds exactly the story's scopes.
    let accounts = owner
        .client
        .org_service_accounts_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(accounts.len(), 1);
    let mut scopes = accounts[0].tokens[0].scopes.clone();
    scopes.sort();
    assert_eq!(scopes, ["chats:write", "kb:*", "roles:read", "users:*"]);
    cx.teardown().await;
}

#[test]
fn the_readme_admin_story_is_the_script() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = std::fs::read_to_string(root.join("scripts/admin-story.sh")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let begin =
        script.find("# admin: begin\n").expect("the begin marker") + "# admin: begin\n".len();
    let end = script.find("# admin: end\n").expect("the end marker");
    let block = format!("```sh\n{}```\n", &script[begin..end]);
    assert!(
        readme.contains(&block),
        "README.md has no ```sh block equal to scripts/admin-story.sh's story:\n{block}"
    );
}

/// `chat share` prints the link's URL once (stdout: the URL alone, stderr:
/// its id and how to revoke it); `chat shares` lists without tokens;
/// `chat shared` reads a link without credentials; `chat share-revoke`
/// ends it.
#[tokio::test]
async fn chat_share_commands() {
    let cx = TestContext::with_config("cli_chat_share", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let user = cx.user("clishare").await;
    let org = user.personal_org().await;
    let chat = workspace_tests::resources::chat_message(
        &user.client,
        org,
        serde_json::json!({"content": "a shared question"}),
    )
    .await
    .chat_id;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    let base_url = cx.base_url.clone();
    let run = move |args: Vec<String>, token: Option<String>| {
        let (url, dir) = (base_url.clone(), dir.clone());
        tokio::task::spawn_blocking(move || {
            let mut command = Command::new(env!("CARGO_BIN_EXE_workspace"));
            command
                .args(&args)
                .env("WORKSPACE_URL", url)
                .env("WORKSPACE_CONFIG_DIR", dir)
                .env_remove("WORKSPACE_TOKEN")
                .env_remove("WORKSPACE_PROFILE")
                .stdin(std::process::Stdio::null());
            if let Some(token) = token {
                command.env("WORKSPACE_TOKEN", token);
            }
            command.output().unwrap()
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (org, chat) = (org.to_string(), chat.to_string());
    let me = Some(user.token.clone());

    let out = run(
        args(&["chat", "share", "--org-id", &org, "--chat-id", &chat]),
        me.clone(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let url = stdout.trim_end();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let prefix = format!("{}/share/wsshare_", cx.base_url);
    assert!(url.starts_with(&prefix), "{url}");
    let token = url.rsplit('/').next().unwrap().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("chat share-revoke"), "{stderr}");

    let listed = json(
        &run(args(&["chat", "shares", "--org-id", &org]), me.clone())
            .await
            .unwrap(),
    );
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["chat_id"], chat.as_str());
    assert!(!listed.to_string().contains(&token), "no token listed");
    let share_id = listed[0]["id"].as_str().unwrap().to_string();

    // Without any credentials.
    let shared = json(
        &run(args(&["chat", "shared", "--token", &token]), None)
            .await
            .unwrap(),
    );
    assert_eq!(shared["messages"][0]["content"], "a shared question");

    json(
        &run(
            args(&[
                "chat",
                "share-revoke",
                "--org-id",
                &org,
                "--share-id",
                &share_id,
            ]),
            me.clone(),
        )
        .await
        .unwrap(),
    );
    let out = run(args(&["chat", "shared", "--token", &token]), None)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"));
    cx.teardown().await;
}

/// `chat import FILE` (a table of what was imported and skipped; JSON
/// with `--format json`) and `chat export` (one chat as Markdown to
/// stdout, all chats as JSON to `--out`, which imports back).
#[tokio::test]
async fn chat_export_and_import() {
    let cx = TestContext::new("cli_chat_transfer").await;
    let user = cx.user("cli-importer").await;
    let dir = std::env::temp_dir().join(format!("workspace-cli-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = std::sync::Arc::new(Cli {
        url: cx.base_url.clone(),
        config_dir: dir.clone(),
    });
    let run = |args: Vec<String>| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli.run(&args, None)
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let login = {
        let cli = cli.clone();
        let email = user.email.clone();
        tokio::task::spawn_blocking(move || {
            cli.run(
                &["auth", "login", "--email", &email],
                Some("correct horse battery staple\n"),
            )
        })
        .await
        .unwrap()
    };
    json(&login);
    let me = json(&run(args(&["me"])).await.unwrap());
    let org = me["organizations"][0]["id"].as_str().unwrap().to_string();

    // A ChatGPT file with one sound conversation and one broken entry.
    let chatgpt = serde_json::json!([
        {"title": "Greetings", "conversation_id": "g-1", "current_node": "a",
         "mapping": {
            "q": {"id": "q", "parent": null, "children": ["a"], "message": {
                "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["Hello?"]}}},
            "a": {"id": "a", "parent": "q", "children": [], "message": {
                "author": {"role": "assistant"}, "content": {"content_type": "text", "parts": ["Hi there."]},
                "metadata": {"model_slug": "gpt-4o"}}}
         }},
        {"title": "Broken", "conversation_id": "b-1", "mapping": {"x": {"parent": "missing", "message": {
            "author": {"role": "user"}, "content": {"parts": ["lost"]}}}}}
    ]);
    let file = dir.join("conversations.json");
    std::fs::write(&file, serde_json::to_vec(&chatgpt).unwrap()).unwrap();
    let out = run(args(&[
        "chat",
        "import",
        "--org-id",
        &org,
        file.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("Read as chatgpt: 1 imported, 1 skipped\n"),
        "{table}"
    );
    assert!(table.contains("Greetings"), "{table}");
    assert!(
        table.contains("b-1") && table.contains("broken_tree"),
        "{table}"
    );
    let chat = table
        .lines()
        .nth(2)
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();

    // JSON on request.
    let imported = json(
        &run(args(&[
            "--format",
            "json",
            "chat",
            "import",
            "--org-id",
            &org,
            "--from",
            "chatgpt",
            file.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(imported["imported"][0]["messages"], 2);
    assert_eq!(imported["skipped"][0]["reason"], "broken_tree");

    // One chat as Markdown, to stdout.
    let out = run(args(&[
        "chat",
        "export",
        "--org-id",
        &org,
        "--chat-id",
        &chat,
        "--to",
        "markdown",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "# Greetings\n\n### User\n\nHello?\n\n### Assistant (gpt-4o)\n\nHi there.\n\n"
    );

    // All chats as JSON, to a file, which imports back.
    let exported = dir.join("chats.json");
    let out = run(args(&[
        "chat",
        "export",
        "--org-id",
        &org,
        "--out",
        exported.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&exported).unwrap()).unwrap();
    assert_eq!(doc["format"], "workspace.chat.v1");
    assert_eq!(doc["chats"].as_array().unwrap().len(), 2);
    let out = run(args(&[
        "chat",
        "import",
        "--org-id",
        &org,
        exported.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("Read as workspace: 2 imported, 0 skipped\n"),
        "{table}"
    );

    // A file of another kind: the server's error, exit 1.
    let other = dir.join("other.json");
    std::fs::write(&other, br#"{"rows": []}"#).unwrap();
    let out = run(args(&[
        "chat",
        "import",
        "--org-id",
        &org,
        other.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("400 unrecognized_import_format"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    cx.teardown().await;
}

/// `workspace chat feedback-rate`, `feedback list` (a table by default,
/// JSON on request) and `feedback export` (CSV or JSON Lines, streamed to
/// stdout or a file).
#[tokio::test]
async fn feedback_commands() {
    let cx = TestContext::with_config("cli_feedback", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let user = cx.user("clifeedback").await;
    let org = user.personal_org().await;
    let answered = workspace_tests::resources::chat_message(
        &user.client,
        org,
        serde_json::json!({"content": "=2+2, spreadsheet?"}),
    )
    .await;
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let org = org.to_string();
    let answer = answered.message_id.to_string();

    let rated = json(
        &run(strings(&[
            "chat",
            "feedback-rate",
            "--org-id",
            &org,
            "--message-id",
            &answer,
            "--rating",
            "down",
            "--comment",
            "@cmd off by one",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(rated["rating"], "down");
    assert_eq!(rated["message_id"], answer.as_str());

    // A table by default, with where the next page starts.
    let out = run(strings(&[
        "feedback", "list", "--org-id", &org, "--limit", "1",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    for column in [
        "CREATED", "AREA", "RATING", "MODEL", "RATER", "TAGS", "COMMENT",
    ] {
        assert!(header.contains(column), "{table}");
    }
    let row = lines.next().unwrap();
    assert!(row.contains("chat") && row.contains("down"), "{table}");
    assert!(
        row.contains("@cmd off by one") && row.contains(&user.email),
        "{table}"
    );
    assert!(
        !table.contains("next cursor:"),
        "one rating, one page: {table}"
    );
    // JSON when asked.
    let page = json(
        &run(strings(&[
            "--format", "json", "feedback", "list", "--org-id", &org,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(page["items"][0]["question"], "=2+2, spreadsheet?");
    assert_eq!(page["next_cursor"], serde_json::Value::Null);

    // CSV on stdout: the header and the neutralised cells.
    let out = run(strings(&[
        "feedback", "export", "--org-id", &org, "--format", "csv", "--rating", "down",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(
        csv.starts_with("id,created_at,updated_at,area,rating,"),
        "{csv}"
    );
    assert!(
        csv.contains(",'@cmd off by one,\"'=2+2, spreadsheet?\","),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 2, "{csv}");
    let none = run(strings(&[
        "feedback", "export", "--org-id", &org, "--format", "csv", "--rating", "up",
    ]))
    .await
    .unwrap();
    assert_eq!(String::from_utf8(none.stdout).unwrap().lines().count(), 1);
    // JSON Lines to a file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("feedback.jsonl");
    let out = run(strings(&[
        "feedback",
        "export",
        "--org-id",
        &org,
        "--format",
        "jsonl",
        "--output",
        file.to_str().unwrap(),
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let items: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["comment"], "@cmd off by one");

    // `--format csv` elsewhere is a usage error; a member without admin
    // rights is refused by the server (exit 1).
    let out = run(strings(&["--format", "csv", "me"])).await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let member = cx.user("climember").await;
    user.add_member(
        org.parse().unwrap(),
        member.id,
        user.role_id(org.parse().unwrap(), "member").await,
    )
    .await;
    let as_member = token_runner(cx.base_url.clone(), member.token.clone());
    let out = as_member(strings(&["feedback", "export", "--org-id", &org]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("403 forbidden"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cx.teardown().await;
}

/// `audit list`, `audit verify` and `audit export` against a real server:
/// the organization's events as JSON, its chain verified, and the export
/// one JSON object per line with the same events.
#[tokio::test]
async fn audit_commands() {
    let cx = TestContext::new("cli_audit").await;
    let user = cx.user("cliaudit").await;
    // Something to record: an organization created.
    let org = user
        .client
        .org_create_org()
        .name("Audited".to_string())
        .send()
        .await
        .expect("create_org")
        .id;
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let org = org.to_string();

    let page = json(
        &run(strings(&["audit", "list", "--org-id", &org]))
            .await
            .unwrap(),
    );
    let items = page["items"].as_array().expect("items");
    assert!(items.iter().any(|e| e["action"] == "org.create"), "{page}");

    let verified = json(
        &run(strings(&["audit", "verify", "--org-id", &org]))
            .await
            .unwrap(),
    );
    assert_eq!(verified["ok"], true, "{verified}");
    assert_eq!(
        verified["chains"][0]["first_broken_seq"],
        serde_json::Value::Null
    );

    let out = run(strings(&["audit", "export", "--org-id", &org]))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), items.len());
    assert_eq!(lines[0]["id"], items[0]["id"]);
    cx.teardown().await;
}

/// `workspace usage report` (a table with totals by default, JSON on
/// request, the server's CSV with `--format csv`) and `workspace budgets
/// create|list` (issue #36).
#[tokio::test]
async fn usage_and_budget_commands() {
    let cx = TestContext::with_config("cli_usage", |c| {
        c.providers.offline_chunk_delay_ms = 0;
        c.usage.flush_interval_ms = 10;
    })
    .await;
    let user = cx.user("cliusage").await;
    let org = user.personal_org().await;
    workspace_tests::resources::chat_message(
        &user.client,
        org,
        serde_json::json!({"content": "count me"}),
    )
    .await;
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let org = org.to_string();
    // The recorder writes within a flush.
    let mut report = serde_json::Value::Null;
    for _ in 0..100 {
        report = json(
            &run(strings(&[
                "--format",
                "json",
                "usage",
                "report",
                "--org-id",
                &org,
                "--group-by",
                "kind",
            ]))
            .await
            .unwrap(),
        );
        if report["totals"]["calls"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(report["groups"][0]["key"], "chat", "{report}");
    assert!(report["totals"]["total_tokens"].as_i64().unwrap() > 0);

    let out = run(strings(&[
        "usage",
        "report",
        "--org-id",
        &org,
        "--group-by",
        "model",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.lines().next().unwrap().contains("COST_MICROS"),
        "{table}"
    );
    assert!(table.contains("offline-dev-model"), "{table}");
    assert!(table.contains("total: 1 calls"), "{table}");

    let out = run(strings(&[
        "usage",
        "report",
        "--org-id",
        &org,
        "--group-by",
        "day",
        "--format",
        "csv",
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(csv.starts_with("key,label,calls,"), "{csv}");
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.lines().last().unwrap().starts_with("total,,1,"),
        "{csv}"
    );

    let created = json(
        &run(strings(&[
            "budgets",
            "create",
            "--org-id",
            &org,
            "--scope",
            "organization",
            "--metric",
            "tokens",
            "--period",
            "month",
            "--limit",
            "100000",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(created["limit"], 100000, "{created}");
    let list = json(
        &run(strings(&["budgets", "list", "--org-id", &org]))
            .await
            .unwrap(),
    );
    assert_eq!(list["items"][0]["id"], created["id"]);
    cx.teardown().await;
}

/// `workspace webhooks create|list|test|deliveries|rotate-secret|delete`
/// (generated commands; the body from a `--json-body` file).
#[tokio::test]
async fn webhooks_commands() {
    let cx = TestContext::with_config("cli_webhooks", |c| {
        // Nothing is sent: the test reads the queued delivery.
        c.webhooks.workers = 0;
    })
    .await;
    let user = cx.user("cliwebhooks").await;
    let org = user.personal_org().await.to_string();
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("hook.json");
    std::fs::write(
        &body,
        r#"{"url": "https://hooks.example.com/in", "event_types": ["member.*", "webhook.test"]}"#,
    )
    .unwrap();
    let made = json(
        &run(strings(&[
            "webhooks",
            "create",
            "--org-id",
            &org,
            "--json-body",
            body.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    assert!(
        made["secret"].as_str().unwrap().starts_with("whsec_"),
        "{made}"
    );
    let id = made["endpoint"]["id"].as_str().unwrap().to_string();
    let listed = json(
        &run(strings(&["webhooks", "list", "--org-id", &org]))
            .await
            .unwrap(),
    );
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(!listed.to_string().contains("whsec_"));
    // `--url` names the server: the body's `url` is `--body-url`.
    let updated = json(
        &run(strings(&[
            "webhooks",
            "update",
            "--org-id",
            &org,
            "--endpoint-id",
            &id,
            "--body-url",
            "https://hooks.example.com/v2",
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(updated["url"], "https://hooks.example.com/v2");
    let queued = json(
        &run(strings(&[
            "webhooks",
            "test",
            "--org-id",
            &org,
            "--endpoint-id",
            &id,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(queued["status"], "pending");
    let log = json(
        &run(strings(&[
            "webhooks",
            "deliveries",
            "--org-id",
            &org,
            "--endpoint-id",
            &id,
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(log["items"][0]["id"], queued["id"]);
    assert_eq!(log["items"][0]["event_type"], "webhook.test");
    let rotated = json(
        &run(strings(&[
            "webhooks",
            "rotate-secret",
            "--org-id",
            &org,
            "--endpoint-id",
            &id,
        ]))
        .await
        .unwrap(),
    );
    assert_ne!(rotated["secret"], made["secret"]);
    let out = run(strings(&[
        "webhooks",
        "delete",
        "--org-id",
        &org,
        "--endpoint-id",
        &id,
    ]))
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cx.teardown().await;
}

/// `workspace sso set|show|start|finish|remove` (generated commands)
/// against `oidc-provider`: a provider registered from a `--json-body`
/// file, shown without its secret, and a whole sign-in through the two
/// steps.
#[tokio::test]
async fn sso_commands() {
    use workspace_tests::sso_peer::{CLIENT_ID, CLIENT_SECRET, OidcSso};
    const REDIRECT: &str = "http://127.0.0.1:9/sso/back";
    let cx = TestContext::new("cli_sso").await;
    let peer = OidcSso::start(REDIRECT).await;
    let user = cx.user("clisso").await;
    let org = user.personal_org().await.to_string();
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("sso.json");
    std::fs::write(
        &body,
        serde_json::json!({
            "issuer": peer.issuer, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "domains": ["cli.example"],
        })
        .to_string(),
    )
    .unwrap();
    let set = json(
        &run(strings(&[
            "sso",
            "set",
            "--org-id",
            &org,
            "--json-body",
            body.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(set["client_secret_set"], true);
    let shown = run(strings(&["sso", "show", "--org-id", &org]))
        .await
        .unwrap();
    assert_eq!(json(&shown)["domains"][0], "cli.example");
    assert!(!String::from_utf8_lossy(&shown.stdout).contains(CLIENT_SECRET));

    peer.set_account(
        "fay",
        serde_json::json!({"email": "fay@cli.example", "email_verified": true}),
    )
    .await;
    let started = json(
        &run(strings(&[
            "sso",
            "start",
            "--email",
            "fay@cli.example",
            "--redirect-uri",
            REDIRECT,
        ]))
        .await
        .unwrap(),
    );
    let back = peer
        .sign_in(started["authorization_url"].as_str().unwrap(), "fay")
        .await;
    let param = |name: &str| {
        back.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string())
            .unwrap()
    };
    let finish = dir.path().join("finish.json");
    std::fs::write(
        &finish,
        serde_json::json!({"state": param("state"), "code": param("code"), "iss": param("iss")})
            .to_string(),
    )
    .unwrap();
    let tokens = json(
        &run(strings(&[
            "sso",
            "finish",
            "--json-body",
            finish.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    let fay = token_runner(
        cx.base_url.clone(),
        tokens["access_token"].as_str().unwrap().to_string(),
    );
    assert_eq!(
        json(&fay(strings(&["me"])).await.unwrap())["email"],
        "fay@cli.example"
    );
    let removed = run(strings(&["sso", "remove", "--org-id", &org]))
        .await
        .unwrap();
    json(&removed);
    cx.teardown().await;
}

/// `workspace scim set|token|show|off` (issue #37): an admin turns
/// provisioning on, maps a group, issues the token an identity provider
/// uses (it works at `/scim/v2`), and turns it off.
#[tokio::test]
async fn scim_commands() {
    let cx = TestContext::new("cli_scim").await;
    let user = cx.user("cliscim").await;
    let org = user.create_org("CLI SCIM").await.to_string();
    let run = token_runner(cx.base_url.clone(), user.token.clone());
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("scim.json");
    std::fs::write(
        &body,
        serde_json::json!({
            "role_mappings": [{"group": "Admins", "role": "admin"}],
            "default_role": "member",
        })
        .to_string(),
    )
    .unwrap();
    let set = json(
        &run(strings(&[
            "scim",
            "set",
            "--org-id",
            &org,
            "--json-body",
            body.to_str().unwrap(),
        ]))
        .await
        .unwrap(),
    );
    assert_eq!(set["token_set"], false);
    assert_eq!(set["role_mappings"][0]["role"], "admin");
    let issued = json(
        &run(strings(&["scim", "token", "--org-id", &org]))
            .await
            .unwrap(),
    );
    let token = issued["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("wscim_"));
    let listed = workspace_tests::http()
        .get(format!("{}/scim/v2/Users", cx.base_url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status().as_u16(), 200);
    let shown = run(strings(&["scim", "show", "--org-id", &org]))
        .await
        .unwrap();
    let shown_text = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(!shown_text.contains(&token), "the token is shown once");
    assert_eq!(json(&shown)["token_set"], true);
    json(
        &run(strings(&["scim", "off", "--org-id", &org]))
            .await
            .unwrap(),
    );
    let refused = workspace_tests::http()
        .get(format!("{}/scim/v2/Users", cx.base_url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    cx.teardown().await;
}

/// An opaque grey PNG of `w`×`h`, written by hand (stored deflate blocks).
fn tiny_png(w: u32, h: u32) -> Vec<u8> {
    fn crc(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for b in data {
            c ^= u32::from(*b);
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    fn adler(data: &[u8]) -> u32 {
        let (mut a, mut b) = (1u32, 0u32);
        for d in data {
            a = (a + u32::from(*d)) % 65521;
            b = (b + a) % 65521;
        }
        (b << 16) | a
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc(&body).to_be_bytes());
    }
    let mut raw = Vec::new();
    for _ in 0..h {
        raw.push(0);
        raw.extend(std::iter::repeat_n(128u8, w as usize));
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let n = block.len() as u16;
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(!n).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&adler(&raw).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}
