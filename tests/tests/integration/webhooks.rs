//! Webhooks (issue #36): endpoints subscribed to events, deliveries signed
//! as the Standard Webhooks specification says and verified by a receiver
//! built on the official Python library (`tests/peers/webhook_receiver.py`,
//! `standardwebhooks` from PyPI, unmodified), sent by the workers of any
//! instance on one database: retries with backoff, slow and huge answers
//! bounded, the SSRF guard at creation and at connection, secret rotation,
//! endpoints disabled after repeated failures (admins told), replay, and
//! deliveries that survive a SIGKILL of the sending instance without being
//! sent twice to a receiver that answered 2xx.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::BufRead;
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::{Client, types};
use workspace_server::config::Config;
use workspace_tests::{ChildGuard, TestContext, TestUser, error_of, resources};

/// The receiver: a Python process on 127.0.0.1 verifying every delivery.
struct Receiver {
    _child: ChildGuard,
    port: u16,
    _dir: tempfile::TempDir,
    secrets: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Receiver {
    fn start() -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("secrets");
        let log = dir.path().join("log.jsonl");
        std::fs::write(&secrets, "").unwrap();
        std::fs::write(&log, "").unwrap();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("peers")
            .join("webhook_receiver.py");
        let mut child = std::process::Command::new(workspace_tests::python())
            .arg(&script)
            .arg(&secrets)
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("python with standardwebhooks (cargo xtask test installs it)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| {
            panic!("the receiver did not start (is standardwebhooks installed?): {line:?}")
        });
        Receiver {
            _child: ChildGuard(child),
            port,
            _dir: dir,
            secrets,
            log,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn set_secrets(&self, secrets: &[&str]) {
        std::fs::write(&self.secrets, secrets.join("\n")).unwrap();
    }

    fn entries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Waits until `done` holds for the log (at most `secs`).
    async fn wait(&self, secs: u64, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let entries = self.entries();
            if done(&entries) {
                return entries;
            }
            assert!(
                started.elapsed() < Duration::from_secs(secs),
                "waited {secs} s for {what}: {entries:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn received(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["stage"] == "received")
        .collect()
}

fn of_type<'a>(entries: &'a [Value], t: &str) -> Vec<&'a Value> {
    received(entries)
        .into_iter()
        .filter(|e| e["payload"]["type"] == t)
        .collect()
}

/// Short schedules and timeouts, loopback and http allowed, `workers`
/// delivery workers.
fn quick(workers: usize) -> impl Fn(&mut Config) {
    move |c: &mut Config| {
        c.fetch.allow_private_networks = true;
        c.webhooks.allow_http = true;
        c.webhooks.workers = workers;
        c.webhooks.poll_interval_ms = 100;
        c.webhooks.timeout_secs = 2;
        c.webhooks.connect_timeout_secs = 1;
        c.webhooks.lease_secs = 4;
        c.webhooks.retry_schedule_secs = vec![1, 1];
        c.providers.offline_chunk_delay_ms = 0;
    }
}

async fn create(
    client: &Client,
    org: Uuid,
    url: &str,
    events: &[&str],
) -> types::WebhookEndpointCreated {
    client
        .org_webhooks_create()
        .org_id(org)
        .body(
            types::WebhookEndpointCreate::builder()
                .url(url.to_string())
                .event_types(events.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
        )
        .send()
        .await
        .expect("org_webhooks_create")
        .into_inner()
}

async fn send_test(client: &Client, org: Uuid, endpoint: Uuid) -> types::WebhookDelivery {
    client
        .org_webhooks_test()
        .org_id(org)
        .endpoint_id(endpoint)
        .send()
        .await
        .expect("org_webhooks_test")
        .into_inner()
}

async fn deliveries(client: &Client, org: Uuid, endpoint: Uuid) -> Vec<types::WebhookDelivery> {
    client
        .org_webhooks_deliveries()
        .org_id(org)
        .endpoint_id(endpoint)
        .limit(200)
        .send()
        .await
        .expect("org_webhooks_deliveries")
        .into_inner()
        .items
}

/// Waits until the delivery `id` is in `status`.
async fn delivery_in(
    client: &Client,
    org: Uuid,
    endpoint: Uuid,
    id: Uuid,
    status: types::WebhookDeliveryStatus,
    secs: u64,
) -> types::WebhookDelivery {
    let started = Instant::now();
    loop {
        let all = deliveries(client, org, endpoint).await;
        if let Some(d) = all.iter().find(|d| d.id == id && d.status == status) {
            return d.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(secs),
            "delivery {id} not {status:?} after {secs} s: {all:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn team(owner: &TestUser, name: &str) -> Uuid {
    owner
        .client
        .org_create_org()
        .name(name.to_string())
        .send()
        .await
        .expect("create_org")
        .id
}

/// Member events, answers and a test event reach a subscribed endpoint,
/// sent by the other instance's workers and verified by the official
/// library with the secret shown at creation; the payloads say what
/// happened. An endpoint subscribed to other types gets none of them;
/// members below the admin level cannot see or manage webhooks.
#[tokio::test]
async fn deliveries_verify_with_the_official_library_across_two_instances() {
    let receiver = Receiver::start();
    // This instance only serves the API; the second one sends.
    let cx = TestContext::with_config("webhooks_verify", quick(0)).await;
    let sender = cx.second_instance(quick(1)).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = team(&ada, "Hooks").await;
    let made = create(
        &ada.client,
        org,
        &receiver.url("/ok"),
        &["member.*", "answer.completed", "webhook.test"],
    )
    .await;
    assert!(made.secret.starts_with("whsec_"), "{}", made.secret);
    assert_eq!(made.endpoint.event_types.len(), 3);
    let other = create(&ada.client, org, &receiver.url("/ok"), &["document.*"]).await;
    receiver.set_secrets(&[&made.secret]);

    // member.joined, then (bob is a member) no access for him.
    let member_role = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member_role).await;
    let (status, code) = error_of(bob.client.org_webhooks_list().org_id(org).send().await);
    assert_eq!((status, code.as_str()), (403, "forbidden"));
    let (status, _) = error_of(
        bob.client
            .org_webhooks_test()
            .org_id(org)
            .endpoint_id(made.endpoint.id)
            .send()
            .await,
    );
    assert_eq!(status, 403);

    // answer.completed from ada's chat in the team.
    let answered =
        resources::chat_message(&ada.client, org, json!({"content": "hello hooks"})).await;
    assert!(!answered.text().is_empty());
    // member.suspended, member.removed, webhook.test.
    ada.client
        .users_suspend()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users_suspend");
    ada.client
        .users_remove()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users_remove");
    send_test(&ada.client, org, made.endpoint.id).await;

    let entries = receiver
        .wait(30, "five verified deliveries", |e| received(e).len() >= 5)
        .await;
    for e in received(&entries) {
        assert_eq!(e["verified"], json!([0]), "{e}");
        assert!(e["webhook_id"].as_str().unwrap().starts_with("msg_"), "{e}");
        assert_eq!(e["payload"]["organization_id"], json!(org), "{e}");
    }
    let joined = of_type(&entries, "member.joined");
    assert_eq!(joined.len(), 1, "{entries:#?}");
    assert_eq!(joined[0]["payload"]["data"]["user_id"], json!(bob.id));
    assert_eq!(joined[0]["payload"]["data"]["via"], "added");
    let suspended = of_type(&entries, "member.suspended");
    assert_eq!(suspended[0]["payload"]["data"]["user_id"], json!(bob.id));
    assert_eq!(suspended[0]["payload"]["data"]["by_user_id"], json!(ada.id));
    let removed = of_type(&entries, "member.removed");
    assert_eq!(removed[0]["payload"]["data"]["left"], json!(false));
    let answer = of_type(&entries, "answer.completed");
    assert_eq!(answer.len(), 1, "{entries:#?}");
    assert_eq!(answer[0]["payload"]["data"]["area"], "chat");
    assert_eq!(answer[0]["payload"]["data"]["user_id"], json!(ada.id));
    assert!(answer[0]["payload"]["data"]["usage"]["output_tokens"].is_number());
    assert_eq!(of_type(&entries, "webhook.test").len(), 1);

    // The log, read through either instance, says they were delivered.
    let via_sender =
        Client::authenticated(&format!("http://{}", sender.local_addr()), &ada.token).unwrap();
    // The receiver logs a delivery before its answer reaches the sender,
    // which then records it: read the log once the sender has.
    let started = Instant::now();
    let log = loop {
        let log = deliveries(&via_sender, org, made.endpoint.id).await;
        let recorded = log
            .iter()
            .all(|d| d.status == types::WebhookDeliveryStatus::Delivered);
        if recorded || started.elapsed() > Duration::from_secs(15) {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(log.len(), 5, "{log:#?}");
    for d in &log {
        assert_eq!(d.status, types::WebhookDeliveryStatus::Delivered, "{d:?}");
        assert_eq!(d.response_status, Some(200));
        assert_eq!(d.attempts, 1);
        assert_eq!(d.response_snippet.as_deref(), Some("ok"));
        assert!(
            received(&entries)
                .iter()
                .any(|e| e["webhook_id"] == json!(d.webhook_id)),
            "{d:?}"
        );
    }
    assert!(
        deliveries(&ada.client, org, other.endpoint.id)
            .await
            .is_empty()
    );
    // Secrets are never shown again.
    let listed = ada
        .client
        .org_webhooks_list()
        .org_id(org)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(!serde_json::to_string(&*listed).unwrap().contains("whsec_"));
    sender.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A receiver answering 500 and then 200 gets the same `webhook-id` twice,
/// a backoff apart; the log shows two attempts. A replay is a new delivery
/// (a new `webhook-id`, `replay_of` set) and is delivered too.
#[tokio::test]
async fn retries_with_backoff_and_replay() {
    let receiver = Receiver::start();
    let cx = TestContext::with_config("webhooks_retry", quick(1)).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let made = create(&ada.client, org, &receiver.url("/flaky"), &["*"]).await;
    receiver.set_secrets(&[&made.secret]);
    let queued = send_test(&ada.client, org, made.endpoint.id).await;
    assert_eq!(queued.status, types::WebhookDeliveryStatus::Pending);
    let done = delivery_in(
        &ada.client,
        org,
        made.endpoint.id,
        queued.id,
        types::WebhookDeliveryStatus::Delivered,
        20,
    )
    .await;
    assert_eq!(done.attempts, 2);
    assert_eq!(done.response_status, Some(200));
    let entries = receiver.entries();
    let attempts: Vec<_> = received(&entries)
        .into_iter()
        .filter(|e| e["webhook_id"] == json!(done.webhook_id))
        .collect();
    assert_eq!(attempts.len(), 2, "{entries:#?}");
    let gap = attempts[1]["at"].as_f64().unwrap() - attempts[0]["at"].as_f64().unwrap();
    assert!(gap >= 0.9, "retried after {gap} s (schedule: 1 s)");
    assert!(attempts.iter().all(|e| e["verified"] == json!([0])));

    // Replay.
    let replay = ada
        .client
        .org_webhooks_replay()
        .org_id(org)
        .delivery_id(done.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.replay_of, Some(done.id));
    assert_ne!(replay.webhook_id, done.webhook_id);
    assert_eq!(replay.event_id, done.event_id);
    let replayed = delivery_in(
        &ada.client,
        org,
        made.endpoint.id,
        replay.id,
        types::WebhookDeliveryStatus::Delivered,
        20,
    )
    .await;
    // /flaky answers 500 to the first attempt of every webhook-id.
    assert_eq!(replayed.attempts, 2);
    let (status, code) = error_of(
        ada.client
            .org_webhooks_replay()
            .org_id(org)
            .delivery_id(Uuid::new_v4())
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));
    cx.teardown().await;
}

/// One worker: an endpoint that never answers costs one timeout (2 s) per
/// attempt, a 1 GiB answer and an endless trickle cost at most the first
/// 4 KiB and the timeout; a prompt endpoint's delivery queued behind them
/// is still delivered within a few seconds.
#[tokio::test]
async fn slow_and_huge_answers_never_hold_a_worker() {
    let receiver = Receiver::start();
    let cx = TestContext::with_config("webhooks_bounded", quick(1)).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let mut ids = HashMap::new();
    let mut secrets = Vec::new();
    for path in ["/slow", "/huge", "/trickle", "/ok"] {
        let made = create(&ada.client, org, &receiver.url(path), &["*"]).await;
        secrets.push(made.secret.clone());
        receiver.set_secrets(&secrets.iter().map(String::as_str).collect::<Vec<_>>());
        // Queue, and wait for the first attempt.
        let queued = send_test(&ada.client, org, made.endpoint.id).await;
        let started = Instant::now();
        receiver
            .wait(10, path, |e| {
                received(e)
                    .iter()
                    .any(|x| x["webhook_id"] == json!(queued.webhook_id))
            })
            .await;
        ids.insert(path, (made.endpoint.id, queued.id, started));
    }
    let (slow_ep, slow, _) = ids["/slow"];
    let d = deliveries(&ada.client, org, slow_ep).await;
    let first = d.iter().find(|x| x.id == slow).unwrap();
    let started = Instant::now();
    while deliveries(&ada.client, org, slow_ep).await[0]
        .last_error
        .is_none()
    {
        assert!(started.elapsed() < Duration::from_secs(10), "{first:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = deliveries(&ada.client, org, slow_ep).await[0].clone();
    assert_eq!(first.response_status, None, "{first:?}");
    let latency = first.latency_ms.unwrap();
    assert!((1900..3500).contains(&latency), "{first:?}");

    let (huge_ep, huge, _) = ids["/huge"];
    let d = delivery_in(
        &ada.client,
        org,
        huge_ep,
        huge,
        types::WebhookDeliveryStatus::Delivered,
        10,
    )
    .await;
    assert_eq!(d.response_status, Some(200));
    assert_eq!(d.response_snippet.as_ref().unwrap().len(), 4096);
    assert!(d.latency_ms.unwrap() < 2500, "{d:?}");

    let (trickle_ep, trickle, _) = ids["/trickle"];
    let d = delivery_in(
        &ada.client,
        org,
        trickle_ep,
        trickle,
        types::WebhookDeliveryStatus::Delivered,
        10,
    )
    .await;
    assert!(d.latency_ms.unwrap() < 3500, "{d:?}");

    let (ok_ep, ok, queued_at) = ids["/ok"];
    delivery_in(
        &ada.client,
        org,
        ok_ep,
        ok,
        types::WebhookDeliveryStatus::Delivered,
        10,
    )
    .await;
    assert!(queued_at.elapsed() < Duration::from_secs(10));
    cx.teardown().await;
}

/// Targets pass the guard of web sources: refused when saved (loopback,
/// private, metadata, by address or by name; other schemes; http:// unless
/// allowed) and again when connecting (an instance that does not allow
/// private networks never connects to an endpoint saved where they were).
#[tokio::test]
async fn targets_pass_the_ssrf_guard_when_saved_and_when_connecting() {
    let receiver = Receiver::start();
    let cx = TestContext::with_config("webhooks_ssrf", |c| {
        c.webhooks.allow_http = true;
        c.webhooks.workers = 0;
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let refused = |url: &str| {
        ada.client
            .org_webhooks_create()
            .org_id(org)
            .body(
                types::WebhookEndpointCreate::builder()
                    .url(url.to_string())
                    .event_types(vec!["*".to_string()]),
            )
            .send()
    };
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://localhost:9/hook",
    ] {
        let (status, code) = error_of(refused(url).await);
        assert_eq!((status, code.as_str()), (400, "url_not_allowed"), "{url}");
    }
    for url in [
        "ftp://example.com/",
        "file:///etc/passwd",
        "not a url",
        "https://user:pw@example.com/",
    ] {
        let (status, code) = error_of(refused(url).await);
        assert_eq!((status, code.as_str()), (400, "invalid_url"), "{url}");
    }
    let (status, code) = error_of(
        ada.client
            .org_webhooks_create()
            .org_id(org)
            .body(
                types::WebhookEndpointCreate::builder()
                    .url("https://example.com/hook".to_string())
                    .event_types(vec!["Not A Type".to_string()]),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "invalid_event_types"));

    // https only, unless allowed.
    let strict = cx
        .second_instance(|c| {
            c.webhooks.workers = 0;
        })
        .await;
    let strict_client =
        Client::authenticated(&format!("http://{}", strict.local_addr()), &ada.token).unwrap();
    let (status, code) = error_of(
        strict_client
            .org_webhooks_create()
            .org_id(org)
            .body(
                types::WebhookEndpointCreate::builder()
                    .url("http://example.com/hook".to_string())
                    .event_types(vec!["*".to_string()]),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "invalid_url"));
    strict.shutdown().await.unwrap();

    // Saved where loopback is allowed, by name; sent by an instance where
    // it is not: the connection is refused, the receiver gets nothing.
    let permissive = cx
        .second_instance(|c| {
            c.fetch.allow_private_networks = true;
            c.webhooks.allow_http = true;
            c.webhooks.workers = 0;
        })
        .await;
    let permissive_client =
        Client::authenticated(&format!("http://{}", permissive.local_addr()), &ada.token).unwrap();
    let url = format!("http://localhost:{}/ok", receiver.port);
    let made = create(&permissive_client, org, &url, &["*"]).await;
    receiver.set_secrets(&[&made.secret]);
    let sender = cx
        .second_instance(|c| {
            c.webhooks.allow_http = true;
            c.webhooks.workers = 1;
            c.webhooks.poll_interval_ms = 100;
            c.webhooks.retry_schedule_secs = vec![];
        })
        .await;
    let queued = send_test(&ada.client, org, made.endpoint.id).await;
    let failed = delivery_in(
        &ada.client,
        org,
        made.endpoint.id,
        queued.id,
        types::WebhookDeliveryStatus::Failed,
        15,
    )
    .await;
    assert!(
        failed
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("not a public address")),
        "{failed:?}"
    );
    assert!(received(&receiver.entries()).is_empty());
    sender.shutdown().await.unwrap();
    permissive.shutdown().await.unwrap();
    cx.teardown().await;
}

/// After a rotation both secrets verify each delivery (two signatures)
/// until the overlap ends; then only the new one signs.
#[tokio::test]
async fn rotation_keeps_both_secrets_valid_for_a_while() {
    let receiver = Receiver::start();
    let cx = TestContext::with_config("webhooks_rotation", |c| {
        quick(1)(c);
        c.webhooks.rotation_overlap_secs = 3;
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let made = create(&ada.client, org, &receiver.url("/ok"), &["webhook.test"]).await;
    let rotated = ada
        .client
        .org_webhooks_rotate_secret()
        .org_id(org)
        .endpoint_id(made.endpoint.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_ne!(rotated.secret, made.secret);
    assert!(rotated.endpoint.previous_secret_expires_at.is_some());
    receiver.set_secrets(&[&made.secret, &rotated.secret]);
    let during = send_test(&ada.client, org, made.endpoint.id).await;
    let entries = receiver
        .wait(10, "the delivery during the overlap", |e| {
            received(e)
                .iter()
                .any(|x| x["webhook_id"] == json!(during.webhook_id))
        })
        .await;
    let e = received(&entries)[0];
    assert_eq!(e["verified"], json!([0, 1]), "{e}");
    assert_eq!(e["signatures"], 2);

    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = send_test(&ada.client, org, made.endpoint.id).await;
    let entries = receiver
        .wait(10, "the delivery after the overlap", |e| {
            received(e)
                .iter()
                .any(|x| x["webhook_id"] == json!(after.webhook_id))
        })
        .await;
    let e = received(&entries)
        .into_iter()
        .find(|x| x["webhook_id"] == json!(after.webhook_id))
        .unwrap();
    assert_eq!(e["verified"], json!([1]), "{e}");
    assert_eq!(e["signatures"], 1);
    let endpoint = ada
        .client
        .org_webhooks_get()
        .org_id(org)
        .endpoint_id(made.endpoint.id)
        .send()
        .await
        .unwrap();
    assert_eq!(endpoint.previous_secret_expires_at, None);
    cx.teardown().await;
}

/// An endpoint whose deliveries keep failing is disabled after the
/// configured number in a row; its admins get an e-mail; what is queued
/// for it then fails without being sent; enabling it again resets it.
#[tokio::test]
async fn failing_endpoints_are_disabled_and_admins_told() {
    let receiver = Receiver::start();
    let cx = TestContext::with_config("webhooks_disable", |c| {
        quick(1)(c);
        c.webhooks.retry_schedule_secs = vec![];
        c.webhooks.disable_after_failures = 2;
    })
    .await;
    let ada = cx.user("ada").await;
    let org = team(&ada, "Failing").await;
    let made = create(&ada.client, org, &receiver.url("/fail"), &["*"]).await;
    receiver.set_secrets(&[&made.secret]);
    let first = send_test(&ada.client, org, made.endpoint.id).await;
    delivery_in(
        &ada.client,
        org,
        made.endpoint.id,
        first.id,
        types::WebhookDeliveryStatus::Failed,
        10,
    )
    .await;
    let endpoint = ada
        .client
        .org_webhooks_get()
        .org_id(org)
        .endpoint_id(made.endpoint.id)
        .send()
        .await
        .unwrap();
    assert!(endpoint.enabled);
    assert_eq!(endpoint.consecutive_failures, 1);
    let second = send_test(&ada.client, org, made.endpoint.id).await;
    let failed = delivery_in(
        &ada.client,
        org,
        made.endpoint.id,
        second.id,
        types::WebhookDeliveryStatus::Failed,
        10,
    )
    .await;
    assert_eq!(failed.response_status, Some(500));
    let endpoint = ada
        .client
        .org_webhooks_get()
        .org_id(org)
        .endpoint_id(made.endpoint.id)
        .send()
        .await
        .unwrap();
    assert!(!endpoint.enabled);
    assert_eq!(endpoint.disabled_reason.as_deref(), Some("failing"));
    let mails = workspace_tests::fixtures::outbox(&cx.db().await, &ada.email).await;
    assert!(
        mails
            .iter()
            .any(|(kind, body)| kind == "webhook_disabled" && body.contains(&receiver.url("/fail"))),
        "{mails:?}"
    );
    // Disabled: queued, never sent.
    let sent_before = received(&receiver.entries()).len();
    let third = send_test(&ada.client, org, made.endpoint.id).await;
    let skipped = delivery_in(
        &ada.client,
        org,
        made.endpoint.id,
        third.id,
        types::WebhookDeliveryStatus::Failed,
        10,
    )
    .await;
    assert_eq!(
        skipped.last_error.as_deref(),
        Some("the endpoint is disabled")
    );
    assert_eq!(received(&receiver.entries()).len(), sent_before);
    // Enabled again.
    let enabled = ada
        .client
        .org_webhooks_update()
        .org_id(org)
        .endpoint_id(made.endpoint.id)
        .body(types::WebhookEndpointUpdate::builder().enabled(Some(true)))
        .send()
        .await
        .unwrap();
    assert!(enabled.enabled);
    assert_eq!(enabled.consecutive_failures, 0);
    assert_eq!(enabled.disabled_reason, None);
    cx.teardown().await;
}

/// The sending instance, a real server process, is killed with SIGKILL
/// while a receiver holds its third delivery: the two deliveries answered
/// 2xx before are never sent again, and the third is sent by another
/// instance once the lease expired (same `webhook-id`), and delivered.
#[tokio::test]
async fn deliveries_survive_a_sigkill_of_the_sending_instance() {
    let receiver = Receiver::start();
    let cx = TestContext::with_config("webhooks_sigkill", quick(0)).await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    let made = create(&ada.client, org, &receiver.url("/hang-third"), &["*"]).await;
    receiver.set_secrets(&[&made.secret]);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("doomed.toml");
    std::fs::write(
        &config,
        format!(
            "bind_address = \"127.0.0.1:{port}\"\n\
             [database]\nurl = {:?}\n\
             {}\
             [fetch]\nallow_private_networks = true\n\
             [webhooks]\nworkers = 1\npoll_interval_ms = 100\ntimeout_secs = 5\n\
             lease_secs = 10\nallow_http = true\nretry_schedule_secs = [1, 1]\n",
            cx.db_url,
            workspace_tests::keys_toml()
        ),
    )
    .unwrap();
    let mut doomed = workspace_tests::server_command()
        .arg("--config")
        .arg(&config)
        .env_remove("WORKSPACE_CONFIG")
        .env_remove("DATABASE_URL")
        .env("WORKSPACE_LOG_LEVEL", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while !workspace_tests::http()
        .get(format!("{base}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut queued = Vec::new();
    for _ in 0..3 {
        queued.push(send_test(&ada.client, org, made.endpoint.id).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The third is being sent (the receiver holds it): kill the sender.
    receiver
        .wait(20, "the third delivery in flight", |e| {
            received(e)
                .iter()
                .any(|x| x["webhook_id"] == json!(queued[2].webhook_id))
        })
        .await;
    doomed.kill().unwrap(); // SIGKILL
    doomed.wait().unwrap();
    let killed_at = Instant::now();
    let in_flight = deliveries(&ada.client, org, made.endpoint.id).await;
    let third = in_flight.iter().find(|d| d.id == queued[2].id).unwrap();
    assert_eq!(
        third.status,
        types::WebhookDeliveryStatus::Sending,
        "{third:?}"
    );

    // Another instance takes it over once the lease (10 s) expired.
    let survivor = cx.second_instance(quick(1)).await;
    for q in &queued {
        let d = delivery_in(
            &ada.client,
            org,
            made.endpoint.id,
            q.id,
            types::WebhookDeliveryStatus::Delivered,
            30,
        )
        .await;
        assert_eq!(d.response_status, Some(200));
    }
    let entries = receiver.entries();
    let third_attempts: Vec<_> = received(&entries)
        .into_iter()
        .filter(|e| e["webhook_id"] == json!(queued[2].webhook_id))
        .collect();
    assert_eq!(third_attempts.len(), 2, "{entries:#?}");
    assert!(killed_at.elapsed() >= Duration::from_secs(5));
    // Every webhook-id answered 2xx was received exactly once.
    let answered_ok: Vec<&str> = entries
        .iter()
        .filter(|e| e["stage"] == "answered" && e["status"] == 200)
        .map(|e| e["webhook_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered_ok.len(), 3, "{entries:#?}");
    for id in &answered_ok {
        let times = received(&entries)
            .iter()
            .filter(|e| e["webhook_id"] == json!(id))
            .count();
        let expected = if *id == queued[2].webhook_id { 2 } else { 1 };
        assert_eq!(times, expected, "{id}: {entries:#?}");
    }
    survivor.shutdown().await.unwrap();
    cx.teardown().await;
}

/// Audit events reach endpoints subscribed to `audit.<action>` prefixes,
/// and a budget's crossed threshold reaches `budget.threshold_reached`
/// subscribers once (written with the usage, on one instance, sent by the
/// other); the audit log records the endpoint's and the budget's creation.
#[tokio::test]
async fn audit_and_budget_events_reach_subscribers() {
    let receiver = Receiver::start();
    let api = |c: &mut Config| {
        quick(0)(c);
        c.usage.flush_interval_ms = 10;
    };
    let cx = TestContext::with_config("webhooks_audit_budget", api).await;
    let sender = cx.second_instance(quick(1)).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = team(&ada, "Governed").await;
    let made = create(
        &ada.client,
        org,
        &receiver.url("/ok"),
        &[
            "audit.member.*",
            "audit.budget.*",
            "budget.threshold_reached",
        ],
    )
    .await;
    receiver.set_secrets(&[&made.secret]);

    // audit.member.add
    let member_role = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member_role).await;
    // audit.budget.create, then a threshold of 1 % of 1,000 tokens a day,
    // crossed by the first answer.
    let http = workspace_tests::http();
    let created: Value = http
        .post(format!("{}/api/org/budgets/create", cx.base_url))
        .query(&[("org_id", org.to_string())])
        .bearer_auth(&ada.token)
        .json(
            &json!({"scope": "organization", "metric": "tokens", "period": "day",
                       "limit": 1_000, "threshold_percent": 1}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let budget_id = created["id"].as_str().expect("a budget").to_string();
    resources::chat_message(&ada.client, org, json!({"content": "spend a little"})).await;
    resources::chat_message(&ada.client, org, json!({"content": "and a little more"})).await;

    let entries = receiver
        .wait(30, "three verified deliveries", |e| received(e).len() >= 3)
        .await;
    for e in received(&entries) {
        assert_eq!(e["verified"], json!([0]), "{e}");
    }
    let added = of_type(&entries, "audit.member.add");
    assert_eq!(added.len(), 1, "{entries:#?}");
    let data = &added[0]["payload"]["data"];
    assert_eq!(data["action"], "member.add");
    assert_eq!(data["actor_id"], json!(ada.id));
    assert_eq!(data["target_id"], json!(bob.id.to_string()));
    assert!(data["seq"].as_i64().unwrap() >= 1, "{data}");
    assert_eq!(data["hash"].as_str().unwrap().len(), 64, "{data}");
    let budget_made = of_type(&entries, "audit.budget.create");
    assert_eq!(
        budget_made[0]["payload"]["data"]["target_id"],
        json!(budget_id)
    );
    // Not subscribed: the endpoint's own creation (audit.webhook.create).
    assert!(of_type(&entries, "audit.webhook.create").is_empty());
    let crossed = of_type(&entries, "budget.threshold_reached");
    assert_eq!(crossed.len(), 1, "{entries:#?}");
    let data = &crossed[0]["payload"]["data"];
    assert_eq!(data["budget_id"], json!(budget_id));
    assert_eq!(data["threshold_percent"], 1);
    assert!(data["spent"].as_i64().unwrap() >= 10, "{data}");

    // Once per period: a third answer queues no second notice.
    resources::chat_message(&ada.client, org, json!({"content": "and more"})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = deliveries(&ada.client, org, made.endpoint.id).await;
    assert_eq!(
        log.iter()
            .filter(|d| d.event_type == "budget.threshold_reached")
            .count(),
        1,
        "{log:#?}"
    );

    // The audit log has the endpoint's creation, without its secret.
    let page = ada
        .client
        .audit_list()
        .org_id(org)
        .action("webhook.*")
        .send()
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1, "{:?}", page.items);
    assert_eq!(page.items[0].action, "webhook.create");
    assert!(
        !serde_json::to_string(&page.items[0].details)
            .unwrap()
            .contains("whsec_")
    );
    sender.shutdown().await.unwrap();
    cx.teardown().await;
}
