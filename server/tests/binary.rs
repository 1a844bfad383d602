//! The server binary as an operator runs it: with no configuration at all
//! it provisions and starts its own PostgreSQL cluster, serves the API
//! (the first account administers it), logs one line per request, backs
//! the database up and restores it (`db dump` / `db restore`), and on
//! SIGTERM shuts down gracefully and stops the cluster.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_ready(url: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    loop {
        let last = match http.get(format!("{url}/readyz")).send().await {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => format!("{}", r.status()),
            Err(e) => format!("{e:?}"),
        };
        if let Some(status) = child.try_wait().unwrap() {
            panic!("server exited early: {status}: {}", stderr_of(child));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server not ready in time ({last}): {}", stderr_of(child));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "server did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where the suite keeps its PostgreSQL binaries and embedding model:
/// `WORKSPACE_DATA_DIR` (`cargo xtask test` sets it), else `target/test-db`
/// as `cargo xtask` would (never a server's data directory, which as root
/// is `/var/lib/workspace`).
fn suite_data_root() -> std::path::PathBuf {
    match std::env::var_os("WORKSPACE_DATA_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => dir.into(),
        None => {
            let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
            workspace_embedded_db::test_data_root(tmp.parent().unwrap_or(tmp)).unwrap()
        }
    }
}

#[tokio::test]
async fn zero_configuration_run_and_graceful_sigterm() {
    // Reuse already-provisioned PostgreSQL binaries (provisioning itself is
    // exercised by `cargo xtask test` on a fresh machine), but a brand-new
    // data directory, so the server initialises its own cluster.
    let root = suite_data_root();
    let install = workspace_embedded_db::PgInstall::locate_or_provision(&root).unwrap();
    let data = tempfile::Builder::new()
        .prefix("ws-zero-config-")
        .tempdir_in("/var/tmp")
        .unwrap();
    if unsafe_is_root() {
        // The postgres user must be able to enter the directory.
        Command::new("chmod")
            .args(["755"])
            .arg(data.path())
            .status()
            .unwrap();
    }
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_workspace-server"))
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env_remove("DATABASE_URL")
        .env_remove("WORKSPACE_CONFIG")
        .env_remove("WORKSPACE_JWT_SECRET")
        .env("WORKSPACE_DATA_DIR", data.path())
        .env("WORKSPACE_PG_BIN", &install.bin_dir)
        // The embedding model is shared, not downloaded again.
        .env(
            "WORKSPACE_MODEL_DIR",
            root.join("models").join("all-minilm-l6-v2"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&url, &mut child).await;

    // The root leads to the API reference; unknown routes are `not_found`.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let root = no_redirects.get(format!("{url}/")).send().await.unwrap();
    assert_eq!(root.status().as_u16(), 302);
    assert_eq!(root.headers()["location"], "/docs");
    let unknown = reqwest::get(format!("{url}/no/such/route")).await.unwrap();
    assert_eq!(unknown.status().as_u16(), 404);
    let body: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(body["error_code"], "not_found", "{body}");
    let wrong_method = no_redirects
        .delete(format!("{url}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_method.status().as_u16(), 405);
    let body: serde_json::Value = wrong_method.json().await.unwrap();
    assert_eq!(body["error_code"], "method_not_allowed", "{body}");

    // The API reference is served from the server itself, telemetry off,
    // confined to this server by its content security policy.
    let page = reqwest::get(format!("{url}/docs")).await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        policy.contains("default-src 'self'") && policy.contains("connect-src 'self'"),
        "{policy}"
    );
    let page = page.text().await.unwrap();
    assert!(
        page.contains("<redoc spec-url=\"/openapi.json\" disable-telemetry=\"true\">"),
        "{page}"
    );
    let script = reqwest::get(format!("{url}/docs/redoc.standalone.js"))
        .await
        .unwrap();
    assert_eq!(script.status().as_u16(), 200);
    assert!(script.text().await.unwrap().contains("Redoc"));
    let document: serde_json::Value = reqwest::get(format!("{url}/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let checked_in: serde_json::Value =
        serde_json::from_str(include_str!("../../openapi/workspace.json")).unwrap();
    assert_eq!(
        document, checked_in,
        "/openapi.json is the checked-in document"
    );

    let first = reqwest::Client::new()
        .post(format!("{url}/api/auth/signup"))
        .json(&serde_json::json!({
            "email": "zero@example.com", "first_name": "Zero", "last_name": "Config",
            "password": "correct horse battery"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status().as_u16(), 201);
    // The first account administers the fresh install (it reads the
    // outbox); the second does not.
    assert_eq!(outbox_status(&url, "zero").await, 200);
    assert_eq!(signup(&url, "second").await, 201);
    assert_eq!(outbox_status(&url, "second").await, 403);

    // A backup while the server runs (the bundled pg_dump), then an
    // account made after it, which the restore below undoes.
    let backup = data.path().join("backup.dump");
    let dump = db_command(data.path(), &install.bin_dir, "dump", &backup);
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert!(std::fs::metadata(&backup).unwrap().len() > 0);
    // Readable by its owner only, whatever the umask; a file that was there
    // (0644) is narrowed before anything is written into it.
    use std::os::unix::fs::PermissionsExt;
    let mode_of = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode_of(&backup), 0o600, "{:o}", mode_of(&backup));
    let existing = data.path().join("existing.dump");
    std::fs::write(&existing, b"old").unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(
        db_command(data.path(), &install.bin_dir, "dump", &existing)
            .status
            .success()
    );
    assert_eq!(mode_of(&existing), 0o600);
    // The generated keys are in the key file (0600), not in the database
    // (so not in the backup).
    assert_eq!(mode_of(&data.path().join("server.keys")), 0o600);
    // A data directory without a cluster (another WORKSPACE_DATA_DIR, or
    // another user's default) is an error naming it: never a new empty
    // cluster and a backup of it.
    let elsewhere = data.path().join("not-the-data-dir");
    for action in ["dump", "restore"] {
        let refused = db_command(&elsewhere, &install.bin_dir, action, &backup);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{action}: {stderr}");
        assert!(
            stderr.contains(&format!("no database under {}", elsewhere.display()))
                && stderr.contains("WORKSPACE_DATA_DIR"),
            "{action}: {stderr}"
        );
        assert!(
            !elsewhere.exists(),
            "{action} created {}",
            elsewhere.display()
        );
    }
    assert_eq!(
        mode_of(&backup),
        0o600,
        "the refused restore left the backup alone"
    );
    // `-`: the same backup on standard output (the archive, its header
    // first; no scratch file left behind).
    let to_stdout = db_command(data.path(), &install.bin_dir, "dump", "-".as_ref());
    assert!(to_stdout.status.success());
    assert_eq!(
        archive_names(&to_stdout.stdout)[..2],
        ["workspace-backup.json", "database.dump"]
    );
    assert!(
        String::from_utf8_lossy(&to_stdout.stderr).contains("It does not hold the key file"),
        "{}",
        String::from_utf8_lossy(&to_stdout.stderr)
    );
    assert!(!data.path().join("-").exists());
    assert_eq!(signup(&url, "after-backup").await, 201);
    // Refused while the server uses the database.
    let refused = db_command(data.path(), &install.bin_dir, "restore", &backup);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("stop it, then restore"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(
        data.path().join("pgdata/PG_VERSION").is_file(),
        "the cluster lives in the data dir"
    );
    // Password-protected (the password kept 0600 beside the cluster),
    // loopback only, and durable.
    let pw_file = data.path().join("pgdata.password");
    let mode = std::fs::metadata(&pw_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let password = std::fs::read_to_string(&pw_file).unwrap();
    let pg_port: u16 = std::fs::read_to_string(data.path().join("pgdata.port"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let no_password = format!("postgresql://postgres@127.0.0.1:{pg_port}/postgres");
    assert!(
        tokio_postgres::connect(&no_password, tokio_postgres::NoTls)
            .await
            .is_err(),
        "the cluster trusts connections without a password"
    );
    let with_password = format!("postgresql://postgres:{password}@127.0.0.1:{pg_port}/postgres");
    let (db, connection) = tokio_postgres::connect(&with_password, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let keys_db = format!(
        "postgresql://postgres:{password}@127.0.0.1:{pg_port}/{}",
        workspace_server::EMBEDDED_DATABASE
    );
    let (keys_db, keys_connection) = tokio_postgres::connect(&keys_db, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(keys_connection);
    let kept: i64 = keys_db
        .query_one("SELECT count(*) FROM server_secrets", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 0, "keys kept in the database");
    drop(keys_db);
    for setting in ["fsync", "synchronous_commit", "full_page_writes"] {
        let value: String = db
            .query_one(&format!("SHOW {setting}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(value, "on", "{setting}");
    }
    drop(db);

    sigterm(&child);
    let status = wait_exit(&mut child);
    let mut log = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(status.success(), "exit {status}: {log}");
    assert!(log.contains("SIGTERM received"), "{log}");
    // A banner for people, and one `listening` line.
    // The binary's version and the contract's, each named (they differ).
    assert!(
        log.contains(&format!(
            "Workspace is running (workspace-server {}, API {})",
            env!("CARGO_PKG_VERSION"),
            workspace_api::API_VERSION
        )),
        "{log}"
    );
    assert!(log.contains(&format!("API reference  {url}/docs")), "{log}");
    assert!(log.contains("Ctrl-C to stop."), "{log}");
    assert_eq!(
        log.lines()
            .filter(|l| l.contains(" INFO listening"))
            .count(),
        1,
        "{log}"
    );
    assert!(
        log.contains("stopped the embedded PostgreSQL cluster"),
        "{log}"
    );
    // The cluster is stopped: its pid file is gone.
    assert!(
        !data.path().join("pgdata/postmaster.pid").exists(),
        "postgres still running"
    );
    assert!(
        reqwest::get(format!("{url}/healthz")).await.is_err(),
        "still serving"
    );
    // Operators' logs: one line per request, with its route template;
    // nothing alarming on a normal start.
    assert!(!log.contains(" WARN "), "{log}");
    assert!(!log.contains("accepted connection"), "{log}");
    let outbox_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("uri: /api/system/outbox"))
        .collect();
    assert_eq!(outbox_lines.len(), 2, "{log}");
    assert!(
        outbox_lines
            .iter()
            .all(|l| l.contains(" INFO request completed")
                && l.contains("route: /api/system/outbox")
                && l.contains("method: GET")
                && l.contains("latency_us: ")
                && l.contains("req_id: ")),
        "{log}"
    );
    assert!(
        log.contains("route: -") && log.contains("uri: /no/such/route"),
        "{log}"
    );

    // Restored with the server stopped: the account made after the backup
    // is gone, the ones before it are back.
    let restored = db_command(data.path(), &install.bin_dir, "restore", &backup);
    assert!(
        restored.status.success(),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    assert!(
        !data.path().join("pgdata/postmaster.pid").exists(),
        "the restore leaves the cluster as it found it (stopped)"
    );
    let mut child = spawn_on(data.path(), &install.bin_dir, port);
    wait_ready(&url, &mut child).await;
    assert_eq!(
        signup(&url, "after-backup").await,
        201,
        "the restore undid it"
    );
    assert_eq!(signup(&url, "second").await, 409, "the backup kept it");
    assert_eq!(outbox_status(&url, "zero").await, 200);
    sigterm(&child);
    assert!(wait_exit(&mut child).success());
}

#[tokio::test]
async fn a_restore_onto_a_new_machine_needs_the_key_file() {
    let root = suite_data_root();
    let install = workspace_embedded_db::PgInstall::locate_or_provision(&root).unwrap();
    let data_dir = |prefix: &str| {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/var/tmp")
            .unwrap();
        if unsafe_is_root() {
            Command::new("chmod")
                .args(["755"])
                .arg(dir.path())
                .status()
                .unwrap();
        }
        dir
    };
    // The old machine: an account, its token, an upload, a backup.
    let old = data_dir("ws-old-machine-");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = spawn_on(old.path(), &install.bin_dir, port);
    wait_ready(&url, &mut child).await;
    assert_eq!(signup(&url, "ada").await, 201);
    let token = login(&url, "ada").await;
    let text = "Backed up with the database.\n".repeat(300);
    let upload = upload_file(&url, &token, "notes.md", text.as_bytes()).await;
    let file_url = upload["url"].as_str().unwrap().to_string();
    let file_id = upload["id"].as_str().unwrap().to_string();
    let backup = old.path().join("backup.dump");
    let dumped = db_command(old.path(), &install.bin_dir, "dump", &backup);
    let said = String::from_utf8_lossy(&dumped.stderr);
    assert!(dumped.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "the backup holds the database and 1 uploaded files ({} bytes)",
            text.len()
        )),
        "{said}"
    );
    let names = archive_names(&std::fs::read(&backup).unwrap());
    let stored = names
        .iter()
        .find(|n| n.starts_with("files/orgs/") && n.ends_with(&file_id))
        .unwrap_or_else(|| panic!("{names:?}"))
        .clone();
    assert_eq!(names.last().unwrap(), "manifest.json");
    assert!(
        !names.iter().any(|n| n.contains("server.keys")),
        "{names:?}"
    );
    // What an earlier version's `db dump` wrote: the database alone.
    let database_only = old.path().join("database-only.dump");
    extract_entry(&backup, "database.dump", &database_only);
    stop(&mut child);

    // The new machine: its first start makes a cluster (and keys of its
    // own); the backup is restored into it.
    let new = data_dir("ws-new-machine-");
    let mut child = spawn_on(new.path(), &install.bin_dir, port);
    wait_ready(&url, &mut child).await;
    stop(&mut child);
    let leftovers = || {
        std::fs::read_dir(new.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("restore"))
            .collect::<Vec<_>>()
    };

    // A crafted archive whose file would land outside the file store is
    // refused before anything is written or the database is touched.
    let crafted = new.path().join("crafted.dump");
    let escaped = "escaped-by-the-crafted-backup";
    std::fs::write(&crafted, crafted_archive(&format!("files/../../{escaped}"))).unwrap();
    let refused = db_command(new.path(), &install.bin_dir, "restore", &crafted);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(said.contains("refused") && said.contains("`..`"), "{said}");
    assert!(!new.path().join(escaped).exists());
    assert!(!new.path().parent().unwrap().join(escaped).exists());
    assert_eq!(leftovers(), Vec::<String>::new());

    // A database-only backup (an earlier version's) whose file is not in
    // the file store: refused, naming it, unless --without-files.
    let refused = db_command(new.path(), &install.bin_dir, "restore", &database_only);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("refused: 1 uploaded files the database refers to are not in")
            && said.contains(stored.trim_start_matches("files/"))
            && said.contains("--without-files")
            && said.contains("the database and the files are as they were"),
        "{said}"
    );
    assert_eq!(leftovers(), Vec::<String>::new());
    let without = Command::new(env!("CARGO_BIN_EXE_workspace-server"))
        .args(["db", "restore", "--without-files"])
        .arg(&database_only)
        .env_remove("DATABASE_URL")
        .env_remove("WORKSPACE_CONFIG")
        .env("WORKSPACE_DATA_DIR", new.path())
        .env("WORKSPACE_PG_BIN", &install.bin_dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&without.stderr);
    assert!(without.status.success(), "{said}");
    assert!(
        said.contains("WARNING: restored WITHOUT 1 uploaded files"),
        "{said}"
    );

    // The archive: the database and the file come back.
    let restored = db_command(new.path(), &install.bin_dir, "restore", &backup);
    let said = String::from_utf8_lossy(&restored.stderr);
    assert!(restored.status.success(), "{said}");
    assert!(
        said.contains("restored the database and 1 uploaded files"),
        "{said}"
    );
    assert_eq!(leftovers(), Vec::<String>::new());
    use std::os::unix::fs::PermissionsExt;
    let restored_file = new.path().join(&stored);
    assert_eq!(
        std::fs::metadata(&restored_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // Without the old machine's key file the server refuses to start (it
    // would log everyone out and fail to open sealed secrets), and says why.
    let mut child = spawn_on(new.path(), &install.bin_dir, port);
    let status = wait_exit(&mut child);
    let log = stderr_of(&mut child);
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("does not hold the keys this database was made with"),
        "{log}"
    );

    // With it, everything is as it was: the old token still works.
    std::fs::copy(
        old.path().join("server.keys"),
        new.path().join("server.keys"),
    )
    .unwrap();
    let mut child = spawn_on(new.path(), &install.bin_dir, port);
    wait_ready(&url, &mut child).await;
    let me = reqwest::Client::new()
        .get(format!("{url}/api/users/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status().as_u16(), 200);
    assert_eq!(signup(&url, "ada").await, 409, "the restored account");
    // The restored upload downloads, byte for byte.
    let download = reqwest::get(&file_url).await.unwrap();
    assert_eq!(download.status().as_u16(), 200);
    assert_eq!(download.bytes().await.unwrap(), text.as_bytes());
    stop(&mut child);
}

/// Uploads `bytes` as `name` into the caller's first organization; the
/// `upload_file` answer.
async fn upload_file(url: &str, token: &str, name: &str, bytes: &[u8]) -> serde_json::Value {
    let http = reqwest::Client::new();
    let me: serde_json::Value = http
        .get(format!("{url}/api/users/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let org = me["organizations"][0]["id"].as_str().unwrap();
    let boundary = "backup-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
         filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = http
        .post(format!("{url}/api/chat/upload_file?org_id={org}"))
        .bearer_auth(token)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    response.json().await.unwrap()
}

/// The entry names of a backup archive, in order.
fn archive_names(bytes: &[u8]) -> Vec<String> {
    tar::Archive::new(bytes)
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Writes the entry `name` of the archive `backup` to `to`.
fn extract_entry(backup: &std::path::Path, name: &str, to: &std::path::Path) {
    let mut archive = tar::Archive::new(std::fs::File::open(backup).unwrap());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some(name) {
            let mut out = std::fs::File::create(to).unwrap();
            std::io::copy(&mut entry, &mut out).unwrap();
            return;
        }
    }
    panic!("no {name} in {}", backup.display());
}

/// A backup archive with a valid header, then one regular file entry named
/// `name` (written by hand: the tar crate's builder refuses `..`).
fn crafted_archive(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut entry = |name: &str, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    };
    let header = serde_json::json!({
        "format": "workspace-backup", "version": 1, "created_at": "2026-12-01T00:00:00Z",
        "server_version": "0", "storage": "local"
    });
    entry("workspace-backup.json", header.to_string().as_bytes());
    entry(name, b"owned");
    out.resize(out.len() + 1024, 0);
    out
}

/// SIGTERM, and a clean exit.
fn stop(child: &mut Child) {
    sigterm(child);
    let status = wait_exit(child);
    assert!(status.success(), "exit {status}: {}", stderr_of(child));
}

/// An access token of `{name}@example.com`.
async fn login(url: &str, name: &str) -> String {
    let login: serde_json::Value = reqwest::Client::new()
        .post(format!("{url}/api/auth/login"))
        .json(&serde_json::json!({
            "email": format!("{name}@example.com"), "password": "correct horse battery"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    login["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("{login}"))
        .to_string()
}

/// `workspace-server db ACTION FILE` (`dump`, `restore`) on the embedded
/// cluster of the data directory `data`.
fn db_command(
    data: &std::path::Path,
    bin_dir: &std::path::Path,
    action: &str,
    file: &std::path::Path,
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_workspace-server"))
        .args(["db", action])
        .arg(file)
        .env_remove("DATABASE_URL")
        .env_remove("WORKSPACE_CONFIG")
        .env("WORKSPACE_DATA_DIR", data)
        .env("WORKSPACE_PG_BIN", bin_dir)
        .output()
        .unwrap()
}

/// The status of `GET /api/system/outbox` as `{name}@example.com`.
async fn outbox_status(url: &str, name: &str) -> u16 {
    let http = reqwest::Client::new();
    let login: serde_json::Value = http
        .post(format!("{url}/api/auth/login"))
        .json(&serde_json::json!({
            "email": format!("{name}@example.com"), "password": "correct horse battery"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("{login}"));
    http.get(format!("{url}/api/system/outbox"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn unsafe_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

fn spawn_on(data: &std::path::Path, bin_dir: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_workspace-server"))
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env_remove("DATABASE_URL")
        .env_remove("WORKSPACE_CONFIG")
        .env_remove("WORKSPACE_JWT_SECRET")
        .env("WORKSPACE_DATA_DIR", data)
        .env("WORKSPACE_PG_BIN", bin_dir)
        .env(
            "WORKSPACE_MODEL_DIR",
            suite_data_root().join("models").join("all-minilm-l6-v2"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stderr_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    log
}

async fn signup(url: &str, name: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{url}/api/auth/signup"))
        .json(&serde_json::json!({
            "email": format!("{name}@example.com"), "first_name": "Two", "last_name": "Servers",
            "password": "correct horse battery"
        }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn servers_sharing_a_data_directory_survive_each_others_exit() {
    let root = suite_data_root();
    let install = workspace_embedded_db::PgInstall::locate_or_provision(&root).unwrap();
    let data = tempfile::Builder::new()
        .prefix("ws-two-servers-")
        .tempdir_in("/var/tmp")
        .unwrap();
    if unsafe_is_root() {
        Command::new("chmod")
            .args(["755"])
            .arg(data.path())
            .status()
            .unwrap();
    }
    // Two different ports: bound together, then released (two calls of
    // `free_port` may hand out the same one, and then `b` would silently
    // fail to listen while `a` answered for it).
    let (pa, pb) = {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        )
    };
    let (ua, ub) = (
        format!("http://127.0.0.1:{pa}"),
        format!("http://127.0.0.1:{pb}"),
    );
    let mut a = spawn_on(data.path(), &install.bin_dir, pa);
    wait_ready(&ua, &mut a).await;
    let mut b = spawn_on(data.path(), &install.bin_dir, pb);
    wait_ready(&ub, &mut b).await;
    assert!(b.try_wait().unwrap().is_none(), "b is not running");

    // A third server on a taken port says so plainly and touches nothing.
    let mut c = spawn_on(data.path(), &install.bin_dir, pb);
    let status = wait_exit(&mut c);
    let log = stderr_of(&mut c);
    assert!(!status.success());
    assert!(log.contains("cannot listen on"), "{log}");
    assert!(
        !log.contains("panicked") && !log.contains("backtrace"),
        "{log}"
    );
    assert_eq!(signup(&ub, "after-c").await, 201, "the port check broke b");

    // `db-url` gives a working URL for backups.
    let out = Command::new(env!("CARGO_BIN_EXE_workspace-server"))
        .arg("db-url")
        .env("WORKSPACE_DATA_DIR", data.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db_url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let (db, connection) = tokio_postgres::connect(&db_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let users: i64 = db
        .query_one("SELECT count(*) FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert!(users >= 1);
    drop(db);

    // The first server (which started the cluster) exits: b keeps serving.
    sigterm(&a);
    assert!(wait_exit(&mut a).success());
    let log = stderr_of(&mut a);
    assert!(log.contains("another server uses it"), "{log}");
    assert_eq!(signup(&ub, "after-a").await, 201, "b lost its database");

    // The last one out stops the cluster.
    sigterm(&b);
    assert!(wait_exit(&mut b).success());
    let log = stderr_of(&mut b);
    assert!(
        log.contains("stopped the embedded PostgreSQL cluster"),
        "{log}"
    );
    assert!(!data.path().join("pgdata/postmaster.pid").exists());
}
