//! Single sign-on per organization (issue #37) against panva's
//! `oidc-provider` (OpenID-certified, strict: PKCE required, RFC 9207
//! `iss`, claims in UserInfo), on two instances of one database: a sign-in
//! started on one finishes on the other. Just-in-time accounts and
//! memberships, roles from groups at every sign-in, sessions scoped to
//! their organization, an organization that requires single sign-on, keys
//! rotated between sign-ins, and a provider that answers for another
//! issuer.

use serde_json::json;
use uuid::Uuid;
use workspace_client::{Client, types};
use workspace_tests::sso_peer::{CLIENT_ID, CLIENT_SECRET, OidcSso};
use workspace_tests::{TestContext, error_of};

/// Where the provider sends the browser back: a page of the frontend,
/// never visited here (the test reads `code`, `state` and `iss` from it).
const REDIRECT: &str = "http://127.0.0.1:9/sso/back";
const DOMAIN: &str = "acme.example";

fn config(issuer: &str, enforced: bool) -> types::SsoConfigInput {
    types::SsoConfigInput {
        issuer: issuer.to_string(),
        client_id: CLIENT_ID.to_string(),
        client_secret: Some(CLIENT_SECRET.to_string()),
        domains: vec![DOMAIN.to_string()],
        groups_claim: None,
        role_mappings: vec![types::SsoRoleMapping {
            group: "admins".to_string(),
            role: "admin".to_string(),
        }],
        default_role: Some("member".to_string()),
        enforced,
    }
}

fn person(email: &str, groups: &[&str]) -> serde_json::Value {
    json!({
        "email": email,
        "email_verified": true,
        "given_name": "Carol",
        "family_name": "Jones",
        "groups": groups,
    })
}

/// Starts a sign-in on `starter` for `email`, signs in at the provider as
/// `login`, and answers the callback's body (`code`, `state`, `iss`).
async fn through_provider(
    peer: &OidcSso,
    starter: &Client,
    email: &str,
    login: &str,
) -> types::SsoCallbackRequest {
    let started = starter
        .auth_sso_start()
        .body(types::SsoStartRequest {
            email: Some(email.to_string()),
            organization_id: None,
            redirect_uri: REDIRECT.to_string(),
        })
        .send()
        .await
        .expect("sso start")
        .into_inner();
    assert!(
        started.authorization_url.starts_with(&peer.url),
        "{}",
        started.authorization_url
    );
    assert!(
        started
            .authorization_url
            .contains("code_challenge_method=S256")
    );
    let back = peer.sign_in(&started.authorization_url, login).await;
    assert!(back.as_str().starts_with(REDIRECT), "{back}");
    let param = |name: &str| {
        back.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string())
    };
    assert_eq!(param("state").as_deref(), Some(started.state.as_str()));
    types::SsoCallbackRequest {
        code: param("code").expect("a code"),
        state: started.state,
        iss: param("iss"),
    }
}

async fn role_in(client: &Client, org: Uuid) -> String {
    client
        .users_me()
        .send()
        .await
        .expect("users_me")
        .organizations
        .iter()
        .find(|o| o.id == org)
        .map(|o| o.role_name.clone())
        .unwrap_or_else(|| panic!("not a member of {org}"))
}

#[tokio::test]
async fn people_sign_in_just_in_time_with_roles_from_their_groups_on_any_instance() {
    let cx = TestContext::new("sso_jit").await;
    let second = cx.second_instance(|_| {}).await;
    let other = Client::new(&format!("http://{}", second.local_addr()));
    let peer = OidcSso::start(REDIRECT).await;
    let ada = cx.user("ada").await;
    let org = ada.create_org("Acme").await;

    // Only the organization's admins manage it.
    let bob = cx.user("bob").await;
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, bob.id, member).await;
    let (status, code) = error_of(
        bob.client
            .org_sso_put()
            .org_id(org)
            .body(config(&peer.issuer, false))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "forbidden"));
    let (status, code) = error_of(ada.client.org_sso_get().org_id(org).send().await);
    assert_eq!((status, code.as_str()), (404, "not_found"));

    // Checked before anything is stored.
    let mut bad = config(&peer.issuer, false);
    bad.domains = vec!["Not A Domain".to_string()];
    let (status, code) = error_of(ada.client.org_sso_put().org_id(org).body(bad).send().await);
    assert_eq!((status, code.as_str()), (400, "invalid_domains"));
    let mut bad = config(&peer.issuer, false);
    bad.default_role = Some("owner".to_string());
    let (status, code) = error_of(ada.client.org_sso_put().org_id(org).body(bad).send().await);
    assert_eq!((status, code.as_str()), (400, "invalid_role"));
    let mut bad = config(&peer.issuer, false);
    bad.client_secret = None;
    let (status, code) = error_of(ada.client.org_sso_put().org_id(org).body(bad).send().await);
    assert_eq!((status, code.as_str()), (400, "invalid_request"));

    let shown = ada
        .client
        .org_sso_put()
        .org_id(org)
        .body(config(&peer.issuer, false))
        .send()
        .await
        .expect("sso put")
        .into_inner();
    assert!(shown.client_secret_set);
    assert_eq!(shown.domains, vec![DOMAIN.to_string()]);
    assert_eq!(shown.groups_claim, "groups");
    let raw = workspace_tests::http()
        .get(format!("{}/api/org/sso?org_id={org}", cx.base_url))
        .bearer_auth(&ada.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!raw.contains(CLIENT_SECRET), "{raw}");
    let sealed: Vec<u8> = cx
        .db()
        .await
        .query_one("SELECT client_secret FROM sso_providers", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!String::from_utf8_lossy(&sealed).contains(CLIENT_SECRET));

    // Another organization cannot vouch for the same domain.
    let other_org = bob.create_org("Not Acme").await;
    let (status, code) = error_of(
        bob.client
            .org_sso_put()
            .org_id(other_org)
            .body(config(&peer.issuer, false))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (409, "sso_domain_taken"));

    // Carol has no account: her first sign-in (started here, finished on
    // the other instance) makes it and her membership, as an admin.
    let carol_email = format!("carol@{DOMAIN}");
    peer.set_account("carol", person(&carol_email, &["admins", "eng"]))
        .await;
    let callback = through_provider(&peer, &cx.anon(), &carol_email, "carol").await;
    assert_eq!(callback.iss.as_deref(), Some(peer.issuer.as_str()));
    let tokens = other
        .auth_sso_callback()
        .body(callback.clone())
        .send()
        .await
        .expect("sso callback")
        .into_inner();
    // The state works once.
    let (status, code) = error_of(cx.anon().auth_sso_callback().body(callback).send().await);
    assert_eq!((status, code.as_str()), (400, "invalid_sso_state"));
    let carol = cx.client_with_token(&tokens.access_token);
    let me = carol
        .users_me()
        .send()
        .await
        .expect("users_me")
        .into_inner();
    assert_eq!(me.email, carol_email);
    assert_eq!(me.first_name, "Carol");
    assert_eq!(role_in(&carol, org).await, "admin");
    // The session acts in Acme only (not even in her own organization).
    let personal = me
        .organizations
        .iter()
        .find(|o| o.id != org)
        .expect("her personal organization")
        .id;
    let (status, code) = error_of(carol.roles_list_roles().org_id(personal).send().await);
    assert_eq!((status, code.as_str()), (403, "sso_required"));
    carol
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .expect("roles in Acme");
    // Her password is nobody's: a password login fails as any wrong one.
    let (status, _) = error_of(
        cx.anon()
            .auth_login()
            .body(
                types::LoginRequest::builder()
                    .email(carol_email.clone())
                    .password(workspace_tests::TEST_PASSWORD.to_string()),
            )
            .send()
            .await,
    );
    assert_eq!(status, 401);

    // Out of the admins group: the next sign-in makes her a member; the
    // same account (by the provider's subject).
    peer.set_account("carol", person(&carol_email, &["eng"]))
        .await;
    let callback = through_provider(&peer, &other, &carol_email, "carol").await;
    let again = cx
        .anon()
        .auth_sso_callback()
        .body(callback)
        .send()
        .await
        .expect("second sign-in");
    let carol = cx.client_with_token(&again.access_token);
    assert_eq!(role_in(&carol, org).await, "member");
    assert_eq!(
        carol.users_me().send().await.unwrap().id,
        me.id,
        "the same account"
    );

    // RFC 9207: a response from another issuer is a mix-up.
    let mut callback = through_provider(&peer, &cx.anon(), &carol_email, "carol").await;
    callback.iss = Some("http://127.0.0.1:1".to_string());
    let (status, code) = error_of(cx.anon().auth_sso_callback().body(callback).send().await);
    assert_eq!((status, code.as_str()), (401, "sso_failed"));

    // An address outside the organization's domains.
    peer.set_account("mallory", person("mallory@evil.example", &["admins"]))
        .await;
    let callback = through_provider(&peer, &cx.anon(), &carol_email, "mallory").await;
    let (status, code) = error_of(cx.anon().auth_sso_callback().body(callback).send().await);
    assert_eq!((status, code.as_str()), (401, "sso_failed"));

    // No provider for a domain.
    let (status, code) = error_of(
        cx.anon()
            .auth_sso_start()
            .body(types::SsoStartRequest {
                email: Some("someone@elsewhere.example".to_string()),
                organization_id: None,
                redirect_uri: REDIRECT.to_string(),
            })
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));

    // An account with a vouched address that is not a member is not taken
    // over; once an admin adds it, single sign-on links it.
    let dave_email = format!("dave@{DOMAIN}");
    cx.anon()
        .auth_signup()
        .body(
            types::SignupRequest::builder()
                .email(dave_email.clone())
                .first_name("Dave".to_string())
                .last_name("Doe".to_string())
                .password(workspace_tests::TEST_PASSWORD.to_string()),
        )
        .send()
        .await
        .expect("dave signs up");
    peer.set_account("dave", person(&dave_email, &[])).await;
    let callback = through_provider(&peer, &cx.anon(), &dave_email, "dave").await;
    let (status, code) = error_of(cx.anon().auth_sso_callback().body(callback).send().await);
    assert_eq!((status, code.as_str()), (409, "email_taken"));
    let dave_id: Uuid = cx
        .db()
        .await
        .query_one(
            "SELECT id FROM users WHERE email_normalized = $1",
            &[&dave_email],
        )
        .await
        .unwrap()
        .get(0);
    ada.add_member(org, dave_id, member).await;
    let callback = through_provider(&peer, &cx.anon(), &dave_email, "dave").await;
    let dave = cx
        .anon()
        .auth_sso_callback()
        .body(callback)
        .send()
        .await
        .expect("dave signs in");
    let dave = cx.client_with_token(&dave.access_token);
    assert_eq!(dave.users_me().send().await.unwrap().id, dave_id);

    // Removed: sign-ins under way end with it.
    let callback = through_provider(&peer, &cx.anon(), &carol_email, "carol").await;
    ada.client
        .org_sso_delete()
        .org_id(org)
        .send()
        .await
        .expect("sso delete");
    let (status, code) = error_of(cx.anon().auth_sso_callback().body(callback).send().await);
    assert_eq!((status, code.as_str()), (400, "invalid_sso_state"));
    drop(second);
    cx.teardown().await;
}

#[tokio::test]
async fn an_organization_that_requires_sso_refuses_password_sessions_and_their_tokens() {
    let cx = TestContext::new("sso_enforced").await;
    let peer = OidcSso::start(REDIRECT).await;
    let ada = cx.user("ada").await;
    let org = ada.create_org("Acme").await;
    // Erin has a password account and is a member.
    let erin_email = format!("erin@{DOMAIN}");
    let erin = cx
        .anon()
        .auth_signup()
        .body(
            types::SignupRequest::builder()
                .email(erin_email.clone())
                .first_name("Erin".to_string())
                .last_name("Example".to_string())
                .password(workspace_tests::TEST_PASSWORD.to_string()),
        )
        .send()
        .await
        .expect("erin signs up");
    let member = ada.role_id(org, "member").await;
    ada.add_member(org, erin.id, member).await;
    let password_login = cx
        .anon()
        .auth_login()
        .body(
            types::LoginRequest::builder()
                .email(erin_email.clone())
                .password(workspace_tests::TEST_PASSWORD.to_string()),
        )
        .send()
        .await
        .expect("erin logs in")
        .into_inner();
    let erin_pw = cx.client_with_token(&password_login.access_token);
    let pat_pw = erin_pw
        .auth_tokens_create()
        .body(
            types::TokenCreate::builder()
                .name("laptop".to_string())
                .scopes(vec!["*:*".to_string()]),
        )
        .send()
        .await
        .expect("a token")
        .into_inner()
        .token;
    erin_pw
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .expect("before enforcement");

    ada.client
        .org_sso_put()
        .org_id(org)
        .body(config(&peer.issuer, true))
        .send()
        .await
        .expect("sso put, enforced");
    // Her password session and its token are refused in Acme, at once.
    let (status, code) = error_of(erin_pw.roles_list_roles().org_id(org).send().await);
    assert_eq!((status, code.as_str()), (403, "sso_required"));
    let erin_pat = cx.client_with_token(&pat_pw);
    let (status, code) = error_of(erin_pat.roles_list_roles().org_id(org).send().await);
    assert_eq!((status, code.as_str()), (403, "sso_required"));
    // Elsewhere they work as before.
    let personal = erin_pw
        .users_me()
        .send()
        .await
        .unwrap()
        .organizations
        .iter()
        .find(|o| o.id != org)
        .unwrap()
        .id;
    erin_pw
        .roles_list_roles()
        .org_id(personal)
        .send()
        .await
        .expect("her own organization");
    // The owner keeps password access (a broken provider must not lock the
    // organization out).
    ada.client
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .expect("the owner");

    // Through single sign-on: linked to her account (a member, with a
    // vouched address), and a token made in that session acts in Acme.
    peer.set_account("erin", person(&erin_email, &[])).await;
    let callback = through_provider(&peer, &cx.anon(), &erin_email, "erin").await;
    let sso = cx
        .anon()
        .auth_sso_callback()
        .body(callback)
        .send()
        .await
        .expect("erin signs in")
        .into_inner();
    let erin_sso = cx.client_with_token(&sso.access_token);
    assert_eq!(erin_sso.users_me().send().await.unwrap().id, erin.id);
    erin_sso
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .expect("an SSO session");
    let pat_sso = erin_sso
        .auth_tokens_create()
        .body(
            types::TokenCreate::builder()
                .name("sso laptop".to_string())
                .scopes(vec!["*:*".to_string()]),
        )
        .send()
        .await
        .expect("a token")
        .into_inner()
        .token;
    let erin_pat_sso = cx.client_with_token(&pat_sso);
    erin_pat_sso
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .expect("a token of an SSO session");
    let (status, code) = error_of(
        erin_pat_sso
            .roles_list_roles()
            .org_id(personal)
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "sso_required"));

    // No longer required: her password session works again.
    ada.client
        .org_sso_put()
        .org_id(org)
        .body(types::SsoConfigInput {
            client_secret: None,
            ..config(&peer.issuer, false)
        })
        .send()
        .await
        .expect("sso put, not enforced");
    erin_pw
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .expect("not enforced");
    cx.teardown().await;
}

#[tokio::test]
async fn rotated_keys_are_picked_up_and_a_provider_for_another_issuer_is_refused() {
    let cx = TestContext::new("sso_keys").await;
    let ada = cx.user("ada").await;
    let org = ada.create_org("Acme").await;

    // A provider reached at one address that says it is another issuer.
    let impostor = OidcSso::start_claiming(REDIRECT, "http://localhost:1").await;
    let (status, code) = error_of(
        ada.client
            .org_sso_put()
            .org_id(org)
            .body(config(&impostor.url, false))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "sso_issuer_mismatch"));
    drop(impostor);
    // Nothing answers there.
    let (status, code) = error_of(
        ada.client
            .org_sso_put()
            .org_id(org)
            .body(config("http://127.0.0.1:9", false))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "invalid_sso_provider"));

    let mut peer = OidcSso::start(REDIRECT).await;
    ada.client
        .org_sso_put()
        .org_id(org)
        .body(config(&peer.issuer, false))
        .send()
        .await
        .expect("sso put");
    let email = format!("carol@{DOMAIN}");
    peer.set_account("carol", person(&email, &[])).await;
    let callback = through_provider(&peer, &cx.anon(), &email, "carol").await;
    let first = cx
        .anon()
        .auth_sso_callback()
        .body(callback)
        .send()
        .await
        .expect("first sign-in");
    let kid = peer.kid().await;
    // The provider rotates its signing key: the next ID token is signed
    // with a key the server has never seen.
    peer.restart().await;
    assert_ne!(peer.kid().await, kid);
    peer.set_account("carol", person(&email, &[])).await;
    let callback = through_provider(&peer, &cx.anon(), &email, "carol").await;
    let second = cx
        .anon()
        .auth_sso_callback()
        .body(callback)
        .send()
        .await
        .expect("a sign-in after the rotation");
    let a = cx.client_with_token(&first.access_token);
    let b = cx.client_with_token(&second.access_token);
    assert_eq!(
        a.users_me().send().await.unwrap().id,
        b.users_me().send().await.unwrap().id
    );
    cx.teardown().await;
}

#[tokio::test]
async fn first_sign_ins_of_one_person_at_once_make_one_account() {
    let cx = TestContext::new("sso_race").await;
    let second = cx.second_instance(|_| {}).await;
    let other = Client::new(&format!("http://{}", second.local_addr()));
    let peer = OidcSso::start(REDIRECT).await;
    let ada = cx.user("ada").await;
    let org = ada.create_org("Acme").await;
    ada.client
        .org_sso_put()
        .org_id(org)
        .body(config(&peer.issuer, false))
        .send()
        .await
        .expect("sso put");
    for round in 0..4 {
        let email = format!("new{round}@{DOMAIN}");
        let login = format!("new{round}");
        peer.set_account(&login, person(&email, &[])).await;
        // Two sign-ins of a person with no account yet, finished together
        // on two instances.
        let a = through_provider(&peer, &cx.anon(), &email, &login).await;
        let b = through_provider(&peer, &other, &email, &login).await;
        let anon = cx.anon();
        let (a, b) = tokio::join!(
            anon.auth_sso_callback().body(a).send(),
            other.auth_sso_callback().body(b).send()
        );
        let a = cx.client_with_token(&a.expect("one sign-in").access_token);
        let b = cx.client_with_token(&b.expect("the other").access_token);
        assert_eq!(
            a.users_me().send().await.unwrap().id,
            b.users_me().send().await.unwrap().id,
            "round {round}"
        );
        let accounts: i64 = cx
            .db()
            .await
            .query_one(
                "SELECT count(*) FROM users WHERE email_normalized = $1",
                &[&email],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(accounts, 1);
    }
    drop(second);
    cx.teardown().await;
}
