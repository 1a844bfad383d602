//! Tools area: categories, tools, validation, visibility across
//! organizations, and the sandboxed test run (escape attempts included).

use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;
use workspace_tests::{TestContext, raw, req, resources};

pub fn tool_body(name: &str, category: Uuid, code: &str) -> Value {
    json!({
        "name": name, "description": "a test tool", "category_id": category,
        "version": "1.0.0",
        "configuration": [{"name": "offset", "type": "int", "description": "", "required": false, "default": "0"}],
        "inputs": [{"name": "a", "type": "int", "description": "a number", "required": true, "default": null}],
        "outputs": {"type": "int", "description": "the result"},
        "settings": {
            "function_info": {"name": "run", "is_async": false, "description": "", "code": code},
            "requirements": [],
            "deployment": {"framework": "python", "toolkit_class": false, "standalone_function": true}
        }
    })
}

pub const ADDER: &str = "def run(a, offset=0):\n    return a + 1 + offset\n";

/// Creates a category and returns its id (the typed fixture).
pub async fn category(cx: &TestContext, token: &str, org: Uuid, name: &str) -> Uuid {
    let client = resources::client_for(&cx.base_url, token);
    resources::category(&client, org, name).await
}

/// Creates a tool and returns its id (the typed fixture).
pub async fn tool(cx: &TestContext, token: &str, org: Uuid, body: Value) -> Uuid {
    let client = resources::client_for(&cx.base_url, token);
    resources::tool(&client, org, body).await
}

fn q(org: Uuid, tool: Uuid) -> Vec<(&'static str, String)> {
    vec![("org_id", org.to_string()), ("tool_id", tool.to_string())]
}

#[tokio::test]
async fn tools_crud_validation_and_visibility() {
    let cx = TestContext::new("tools_crud").await;
    let ada = cx.user("tools-ada").await;
    let bob = cx.user("tools-bob").await;
    let org = ada.personal_org().await;
    let bob_org = bob.personal_org().await;
    let t = ada.token.as_str();

    let cat = category(&cx, t, org, "Math").await;
    // Duplicate category name (case-insensitive).
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/tools/create_category",
        &[("org_id", org.to_string())],
        Some(json!({"name": "math", "description": ""})),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (409, Some("category_name_taken"))
    );

    let id = tool(&cx, t, org, tool_body("adder", cat, ADDER)).await;

    // Validation: each a 400 with a stable code, nothing stored.
    let bob_cat = category(&cx, &bob.token, bob_org, "Other").await;
    let cases: Vec<(Value, &str)> = vec![
        (tool_body("x1", bob_cat, ADDER), "unknown_category"),
        (tool_body("x2", Uuid::new_v4(), ADDER), "unknown_category"),
        (tool_body("x3", cat, "   "), "empty_code"),
        (tool_body("", cat, ADDER), "invalid_name"),
        (
            {
                let mut b = tool_body("x4", cat, ADDER);
                b["inputs"] = json!([{"name":"a","type":"int"},{"name":"a","type":"str"}]);
                b
            },
            "duplicate_parameter",
        ),
        (
            {
                let mut b = tool_body("x5", cat, ADDER);
                b["inputs"] = json!([{"name":"a","type":"int","default":"seven"}]);
                b
            },
            "invalid_default",
        ),
        (
            {
                let mut b = tool_body("x6", cat, ADDER);
                b["inputs"] = json!([{"name":"a","type":"bool","default":"yes"}]);
                b
            },
            "invalid_default",
        ),
        (
            {
                let mut b = tool_body("x7", cat, ADDER);
                b["inputs"] = json!([{"name":"1a","type":"int"}]);
                b
            },
            "invalid_parameter",
        ),
        (
            {
                let mut b = tool_body("x8", cat, ADDER);
                b["version"] = json!("");
                b
            },
            "invalid_version",
        ),
        (
            {
                let mut b = tool_body("x9", cat, ADDER);
                b["settings"]["function_info"]["name"] = json!("not ok");
                b
            },
            "invalid_function",
        ),
        (
            {
                let mut b = tool_body("x10", cat, ADDER);
                b["inputs"][0]["type"] = json!("complex");
                b
            },
            "invalid_request",
        ),
    ];
    for (body, code) in cases {
        let (s, b) = req(
            &cx.base_url,
            t,
            Method::POST,
            "/api/tools",
            &[("org_id", org.to_string())],
            Some(body),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str()), (400, Some(code)), "{b}");
    }
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/tools",
        &[("org_id", org.to_string())],
        Some(tool_body("ADDER", cat, ADDER)),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (409, Some("tool_name_taken"))
    );

    // List view: category {id, name}, no settings; only one tool stored.
    let (s, list) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/tools/list_all",
        &[("org_id", org.to_string())],
        None,
    )
    .await;
    assert_eq!(s, 200);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["category"], json!({"id": cat, "name": "Math"}));
    assert!(list[0].get("settings").is_none());
    assert_eq!(list[0]["inputs"][0]["type"], "int");

    // Get: full tool with settings.
    let (s, got) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/tools/get",
        &q(org, id),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(got["settings"]["function_info"]["code"], ADDER);

    // Update accepts every field; validation applies to the merge.
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/tools",
        &q(org, id),
        Some(json!({"name": "adder2", "version": "2.0", "is_active": true})),
    )
    .await;
    assert_eq!(
        (s, b["name"].as_str(), b["version"].as_str()),
        (200, Some("adder2"), Some("2.0"))
    );
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/tools",
        &q(org, id),
        Some(json!({"settings": {"function_info": {"name": "run", "code": ""}}})),
    )
    .await;
    assert_eq!((s, b["error_code"].as_str()), (400, Some("empty_code")));

    // Private: invisible to Bob's organization, by get, list, test, update.
    let bq = q(bob_org, id);
    for (m, path) in [
        (Method::GET, "/api/tools/get"),
        (Method::POST, "/api/tools/test"),
        (Method::PUT, "/api/tools"),
        (Method::DELETE, "/api/tools/delete"),
    ] {
        let body = match m {
            Method::POST => Some(json!({"inputs": {"a": 1}})),
            Method::PUT => Some(json!({"name": "stolen"})),
            _ => None,
        };
        let (s, b) = req(&cx.base_url, &bob.token, m, path, &bq, body).await;
        assert_eq!(
            (s, b["error_code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    // Bob (not a member of Ada's org) addressing it through Ada's org: 403.
    let (s, _) = req(
        &cx.base_url,
        &bob.token,
        Method::GET,
        "/api/tools/get",
        &q(org, id),
        None,
    )
    .await;
    assert_eq!(s, 403);
    let (_, list) = req(
        &cx.base_url,
        &bob.token,
        Method::GET,
        "/api/tools/list_all",
        &[],
        None,
    )
    .await;
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|x| x["id"] != json!(id))
    );

    // Public: visible (read, test) to Bob, but not writable.
    let (s, _) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/tools",
        &q(org, id),
        Some(json!({"is_public": true})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, got) = req(
        &cx.base_url,
        &bob.token,
        Method::GET,
        "/api/tools/get",
        &bq,
        None,
    )
    .await;
    assert_eq!((s, got["name"].as_str()), (200, Some("adder2")));
    let (_, list) = req(
        &cx.base_url,
        &bob.token,
        Method::GET,
        "/api/tools/list_all",
        &[],
        None,
    )
    .await;
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == json!(id))
    );
    let (s, _) = req(
        &cx.base_url,
        &bob.token,
        Method::PUT,
        "/api/tools",
        &bq,
        Some(json!({"name": "stolen"})),
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = req(
        &cx.base_url,
        &bob.token,
        Method::DELETE,
        "/api/tools/delete",
        &bq,
        None,
    )
    .await;
    assert_eq!(s, 404);

    // Categories: listing without org_id covers the caller's organizations.
    let (_, cats) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/tools/list_categories",
        &[],
        None,
    )
    .await;
    assert_eq!(cats.as_array().unwrap().len(), 1);
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::GET,
        "/api/tools/list_categories",
        &[("limit", "0".into())],
        None,
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (400, Some("invalid_pagination"))
    );
    let cq = vec![
        ("org_id", org.to_string()),
        ("category_id", cat.to_string()),
    ];
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::PUT,
        "/api/tools/update_category",
        &cq,
        Some(json!({"name": "Maths"})),
    )
    .await;
    assert_eq!((s, b["name"].as_str()), (200, Some("Maths")));
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::DELETE,
        "/api/tools/delete_category",
        &cq,
        None,
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (409, Some("category_in_use"))
    );
    let bcq = vec![
        ("org_id", bob_org.to_string()),
        ("category_id", cat.to_string()),
    ];
    let (s, _) = req(
        &cx.base_url,
        &bob.token,
        Method::DELETE,
        "/api/tools/delete_category",
        &bcq,
        None,
    )
    .await;
    assert_eq!(s, 404);

    // Delete the tool, then the category.
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::DELETE,
        "/api/tools/delete",
        &q(org, id),
        None,
    )
    .await;
    assert_eq!((s, b["success"].as_bool()), (200, Some(true)));
    let (s, _) = req(
        &cx.base_url,
        t,
        Method::DELETE,
        "/api/tools/delete_category",
        &cq,
        None,
    )
    .await;
    assert_eq!(s, 200);
    let (s, _) = raw(
        &cx.base_url,
        Some(t),
        Method::GET,
        "/api/tools/get",
        &q(org, id),
        None,
    )
    .await;
    assert_eq!(s, 404);
    cx.teardown().await;
}

async fn run(
    cx: &TestContext,
    token: &str,
    org: Uuid,
    cat: Uuid,
    name: &str,
    code: &str,
    inputs: Value,
) -> Value {
    let mut body = tool_body(name, cat, code);
    body["inputs"] = json!([]);
    body["configuration"] = json!([]);
    if inputs != json!({}) {
        body["inputs"] = json!([{"name": "a", "type": "int", "required": true}]);
    }
    let id = tool(cx, token, org, body).await;
    let (s, b) = req(
        &cx.base_url,
        token,
        Method::POST,
        "/api/tools/test",
        &q(org, id),
        Some(json!({"inputs": inputs})),
    )
    .await;
    assert_eq!(s, 200, "{name}: {b}");
    b
}

#[tokio::test]
async fn tool_test_runs_in_the_sandbox() {
    let cx = TestContext::new("tools_sandbox").await;
    let ada = cx.user("sandbox-ada").await;
    let org = ada.personal_org().await;
    let t = ada.token.as_str();
    let cat = category(&cx, t, org, "Sandbox").await;

    // The happy path, with a configuration default and an override.
    let id = tool(&cx, t, org, tool_body("adder", cat, ADDER)).await;
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/tools/test",
        &q(org, id),
        Some(json!({"inputs": {"a": 41}})),
    )
    .await;
    assert_eq!(
        (s, &b["success"], &b["output"]),
        (200, &json!(true), &json!(42)),
        "{b}"
    );
    let (_, b) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/tools/test",
        &q(org, id),
        Some(json!({"inputs": {"a": 1}, "configuration": {"offset": 10}})),
    )
    .await;
    assert_eq!(b["output"], json!(12));
    // Bad inputs are refused before running.
    for inputs in [json!({}), json!({"a": "x"}), json!({"a": 1, "zzz": 2})] {
        let (s, b) = req(
            &cx.base_url,
            t,
            Method::POST,
            "/api/tools/test",
            &q(org, id),
            Some(json!({"inputs": inputs})),
        )
        .await;
        assert_eq!((s, b["error_code"].as_str()), (400, Some("invalid_input")));
    }

    // Escapes and abuse: each fails cleanly.
    // The test server itself listens on 127.0.0.1: unreachable from the
    // sandbox's own network namespace; so is any outside address.
    let port = cx.base_url.rsplit(':').next().unwrap().to_string();
    for (name, host) in [("socket_local", "127.0.0.1"), ("socket_outside", "1.1.1.1")] {
        let code = format!(
            "def run():\n    import socket\n    socket.create_connection(('{host}', {port}), timeout=2)\n    return 'connected'\n"
        );
        let b = run(&cx, t, org, cat, name, &code, json!({})).await;
        assert_eq!(b["success"], false, "{b}");
        let e = b["error"].as_str().unwrap();
        assert!(e.contains("refused") || e.contains("unreachable"), "{b}");
    }

    // Not even there: the sandbox's /etc holds only what Python needs.
    let shadow = "def run():\n    return open('/etc/shadow').read()\n";
    let b = run(&cx, t, org, cat, "shadow", shadow, json!({})).await;
    assert!(
        b["error"].as_str().unwrap().contains("FileNotFoundError"),
        "{b}"
    );

    let write = "def run():\n    open('/usr/evil', 'w').write('x')\n    return 1\n";
    let b = run(&cx, t, org, cat, "write", write, json!({})).await;
    assert_eq!(b["success"], false, "{b}");

    let fork = "def run():\n    import os\n    n = 0\n    try:\n        while True:\n            if os.fork() == 0:\n                import time\n                time.sleep(30)\n                os._exit(0)\n            n += 1\n    except OSError:\n        return n\n";
    let b = run(&cx, t, org, cat, "forkbomb", fork, json!({})).await;
    // The process limit stops the bomb (the count is what fork allowed).
    assert!(
        b["success"] == true && b["output"].as_i64().unwrap() < 64 || b["success"] == false,
        "{b}"
    );

    let spin = "def run():\n    while True:\n        pass\n";
    let b = run(&cx, t, org, cat, "spin", spin, json!({})).await;
    let e = b["error"].as_str().unwrap();
    assert!(
        e.starts_with("tool_cpu_limit") || e.starts_with("tool_timeout"),
        "{b}"
    );

    let sleeper = "def run():\n    import time\n    time.sleep(60)\n";
    let b = run(&cx, t, org, cat, "sleeper", sleeper, json!({})).await;
    assert!(
        b["error"].as_str().unwrap().starts_with("tool_timeout"),
        "{b}"
    );

    let flood = "def run():\n    import sys\n    for _ in range(100):\n        sys.stderr.write('x' * 1048576)\n    return 1\n";
    let b = run(&cx, t, org, cat, "flood", flood, json!({})).await;
    assert!(
        b["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_output_too_large"),
        "{b}"
    );

    let big = "def run():\n    return 'x' * 100_000_000\n";
    let b = run(&cx, t, org, cat, "big", big, json!({})).await;
    let e = b["error"].as_str().unwrap();
    assert!(
        e.starts_with("tool_output_too_large") || e.starts_with("tool_memory_limit"),
        "{b}"
    );

    let hog = "def run():\n    x = bytearray(2 * 1024 * 1024 * 1024)\n    return len(x)\n";
    let b = run(&cx, t, org, cat, "hog", hog, json!({})).await;
    assert!(
        b["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_memory_limit"),
        "{b}"
    );

    // A missing requirement is a clear 400; nothing is installed.
    let mut body = tool_body("needs", cat, "def run(a):\n    return a\n");
    body["settings"]["requirements"] = json!(["definitely-not-installed-pkg>=1.0"]);
    body["configuration"] = json!([]);
    let id = tool(&cx, t, org, body).await;
    let (s, b) = req(
        &cx.base_url,
        t,
        Method::POST,
        "/api/tools/test",
        &q(org, id),
        Some(json!({"inputs": {"a": 1}})),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (400, Some("tool_requirement_missing")),
        "{b}"
    );

    // The server is still healthy.
    let (s, _) = raw(&cx.base_url, None, Method::GET, "/readyz", &[], None).await;
    assert_eq!(s, 200);

    // Start-up time of the sandbox: p50 of 15 runs of the trivial tool.
    let id = tool(&cx, t, org, {
        let mut b = tool_body("noop", cat, "def run():\n    return None\n");
        b["inputs"] = json!([]);
        b["configuration"] = json!([]);
        b
    })
    .await;
    let mut ms = Vec::new();
    for _ in 0..15 {
        let (_, b) = req(
            &cx.base_url,
            t,
            Method::POST,
            "/api/tools/test",
            &q(org, id),
            Some(json!({})),
        )
        .await;
        ms.push(b["duration_ms"].as_u64().unwrap());
    }
    ms.sort();
    eprintln!(
        "sandbox start-up p50: {} ms (min {}, max {})",
        ms[7], ms[0], ms[14]
    );
    cx.teardown().await;
}

#[tokio::test]
async fn no_bubblewrap_no_run() {
    let cx = TestContext::with_config("tools_no_bwrap", |c| {
        c.sandbox.bwrap = "/nonexistent/bwrap".into();
    })
    .await;
    let ada = cx.user("nobwrap-ada").await;
    let org = ada.personal_org().await;
    let cat = category(&cx, &ada.token, org, "C").await;
    let id = tool(&cx, &ada.token, org, tool_body("adder", cat, ADDER)).await;
    let (s, b) = req(
        &cx.base_url,
        &ada.token,
        Method::POST,
        "/api/tools/test",
        &q(org, id),
        Some(json!({"inputs": {"a": 1}})),
    )
    .await;
    assert_eq!(
        (s, b["error_code"].as_str()),
        (503, Some("tool_sandbox_unavailable"))
    );
    cx.teardown().await;
}

/// Walks the sandbox's whole file system from `/` and reports what a tool
/// can read: every readable file and folder outside `/usr` (the runtime,
/// listed only at its top), the numeric `/proc` entries (processes it can
/// see) and whether the given host paths exist inside.
const WALKER: &str = r#"def run():
    import os
    readable = []
    for root, dirs, files in os.walk("/", followlinks=False):
        if root == "/usr" or root.startswith("/usr/") or root.startswith("/proc"):
            dirs[:] = []
            continue
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.access(path, os.R_OK):
                readable.append(path)
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    probes = {p: os.path.exists(p) for p in ["/var", "/home", "/root", "/work", "/srv", "/opt",
              "/var/lib/workspace", "/etc/passwd", "/etc/shadow", "/etc/hostname"]}
    return {"readable": readable, "pids": pids, "probes": probes, "uid": os.getuid()}
"#;

/// Writes a marker into its own `/tmp` and waits, so that a concurrent run
/// can look for it.
const MARKER: &str = r#"def run():
    import time
    open("/tmp/other-run-marker", "w").write("secret of another run")
    time.sleep(3)
    return 1
"#;

#[tokio::test]
async fn the_sandbox_sees_only_its_allow_list() {
    let cx = TestContext::new("tools_sandbox_fs").await;
    // Organization A uploads a file into the data directory.
    let ada = cx.user("fs-ada").await;
    let org_a = ada.personal_org().await;
    let secret = "organization A's confidential numbers";
    let upload = ada
        .client
        .chat_upload_file(org_a, None, "a.md", secret.as_bytes().to_vec())
        .await
        .unwrap()
        .into_inner();
    assert!(!upload.url.is_empty());

    // Organization B's member writes tools and runs them.
    let bob = cx.user("fs-bob").await;
    let org_b = bob.personal_org().await;
    let t = bob.token.as_str();
    let cat = category(&cx, t, org_b, "Walk").await;
    let (walk, _) = tokio::join!(
        async {
            // Let the marker run start first.
            tokio::time::sleep(std::time::Duration::from_millis(700)).await;
            run(&cx, t, org_b, cat, "walker", WALKER, json!({})).await
        },
        run(&cx, t, org_b, cat, "marker", MARKER, json!({})),
    );
    assert_eq!(walk["success"], true, "{walk}");
    let out = &walk["output"];
    let allowed = |p: &str| {
        [
            "/dev/",
            "/tmp/",
            "/etc/ld.so.cache",
            "/etc/localtime",
            "/etc/alternatives",
            "/etc/python3",
        ]
        .iter()
        .any(|a| p.starts_with(a))
            || [
                "/dev", "/tmp", "/etc", "/proc", "/usr", "/bin", "/lib", "/lib64", "/lib32",
                "/libx32", "/sbin",
            ]
            .contains(&p)
    };
    let readable: Vec<&str> = out["readable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let outside: Vec<&&str> = readable.iter().filter(|p| !allowed(p)).collect();
    assert!(
        outside.is_empty(),
        "readable outside the allow-list: {outside:?}"
    );
    assert!(
        !readable.iter().any(|p| p.contains("other-run-marker")),
        "another run's /tmp is visible: {readable:?}"
    );
    for (path, exists) in out["probes"].as_object().unwrap() {
        assert_eq!(exists, &json!(false), "{path} is visible in the sandbox");
    }
    // Its own processes only (the runner; bubblewrap's init at most).
    assert!(out["pids"].as_array().unwrap().len() <= 3, "{out}");
    // The uploaded file's folder is closed to other users on the host too.
    let root = workspace_tests::data_root().join("files");
    if root.is_dir() {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", root.display());
    }
    cx.teardown().await;
}
