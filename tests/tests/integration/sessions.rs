//! Sessions (issue #34 item 1): refresh-token rotation with reuse
//! detection, logout and revocation seen by every instance at once,
//! listing and revoking sessions, and tokens issued before sessions existed.

use std::time::{Duration, Instant};
use workspace_client::Client;
use workspace_client::types::{LoginRequest, LoginResponse, RefreshRequest};
use workspace_tests::{TEST_JWT_SECRET, TEST_PASSWORD, TestContext, TestUser, error_of};

/// Logs `user` in again (a new session) from a client with `user_agent`.
async fn login_as(cx: &TestContext, user: &TestUser, user_agent: &str) -> LoginResponse {
    let http = reqwest::Client::builder()
        .user_agent(user_agent)
        .build()
        .unwrap();
    Client::new_with_client(&cx.base_url, http)
        .auth_login()
        .body(
            LoginRequest::builder()
                .email(user.email.clone())
                .password(TEST_PASSWORD.to_string()),
        )
        .send()
        .await
        .expect("login")
        .into_inner()
}

async fn refresh(
    base_url: &str,
    refresh_token: &str,
) -> Result<LoginResponse, workspace_client::Error<workspace_client::types::Error>> {
    Client::anonymous(base_url)
        .unwrap()
        .auth_refresh()
        .body(RefreshRequest::builder().refresh_token(refresh_token.to_string()))
        .send()
        .await
        .map(|r| r.into_inner())
}

/// The status and `error_code` of `GET /api/users/me` with `token` on the
/// instance at `base_url`.
async fn me(base_url: &str, token: &str) -> (u16, String) {
    match Client::authenticated(base_url, token)
        .unwrap()
        .users_me()
        .send()
        .await
    {
        Ok(_) => (200, String::new()),
        Err(e) => error_of::<()>(Err(e)),
    }
}

/// The status and `error_code` of an org-scoped operation (the
/// authorization statement) with `token`.
async fn org_scoped(base_url: &str, token: &str, org: uuid::Uuid) -> (u16, String) {
    match Client::authenticated(base_url, token)
        .unwrap()
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
    {
        Ok(_) => (200, String::new()),
        Err(e) => error_of::<()>(Err(e)),
    }
}

/// The status and `error_code` of an operation on the caller's own
/// account (`ServerContext::authenticate`) with `token`.
async fn own_account(base_url: &str, token: &str) -> (u16, String) {
    match Client::authenticated(base_url, token)
        .unwrap()
        .auth_sessions()
        .send()
        .await
    {
        Ok(_) => (200, String::new()),
        Err(e) => error_of::<()>(Err(e)),
    }
}

fn revoked() -> (u16, String) {
    (401, "session_revoked".to_string())
}

#[tokio::test]
async fn refresh_rotates_the_refresh_token_and_keeps_the_session() {
    let cx = TestContext::new("sessions_refresh_rotates").await;
    let user = cx.user("rota").await;
    let first = login_as(&cx, &user, "rota-laptop/1.0").await;
    assert!(first.refresh_token.starts_with("wsr_"));

    let second = refresh(&cx.base_url, &first.refresh_token).await.unwrap();
    assert_eq!(second.session_id, first.session_id);
    assert_ne!(second.refresh_token, first.refresh_token);
    assert_ne!(second.access_token, first.access_token);
    assert_eq!(second.expires_in, 900);
    // Both access tokens of the session work (the old one until it
    // expires), and the access token carries the session.
    assert_eq!(me(&cx.base_url, &second.access_token).await.0, 200);
    assert_eq!(me(&cx.base_url, &first.access_token).await.0, 200);
    let claims = jwt_claims(&second.access_token);
    assert_eq!(claims["sid"], second.session_id.to_string());
    assert_eq!(claims["sub"], user.id.to_string());

    // The refresh token is stored hashed only.
    let db = cx.db().await;
    let stored: i64 = db
        .query_one(
            "SELECT count(*) FROM refresh_tokens WHERE token_hash = sha256($1::text::bytea)",
            &[&second.refresh_token],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 1);
    let plain: i64 = db
        .query_one(
            "SELECT count(*) FROM refresh_tokens WHERE encode(token_hash, 'escape') LIKE '%wsr_%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(plain, 0);

    // Garbage, a well-shaped unknown token and an expired one are refused
    // alike, and none of them ends the session.
    for bad in [
        "",
        "not-a-token",
        "wsr_",
        &format!("wsr_{}", "A".repeat(43)),
        &first.access_token,
    ] {
        // Raw: the generated client refuses an over-long one itself.
        let refused = workspace_tests::raw(
            &cx.base_url,
            None,
            reqwest::Method::POST,
            "/api/auth/refresh",
            &[],
            Some(serde_json::json!({ "refresh_token": bad })),
        )
        .await;
        assert_eq!(
            refused,
            (401, "invalid_refresh_token".to_string()),
            "{bad:?}"
        );
    }
    let third = refresh(&cx.base_url, &second.refresh_token).await.unwrap();
    db.execute(
        "UPDATE refresh_tokens SET expires_at = now() - interval '1 second' \
         WHERE token_hash = sha256($1::text::bytea)",
        &[&third.refresh_token],
    )
    .await
    .unwrap();
    let (status, code) = error_of(refresh(&cx.base_url, &third.refresh_token).await);
    assert_eq!((status, code.as_str()), (401, "invalid_refresh_token"));
    assert_eq!(me(&cx.base_url, &third.access_token).await.0, 200);
    cx.teardown().await;
}

/// The claims of a JWT, read without verifying it.
fn jwt_claims(token: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn an_expired_access_token_is_renewed_with_the_refresh_token() {
    let cx = TestContext::with_config("sessions_expired_access", |c| {
        c.auth.token_lifetime_secs = 1;
    })
    .await;
    let user = cx.user("expiring").await;
    // Past the lifetime and the server's 5 s leeway.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        me(&cx.base_url, &user.token).await,
        (401, "token_expired".to_string())
    );
    let renewed = refresh(&cx.base_url, &user.refresh_token).await.unwrap();
    assert_eq!(renewed.expires_in, 1);
    assert_eq!(me(&cx.base_url, &renewed.access_token).await.0, 200);
    cx.teardown().await;
}

#[tokio::test]
async fn a_stolen_rotated_refresh_token_revokes_the_whole_session() {
    let cx = TestContext::new("sessions_stolen_refresh").await;
    let user = cx.user("victim").await;
    let org = user.personal_org().await;
    let other_session = login_as(&cx, &user, "victim-phone/2.0").await;

    // The client refreshes (T1 -> T2); an attacker who copied T1 presents
    // it afterwards.
    let stolen = user.refresh_token.clone();
    let legit = refresh(&cx.base_url, &stolen).await.unwrap();
    let (status, code) = error_of(refresh(&cx.base_url, &stolen).await);
    assert_eq!((status, code.as_str()), (401, "refresh_token_reused"));
    // Every token of that session is dead: the client's new access token,
    // its new refresh token and the first access token.
    assert_eq!(me(&cx.base_url, &legit.access_token).await, revoked());
    assert_eq!(
        org_scoped(&cx.base_url, &legit.access_token, org).await,
        revoked()
    );
    assert_eq!(me(&cx.base_url, &user.token).await, revoked());
    let (status, code) = error_of(refresh(&cx.base_url, &legit.refresh_token).await);
    assert_eq!((status, code.as_str()), (401, "session_revoked"));
    // The user's other session is untouched.
    assert_eq!(me(&cx.base_url, &other_session.access_token).await.0, 200);

    // The other order: the attacker refreshes first with a copied token,
    // then the client presents it: the attacker's tokens die as well.
    let copied = other_session.refresh_token.clone();
    let attacker = refresh(&cx.base_url, &copied).await.unwrap();
    assert_eq!(me(&cx.base_url, &attacker.access_token).await.0, 200);
    let (status, code) = error_of(refresh(&cx.base_url, &copied).await);
    assert_eq!((status, code.as_str()), (401, "refresh_token_reused"));
    assert_eq!(me(&cx.base_url, &attacker.access_token).await, revoked());
    let (status, _) = error_of(refresh(&cx.base_url, &attacker.refresh_token).await);
    assert_eq!(status, 401);

    let db = cx.db().await;
    let reasons: Vec<String> = db
        .query(
            "SELECT revoked_reason FROM sessions WHERE user_id = $1 AND revoked_at IS NOT NULL",
            &[&user.id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(reasons, ["refresh_token_reused", "refresh_token_reused"]);
    cx.teardown().await;
}

#[tokio::test]
async fn two_refreshes_racing_with_one_token_exactly_one_wins() {
    let cx = TestContext::new("sessions_refresh_race").await;
    let user = cx.user("racer").await;
    // Several rounds, each on a fresh session, the two requests on two
    // instances released together.
    let second = cx.second_instance(|_| {}).await;
    let second_url = format!("http://{}", second.local_addr());
    for round in 0..5 {
        let session = login_as(&cx, &user, "racer/1.0").await;
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let run = |url: String| {
            let barrier = barrier.clone();
            let token = session.refresh_token.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                refresh(&url, &token).await
            })
        };
        let (a, b) = (run(cx.base_url.clone()), run(second_url.clone()));
        let results = [a.await.unwrap(), b.await.unwrap()];
        let winners: Vec<&LoginResponse> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let loser = results.into_iter().find(|r| r.is_err()).unwrap();
        let (status, code) = error_of(loser);
        // The loser presented a used token: indistinguishable from a thief,
        // so the session is revoked (see the operation's description).
        assert_eq!((status, code.as_str()), (401, "refresh_token_reused"));
        let db = cx.db().await;
        let live: i64 = db
            .query_one(
                "SELECT count(*) FROM refresh_tokens WHERE session_id = $1 AND rotated_at IS NULL",
                &[&session.session_id],
            )
            .await
            .unwrap()
            .get(0);
        // Exactly one new refresh token was issued.
        assert_eq!(live, 1, "round {round}");
    }
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn logout_is_refused_on_every_instance_within_a_second() {
    let cx = TestContext::new("sessions_logout_two_instances").await;
    let user = cx.user("leaver").await;
    let org = user.personal_org().await;
    let second = cx.second_instance(|_| {}).await;
    let b = format!("http://{}", second.local_addr());

    // Each path that checks a session: users/me's statement, the
    // authorization statement and `authenticate`'s.
    type Probe =
        fn(String, String, uuid::Uuid) -> futures::future::BoxFuture<'static, (u16, String)>;
    let probes: [(&str, Probe); 3] = [
        ("users/me", |url, token, _| {
            Box::pin(async move { me(&url, &token).await })
        }),
        ("org-scoped", |url, token, org| {
            Box::pin(async move { org_scoped(&url, &token, org).await })
        }),
        ("own account", |url, token, _| {
            Box::pin(async move { own_account(&url, &token).await })
        }),
    ];
    for (name, probe) in probes {
        let session = login_as(&cx, &user, "leaver/1.0").await;
        let token = session.access_token.clone();
        // Both instances have verified (and remembered) the token.
        assert_eq!(probe(cx.base_url.clone(), token.clone(), org).await.0, 200);
        assert_eq!(probe(b.clone(), token.clone(), org).await.0, 200);

        // Log out on instance A; poll instance B until it refuses.
        let message = cx
            .client_with_token(&token)
            .auth_logout()
            .send()
            .await
            .unwrap()
            .into_inner()
            .message;
        assert!(message.contains("revoked"), "{message}");
        let revoked_at = Instant::now();
        let refused = loop {
            let answer = probe(b.clone(), token.clone(), org).await;
            if answer.0 == 401 {
                break answer;
            }
            assert!(
                revoked_at.elapsed() < Duration::from_secs(1),
                "{name}: instance B still accepts the token after a second"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let delay = revoked_at.elapsed();
        println!("{name}: logout on instance A to refusal on instance B: {delay:?}");
        assert_eq!(refused, revoked(), "{name}");
        assert_eq!(
            probe(cx.base_url.clone(), token.clone(), org).await,
            revoked()
        );
        // The session's refresh token is dead too.
        let (status, code) = error_of(refresh(&b, &session.refresh_token).await);
        assert_eq!((status, code.as_str()), (401, "session_revoked"));
    }
    // The harness's own login session is untouched.
    assert_eq!(me(&b, &user.token).await.0, 200);
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn sessions_are_listed_and_revoked_one_or_all_others() {
    let cx = TestContext::new("sessions_list_revoke").await;
    let user = cx.user("lister").await;
    let laptop = login_as(&cx, &user, "Lister-Laptop/1.0").await;
    let phone = login_as(&cx, &user, "Lister-Phone/2.0").await;
    let stranger = cx.user("stranger").await;

    let sessions = cx
        .client_with_token(&laptop.access_token)
        .auth_sessions()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    // Newest first, the caller's marked.
    assert_eq!(sessions[0].id, phone.session_id);
    assert_eq!(sessions[1].id, laptop.session_id);
    let current: Vec<_> = sessions
        .iter()
        .filter(|s| s.current)
        .map(|s| s.id)
        .collect();
    assert_eq!(current, [laptop.session_id]);
    assert_eq!(sessions[0].user_agent.as_deref(), Some("Lister-Phone/2.0"));
    assert_eq!(sessions[0].ip_address.as_deref(), Some("127.0.0.1"));
    assert!(sessions[0].expires_at > sessions[0].last_used_at);

    // Another user's session, and an unknown one, are not found.
    let (status, code) = error_of(
        cx.client_with_token(&stranger.token)
            .auth_revoke_session()
            .session_id(phone.session_id)
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));
    assert_eq!(me(&cx.base_url, &phone.access_token).await.0, 200);

    // Revoke the phone from the laptop.
    let done = cx
        .client_with_token(&laptop.access_token)
        .auth_revoke_session()
        .session_id(phone.session_id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.revoked, 1);
    assert_eq!(me(&cx.base_url, &phone.access_token).await, revoked());
    let (status, _) = error_of(
        cx.client_with_token(&laptop.access_token)
            .auth_revoke_session()
            .session_id(phone.session_id)
            .send()
            .await,
    );
    assert_eq!(status, 404);

    // Everywhere else: the harness's session goes, the laptop stays.
    let done = cx
        .client_with_token(&laptop.access_token)
        .auth_revoke_other_sessions()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.revoked, 1);
    assert_eq!(me(&cx.base_url, &user.token).await, revoked());
    assert_eq!(me(&cx.base_url, &laptop.access_token).await.0, 200);
    let left = cx
        .client_with_token(&laptop.access_token)
        .auth_sessions()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(left.len(), 1);
    assert!(left[0].current);
    // The stranger's session was never touched.
    assert_eq!(me(&cx.base_url, &stranger.token).await.0, 200);

    // The janitor deletes sessions a day after they ended, with their
    // refresh tokens; live ones stay.
    let db = cx.db().await;
    db.execute(
        "UPDATE sessions SET revoked_at = now() - interval '2 days' WHERE id = $1",
        &[&phone.session_id],
    )
    .await
    .unwrap();
    let datastore = &cx.server.http.app_private().datastore;
    let deleted = datastore
        .expire_counters(900, 30 * 24 * 3600)
        .await
        .unwrap();
    // (Its refresh tokens go by the foreign key's cascade, not counted.)
    assert!(deleted >= 1, "{deleted}");
    let left: Vec<uuid::Uuid> = db
        .query(
            "SELECT s.id FROM sessions s WHERE s.user_id = $1 \
             AND EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.session_id = s.id)",
            &[&user.id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!left.contains(&phone.session_id), "{left:?}");
    assert!(left.contains(&laptop.session_id), "{left:?}");
    cx.teardown().await;
}

/// A token as the version before sessions issued it: no `sid` claim.
fn legacy_token(user: uuid::Uuid) -> String {
    let now = chrono::Utc::now().timestamp();
    let claims = serde_json::json!({
        "sub": user, "iat": now - 60, "nbf": now - 60, "exp": now + 3600,
        "iss": "workspace", "aud": "workspace-api", "jti": uuid::Uuid::new_v4(),
    });
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(TEST_JWT_SECRET.as_bytes()),
    )
    .unwrap()
}

#[tokio::test]
async fn tokens_issued_before_sessions_work_until_the_password_changes() {
    let cx = TestContext::new("sessions_legacy_tokens").await;
    let user = cx.user("oldtimer").await;
    let org = user.personal_org().await;
    let legacy = legacy_token(user.id);
    // The upgrade logs no one out: every path accepts the old token.
    assert_eq!(me(&cx.base_url, &legacy).await.0, 200);
    assert_eq!(org_scoped(&cx.base_url, &legacy, org).await.0, 200);
    assert_eq!(own_account(&cx.base_url, &legacy).await.0, 200);
    // It has no session to log out of, and lists none as current.
    let message = cx
        .client_with_token(&legacy)
        .auth_logout()
        .send()
        .await
        .unwrap()
        .into_inner()
        .message;
    assert!(message.contains("before sessions"), "{message}");
    assert_eq!(me(&cx.base_url, &legacy).await.0, 200);
    let sessions = cx
        .client_with_token(&legacy)
        .auth_sessions()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(sessions.iter().all(|s| !s.current));

    // A password change (from a session) ends it, as it ends other
    // sessions.
    cx.client_with_token(&user.token)
        .auth_change_password()
        .body(
            workspace_client::types::ChangePasswordRequest::builder()
                .current_password(TEST_PASSWORD.to_string())
                .new_password("a brand new passphrase".to_string()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(me(&cx.base_url, &legacy).await, revoked());
    assert_eq!(org_scoped(&cx.base_url, &legacy, org).await, revoked());
    assert_eq!(me(&cx.base_url, &user.token).await.0, 200);
    cx.teardown().await;
}
