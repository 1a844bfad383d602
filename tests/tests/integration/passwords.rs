//! Passwords (issue #34 item 2): forgot-password without enumeration (by
//! status, body or timing), rate-limited per address and per e-mail across
//! instances; single-use, expiring, unguessable reset tokens; reset and
//! change revoking sessions; one password policy.

use std::time::{Duration, Instant};
use workspace_client::Client;
use workspace_client::types::{
    ChangePasswordRequest, ForgotPasswordRequest, LoginRequest, ResetPasswordRequest,
};
use workspace_tests::{TEST_PASSWORD, TestContext, error_of, too_many_requests};

const NEW_PASSWORD: &str = "correct horse battery";

/// `POST /api/auth/forgot_password` through `client`: the status and the
/// answer (or the `error_code`).
async fn forgot(client: &Client, email: &str) -> (u16, String) {
    match client
        .auth_forgot_password()
        .body(ForgotPasswordRequest::builder().email(email.to_string()))
        .send()
        .await
    {
        Ok(answer) => (answer.status().as_u16(), answer.into_inner().message),
        Err(e) => error_of::<()>(Err(e)),
    }
}

async fn reset(
    cx: &TestContext,
    token: &str,
    password: &str,
) -> Result<
    workspace_client::types::SessionsRevoked,
    workspace_client::Error<workspace_client::types::Error>,
> {
    cx.anon()
        .auth_reset_password()
        .body(
            ResetPasswordRequest::builder()
                .token(token.to_string())
                .new_password(password.to_string()),
        )
        .send()
        .await
        .map(|r| r.into_inner())
}

async fn login(cx: &TestContext, email: &str, password: &str) -> Result<String, (u16, String)> {
    cx.anon()
        .auth_login()
        .body(
            LoginRequest::builder()
                .email(email.to_string())
                .password(password.to_string()),
        )
        .send()
        .await
        .map(|r| r.into_inner().access_token)
        .map_err(|e| error_of::<()>(Err(e)))
}

/// The reset e-mails sent to `email` (the outbox mailer), oldest first:
/// their tokens, read from the link. Waits for at least `count` of them
/// (an e-mail is handed over a moment after the answer).
async fn reset_tokens(cx: &TestContext, email: &str, count: usize) -> Vec<String> {
    let db = cx.db().await;
    for _ in 0..200 {
        let rows = db
            .query(
                "SELECT body_text FROM email_outbox \
                 WHERE to_address = $1 AND kind = 'password_reset' ORDER BY created_at",
                &[&email],
            )
            .await
            .unwrap();
        if rows.len() >= count {
            return rows
                .iter()
                .map(|r| {
                    let body: String = r.get(0);
                    let link = body
                        .lines()
                        .find(|l| l.contains("/reset-password?token="))
                        .expect("a reset link");
                    // This server's own page (of the instance that answered).
                    assert!(
                        link.starts_with("http://127.0.0.1:")
                            && link.contains("/reset-password?token=wsreset_"),
                        "{link}"
                    );
                    link.split("token=").nth(1).unwrap().trim().to_string()
                })
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Vec::new()
}

async fn me_status(cx: &TestContext, token: &str) -> (u16, String) {
    match cx.client_with_token(token).users_me().send().await {
        Ok(_) => (200, String::new()),
        Err(e) => error_of::<()>(Err(e)),
    }
}

#[tokio::test]
async fn forgot_password_answers_alike_for_known_and_unknown_addresses() {
    let cx = TestContext::new("passwords_forgot_alike").await;
    let user = cx.user("known").await;
    let client = cx.anon();
    let mut answers = Vec::new();
    for email in [
        user.email.as_str(),
        "nobody@example.com",
        "not an address",
        &user.email.to_uppercase(),
    ] {
        answers.push(forgot(&client, email).await);
    }
    for answer in &answers {
        assert_eq!(answer, &answers[0], "{answers:?}");
    }
    assert_eq!(answers[0].0, 202);
    // Only the account's address got e-mails (two: the case variant is the
    // same account).
    assert_eq!(reset_tokens(&cx, &user.email, 2).await.len(), 2);
    let db = cx.db().await;
    let mails: i64 = db
        .query_one(
            "SELECT count(*) FROM email_outbox WHERE kind = 'password_reset'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mails, 2);
    // Both cases wrote a row (the unknown ones with no user), stored hashed.
    let rows: Vec<(bool, i32)> = db
        .query(
            "SELECT user_id IS NOT NULL, length(token_hash) FROM password_resets",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r.0).count(), 2);
    assert!(rows.iter().all(|r| r.1 == 32));
    // An over-long address is a 400 whatever it is (sent raw: the
    // generated client refuses it itself).
    let long = format!("{}@example.com", "a".repeat(300));
    let refused = workspace_tests::raw(
        &cx.base_url,
        None,
        reqwest::Method::POST,
        "/api/auth/forgot_password",
        &[],
        Some(serde_json::json!({ "email": long })),
    )
    .await;
    assert_eq!(refused, (400, "invalid_email".to_string()));
    cx.teardown().await;
}

#[tokio::test]
async fn forgot_password_timing_does_not_reveal_the_account() {
    let cx = TestContext::new("passwords_forgot_timing").await;
    let user = cx.user("timed").await;
    let client = cx.anon();
    // Warm up both paths (statement caches, connections).
    for _ in 0..5 {
        forgot(&client, &user.email).await;
        forgot(&client, "warmup@example.com").await;
    }
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for i in 0..60 {
        // Alternate which goes first; pause so that one request's e-mail
        // (sent after its answer) does not overlap the next.
        let order = if i % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_known in order {
            let email = if is_known {
                user.email.clone()
            } else {
                format!("ghost{i}@example.com")
            };
            tokio::time::sleep(Duration::from_millis(15)).await;
            let started = Instant::now();
            let (status, _) = forgot(&client, &email).await;
            let elapsed = started.elapsed();
            assert_eq!(status, 202);
            if is_known { &mut known } else { &mut unknown }.push(elapsed);
        }
    }
    let p50 = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (k, u) = (p50(&mut known), p50(&mut unknown));
    let diff = k.abs_diff(u);
    println!(
        "forgot_password p50: known address {k:?}, unknown address {u:?}, difference {diff:?}"
    );
    assert!(
        diff < Duration::from_millis(3),
        "known {k:?} vs unknown {u:?}: the timing tells them apart"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn forgot_password_is_limited_per_address_and_per_email_across_instances() {
    let cx = TestContext::with_config("passwords_forgot_limits", |c| {
        c.rate_limits.forgot_password_per_email = 3;
        c.rate_limits.forgot_password_per_address = 8;
    })
    .await;
    let user = cx.user("limited").await;
    let second = cx
        .second_instance(|c| {
            c.rate_limits.forgot_password_per_email = 3;
            c.rate_limits.forgot_password_per_address = 8;
        })
        .await;
    let b = format!("http://{}", second.local_addr());
    let clients = [cx.anon(), Client::anonymous(&b).unwrap()];
    // Per e-mail, alternating instances: the same for an account's address
    // and an address without one.
    for email in [user.email.as_str(), "nobody@example.com"] {
        for i in 0..3 {
            assert_eq!(forgot(&clients[i % 2], email).await.0, 202, "{email} #{i}");
        }
        let (retry, code) = too_many_requests(
            workspace_tests::http()
                .post(format!("{b}/api/auth/forgot_password"))
                .json(&serde_json::json!({ "email": email })),
        )
        .await;
        assert_eq!(code, "rate_limited");
        assert!(retry >= 1, "{retry}");
    }
    assert_eq!(reset_tokens(&cx, &user.email, 3).await.len(), 3);
    // Per client address: 8 + 2 requests counted so far (the two refused
    // ones count too); the next distinct addresses fill and pass the limit.
    let mut statuses = Vec::new();
    for i in 0..3 {
        statuses.push(
            forgot(&clients[1], &format!("other{i}@example.com"))
                .await
                .0,
        );
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn a_reset_token_works_once_and_ends_every_session() {
    let cx = TestContext::new("passwords_reset_once").await;
    let user = cx.user("forgetful").await;
    let org = user.personal_org().await;
    let other_session = login(&cx, &user.email, TEST_PASSWORD).await.unwrap();
    forgot(&cx.anon(), &user.email).await;
    let token = reset_tokens(&cx, &user.email, 1).await.remove(0);
    // The page of the link is served, with the token kept out of referrers.
    let page = workspace_tests::http()
        .get(format!("{}/reset-password?token={token}", cx.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    assert!(page.text().await.unwrap().contains("/reset-password.js"));

    let done = reset(&cx, &token, NEW_PASSWORD).await.unwrap();
    assert_eq!(done.revoked, 2);
    // Every session is over: access and refresh tokens.
    for token in [&user.token, &other_session] {
        assert_eq!(
            me_status(&cx, token).await,
            (401, "session_revoked".to_string())
        );
    }
    let (status, code) = error_of(
        cx.anon()
            .auth_refresh()
            .body(
                workspace_client::types::RefreshRequest::builder()
                    .refresh_token(user.refresh_token.clone()),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (401, "session_revoked"));
    // The old password is gone, the new one works.
    assert_eq!(
        login(&cx, &user.email, TEST_PASSWORD).await.unwrap_err(),
        (401, "invalid_credentials".to_string())
    );
    let fresh = login(&cx, &user.email, NEW_PASSWORD).await.unwrap();
    let roles = cx
        .client_with_token(&fresh)
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .unwrap();
    assert_eq!(roles.len(), 4);

    // Used once: a second use is refused and changes nothing.
    let (status, code) = error_of(reset(&cx, &token, "yet another passphrase").await);
    assert_eq!((status, code.as_str()), (410, "reset_token_used"));
    assert!(login(&cx, &user.email, NEW_PASSWORD).await.is_ok());

    // Two resets racing with one token: exactly one sets its password.
    forgot(&cx.anon(), &user.email).await;
    let tokens = reset_tokens(&cx, &user.email, 2).await;
    assert_eq!(tokens.len(), 2);
    let racing = tokens.last().unwrap().clone();
    let (a, b) = tokio::join!(
        reset(&cx, &racing, "first racer password"),
        reset(&cx, &racing, "second racer password")
    );
    let wins = [a.is_ok(), b.is_ok()];
    assert_eq!(wins.iter().filter(|w| **w).count(), 1, "{wins:?}");
    let loser = if a.is_ok() { b } else { a };
    assert_eq!(error_of(loser), (410, "reset_token_used".to_string()));
    let winner = if wins[0] {
        "first racer password"
    } else {
        "second racer password"
    };
    assert!(login(&cx, &user.email, winner).await.is_ok());
    cx.teardown().await;
}

#[tokio::test]
async fn a_reset_token_expires_after_an_hour() {
    let cx = TestContext::new("passwords_reset_expiry").await;
    let user = cx.user("slowpoke").await;
    forgot(&cx.anon(), &user.email).await;
    let tokens = reset_tokens(&cx, &user.email, 1).await;
    let db = cx.db().await;
    let lifetime: f64 = db
        .query_one(
            "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM password_resets \
             WHERE user_id = $1",
            &[&user.id],
        )
        .await
        .unwrap()
        .get(0);
    assert!((lifetime - 3600.0).abs() < 1.0, "{lifetime}");
    // An hour later.
    db.execute(
        "UPDATE password_resets SET expires_at = now() - interval '1 second', \
                created_at = created_at - interval '1 hour'",
        &[],
    )
    .await
    .unwrap();
    let (status, code) = error_of(reset(&cx, &tokens[0], NEW_PASSWORD).await);
    assert_eq!((status, code.as_str()), (410, "reset_token_expired"));
    assert!(login(&cx, &user.email, TEST_PASSWORD).await.is_ok());
    assert_eq!(me_status(&cx, &user.token).await.0, 200);
    cx.teardown().await;
}

#[tokio::test]
async fn reset_tokens_cannot_be_guessed() {
    let cx = TestContext::with_config("passwords_reset_guessing", |c| {
        c.rate_limits.reset_password_per_address = 5;
    })
    .await;
    let user = cx.user("guarded").await;
    forgot(&cx.anon(), &user.email).await;
    let token = reset_tokens(&cx, &user.email, 1).await.remove(0);
    // A near miss (one character changed), a random well-shaped token, a
    // malformed one and the token's hash: all unknown, none reveal more.
    let last = token.chars().last().unwrap();
    let near = format!(
        "{}{}",
        &token[..token.len() - 1],
        if last == 'A' { 'B' } else { 'A' }
    );
    let random = format!("wsreset_{}", "Q".repeat(43));
    for guess in [
        near.as_str(),
        &random,
        "wsreset_",
        "' OR 1=1 --",
        &token[8..],
    ] {
        let (status, code) = error_of(reset(&cx, guess, NEW_PASSWORD).await);
        assert_eq!(
            (status, code.as_str()),
            (400, "invalid_reset_token"),
            "{guess:?}"
        );
    }
    // Guessing is bounded per client address.
    let (status, code) = error_of(reset(&cx, &random, NEW_PASSWORD).await);
    assert_eq!((status, code.as_str()), (429, "rate_limited"));
    // The real token was not spent by any of it.
    let db = cx.db().await;
    let unused: i64 = db
        .query_one(
            "SELECT count(*) FROM password_resets WHERE user_id = $1 AND used_at IS NULL",
            &[&user.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unused, 1);
    cx.teardown().await;
}

#[tokio::test]
async fn change_password_needs_the_current_one_and_keeps_only_the_callers_session() {
    let cx = TestContext::new("passwords_change").await;
    let user = cx.user("changer").await;
    let phone = login(&cx, &user.email, TEST_PASSWORD).await.unwrap();
    let client = cx.client_with_token(&user.token);
    let change = |current: &str, new: &str| {
        client
            .auth_change_password()
            .body(
                ChangePasswordRequest::builder()
                    .current_password(current.to_string())
                    .new_password(new.to_string()),
            )
            .send()
    };
    let (status, code) = error_of(change("wrong password!", NEW_PASSWORD).await);
    assert_eq!((status, code.as_str()), (401, "invalid_credentials"));
    // A wrong current password counts as a failed login.
    let db = cx.db().await;
    let failures: i64 = db
        .query_one(
            "SELECT count(*) FROM login_failures WHERE email_normalized = $1",
            &[&user.email],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(failures, 1);
    assert_eq!(me_status(&cx, &phone).await.0, 200);

    let done = change(TEST_PASSWORD, NEW_PASSWORD)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.revoked, 1);
    assert_eq!(me_status(&cx, &user.token).await.0, 200);
    assert_eq!(
        me_status(&cx, &phone).await,
        (401, "session_revoked".to_string())
    );
    assert!(login(&cx, &user.email, TEST_PASSWORD).await.is_err());
    assert!(login(&cx, &user.email, NEW_PASSWORD).await.is_ok());
    cx.teardown().await;
}

#[tokio::test]
async fn one_password_policy_for_signup_reset_and_change() {
    let cx = TestContext::new("passwords_one_policy").await;
    let user = cx.user("policyholder").await;
    forgot(&cx.anon(), &user.email).await;
    let token = reset_tokens(&cx, &user.email, 1).await.remove(0);
    // Too short, one repeated character, the address, its local part.
    let weak = |email: &str| {
        let local = email.split('@').next().unwrap().to_uppercase();
        [
            "short".to_string(),
            "a".repeat(12),
            email.to_string(),
            local,
        ]
    };
    let expected = (422, "weak_password".to_string());
    let newcomer = "policyholder2@example.com";
    for password in weak(newcomer) {
        // Raw: the generated client refuses a short password itself.
        let signup = workspace_tests::raw(
            &cx.base_url,
            None,
            reqwest::Method::POST,
            "/api/auth/signup",
            &[],
            Some(serde_json::json!({
                "email": newcomer, "first_name": "P", "last_name": "Q", "password": password,
            })),
        )
        .await;
        assert_eq!(signup, expected, "signup {password:?}");
    }
    for password in weak(&user.email) {
        assert_eq!(
            error_of(reset(&cx, &token, &password).await),
            expected,
            "reset {password:?}"
        );
        let change = cx
            .client_with_token(&user.token)
            .auth_change_password()
            .body(
                ChangePasswordRequest::builder()
                    .current_password(TEST_PASSWORD.to_string())
                    .new_password(password.clone()),
            )
            .send()
            .await;
        assert_eq!(error_of(change), expected, "change {password:?}");
    }
    // None of that spent the token or changed the password.
    assert!(reset(&cx, &token, NEW_PASSWORD).await.is_ok());
    cx.teardown().await;
}
