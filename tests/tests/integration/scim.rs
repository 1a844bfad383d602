//! SCIM 2.0 provisioning (issue #37): the compliance checker `scim2-tester`
//! (PyPI, unmodified: `tests/peers/scim_check.py`) finds no violation; an
//! identity provider's Users and Groups become members with the roles
//! their groups map to, on any instance; a deprovisioned person is
//! suspended at once (their session and tokens refused on the next
//! request); tokens are per organization and rotate; hostile requests are
//! bounded.

use reqwest::Method;
use serde_json::{Value, json};
use std::io::BufRead;
use workspace_client::types;
use workspace_tests::{TestContext, TestUser, http};

const SCIM_JSON: &str = "application/scim+json";

/// A SCIM request as an identity provider sends it: status, headers, body
/// (`null` when there is none).
async fn scim(
    base_url: &str,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = http()
        .request(method, format!("{base_url}/scim/v2{path}"))
        .bearer_auth(token);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", SCIM_JSON)
            .body(body.to_string());
    }
    let response = request.send().await.expect("SCIM request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("SCIM body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
    };
    (status, headers, body)
}

/// A team organization of `owner` with SCIM on; its token.
async fn scim_org(owner: &TestUser, name: &str) -> (uuid::Uuid, String) {
    let org = owner.create_org(name).await;
    let issued = owner
        .client
        .org_scim_token()
        .org_id(org)
        .send()
        .await
        .expect("a SCIM token")
        .into_inner();
    assert!(issued.token.starts_with("wscim_"), "{}", issued.token);
    assert!(issued.config.token_set);
    (org, issued.token)
}

/// A person's membership in `org`: its status and role's name.
async fn member_of(
    cx: &TestContext,
    org: uuid::Uuid,
    user: uuid::Uuid,
) -> Option<(String, String)> {
    cx.db()
        .await
        .query_opt(
            "SELECT m.status::text, r.name FROM memberships m JOIN roles r ON r.id = m.role_id \
             WHERE m.organization_id = $1 AND m.user_id = $2",
            &[&org, &user],
        )
        .await
        .expect("the membership")
        .map(|r| (r.get(0), r.get(1)))
}

#[tokio::test]
async fn the_compliance_checker_finds_no_violation() {
    let cx = TestContext::new("scim_compliance").await;
    let owner = cx.user("scimowner").await;
    let (_org, token) = scim_org(&owner, "Compliance").await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join("scim_check.py");
    // The checker blocks while the server (in this test's runtime) answers.
    let base_url = format!("{}/scim/v2", cx.base_url);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(workspace_tests::python())
            .arg(&script)
            .arg(base_url)
            .arg(&token)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("python with scim2-tester (cargo xtask test installs it)")
    })
    .await
    .expect("the checker");
    assert!(output.status.success(), "scim_check.py failed");
    let mut violations = Vec::new();
    let mut successes = std::collections::HashMap::<String, usize>::new();
    let mut summary = None;
    for line in output.stdout.lines() {
        let line = line.expect("a line");
        let value: Value = serde_json::from_str(&line).expect("a JSON line");
        if value.get("summary").is_some() {
            summary = Some(value);
            continue;
        }
        let status = value["status"].as_str().unwrap_or_default();
        if status == "ERROR" || status == "CRITICAL" {
            violations.push(value.clone());
        }
        if status == "SUCCESS" {
            let kind = value["resource_type"].as_str().unwrap_or("-").to_string();
            *successes.entry(kind).or_default() += 1;
        }
    }
    let summary = summary.expect("the checker's summary");
    eprintln!("scim2-tester: {summary}");
    assert!(
        violations.is_empty(),
        "scim2-tester found {} violation(s): {violations:#?}",
        violations.len()
    );
    // It checked the resources, not only the discovery endpoints.
    assert!(
        successes.get("User").copied().unwrap_or(0) >= 20
            && successes.get("Group").copied().unwrap_or(0) >= 5,
        "too few checks passed on resources: {successes:?} ({summary})"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn provisioned_people_get_roles_from_groups_and_are_suspended_at_once_on_two_instances() {
    let cx = TestContext::new("scim_provisioning").await;
    let b = cx.second_instance(|_| {}).await;
    let b_url = format!("http://{}", b.local_addr());
    let owner = cx.user("scimboss").await;
    let (org, token) = scim_org(&owner, "Provisioned").await;
    // Groups map to roles (set on instance A, used by B's requests).
    owner
        .client
        .org_scim_put()
        .org_id(org)
        .body(
            types::ScimConfigInput::builder()
                .role_mappings(vec![types::ScimRoleMapping {
                    group: "Admins".to_string(),
                    role: "admin".to_string(),
                }])
                .default_role("member".to_string()),
        )
        .send()
        .await
        .expect("scim put");

    // A person who already has an account and is a member, and a new one.
    let ada = cx.user("ada-scim").await;
    let member_role = owner.role_id(org, "member").await;
    owner.add_member(org, ada.id, member_role).await;
    let (status, headers, ada_scim) = scim(
        &b_url,
        &token,
        Method::POST,
        "/Users",
        Some(json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "userName": "Ada.SCIM@example.com",
            "externalId": "okta-1",
            "name": {"givenName": "Ada", "familyName": "Lovelace"},
            "emails": [{"value": ada.email, "type": "work", "primary": true}],
            "active": true
        })),
        &[],
    )
    .await;
    assert_eq!(status, 201, "{ada_scim}");
    assert_eq!(headers["content-type"], SCIM_JSON);
    let ada_id = ada_scim["id"].as_str().unwrap().to_string();
    assert_eq!(
        headers["location"].to_str().unwrap(),
        ada_scim["meta"]["location"].as_str().unwrap()
    );
    assert_eq!(
        headers["etag"].to_str().unwrap(),
        ada_scim["meta"]["version"].as_str().unwrap()
    );
    // userName is unique without case.
    let (status, _, body) = scim(
        &cx.base_url,
        &token,
        Method::POST,
        "/Users",
        Some(
            json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                    "userName": "ada.scim@EXAMPLE.com"}),
        ),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["scimType"].as_str()),
        (409, Some("uniqueness")),
        "{body}"
    );

    let (status, _, grace) = scim(
        &cx.base_url,
        &token,
        Method::POST,
        "/Users",
        Some(json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "userName": "grace",
            "name": {"givenName": "Grace", "familyName": "Hopper"},
            "emails": [{"value": "grace.scim@example.com", "type": "work"}]
        })),
        &[],
    )
    .await;
    assert_eq!(status, 201, "{grace}");
    let grace_user: uuid::Uuid = {
        let db = cx.db().await;
        db.query_one(
            "SELECT id FROM users WHERE email_normalized = 'grace.scim@example.com'",
            &[],
        )
        .await
        .expect("the account made just in time")
        .get(0)
    };
    assert_eq!(
        member_of(&cx, org, grace_user).await,
        Some(("active".to_string(), "member".to_string()))
    );

    // A filter finds Ada without case, and by a value path.
    for filter in [
        r#"userName eq "ADA.scim@example.com""#,
        r#"emails[type eq "work" and value co "ada-scim"]"#,
        r#"externalId eq "okta-1" and active eq true"#,
    ] {
        let (status, _, list) = scim(
            &cx.base_url,
            &token,
            Method::GET,
            &format!("/Users?filter={}", urlencode(filter)),
            None,
            &[],
        )
        .await;
        assert_eq!(status, 200, "{filter}: {list}");
        assert_eq!(list["totalResults"], json!(1), "{filter}: {list}");
        assert_eq!(list["Resources"][0]["id"], json!(ada_id), "{filter}");
    }
    let (status, _, body) = scim(
        &cx.base_url,
        &token,
        Method::GET,
        &format!("/Users?filter={}", urlencode("userName xx \"a\"")),
        None,
        &[],
    )
    .await;
    assert_eq!(
        (status, body["scimType"].as_str()),
        (400, Some("invalidFilter")),
        "{body}"
    );

    // A Group mapped to `admin`: Ada becomes an admin (instance B writes,
    // A's members list shows it).
    let (status, _, group) = scim(
        &b_url,
        &token,
        Method::POST,
        "/Groups",
        Some(json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
            "displayName": "Admins",
            "members": [{"value": ada_id}]
        })),
        &[],
    )
    .await;
    assert_eq!(status, 201, "{group}");
    let group_id = group["id"].as_str().unwrap().to_string();
    assert_eq!(
        member_of(&cx, org, ada.id).await,
        Some(("active".to_string(), "admin".to_string()))
    );
    let (_, _, read) = scim(
        &cx.base_url,
        &token,
        Method::GET,
        &format!("/Users/{ada_id}"),
        None,
        &[],
    )
    .await;
    assert_eq!(read["groups"][0]["value"], json!(group_id), "{read}");
    assert_eq!(read["groups"][0]["display"], json!("Admins"));
    // A member that is not a provisioned resource is refused.
    let (status, _, body) = scim(
        &cx.base_url,
        &token,
        Method::PATCH,
        &format!("/Groups/{group_id}"),
        Some(
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                    "Operations": [{"op": "add", "path": "members",
                                    "value": [{"value": uuid::Uuid::new_v4().to_string()}]}]}),
        ),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["scimType"].as_str()),
        (400, Some("invalidValue")),
        "{body}"
    );
    // Removed from the group (Azure's shape): back to the default role.
    let (status, _, body) = scim(
        &b_url,
        &token,
        Method::PATCH,
        &format!("/Groups/{group_id}"),
        Some(
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                    "Operations": [{"op": "Remove", "path": "members",
                                    "value": [{"value": ada_id}]}]}),
        ),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        member_of(&cx, org, ada.id).await,
        Some(("active".to_string(), "member".to_string()))
    );

    // Versions: a stale If-Match is 412, a current If-None-Match is 304.
    let (_, headers, _) = scim(
        &cx.base_url,
        &token,
        Method::GET,
        &format!("/Users/{ada_id}"),
        None,
        &[],
    )
    .await;
    let etag = headers["etag"].to_str().unwrap().to_string();
    let (status, _, _) = scim(
        &cx.base_url,
        &token,
        Method::GET,
        &format!("/Users/{ada_id}"),
        None,
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(status, 304);
    let (status, _, _) = scim(
        &b_url,
        &token,
        Method::PATCH,
        &format!("/Users/{ada_id}"),
        Some(
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                    "Operations": [{"op": "replace", "path": "title", "value": "Countess"}]}),
        ),
        &[("if-match", "W/\"999\"")],
    )
    .await;
    assert_eq!(status, 412);

    // Ada's session and a token of hers work in the organization…
    let pat = ada
        .client
        .auth_tokens_create()
        .body(
            types::TokenCreate::builder()
                .name("ci".to_string())
                .scopes(vec!["organization:read".to_string()]),
        )
        .send()
        .await
        .expect("a token")
        .into_inner()
        .token;
    let in_org = |token: String, base: String| async move {
        workspace_tests::raw(
            &base,
            Some(&token),
            Method::GET,
            "/api/org/features",
            &[("org_id", org.to_string())],
            None,
        )
        .await
        .0
    };
    assert_eq!(in_org(ada.token.clone(), cx.base_url.clone()).await, 200);
    assert_eq!(in_org(pat.clone(), b_url.clone()).await, 200);
    // …until the provider deactivates her (Okta's shape, on instance B):
    // the next request on instance A is refused.
    let (status, _, body) = scim(
        &b_url,
        &token,
        Method::PATCH,
        &format!("/Users/{ada_id}"),
        Some(
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                    "Operations": [{"op": "replace", "value": {"active": false}}]}),
        ),
        &[],
    )
    .await;
    assert_eq!((status, &body["active"]), (200, &json!(false)), "{body}");
    assert_eq!(in_org(ada.token.clone(), cx.base_url.clone()).await, 403);
    assert_eq!(in_org(pat.clone(), cx.base_url.clone()).await, 403);
    assert_eq!(
        member_of(&cx, org, ada.id).await.map(|m| m.0),
        Some("suspended".to_string())
    );
    // Her own organization is not the provider's to close.
    assert_eq!(in_org_personal(&cx.base_url, &ada).await, 200);
    // Reactivated (Azure's shape: a string boolean), then deleted:
    // suspended again, her account kept.
    let (status, _, _) = scim(
        &cx.base_url,
        &token,
        Method::PATCH,
        &format!("/Users/{ada_id}"),
        Some(
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                    "Operations": [{"op": "Replace", "path": "active", "value": "True"}]}),
        ),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(in_org(ada.token.clone(), b_url.clone()).await, 200);
    let (status, _, _) = scim(
        &b_url,
        &token,
        Method::DELETE,
        &format!("/Users/{ada_id}"),
        None,
        &[],
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(in_org(ada.token.clone(), cx.base_url.clone()).await, 403);
    let (status, _, _) = scim(
        &cx.base_url,
        &token,
        Method::GET,
        &format!("/Users/{ada_id}"),
        None,
        &[],
    )
    .await;
    assert_eq!(status, 404);

    // An account outside the organization is not taken over.
    let outsider = cx.user("outsider-scim").await;
    let (status, _, body) = scim(
        &cx.base_url,
        &token,
        Method::POST,
        "/Users",
        Some(
            json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                    "userName": outsider.email}),
        ),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["scimType"].as_str()),
        (409, Some("uniqueness")),
        "{body}"
    );
    // The owner cannot be deactivated by provisioning.
    let (status, _, body) = scim(
        &cx.base_url,
        &token,
        Method::POST,
        "/Users",
        Some(
            json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                    "userName": owner.email, "active": false}),
        ),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["scimType"].as_str()),
        (400, Some("mutability")),
        "{body}"
    );

    // Tenancy: another organization's token sees none of this one's.
    let other_owner = cx.user("scimother").await;
    let (_, other_token) = scim_org(&other_owner, "Other").await;
    let (status, _, body) = scim(&b_url, &other_token, Method::GET, "/Users", None, &[]).await;
    assert_eq!((status, &body["totalResults"]), (200, &json!(0)), "{body}");
    let (status, _, _) = scim(
        &b_url,
        &other_token,
        Method::GET,
        &format!("/Groups/{group_id}"),
        None,
        &[],
    )
    .await;
    assert_eq!(status, 404);
    let (status, _, _) = scim(
        &b_url,
        &other_token,
        Method::DELETE,
        &format!("/Groups/{group_id}"),
        None,
        &[],
    )
    .await;
    assert_eq!(status, 404);

    // A new token: the old one is refused at once, on both instances.
    let rotated = owner
        .client
        .org_scim_token()
        .org_id(org)
        .send()
        .await
        .expect("rotated")
        .into_inner()
        .token;
    for base in [&cx.base_url, &b_url] {
        let (status, headers, body) = scim(base, &token, Method::GET, "/Users", None, &[]).await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(headers["content-type"], SCIM_JSON);
        assert_eq!(
            body["schemas"][0],
            json!("urn:ietf:params:scim:api:messages:2.0:Error")
        );
        assert_eq!(body["status"], json!("401"));
    }
    let (status, _, body) = scim(&b_url, &rotated, Method::GET, "/Users", None, &[]).await;
    assert_eq!((status, &body["totalResults"]), (200, &json!(1)), "{body}");
    let config = owner
        .client
        .org_scim_get()
        .org_id(org)
        .send()
        .await
        .expect("get")
        .into_inner();
    assert_eq!((config.users, config.groups), (1, 1));
    assert!(config.base_url.ends_with("/scim/v2"));

    // A member (not an admin) cannot see or issue the token.
    let bob = cx.user("bob-scim").await;
    owner.add_member(org, bob.id, member_role).await;
    for (method, path) in [
        (Method::POST, "/api/org/scim/token"),
        (Method::GET, "/api/org/scim"),
    ] {
        let (status, code) = workspace_tests::raw(
            &cx.base_url,
            Some(&bob.token),
            method,
            path,
            &[("org_id", org.to_string())],
            None,
        )
        .await;
        assert_eq!((status, code.as_str()), (403, "forbidden"), "{path}");
    }

    // Off: the token stops working, the members stay.
    owner
        .client
        .org_scim_delete()
        .org_id(org)
        .send()
        .await
        .expect("off");
    let (status, _, _) = scim(&cx.base_url, &rotated, Method::GET, "/Users", None, &[]).await;
    assert_eq!(status, 401);
    assert_eq!(
        member_of(&cx, org, grace_user).await.map(|m| m.0),
        Some("active".to_string())
    );
    b.shutdown().await.expect("second instance shutdown");
    cx.teardown().await;
}

/// The personal organization still answers for a deprovisioned person.
async fn in_org_personal(base_url: &str, user: &TestUser) -> u16 {
    let org = user.personal_org().await;
    workspace_tests::raw(
        base_url,
        Some(&user.token),
        Method::GET,
        "/api/org/features",
        &[("org_id", org.to_string())],
        None,
    )
    .await
    .0
}

/// Percent-encodes a query value (every byte but ASCII letters and digits).
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn hostile_requests_are_bounded() {
    let cx = TestContext::new("scim_hostile").await;
    let owner = cx.user("scimhostile").await;
    let (_org, token) = scim_org(&owner, "Hostile").await;
    // No token, a user's access token, garbage: 401 in SCIM's shape.
    for bad in ["", owner.token.as_str(), "wscim_AAAA", "wscim_' OR 1=1 --"] {
        let (status, _, body) = scim(&cx.base_url, bad, Method::GET, "/Users", None, &[]).await;
        assert_eq!(
            (status, &body["status"]),
            (401, &json!("401")),
            "{bad}: {body}"
        );
    }
    let huge_filter = format!("userName eq \"{}\"", "a".repeat(5000));
    let deep_filter = format!("{}userName pr{}", "(".repeat(200), ")".repeat(200));
    let injection = r#"userName eq "x\" || true || \"" or userName eq "$.a ? (@ == 1)""#;
    for filter in [huge_filter.as_str(), deep_filter.as_str()] {
        let (status, _, body) = scim(
            &cx.base_url,
            &token,
            Method::GET,
            &format!("/Users?filter={}", urlencode(filter)),
            None,
            &[],
        )
        .await;
        assert_eq!(
            (status, body["scimType"].as_str()),
            (400, Some("invalidFilter")),
            "{body}"
        );
    }
    let (status, _, body) = scim(
        &cx.base_url,
        &token,
        Method::GET,
        &format!("/Users?filter={}", urlencode(injection)),
        None,
        &[],
    )
    .await;
    assert_eq!((status, &body["totalResults"]), (200, &json!(0)), "{body}");
    // Too many values, a value too long, JSON nested past any sense, not
    // JSON at all.
    let emails: Vec<Value> = (0..500)
        .map(|i| json!({"value": format!("x{i}@example.com")}))
        .collect();
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    for body in [
        json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
               "userName": "many", "emails": emails}),
        json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
               "userName": "x".repeat(100_000)}),
    ] {
        let (status, _, answer) = scim(
            &cx.base_url,
            &token,
            Method::POST,
            "/Users",
            Some(body),
            &[],
        )
        .await;
        assert_eq!(
            (status, answer["scimType"].as_str()),
            (400, Some("invalidValue")),
            "{answer}"
        );
    }
    let response = http()
        .post(format!("{}/scim/v2/Users", cx.base_url))
        .bearer_auth(&token)
        .header("content-type", SCIM_JSON)
        .body(nested)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["scimType"], json!("invalidSyntax"), "{body}");
    // Nothing was written by any of it.
    let (_, _, list) = scim(&cx.base_url, &token, Method::GET, "/Users", None, &[]).await;
    assert_eq!(list["totalResults"], json!(0), "{list}");
    cx.teardown().await;
}
