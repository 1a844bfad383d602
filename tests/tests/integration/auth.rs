//! Signup, login and the current user.

use workspace_client::types::{LoginRequest, SignupRequest};
use workspace_tests::{TEST_PASSWORD, TestContext, error_of, too_many_requests};

fn signup(email: &str, password: &str) -> workspace_client::types::builder::SignupRequest {
    SignupRequest::builder()
        .email(email.to_string())
        .first_name("Ada".to_string())
        .last_name("Lovelace".to_string())
        .password(password.to_string())
}

fn login(email: &str, password: &str) -> workspace_client::types::builder::LoginRequest {
    LoginRequest::builder()
        .email(email.to_string())
        .password(password.to_string())
}

#[tokio::test]
async fn signup_creates_user_personal_org_roles_and_owner_membership() {
    let cx = TestContext::new("signup_creates").await;
    let client = cx.anon();
    let response = client
        .auth_signup()
        .body(signup("  Ada@Example.COM ", TEST_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let created = response.into_inner();
    assert_eq!(created.email, "ada@example.com");
    assert_eq!(created.first_name, "Ada");
    assert_eq!(created.last_name, "Lovelace");

    let token = client
        .auth_login()
        .body(login("ADA@example.com", TEST_PASSWORD))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(token.token_type, workspace_client::types::TokenType::Bearer);
    assert_eq!(token.expires_in, 900);
    assert_eq!(token.refresh_expires_in, 30 * 24 * 3600);
    assert!(token.refresh_token.starts_with("wsr_"));
    let me = cx
        .client_with_token(&token.access_token)
        .users_me()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(me.id, created.id);
    assert_eq!(me.full_name, "Ada Lovelace");
    assert_eq!(me.organizations.len(), 1);
    let org = &me.organizations[0];
    assert_eq!(org.role_name, "owner");
    assert_eq!(org.slug, "ada");

    // The four system roles with their levels and non-empty permission sets.
    let db = cx.db().await;
    let rows = db
        .query(
            "SELECT r.name, r.hierarchy_level, r.is_system_role, count(rp.permission_id) \
             FROM roles r LEFT JOIN role_permissions rp ON rp.role_id = r.id \
             WHERE r.organization_id = $1 GROUP BY r.id ORDER BY r.hierarchy_level DESC",
            &[&org.id],
        )
        .await
        .unwrap();
    let roles: Vec<(String, i32, bool, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let names: Vec<(&str, i32)> = roles.iter().map(|r| (r.0.as_str(), r.1)).collect();
    assert_eq!(
        names,
        [("owner", 100), ("admin", 80), ("member", 20), ("guest", 10)]
    );
    assert!(roles.iter().all(|r| r.2 && r.3 > 0), "{roles:?}");

    // Only an argon2id hash is stored.
    let hash: String = db
        .query_one(
            "SELECT password_hash FROM users WHERE id = $1",
            &[&created.id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{hash}"
    );
    assert!(!hash.contains(TEST_PASSWORD));
    cx.teardown().await;
}

#[tokio::test]
async fn signup_rejects_duplicates_case_insensitively() {
    let cx = TestContext::new("signup_duplicates").await;
    let client = cx.anon();
    client
        .auth_signup()
        .body(signup("grace@example.com", TEST_PASSWORD))
        .send()
        .await
        .unwrap();
    let (status, code) = error_of(
        client
            .auth_signup()
            .body(signup("GRACE@example.com", TEST_PASSWORD))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (409, "email_taken"));
    let db = cx.db().await;
    let n: i64 = db
        .query_one("SELECT count(*) FROM organizations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the failed signup wrote no organization");
    cx.teardown().await;
}

#[tokio::test]
async fn concurrent_signups_for_one_address_create_exactly_one_account() {
    let cx = TestContext::new("concurrent_signups").await;
    let client = cx.anon();
    let attempts = (0..8).map(|_| {
        let client = client.clone();
        async move {
            client
                .auth_signup()
                .body(signup("race@example.com", TEST_PASSWORD))
                .send()
                .await
        }
    });
    let results = futures::future::join_all(attempts).await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(created, 1);
    for r in results.into_iter().filter(|r| r.is_err()) {
        assert_eq!(error_of(r), (409, "email_taken".to_string()));
    }
    let db = cx.db().await;
    let counts: (i64, i64, i64, i64) = {
        let row = db
            .query_one(
                "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM organizations), \
                        (SELECT count(*) FROM roles), (SELECT count(*) FROM memberships)",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3))
    };
    assert_eq!(counts, (1, 1, 4, 1), "nothing half-written by the losers");
    cx.teardown().await;
}

#[tokio::test]
async fn signup_validates_input() {
    let cx = TestContext::new("signup_validates").await;
    let client = cx.anon();
    // Raw JSON: the server enforces every rule even for clients that skip
    // the schema's constraints.
    let body = |email: &str, first: &str, last: &str, password: &str| serde_json::json!({"email": email, "first_name": first, "last_name": last, "password": password});
    let long = "z".repeat(129);
    let cases = [
        (
            body("not-an-email", "A", "B", TEST_PASSWORD),
            400,
            "invalid_email",
        ),
        (body("a@b", "A", "B", TEST_PASSWORD), 400, "invalid_email"),
        (
            body("a b@example.com", "A", "B", TEST_PASSWORD),
            400,
            "invalid_email",
        ),
        (
            body("x@example.com", "  ", "B", TEST_PASSWORD),
            400,
            "invalid_name",
        ),
        (
            body("x@example.com", "A", "", TEST_PASSWORD),
            400,
            "invalid_name",
        ),
        (
            body("x@example.com", "A", "B", "short"),
            422,
            "weak_password",
        ),
        (body("x@example.com", "A", "B", &long), 422, "weak_password"),
        (
            body("x@example.com", "A", "B", "aaaaaaaaaaaaaa"),
            422,
            "weak_password",
        ),
        (
            body("longlocalpart@example.com", "A", "B", "LongLocalPart"),
            422,
            "weak_password",
        ),
        (
            body("someone@example.com", "A", "B", "SomeOne@Example.com"),
            422,
            "weak_password",
        ),
    ];
    for (json, status, code) in cases {
        let got = workspace_tests::raw(
            &cx.base_url,
            None,
            reqwest::Method::POST,
            "/api/auth/signup",
            &[],
            Some(json.clone()),
        )
        .await;
        assert_eq!(got, (status, code.to_string()), "{json}");
    }
    // The generated client checks the schema's constraints before sending.
    assert!(
        client
            .auth_signup()
            .body(signup("x@example.com", "short"))
            .send()
            .await
            .is_err()
    );
    // The message names the rule.
    let response = workspace_tests::http()
        .post(format!("{}/api/auth/signup", cx.base_url))
        .json(&serde_json::json!({
            "email": "x@example.com", "first_name": "X", "last_name": "Y", "password": "short"
        }))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("at least 10 characters"),
        "{body}"
    );

    // Malformed bodies get a stable code too.
    for raw in [
        "{",
        "{\"email\": \"x@example.com\"}",
        "[]",
        "{\"email\": 5}",
    ] {
        let response = workspace_tests::http()
            .post(format!("{}/api/auth/signup", cx.base_url))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 400, "{raw}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error_code"], "invalid_request", "{raw}");
    }
    let db = cx.db().await;
    let n: i64 = db
        .query_one("SELECT count(*) FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    cx.teardown().await;
}

#[tokio::test]
async fn personal_org_slugs_are_unique() {
    let cx = TestContext::new("unique_slugs").await;
    let client = cx.anon();
    let mut slugs = Vec::new();
    for domain in ["a.example", "b.example", "c.example"] {
        let email = format!("sam@{domain}");
        client
            .auth_signup()
            .body(signup(&email, TEST_PASSWORD))
            .send()
            .await
            .unwrap();
        let token = client
            .auth_login()
            .body(login(&email, TEST_PASSWORD))
            .send()
            .await
            .unwrap();
        let me = cx
            .client_with_token(&token.access_token)
            .users_me()
            .send()
            .await
            .unwrap();
        slugs.push(me.organizations[0].slug.clone());
    }
    assert_eq!(slugs[0], "sam");
    assert!(slugs[1].starts_with("sam-") && slugs[2].starts_with("sam-"));
    assert_ne!(slugs[1], slugs[2]);
    cx.teardown().await;
}

#[tokio::test]
async fn login_failures_do_not_say_which_part_was_wrong() {
    let cx = TestContext::new("login_failures").await;
    let user = cx.user("hopper").await;
    let client = cx.anon();
    let wrong_password = client
        .auth_login()
        .body(login(&user.email, "wrong password!"))
        .send()
        .await;
    let unknown_user = client
        .auth_login()
        .body(login("nobody@example.com", TEST_PASSWORD))
        .send()
        .await;
    let (a, b) = match (wrong_password, unknown_user) {
        (
            Err(workspace_client::Error::ErrorResponse(a)),
            Err(workspace_client::Error::ErrorResponse(b)),
        ) => (a, b),
        other => panic!("expected two error responses, got {other:?}"),
    };
    assert_eq!(a.status().as_u16(), 401);
    assert_eq!(b.status().as_u16(), 401);
    assert_eq!(a.error_code, "invalid_credentials");
    assert_eq!(a.error_code, b.error_code);
    assert_eq!(a.message, b.message);
    cx.teardown().await;
}

#[tokio::test]
async fn failed_logins_are_rate_limited_across_instances() {
    let cx = TestContext::with_config("login_rate_limit", |c| {
        c.auth.login_max_failures = 3;
        c.auth.login_window_secs = 600;
    })
    .await;
    let user = cx.user("turing").await;
    let other = cx.user("church").await;
    let client = cx.anon();
    for _ in 0..3 {
        let (status, _) = error_of(
            client
                .auth_login()
                .body(login(&user.email, "not the password"))
                .send()
                .await,
        );
        assert_eq!(status, 401);
    }
    // Now even the right password is refused, with Retry-After.
    let (retry, code) = too_many_requests(
        workspace_tests::http()
            .post(format!("{}/api/auth/login", cx.base_url))
            .json(&serde_json::json!({"email": user.email, "password": TEST_PASSWORD})),
    )
    .await;
    assert!((590..=600).contains(&retry), "retry-after {retry}");
    assert_eq!(code, "too_many_login_attempts");

    // The count lives in PostgreSQL: a second instance refuses too.
    let second = cx
        .second_instance(|c| {
            c.auth.login_max_failures = 3;
            c.auth.login_window_secs = 600;
        })
        .await;
    let second_client =
        workspace_client::Client::anonymous(&format!("http://{}", second.local_addr())).unwrap();
    let (status, code) = error_of(
        second_client
            .auth_login()
            .body(login(&user.email, TEST_PASSWORD))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (429, "too_many_login_attempts"));
    // Case variants of the address share the limit.
    let (status, _) = error_of(
        client
            .auth_login()
            .body(login(&user.email.to_uppercase(), TEST_PASSWORD))
            .send()
            .await,
    );
    assert_eq!(status, 429);
    // Other accounts are unaffected.
    client
        .auth_login()
        .body(login(&other.email, TEST_PASSWORD))
        .send()
        .await
        .unwrap();
    second.shutdown().await.unwrap();

    // When the failures leave the window, login works again and clears the count.
    let db = cx.db().await;
    db.execute(
        "UPDATE login_failures SET failed_at = failed_at - interval '11 minutes'",
        &[],
    )
    .await
    .unwrap();
    client
        .auth_login()
        .body(login(&user.email, TEST_PASSWORD))
        .send()
        .await
        .unwrap();
    let left: i64 = db
        .query_one(
            "SELECT count(*) FROM login_failures WHERE email_normalized = $1",
            &[&user.email],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    cx.teardown().await;
}

#[tokio::test]
async fn me_lists_only_active_memberships() {
    let cx = TestContext::new("me_active_only").await;
    let owner = cx.user("owner").await;
    let user = cx.user("someone").await;
    let me = owner.client.users_me().send().await.unwrap().into_inner();
    let org = me.organizations[0].id;
    // Put `someone` into owner's organization in each non-active state, then
    // as active.
    let db = cx.db().await;
    for status in ["invited", "suspended", "deleted", "active"] {
        db.execute(
            "INSERT INTO memberships (user_id, organization_id, role_id, status) \
             SELECT $1, $2, id, $3 FROM roles WHERE organization_id = $2 AND name = 'member' \
             ON CONFLICT (user_id, organization_id) DO UPDATE SET status = EXCLUDED.status",
            &[&user.id, &org, &status],
        )
        .await
        .unwrap();
        let me = user.client.users_me().send().await.unwrap().into_inner();
        let ids: Vec<_> = me.organizations.iter().map(|m| m.id).collect();
        assert_eq!(ids.contains(&org), status == "active", "status {status}");
        if status == "active" {
            let m = me.organizations.iter().find(|m| m.id == org).unwrap();
            assert_eq!(m.role_name, "member");
        }
    }
    cx.teardown().await;
}
