//! CORS for the whole API: preflights answered for every route with its
//! methods, the allowed request headers and a max-age; allowed origins get
//! `Access-Control-Allow-Origin` (errors included) and the exposed headers;
//! refused origins get nothing a browser would accept; the deployment
//! endpoint keeps its per-deployment origins.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use workspace_tests::TestContext;

const APP: &str = "https://app.example.com";
const EVIL: &str = "https://evil.example.net";

async fn preflight(cx: &TestContext, path: &str, origin: &str, method: &str) -> reqwest::Response {
    workspace_tests::http()
        .request(Method::OPTIONS, format!("{}{path}", cx.base_url))
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .expect("a preflight")
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

fn list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or("")
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

#[tokio::test]
async fn cors_preflights_and_responses_follow_the_allowed_origins() {
    let cx = TestContext::with_config("cors", |c| {
        // Any case and a default port are the same origin.
        c.http.cors_allowed_origins = vec![APP.to_string(), "http://localhost:5173".to_string()];
        c.http.cors_max_age_secs = 321;
    })
    .await;
    let ada = cx.user("cors-ada").await;

    // A preflight of a GET route from an allowed origin.
    let r = preflight(&cx, "/api/users/me", APP, "GET").await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(header(&r, "access-control-allow-origin"), Some(APP));
    assert_eq!(list(header(&r, "access-control-allow-methods")), ["get"]);
    let allowed = list(header(&r, "access-control-allow-headers"));
    for h in ["authorization", "content-type", "last-event-id"] {
        assert!(allowed.contains(&h.to_string()), "{allowed:?}");
    }
    assert_eq!(header(&r, "access-control-max-age"), Some("321"));
    assert!(list(header(&r, "vary")).contains(&"origin".to_string()));
    // A path with several methods lists them all (/api/tools: create is
    // POST, update is PUT).
    let r = preflight(&cx, "/api/tools", APP, "PUT").await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        list(header(&r, "access-control-allow-methods")),
        ["post", "put"]
    );

    // A method the route does not have, and a refused origin: 403 with the
    // usual JSON error, and nothing a browser would accept.
    let r = preflight(&cx, "/api/users/me", APP, "DELETE").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error_code"], "method_not_allowed");
    let r = preflight(&cx, "/api/users/me", EVIL, "GET").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error_code"], "origin_not_allowed");
    // An unknown path: the usual 404.
    let r = preflight(&cx, "/api/no/such/route", APP, "GET").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The actual requests: the allowed origin may read the answer and the
    // exposed headers, errors included; the refused one gets no grant.
    let get = |origin: &'static str, token: Option<String>| {
        let url = format!("{}/api/users/me", cx.base_url);
        async move {
            let mut rq = workspace_tests::http().get(url).header("origin", origin);
            if let Some(t) = token {
                rq = rq.bearer_auth(t);
            }
            rq.send().await.expect("a request")
        }
    };
    let r = get(APP, Some(ada.token.clone())).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, "access-control-allow-origin"), Some(APP));
    let exposed = list(header(&r, "access-control-expose-headers"));
    for h in ["retry-after", "x-request-id"] {
        assert!(exposed.contains(&h.to_string()), "{exposed:?}");
    }
    assert!(list(header(&r, "vary")).contains(&"origin".to_string()));
    let r = get(APP, None).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&r, "access-control-allow-origin"), Some(APP));
    let r = get(EVIL, Some(ada.token.clone())).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    // The second configured origin, written with a port.
    let r = get("http://localhost:5173", Some(ada.token.clone())).await;
    assert_eq!(
        header(&r, "access-control-allow-origin"),
        Some("http://localhost:5173")
    );

    // The deployment endpoint answers with its deployment's origins, not
    // the API's: an allowed API origin gets no grant there.
    let r = workspace_tests::http()
        .post(format!(
            "{}/api/agent_deploy/v1/chat/completions",
            cx.base_url
        ))
        .header("origin", APP)
        .bearer_auth("wsk_live_not-a-key")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    cx.teardown().await;
}

#[tokio::test]
async fn without_allowed_origins_the_api_is_same_origin_only() {
    let cx = TestContext::new("cors_off").await;
    let ada = cx.user("cors-off-ada").await;
    let r = preflight(&cx, "/api/users/me", APP, "GET").await;
    // No policy: the router's own answer (no OPTIONS route), no grant.
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    let r = workspace_tests::http()
        .get(format!("{}/api/users/me", cx.base_url))
        .header("origin", APP)
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    cx.teardown().await;
}

/// `Server-Timing: app;dur=<ms>` on every answer (successes, errors,
/// preflights, streams), readable by a page on an allowed origin
/// (`Timing-Allow-Origin`), never granted to a refused one; absent when
/// `http.server_timing` is off (issue #37).
#[tokio::test]
async fn every_answer_says_how_long_the_server_took() {
    fn duration(r: &reqwest::Response) -> f64 {
        let value = header(r, "server-timing").expect("a Server-Timing header");
        let dur = value
            .strip_prefix("app;dur=")
            .unwrap_or_else(|| panic!("{value}"));
        let ms: f64 = dur.parse().unwrap_or_else(|_| panic!("{value}"));
        assert!((0.0..60_000.0).contains(&ms), "{value}");
        ms
    }
    let cx = TestContext::with_config("server_timing", |c| {
        c.http.cors_allowed_origins = vec![APP.to_string()];
    })
    .await;
    let ada = cx.user("timing-ada").await;
    let http = workspace_tests::http();
    let ok = http
        .get(format!("{}/api/users/me", cx.base_url))
        .bearer_auth(&ada.token)
        .header("origin", APP)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    duration(&ok);
    assert_eq!(header(&ok, "timing-allow-origin"), Some(APP));
    assert!(
        list(header(&ok, "access-control-expose-headers")).contains(&"server-timing".to_string())
    );
    let refused = http
        .get(format!("{}/api/users/me", cx.base_url))
        .header("origin", EVIL)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    duration(&refused);
    assert_eq!(header(&refused, "timing-allow-origin"), None);
    let unknown = http
        .get(format!("{}/api/no/such/route", cx.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    duration(&unknown);
    duration(&preflight(&cx, "/api/users/me", APP, "GET").await);
    // A slow answer says so: a password check takes tens of milliseconds.
    let login = http
        .post(format!("{}/api/auth/login", cx.base_url))
        .json(&json!({"email": ada.email, "password": workspace_tests::TEST_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    assert!(
        duration(&login) >= 1.0,
        "{:?}",
        header(&login, "server-timing")
    );
    cx.teardown().await;

    let off = TestContext::with_config("server_timing_off", |c| {
        c.http.server_timing = false;
    })
    .await;
    let r = workspace_tests::http()
        .get(format!("{}/healthz", off.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, "server-timing"), None);
    off.teardown().await;
}
