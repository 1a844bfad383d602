//! The audit log (issue #36): events written in the transaction of the
//! change they record (two instances on one database), nothing written
//! for a change rolled back, the append-only trigger, tampering found by
//! verification, who reads what, no secret in any row, the JSON Lines
//! export, and retention dropping whole old partitions only.

use reqwest::Method;
use uuid::Uuid;
use workspace_client::types::{self, AuditEvent, AuditOutcome, CreateRoleRequest};
use workspace_tests::{TestContext, TestUser, error_of, raw};

/// An organization of `owner` named `name`.
async fn org_named(owner: &TestUser, name: &str) -> Uuid {
    owner
        .client
        .org_create_org()
        .name(name.to_string())
        .send()
        .await
        .expect("create_org")
        .id
}

/// Every event of `org` the client may read, newest first (all pages).
async fn events(client: &workspace_client::Client, org: Option<Uuid>) -> Vec<AuditEvent> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut request = client
            .audit_list()
            .limit(std::num::NonZeroU32::new(7).unwrap());
        if let Some(org) = org {
            request = request.org_id(org);
        }
        if let Some(c) = &cursor {
            request = request.cursor(c.as_str());
        }
        let page = request.send().await.expect("audit_list").into_inner();
        out.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
}

fn actions(events: &[AuditEvent]) -> Vec<&str> {
    events.iter().map(|e| e.action.as_str()).collect()
}

async fn create_role(owner: &TestUser, org: Uuid, name: &str) -> Uuid {
    owner
        .client
        .roles_create()
        .org_id(org)
        .body(
            CreateRoleRequest::builder()
                .name(name.to_string())
                .hierarchy_level(30)
                .permission_ids(Vec::<Uuid>::new()),
        )
        .send()
        .await
        .expect("roles_create")
        .id
}

async fn verify(client: &workspace_client::Client, org: Option<Uuid>) -> types::AuditVerification {
    let mut request = client.audit_verify();
    if let Some(org) = org {
        request = request.org_id(org);
    }
    request.send().await.expect("audit_verify").into_inner()
}

/// Changes made on two instances land in one chain per organization:
/// written concurrently, their `seq`s have no gaps and the chain verifies
/// on either instance; each event names its actor, address, user agent
/// and request id.
#[tokio::test]
async fn two_instances_write_one_chain_per_organization() {
    let cx = TestContext::new("audit_two_instances").await;
    let second = cx.second_instance(|_| {}).await;
    let second_url = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let org = org_named(&ada, "Acme").await;
    let ada_b = workspace_client::Client::authenticated(&second_url, &ada.token).unwrap();

    // Sixteen roles created at once, half through each instance.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let client = if i % 2 == 0 {
            ada.client.clone()
        } else {
            ada_b.clone()
        };
        tasks.push(tokio::spawn(async move {
            client
                .roles_create()
                .org_id(org)
                .body(
                    CreateRoleRequest::builder()
                        .name(format!("role-{i}"))
                        .hierarchy_level(30)
                        .permission_ids(Vec::<Uuid>::new()),
                )
                .send()
                .await
                .expect("roles_create")
                .id
        }));
    }
    let mut roles = Vec::new();
    for t in tasks {
        roles.push(t.await.unwrap());
    }

    let seen = events(&ada_b, Some(org)).await;
    // org.create, then the sixteen role.create.
    assert_eq!(seen.len(), 17, "{:?}", actions(&seen));
    let mut seqs: Vec<i64> = seen.iter().map(|e| e.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=17).collect::<Vec<i64>>());
    assert_eq!(seen.last().unwrap().action, "org.create");
    for role in &roles {
        let e = seen
            .iter()
            .find(|e| e.target_id.as_deref() == Some(role.to_string().as_str()))
            .expect("an event per role");
        assert_eq!(e.action, "role.create");
        assert_eq!(e.org_id, Some(org));
        assert_eq!(e.actor_kind, types::AuditActorKind::User);
        assert_eq!(e.actor_id, Some(ada.id));
        assert_eq!(e.address.as_deref(), Some("127.0.0.1"));
        assert!(e.request_id.as_deref().is_some_and(|r| !r.is_empty()));
        assert_eq!(e.outcome, AuditOutcome::Success);
        assert_eq!(e.hash.len(), 64);
    }
    // Newest first, by id.
    assert!(seen.windows(2).all(|w| w[0].id > w[1].id));

    for client in [&ada.client, &ada_b] {
        let v = verify(client, Some(org)).await;
        assert!(v.ok, "{v:?}");
        assert_eq!(v.chains.len(), 1);
        assert_eq!((v.chains[0].checked, v.chains[0].head_seq), (17, 17));
    }

    // Filters: an action prefix, a target, an actor, a time range.
    let only = ada
        .client
        .audit_list()
        .org_id(org)
        .action("role.*")
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(only.items.len(), 16);
    let one = ada
        .client
        .audit_list()
        .org_id(org)
        .target_id(roles[3].to_string().as_str())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(actions(&one.items), ["role.create"]);
    let later = ada
        .client
        .audit_list()
        .org_id(org)
        .from(chrono::Utc::now() + chrono::Duration::hours(1))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(later.items.is_empty());
    let nobody = ada
        .client
        .audit_list()
        .org_id(org)
        .actor_id(Uuid::new_v4())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(nobody.items.is_empty());
    // A malformed cursor, a bad limit.
    let base = &cx.base_url;
    let q = |k: &'static str, v: &str| vec![("org_id", org.to_string()), (k, v.to_string())];
    assert_eq!(
        raw(
            base,
            Some(&ada.token),
            Method::GET,
            "/api/audit/events",
            &q("cursor", "AAAAAAAAAA!"),
            None
        )
        .await
        .0,
        400
    );
    assert_eq!(
        raw(
            base,
            Some(&ada.token),
            Method::GET,
            "/api/audit/events",
            &q("limit", "501"),
            None
        )
        .await
        .0,
        400
    );

    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A change that fails after its first write is rolled back with its
/// event: deleting a role still assigned removes the removed members'
/// rows first, then refuses (`409 role_in_use`): no `role.delete` row.
/// The same deletion once the role is free is recorded.
#[tokio::test]
async fn a_rolled_back_change_leaves_no_event() {
    let cx = TestContext::new("audit_rollback").await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = org_named(&ada, "Acme").await;
    let role = create_role(&ada, org, "reviewer").await;
    ada.add_member(org, bob.id, role).await;
    let refused = error_of(
        ada.client
            .roles_remove()
            .org_id(org)
            .role_id(role)
            .send()
            .await,
    );
    assert_eq!(refused, (409, "role_in_use".to_string()));
    let seen = events(&ada.client, Some(org)).await;
    assert_eq!(
        actions(&seen),
        ["member.add", "role.create", "org.create"],
        "{seen:?}"
    );

    let member = ada.role_id(org, "member").await;
    ada.client
        .users_update()
        .org_id(org)
        .user_id(bob.id)
        .body(types::UpdateUserRoleRequest::builder().role_id(member))
        .send()
        .await
        .expect("users_update");
    ada.client
        .roles_remove()
        .org_id(org)
        .role_id(role)
        .send()
        .await
        .expect("roles_remove");
    let seen = events(&ada.client, Some(org)).await;
    assert_eq!(
        &actions(&seen)[..2],
        ["role.delete", "member.role_change"],
        "{seen:?}"
    );
    let change = &seen[1];
    assert_eq!(
        change.target_id.as_deref(),
        Some(bob.id.to_string().as_str())
    );
    assert_eq!(change.details["role_id"], member.to_string());
    assert!(verify(&ada.client, Some(org)).await.ok);
    cx.teardown().await;
}

/// Rows are append-only: UPDATE, DELETE and TRUNCATE are refused by the
/// trigger, even to the database owner. A row changed or removed with the
/// trigger bypassed (as a superuser with `session_replication_role =
/// replica`) is found by verification, which names the first broken seq.
#[tokio::test]
async fn tampering_is_refused_and_found() {
    let cx = TestContext::new("audit_tamper").await;
    let ada = cx.user("ada").await;
    let org = org_named(&ada, "Acme").await;
    for name in ["a", "b", "c", "d"] {
        create_role(&ada, org, name).await;
    }
    let other = org_named(&ada, "Other").await;
    for name in ["x", "y", "z"] {
        create_role(&ada, other, name).await;
    }
    let db = cx.db().await;
    for sql in [
        "UPDATE audit_events SET action = 'x' WHERE organization_id = $1",
        "DELETE FROM audit_events WHERE organization_id = $1",
    ] {
        let e = db.execute(sql, &[&org]).await.expect_err(sql);
        assert!(refused(&e), "{e:?}");
    }
    let e = db
        .batch_execute("TRUNCATE audit_events")
        .await
        .expect_err("truncate");
    assert!(refused(&e), "{e:?}");
    assert!(verify(&ada.client, Some(org)).await.ok);

    // Changed by hand, the trigger bypassed: seq 3 of Acme.
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         UPDATE audit_events SET details = '{{\"name\": \"forged\"}}' \
          WHERE organization_id = '{org}' AND seq = 3; COMMIT;"
    ))
    .await
    .expect("tampering as a superuser");
    let v = verify(&ada.client, Some(org)).await;
    assert!(!v.ok);
    assert_eq!(v.chains[0].first_broken_seq, Some(3), "{v:?}");
    // Removed by hand: seq 2 of Other.
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         DELETE FROM audit_events WHERE organization_id = '{other}' AND seq = 2; COMMIT;"
    ))
    .await
    .expect("removing as a superuser");
    let v = verify(&ada.client, Some(other)).await;
    assert_eq!(v.chains[0].first_broken_seq, Some(2), "{v:?}");
    // The newest row removed: the chain no longer reaches its head.
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         DELETE FROM audit_events WHERE organization_id = '{other}' AND seq = 4; COMMIT;"
    ))
    .await
    .unwrap();
    let v = verify(&ada.client, Some(other)).await;
    assert_eq!(v.chains[0].first_broken_seq, Some(2), "{v:?}");

    cx.teardown().await;
}

/// Whether the append-only trigger refused the statement.
fn refused(e: &tokio_postgres::Error) -> bool {
    e.as_db_error()
        .is_some_and(|d| d.message().contains("append-only"))
}

/// The CLI binary beside the test binary (built with the workspace).
/// Organization admins read their organization's log only; a member is
/// refused (and the refusal is recorded); a personal access token needs
/// the `audit:read` scope; without `org_id`, system administrators only,
/// who see every organization's events and the system ones (logins, a
/// failed one with the address tried, personal tokens). No secret lands
/// in any row.
#[tokio::test]
async fn who_reads_what_and_no_secret_is_written() {
    let cx = TestContext::with_config("audit_access", |c| {
        c.auth.system_admins = vec!["root@example.com".into()];
    })
    .await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let carl = cx.user("carl").await;
    let root = cx.user("root").await;
    let acme = org_named(&ada, "Acme").await;
    let globex = org_named(&carl, "Globex").await;
    let member = ada.role_id(acme, "member").await;
    ada.add_member(acme, bob.id, member).await;
    create_role(&carl, globex, "g").await;

    // Ada sees Acme's, not Globex's.
    let seen = events(&ada.client, Some(acme)).await;
    assert!(seen.iter().all(|e| e.org_id == Some(acme)));
    assert_eq!(actions(&seen), ["member.add", "org.create"]);
    assert_eq!(
        error_of(ada.client.audit_list().org_id(globex).send().await),
        (403, "forbidden".to_string())
    );
    // Not a system administrator: nothing without an organization.
    assert_eq!(
        error_of(ada.client.audit_list().send().await),
        (403, "forbidden".to_string())
    );
    // A member is refused, and the refusal is in Acme's log.
    assert_eq!(
        error_of(bob.client.audit_list().org_id(acme).send().await),
        (403, "forbidden".to_string())
    );
    assert_eq!(
        error_of(bob.client.audit_verify().org_id(acme).send().await),
        (403, "forbidden".to_string())
    );
    let seen = events(&ada.client, Some(acme)).await;
    let denied: Vec<&AuditEvent> = seen.iter().filter(|e| e.action == "authz.denied").collect();
    assert_eq!(denied.len(), 2, "{seen:?}");
    assert_eq!(denied[0].outcome, AuditOutcome::Denied);
    assert_eq!(denied[0].actor_id, Some(bob.id));
    assert_eq!(denied[0].details["operation"], "audit_verify");

    // A personal access token: refused without the scope, allowed with it.
    let token = |scopes: &[&str]| {
        let client = ada.client.clone();
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        async move {
            client
                .auth_tokens_create()
                .body(
                    types::TokenCreate::builder()
                        .name("audit".parse::<types::TokenCreateName>().unwrap())
                        .scopes(scopes),
                )
                .send()
                .await
                .unwrap()
                .into_inner()
        }
    };
    let unscoped = token(&["kb:read"]).await;
    let scoped = token(&["audit:read"]).await;
    let with = |t: &str| cx.client_with_token(t);
    assert_eq!(
        error_of(with(&unscoped.token).audit_list().org_id(acme).send().await),
        (403, "insufficient_scope".to_string())
    );
    let by_token = events(&with(&scoped.token), Some(acme)).await;
    assert!(!by_token.is_empty());
    // Reading with the token is not a change; the token's refusal was
    // an administrative refusal, recorded with the token as its actor.
    let seen = events(&ada.client, Some(acme)).await;
    let token_denied = seen
        .iter()
        .find(|e| e.action == "authz.denied" && e.actor_id == Some(unscoped.id))
        .expect("the token's refusal");
    assert_eq!(token_denied.actor_kind, types::AuditActorKind::Token);
    assert_eq!(token_denied.actor_user_id, Some(ada.id));
    // Without org_id a token is refused (system administration is a login's).
    assert_eq!(
        error_of(with(&scoped.token).audit_list().send().await),
        (403, "token_not_allowed".to_string())
    );

    // A failed login, then a revoked token.
    let (status, _) = raw(
        &cx.base_url,
        None,
        Method::POST,
        "/api/auth/login",
        &[],
        Some(serde_json::json!({"email": "ada@example.com", "password": "not the password"})),
    )
    .await;
    assert_eq!(status, 401);
    ada.client
        .auth_tokens_revoke()
        .token_id(unscoped.id)
        .send()
        .await
        .unwrap();
    // A service account and its token.
    let account = ada
        .client
        .org_service_accounts_create()
        .org_id(acme)
        .body(
            serde_json::from_value::<types::ServiceAccountCreate>(serde_json::json!({
                "name": "ci", "role_id": member, "scopes": ["kb:read"],
            }))
            .unwrap(),
        )
        .send()
        .await
        .expect("service account")
        .into_inner();

    // The system administrator sees everything, system events included.
    let all = events(&root.client, None).await;
    for action in [
        "auth.login",
        "token.create",
        "token.revoke",
        "org.create",
        "role.create",
        "member.add",
        "service_account.create",
        "authz.denied",
    ] {
        assert!(
            actions(&all).contains(&action),
            "{action}: {:?}",
            actions(&all)
        );
    }
    assert!(all.iter().any(|e| e.org_id == Some(globex)));
    let failed = all
        .iter()
        .find(|e| e.action == "auth.login" && e.outcome == AuditOutcome::Failure)
        .expect("the failed login");
    assert_eq!(failed.org_id, None);
    assert_eq!(failed.actor_kind, types::AuditActorKind::Anonymous);
    assert_eq!(failed.details["email"], "ada@example.com");
    // ... and any one organization's, though not a member there.
    let globex_events = events(&root.client, Some(globex)).await;
    assert_eq!(actions(&globex_events), ["role.create", "org.create"]);
    let v = verify(&root.client, None).await;
    assert!(v.ok, "{v:?}");
    assert!(v.chains.iter().any(|c| c.org_id.is_none()));
    assert!(v.chains.iter().any(|c| c.org_id == Some(globex)));

    // No secret in any row: tokens, the service account's token, the
    // password tried, access and refresh tokens.
    let db = cx.db().await;
    for secret in [
        scoped.token.as_str(),
        unscoped.token.as_str(),
        account.token.token.as_str(),
        "not the password",
        workspace_tests::TEST_PASSWORD,
        ada.token.as_str(),
        ada.refresh_token.as_str(),
    ] {
        let n: i64 = db
            .query_one(
                "SELECT count(*) FROM audit_events a WHERE strpos(a::text, $1) > 0",
                &[&secret],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "a secret in the audit log");
    }
    cx.teardown().await;
}

/// The export streams every matching event as JSON Lines, the same as the
/// list's pages, and applies the filters.
#[tokio::test]
async fn the_export_streams_json_lines() {
    let cx = TestContext::new("audit_export").await;
    let ada = cx.user("ada").await;
    let org = org_named(&ada, "Acme").await;
    for i in 0..30 {
        create_role(&ada, org, &format!("r{i}")).await;
    }
    let export = |query: Vec<(&'static str, String)>| {
        let base = cx.base_url.clone();
        let token = ada.token.clone();
        async move {
            let response = workspace_tests::http()
                .get(format!("{base}/api/audit/export"))
                .bearer_auth(token)
                .query(&query)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let kind = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            (status, kind, response.text().await.unwrap())
        }
    };
    let (status, kind, text) = export(vec![("org_id", org.to_string())]).await;
    assert_eq!((status, kind.as_str()), (200, "application/jsonl"));
    let lines: Vec<AuditEvent> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a line is an AuditEvent"))
        .collect();
    assert_eq!(lines.len(), 31);
    let listed = events(&ada.client, Some(org)).await;
    assert_eq!(
        lines.iter().map(|e| e.id).collect::<Vec<_>>(),
        listed.iter().map(|e| e.id).collect::<Vec<_>>()
    );
    let (_, _, text) = export(vec![
        ("org_id", org.to_string()),
        ("action", "org.*".to_string()),
    ])
    .await;
    assert_eq!(text.lines().count(), 1);
    // Another organization's: refused.
    let bob = cx.user("bob").await;
    let bobs = org_named(&bob, "Bobs").await;
    let (status, _, _) = export(vec![("org_id", bobs.to_string())]).await;
    assert_eq!(status, 403);
    cx.teardown().await;
}

/// Retention drops the partitions whose every row is older than
/// `audit.retention_days`, whole, and keeps the others (a month partly
/// inside the retention stays); the next months' partitions exist ahead.
/// Verification still passes after the drop (retention records where
/// each chain resumes). Two instances run the maintenance at once.
#[tokio::test]
async fn retention_drops_only_whole_old_partitions() {
    let cx = TestContext::with_config("audit_retention", |c| {
        c.audit.maintenance_interval_secs = 1;
    })
    .await;
    let ada = cx.user("ada").await;
    let org = org_named(&ada, "Acme").await;
    create_role(&ada, org, "r").await;
    let db = cx.db().await;
    // An old month with rows of Acme's chain as they were then (seq 1 and
    // 2 of a chain moved back in time: written here by hand, with the
    // chain's head and hashes of the time), and a month 380 days ago.
    let kept_month = (chrono::Utc::now() - chrono::Duration::days(380))
        .format("%Y-%m-01")
        .to_string();
    db.batch_execute(&format!(
        "CREATE TABLE audit_events_y2020m01 PARTITION OF audit_events \
             FOR VALUES FROM ('2020-01-01 00:00:00+00') TO ('2020-02-01 00:00:00+00'); \
         CREATE TABLE audit_events_kept PARTITION OF audit_events \
             FOR VALUES FROM ('{kept_month} 00:00:00+00') \
             TO (('{kept_month}'::date + interval '1 month')::timestamptz);"
    ))
    .await
    .expect("old partitions");
    let chain = Uuid::new_v4();
    db.execute(
        "INSERT INTO audit_events (occurred_at, chain_id, seq, prev_hash, hash, actor_kind, \
             action, outcome) \
         VALUES ('2020-01-15', $1, 1, decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex'), \
                 'system', 'old', 'success'), \
                ($2::date + interval '3 days', $1, 2, decode(repeat('11', 32), 'hex'), \
                 decode(repeat('22', 32), 'hex'), 'system', 'kept', 'success')",
        &[&chain, &kept_month.parse::<chrono::NaiveDate>().unwrap()],
    )
    .await
    .expect("old rows");
    let before = partitions(&db).await;
    assert!(before.contains(&"audit_events_y2020m01".to_string()));
    // The current month and three ahead exist.
    assert!(before.len() >= 6, "{before:?}");

    // Two instances with a retention of 400 days.
    let first = cx
        .second_instance(|c| {
            c.audit.retention_days = Some(400);
            c.audit.maintenance_interval_secs = 1;
        })
        .await;
    let second = cx
        .second_instance(|c| {
            c.audit.retention_days = Some(400);
            c.audit.maintenance_interval_secs = 1;
        })
        .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = partitions(&db).await;
        if !now.contains(&"audit_events_y2020m01".to_string()) {
            assert!(now.contains(&"audit_events_kept".to_string()), "{now:?}");
            assert_eq!(now.len(), before.len() - 1, "{now:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old partition was not dropped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The kept row is still there; the dropped chain's mark was recorded.
    let kept: i64 = db
        .query_one(
            "SELECT count(*) FROM audit_events WHERE chain_id = $1",
            &[&chain],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
    let mark: i64 = db
        .query_one(
            "SELECT seq FROM audit_retention_marks WHERE chain_id = $1",
            &[&chain],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mark, 1);
    // Recorded once, on the system chain, by whichever instance dropped it.
    let drops: i64 = db
        .query_one(
            "SELECT count(*) FROM audit_events WHERE action = 'audit.partition_drop' \
               AND target_id = 'audit_events_y2020m01'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(drops, 1);
    // Acme's chain is untouched and verifies.
    assert!(verify(&ada.client, Some(org)).await.ok);
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// The partitions of `audit_events`, by name.
async fn partitions(db: &tokio_postgres::Client) -> Vec<String> {
    db.query(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'audit_events'::regclass ORDER BY 1",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get::<_, String>(0))
    .collect()
}

// The attacker of issue #51: SQL access as a superuser (the append-only
// trigger bypassed), but not the server's key file. Each attack is made
// after a signed checkpoint of the chain was published (every second
// here), and verification, on either instance, names the first event
// affected.

/// A context whose instances publish checkpoints every second, its second
/// instance, an owner and an organization with `roles` roles created
/// (events 1 to `roles + 1`), once a checkpoint of the last one is out.
async fn checkpointed(
    name: &str,
    roles: usize,
) -> (
    TestContext,
    workspace_server::Server,
    TestUser,
    Uuid,
    workspace_client::Client,
) {
    let cx = TestContext::with_config(name, |c| c.audit.checkpoint_interval_secs = 1).await;
    let second = cx
        .second_instance(|c| c.audit.checkpoint_interval_secs = 1)
        .await;
    let ada = cx.user("ada").await;
    let org = org_named(&ada, "Acme").await;
    for i in 0..roles {
        create_role(&ada, org, &format!("role-{i}")).await;
    }
    let last = roles as i64 + 1;
    let v = wait_for_checkpoint(&ada.client, org, last).await;
    assert!(v.ok, "{v:?}");
    assert_eq!(v.chains[0].keyed_from_seq, 1);
    let ada_b = workspace_client::Client::authenticated(
        &format!("http://{}", second.local_addr()),
        &ada.token,
    )
    .unwrap();
    (cx, second, ada, org, ada_b)
}

/// Verifies `org` until its newest checkpoint states `seq`.
async fn wait_for_checkpoint(
    client: &workspace_client::Client,
    org: Uuid,
    seq: i64,
) -> types::AuditVerification {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = verify(client, Some(org)).await;
        if v.chains[0]
            .checkpoint
            .as_ref()
            .is_some_and(|c| c.seq >= seq)
        {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint of seq {seq}: {v:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The one chain of `v` is broken at `seq` by `problem`.
fn assert_broken(v: &types::AuditVerification, seq: i64, problem: types::AuditChainProblem) {
    assert!(!v.ok, "{v:?}");
    let chain = &v.chains[0];
    assert!(!chain.ok, "{v:?}");
    assert_eq!(chain.first_broken_seq, Some(seq), "{v:?}");
    assert_eq!(chain.problem, Some(problem), "{v:?}");
    assert!(chain.reason.is_some(), "{v:?}");
}

/// A stored row as the attacker reads it.
struct Row {
    seq: i64,
    prev_hash: Vec<u8>,
    hash: Vec<u8>,
    occurred_at: chrono::DateTime<chrono::Utc>,
    chain_id: Uuid,
    organization_id: Option<Uuid>,
    actor_kind: String,
    actor_id: Option<Uuid>,
    actor_user_id: Option<Uuid>,
    action: String,
    target_kind: Option<String>,
    target_id: Option<String>,
    outcome: String,
    address: Option<String>,
    user_agent: Option<String>,
    request_id: Option<String>,
    details: serde_json::Value,
}

impl Row {
    /// Its hash recomputed the way the unkeyed chain did: plain SHA-256
    /// (all an attacker without the key file can compute).
    fn sha256(&self, prev_hash: &[u8]) -> Vec<u8> {
        use workspace_server::db::datastore::audit::{Stored, canonical, chain_hash};
        let stored = Stored {
            occurred_at: self.occurred_at,
            chain_id: self.chain_id,
            organization_id: self.organization_id,
            actor_kind: &self.actor_kind,
            actor_id: self.actor_id,
            actor_user_id: self.actor_user_id,
            action: &self.action,
            target_kind: self.target_kind.as_deref(),
            target_id: self.target_id.as_deref(),
            outcome: &self.outcome,
            address: self.address.as_deref(),
            user_agent: self.user_agent.as_deref(),
            request_id: self.request_id.as_deref(),
            details: &self.details,
        };
        chain_hash(prev_hash, self.seq, &canonical(&stored))
    }
}

async fn rows_of(db: &tokio_postgres::Client, org: Uuid) -> Vec<Row> {
    db.query(
        "SELECT seq, prev_hash, hash, occurred_at, chain_id, organization_id, actor_kind, \
             actor_id, actor_user_id, action, target_kind, target_id, outcome, address, \
             user_agent, request_id, details \
           FROM audit_events WHERE chain_id = $1 ORDER BY seq",
        &[&org],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| Row {
        seq: r.get("seq"),
        prev_hash: r.get("prev_hash"),
        hash: r.get("hash"),
        occurred_at: r.get("occurred_at"),
        chain_id: r.get("chain_id"),
        organization_id: r.get("organization_id"),
        actor_kind: r.get("actor_kind"),
        actor_id: r.get("actor_id"),
        actor_user_id: r.get("actor_user_id"),
        action: r.get("action"),
        target_kind: r.get("target_kind"),
        target_id: r.get("target_id"),
        outcome: r.get("outcome"),
        address: r.get("address"),
        user_agent: r.get("user_agent"),
        request_id: r.get("request_id"),
        details: r.get("details"),
    })
    .collect()
}

/// Rewrites every row of `org`'s chain from `from` on with plain SHA-256
/// hashes chained from the row before, and the head to match: the chain
/// is consistent again for anyone who does not hold the key.
async fn rechain_with_sha256(db: &tokio_postgres::Client, org: Uuid, from: i64) {
    let rows = rows_of(db, org).await;
    let mut prev = rows
        .iter()
        .find(|r| r.seq == from - 1)
        .map_or(vec![0; 32], |r| r.hash.clone());
    let mut last = (0i64, prev.clone(), prev.clone());
    for row in rows.iter().filter(|r| r.seq >= from) {
        let hash = row.sha256(&prev);
        db.batch_execute("BEGIN; SET LOCAL session_replication_role = replica;")
            .await
            .unwrap();
        db.execute(
            "UPDATE audit_events SET prev_hash = $3, hash = $4 WHERE chain_id = $1 AND seq = $2",
            &[&org, &row.seq, &prev, &hash],
        )
        .await
        .unwrap();
        db.batch_execute("COMMIT").await.unwrap();
        last = (row.seq, prev.clone(), hash.clone());
        prev = hash;
    }
    db.execute(
        "UPDATE audit_chain_heads SET seq = $2, prev_hash = $3, hash = $4 WHERE chain_id = $1",
        &[&org, &last.0, &last.1, &last.2],
    )
    .await
    .unwrap();
}

/// (a) A forged event appended after the chain's head, hashed with plain
/// SHA-256 from the last row, the head left alone: the events list shows
/// it, and verification (which walks every row, not up to the head) finds
/// its hash is not the keyed one.
#[tokio::test]
async fn an_event_appended_after_the_head_is_found() {
    let (cx, second, ada, org, ada_b) = checkpointed("audit_forged_append", 3).await;
    let db = cx.db().await;
    let rows = rows_of(&db, org).await;
    let last = rows.last().unwrap();
    assert_eq!(last.seq, 4);
    let mut forged = Row {
        seq: 5,
        prev_hash: last.hash.clone(),
        hash: Vec::new(),
        occurred_at: last.occurred_at + chrono::Duration::seconds(1),
        chain_id: org,
        organization_id: Some(org),
        actor_kind: "user".to_string(),
        actor_id: Some(ada.id),
        actor_user_id: Some(ada.id),
        action: "member.remove".to_string(),
        target_kind: Some("user".to_string()),
        target_id: Some(Uuid::new_v4().to_string()),
        outcome: "success".to_string(),
        address: Some("127.0.0.1".to_string()),
        user_agent: None,
        request_id: Some("forged".to_string()),
        details: serde_json::json!({}),
    };
    forged.hash = forged.sha256(&forged.prev_hash);
    db.execute(
        "INSERT INTO audit_events (occurred_at, chain_id, seq, prev_hash, hash, organization_id, \
             actor_kind, actor_id, actor_user_id, action, target_kind, target_id, outcome, \
             address, request_id) \
         VALUES ($1, $2, $3, $4, $5, $2, $6, $7, $7, $8, $9, $10, $11, $12, $13)",
        &[
            &forged.occurred_at,
            &org,
            &forged.seq,
            &forged.prev_hash,
            &forged.hash,
            &forged.actor_kind,
            &ada.id,
            &forged.action,
            &forged.target_kind,
            &forged.target_id,
            &forged.outcome,
            &forged.address,
            &forged.request_id,
        ],
    )
    .await
    .expect("appending a forged row");
    // The forged event is listed as any other.
    assert_eq!(
        events(&ada.client, Some(org)).await[0].action,
        "member.remove"
    );
    for client in [&ada.client, &ada_b] {
        let v = verify(client, Some(org)).await;
        assert_broken(&v, 5, types::AuditChainProblem::MacMismatch);
        assert_eq!(v.chains[0].head_seq, 4);
        assert_eq!(v.chains[0].checked, 4);
    }
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// (b) The newest events deleted and the head wound back to the last
/// row kept: the chain is consistent up to its head, but the newest
/// checkpoint vouched for rows that are gone.
#[tokio::test]
async fn newest_events_removed_with_the_head_wound_back_are_found() {
    let (cx, second, ada, org, ada_b) = checkpointed("audit_truncated", 4).await;
    // The checkpoints: in the server's log, and one signed JSON line each
    // in the test's checkpoint file (mode 0600); a line not signed with
    // the key (here: a later seq, its signature kept) is not believed.
    let file =
        workspace_tests::data_root().join(format!("audit-checkpoints-{}.jsonl", cx.database));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        let text = std::fs::read_to_string(&file).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains(&org.to_string()) && l.contains("\"seq\":5"))
            .expect("a checkpoint of seq 5 in the file")
            .to_string();
        assert!(line.contains("\"mac\":"), "{line}");
        let forged = line.replace("\"seq\":5", "\"seq\":9");
        std::fs::write(&file, format!("{text}{forged}\n")).unwrap();
    }
    // The log is written asynchronously: its line may follow the file's.
    let logged = async {
        for _ in 0..100 {
            let log = std::fs::read_to_string(&cx.log_path).unwrap_or_default();
            if log.contains("audit checkpoint") {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        false
    };
    assert!(logged.await, "no checkpoint in the log");
    let db = cx.db().await;
    let rows = rows_of(&db, org).await;
    assert_eq!(rows.len(), 5);
    let kept = &rows[2];
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         DELETE FROM audit_events WHERE chain_id = '{org}' AND seq > 3; COMMIT;"
    ))
    .await
    .expect("removing as a superuser");
    db.execute(
        "UPDATE audit_chain_heads SET seq = 3, prev_hash = $2, hash = $3 WHERE chain_id = $1",
        &[&org, &kept.prev_hash, &kept.hash],
    )
    .await
    .unwrap();
    for client in [&ada.client, &ada_b] {
        let v = verify(client, Some(org)).await;
        assert_broken(&v, 4, types::AuditChainProblem::MissingRows);
        let chain = &v.chains[0];
        assert_eq!((chain.head_seq, chain.checked), (3, 3));
        assert_eq!(chain.checkpoint.as_ref().map(|c| c.seq), Some(5), "{v:?}");
    }
    // The head alone wound back (rows kept) is found without a checkpoint.
    let other = org_named(&ada, "Other").await;
    create_role(&ada, other, "r").await;
    let rows = rows_of(&db, other).await;
    db.execute(
        "UPDATE audit_chain_heads SET seq = 1, prev_hash = $2, hash = $3 WHERE chain_id = $1",
        &[&other, &rows[0].prev_hash, &rows[0].hash],
    )
    .await
    .unwrap();
    let v = verify(&ada_b, Some(other)).await;
    assert_broken(&v, 2, types::AuditChainProblem::RowsAfterHead);
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// (c) An event changed and every hash from it on recomputed with plain
/// SHA-256 (the head too): without the key the rows' hashes cannot be
/// the keyed ones. Claiming in the database that the chain was keyed
/// only later (as rows of an earlier version are) does not help: the
/// checkpoint states where the keyed chain begins.
#[tokio::test]
async fn an_event_changed_and_rechained_with_sha256_is_found() {
    let (cx, second, ada, org, ada_b) = checkpointed("audit_rechained", 4).await;
    let db = cx.db().await;
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         UPDATE audit_events SET details = '{{\"name\": \"forged\"}}' \
          WHERE chain_id = '{org}' AND seq = 2; COMMIT;"
    ))
    .await
    .expect("tampering as a superuser");
    rechain_with_sha256(&db, org, 2).await;
    for client in [&ada.client, &ada_b] {
        let v = verify(client, Some(org)).await;
        assert_broken(&v, 2, types::AuditChainProblem::MacMismatch);
        assert_eq!(v.chains[0].checked, 1);
    }
    // Every row rehashed, and the chain claimed unkeyed (as if written by
    // an earlier version): the checkpoint says it is keyed from seq 1.
    rechain_with_sha256(&db, org, 1).await;
    db.execute(
        "UPDATE audit_chain_heads SET keyed_from = 100 WHERE chain_id = $1",
        &[&org],
    )
    .await
    .unwrap();
    for client in [&ada.client, &ada_b] {
        let v = verify(client, Some(org)).await;
        assert_broken(&v, 1, types::AuditChainProblem::MacMismatch);
        assert_eq!(v.chains[0].keyed_from_seq, 1);
    }
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// Rows of an earlier version (hashed with plain SHA-256, before the
/// chain's `keyed_from`) verify; rows written since are keyed; the first
/// checkpoint seals where the keyed chain begins, so rewriting keyed rows
/// with SHA-256 and moving `keyed_from` later in the database is found.
#[tokio::test]
async fn rows_of_an_earlier_version_verify_and_are_sealed_by_the_first_checkpoint() {
    // No checkpoint after the one at start (before the organization).
    let cx = TestContext::with_config("audit_legacy", |c| {
        c.audit.checkpoint_interval_secs = 3600;
    })
    .await;
    let ada = cx.user("ada").await;
    let org = org_named(&ada, "Acme").await;
    create_role(&ada, org, "old").await;
    // As an earlier version left them: rows 1 and 2 hashed with SHA-256,
    // the migration's `keyed_from` after them.
    let db = cx.db().await;
    rechain_with_sha256(&db, org, 1).await;
    db.execute(
        "UPDATE audit_chain_heads SET keyed_from = 3 WHERE chain_id = $1",
        &[&org],
    )
    .await
    .unwrap();
    let v = verify(&ada.client, Some(org)).await;
    assert!(v.ok, "{v:?}");
    assert_eq!(v.chains[0].keyed_from_seq, 3);
    assert!(v.chains[0].checkpoint.is_none(), "{v:?}");
    // New rows are keyed: rehashed with SHA-256 they no longer verify.
    create_role(&ada, org, "new-1").await;
    create_role(&ada, org, "new-2").await;
    let v = verify(&ada.client, Some(org)).await;
    assert!(v.ok, "{v:?}");
    assert_eq!((v.chains[0].checked, v.chains[0].head_seq), (4, 4));
    // An instance publishing checkpoints seals the chain as it is.
    let second = cx
        .second_instance(|c| c.audit.checkpoint_interval_secs = 1)
        .await;
    let ada_b = workspace_client::Client::authenticated(
        &format!("http://{}", second.local_addr()),
        &ada.token,
    )
    .unwrap();
    let v = wait_for_checkpoint(&ada_b, org, 4).await;
    assert!(v.ok, "{v:?}");
    assert_eq!(v.chains[0].checkpoint.as_ref().unwrap().keyed_from_seq, 3);
    // Row 4 changed, the chain rehashed from there, `keyed_from` moved past
    // it: found on both instances (they read the same checkpoint file).
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         UPDATE audit_events SET target_id = 'forged' WHERE chain_id = '{org}' AND seq = 4; \
         COMMIT;"
    ))
    .await
    .unwrap();
    rechain_with_sha256(&db, org, 4).await;
    db.execute(
        "UPDATE audit_chain_heads SET keyed_from = 5 WHERE chain_id = $1",
        &[&org],
    )
    .await
    .unwrap();
    for client in [&ada.client, &ada_b] {
        let v = verify(client, Some(org)).await;
        assert_broken(&v, 4, types::AuditChainProblem::MacMismatch);
    }
    second.shutdown().await.unwrap();
    cx.teardown().await;
}
