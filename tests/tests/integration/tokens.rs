//! Bearer-token handling: every malformed, expired, forged or unsigned token
//! is refused with 401 and a stable error code.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use workspace_tests::{TEST_JWT_SECRET, TestContext};

async fn me_status(cx: &TestContext, authorization: Option<&str>) -> (u16, String) {
    let mut request = workspace_tests::http().get(format!("{}/api/users/me", cx.base_url));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    if status == 401 {
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    let body: serde_json::Value = response.json().await.unwrap();
    (
        status,
        body["error_code"].as_str().unwrap_or_default().to_string(),
    )
}

fn sign(claims: &serde_json::Value, secret: &str, alg: Algorithm) -> String {
    jsonwebtoken::encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn claims(sub: uuid::Uuid, exp_offset: i64) -> serde_json::Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "sub": sub, "iat": now, "nbf": now, "exp": now + exp_offset,
        "iss": "workspace", "aud": "workspace-api", "jti": uuid::Uuid::new_v4(),
    })
}

fn b64(value: &serde_json::Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

#[tokio::test]
async fn token_tampering_is_refused() {
    let cx = TestContext::new("token_tampering").await;
    let user = cx.user("mallory").await;
    let bearer = |t: &str| format!("Bearer {t}");

    assert_eq!(me_status(&cx, Some(&bearer(&user.token))).await.0, 200);
    // Scheme is case-insensitive.
    assert_eq!(
        me_status(&cx, Some(&format!("bearer {}", user.token)))
            .await
            .0,
        200
    );

    let expect = |code: &'static str| (401u16, code.to_string());
    assert_eq!(me_status(&cx, None).await, expect("unauthenticated"));
    for header in [
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Token abc",
        "abc",
    ] {
        assert_eq!(
            me_status(&cx, Some(header)).await,
            expect("invalid_token"),
            "{header:?}"
        );
    }
    assert_eq!(
        me_status(&cx, Some("Bearer not.a.jwt")).await,
        expect("invalid_token")
    );

    // Expired.
    let expired = sign(&claims(user.id, -3600), TEST_JWT_SECRET, Algorithm::HS256);
    assert_eq!(
        me_status(&cx, Some(&bearer(&expired))).await,
        expect("token_expired")
    );
    // Not yet valid.
    let mut future = claims(user.id, 7200);
    future["nbf"] = json!(chrono::Utc::now().timestamp() + 3600);
    let future = sign(&future, TEST_JWT_SECRET, Algorithm::HS256);
    assert_eq!(
        me_status(&cx, Some(&bearer(&future))).await,
        expect("invalid_token")
    );
    // Signed with another key.
    let wrong_key = sign(
        &claims(user.id, 600),
        "another-secret-another-secret-0123456789",
        Algorithm::HS256,
    );
    assert_eq!(
        me_status(&cx, Some(&bearer(&wrong_key))).await,
        expect("invalid_token")
    );
    // Another HMAC algorithm with the right key.
    let hs512 = sign(&claims(user.id, 600), TEST_JWT_SECRET, Algorithm::HS512);
    assert_eq!(
        me_status(&cx, Some(&bearer(&hs512))).await,
        expect("invalid_token")
    );
    // alg: none, with and without a trailing signature.
    let header = json!({"alg": "none", "typ": "JWT"});
    let unsigned = format!("{}.{}.", b64(&header), b64(&claims(user.id, 600)));
    assert_eq!(
        me_status(&cx, Some(&bearer(&unsigned))).await,
        expect("invalid_token")
    );
    let unsigned = format!("{}.{}", b64(&header), b64(&claims(user.id, 600)));
    assert_eq!(
        me_status(&cx, Some(&bearer(&unsigned))).await,
        expect("invalid_token")
    );
    // A payload swapped under a valid signature.
    let other = cx.user("victim").await;
    let parts: Vec<&str> = user.token.split('.').collect();
    let forged = format!("{}.{}.{}", parts[0], b64(&claims(other.id, 600)), parts[2]);
    assert_eq!(
        me_status(&cx, Some(&bearer(&forged))).await,
        expect("invalid_token")
    );
    // Wrong audience, wrong issuer, missing exp.
    for (key, value) in [
        ("aud", json!("someone-else")),
        ("iss", json!("evil")),
        ("exp", json!(null)),
    ] {
        let mut c = claims(user.id, 600);
        if value.is_null() {
            c.as_object_mut().unwrap().remove(key);
        } else {
            c[key] = value;
        }
        let token = sign(&c, TEST_JWT_SECRET, Algorithm::HS256);
        assert_eq!(
            me_status(&cx, Some(&bearer(&token))).await,
            expect("invalid_token"),
            "{key}"
        );
    }
    // A well-signed token for a user that does not exist.
    let ghost = sign(
        &claims(uuid::Uuid::new_v4(), 600),
        TEST_JWT_SECRET,
        Algorithm::HS256,
    );
    assert_eq!(
        me_status(&cx, Some(&bearer(&ghost))).await,
        expect("invalid_token")
    );
    cx.teardown().await;
}

#[tokio::test]
async fn token_lifetime_is_configurable() {
    let cx = TestContext::with_config("token_lifetime", |c| c.auth.token_lifetime_secs = 120).await;
    let user = cx.user("short").await;
    let payload = user.token.split('.').nth(1).unwrap();
    use base64::Engine;
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    let claims: serde_json::Value = serde_json::from_slice(&decoded).unwrap();
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        120
    );
    assert_eq!(claims["sub"], json!(user.id));
    assert_eq!(claims["iss"], "workspace");
    assert_eq!(claims["aud"], "workspace-api");
    cx.teardown().await;
}

#[tokio::test]
async fn generated_secret_is_shared_through_the_key_file() {
    // No configured secret: the first instance generates one into the key
    // file (as the embedded database's server does), the second reads the
    // same file, so a token from one is accepted by the other. The secret
    // is not in the database.
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("server.keys");
    let from_file = |create: bool| {
        let key_file = key_file.clone();
        move |c: &mut workspace_server::config::Config| {
            c.auth.jwt_secret = None;
            c.secrets.key_file = Some(key_file);
            c.secrets.generate_key_file = create;
        }
    };
    let cx = TestContext::with_config("generated_secret", from_file(true)).await;
    let user = cx.user("shared").await;
    let second = cx.second_instance(from_file(false)).await;
    let client = workspace_client::Client::authenticated(
        &format!("http://{}", second.local_addr()),
        &user.token,
    )
    .unwrap();
    let me = client.users_me().send().await.unwrap().into_inner();
    assert_eq!(me.id, user.id);
    let kept: i64 = cx
        .db()
        .await
        .query_one("SELECT count(*) FROM server_secrets", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 0, "the secret is kept in the database");
    second.shutdown().await.unwrap();
    cx.teardown().await;
}
