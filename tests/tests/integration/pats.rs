//! Personal access tokens (`/api/auth/tokens`): shown once, stored hashed,
//! recognisable, scoped, intersected with the user's role at every
//! request, refused at once when revoked or expired, on every instance.

use uuid::Uuid;
use workspace_client::types;
use workspace_tests::fixtures::{add_member, role_id};
use workspace_tests::{TestContext, TestUser, error_of};

async fn create_token(user: &TestUser, scopes: &[&str]) -> types::TokenCreated {
    user.client
        .auth_tokens_create()
        .body(
            types::TokenCreate::builder()
                .name("ci".to_string())
                .scopes(scopes.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
        )
        .send()
        .await
        .expect("auth_tokens_create")
        .into_inner()
}

fn kb_body(name: &str) -> types::builder::KbCreate {
    types::KbCreate::builder()
        .name(name.to_string())
        .description("d".to_string())
        .embedding_model("all-minilm-l6-v2".to_string())
        .sources(Vec::new())
}

#[tokio::test]
async fn a_token_is_shown_once_recognisable_and_acts_for_its_user() {
    let cx = TestContext::new("pat_basics").await;
    let ada = cx.user("pat-ada").await;
    let org = ada.personal_org().await;
    let created = create_token(&ada, &["kb:read", "organization:read"]).await;
    let secret = created.token.clone();
    // wsp_ + 32 + 6 checksum characters of [0-9A-Za-z].
    assert_eq!(secret.len(), 42, "{secret}");
    assert!(secret.starts_with("wsp_"));
    assert!(secret[4..].chars().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(
        workspace_server::authn::personal_token_checksum(&secret[..36]),
        secret[36..]
    );
    assert_eq!(created.prefix, secret[..12]);
    // Stored hashed: the secret is nowhere in the database.
    let db = cx.db().await;
    let stored: i64 = db
        .query_one(
            "SELECT count(*) FROM personal_access_tokens \
             WHERE prefix = $1 AND position($2::bytea in secret_hash) = 0",
            &[&created.prefix, &secret.as_bytes()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 1);
    // Listed without the secret.
    let listed = ada.client.auth_tokens_list().send().await.unwrap();
    assert_eq!(listed.len(), 1);
    let listed_json = serde_json::to_string(&*listed).unwrap();
    assert!(!listed_json.contains(&secret));

    let bot = cx.client_with_token(&secret);
    let me = bot.users_me().send().await.expect("users_me with a token");
    assert_eq!(me.id, ada.id);
    bot.kb_list().org_id(org).send().await.expect("kb:read");
    let (status, code) = error_of(bot.kb_create().org_id(org).body(kb_body("k")).send().await);
    assert_eq!((status, code.as_str()), (403, "insufficient_scope"));

    // Its use is recorded (to the minute, off the request's path).
    let mut used = None;
    for _ in 0..50 {
        used = ada.client.auth_tokens_list().send().await.unwrap()[0].last_used_at;
        if used.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(used.is_some(), "last_used_at was not recorded");
    cx.teardown().await;
}

#[tokio::test]
async fn a_kb_read_token_is_refused_every_write_with_a_stable_code() {
    let cx = TestContext::new("pat_kb_read_writes").await;
    let ada = cx.user("pat-writer").await;
    let org = ada.personal_org().await;
    let kb = ada
        .client
        .kb_create()
        .org_id(org)
        .body(kb_body("mine"))
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let bot = cx.client_with_token(&create_token(&ada, &["kb:read"]).await.token);
    let scope = |r: Result<_, _>| error_of::<()>(r.map(|_| ()));
    let refused = [
        scope(
            bot.kb_create()
                .org_id(org)
                .body(kb_body("x"))
                .send()
                .await
                .map(|_| ()),
        ),
        scope(
            bot.kb_update()
                .kb_id(kb)
                .body(types::KbUpdate::builder().name(Some("y".parse().unwrap())))
                .send()
                .await
                .map(|_| ()),
        ),
        scope(bot.kb_delete().kb_id(kb).send().await.map(|_| ())),
        scope(
            bot.chat_create()
                .org_id(org)
                .body(types::ChatWrite::builder())
                .send()
                .await
                .map(|_| ()),
        ),
        scope(
            bot.conversation_create()
                .org_id(org)
                .body(types::ConversationCreate::builder().title("t"))
                .send()
                .await
                .map(|_| ()),
        ),
    ];
    for (i, (status, code)) in refused.iter().enumerate() {
        assert_eq!(
            (*status, code.as_str()),
            (403, "insufficient_scope"),
            "write {i}"
        );
    }
    // What only a login may do, whatever the scopes.
    let all = cx.client_with_token(&create_token(&ada, &["*:*"]).await.token);
    let login_only = [
        error_of(
            all.auth_tokens_create()
                .body(
                    types::TokenCreate::builder()
                        .name("again".to_string())
                        .scopes(vec!["*:*".to_string()]),
                )
                .send()
                .await,
        ),
        scope(all.auth_tokens_list().send().await.map(|_| ())),
        scope(
            all.roles_create()
                .org_id(org)
                .body(
                    types::CreateRoleRequest::builder()
                        .name("r".to_string())
                        .hierarchy_level(1)
                        .permission_ids(Vec::new()),
                )
                .send()
                .await
                .map(|_| ()),
        ),
    ];
    for (i, (status, code)) in login_only.iter().enumerate() {
        assert_eq!(
            (*status, code.as_str()),
            (403, "token_not_allowed"),
            "login-only {i}"
        );
    }
    // A system administrator's token does not administer the system.
    cx.db()
        .await
        .execute(
            "UPDATE users SET is_system_admin = true WHERE id = $1",
            &[&ada.id],
        )
        .await
        .unwrap();
    ada.client
        .system_outbox()
        .send()
        .await
        .expect("a login administers");
    let (status, code) = error_of(all.system_outbox().send().await);
    assert_eq!((status, code.as_str()), (403, "token_not_allowed"));
    // The tools of all the caller's organizations need `tool:read`.
    let (status, code) = error_of(bot.tools_list_all().send().await);
    assert_eq!((status, code.as_str()), (403, "insufficient_scope"));
    all.tools_list_all().send().await.expect("*:* lists tools");
    // The all-scopes token does write.
    all.kb_create()
        .org_id(org)
        .body(kb_body("ok"))
        .send()
        .await
        .expect("*:* writes");
    cx.teardown().await;
}

#[tokio::test]
async fn a_token_never_does_more_than_its_user_now() {
    let cx = TestContext::new("pat_demoted").await;
    let owner = cx.user("pat-owner").await;
    let bob = cx.user("pat-bob").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    add_member(&db, bob.id, org, "admin").await;
    let bot = cx.client_with_token(&create_token(&bob, &["*:*"]).await.token);
    bot.kb_create()
        .org_id(org)
        .body(kb_body("as admin"))
        .send()
        .await
        .expect("admin writes");
    // Demoted to guest: the token's `*:*` is cut to what a guest may do.
    let guest = role_id(&db, org, "guest").await;
    owner
        .client
        .users_update()
        .org_id(org)
        .user_id(bob.id)
        .body(types::UpdateUserRoleRequest::builder().role_id(guest))
        .send()
        .await
        .expect("demote");
    let (status, code) = error_of(bot.kb_create().org_id(org).body(kb_body("x")).send().await);
    assert_eq!((status, code.as_str()), (403, "forbidden"));
    bot.kb_list()
        .org_id(org)
        .send()
        .await
        .expect("a guest reads");
    // Out of the organization: not a member any more.
    db.execute(
        "DELETE FROM memberships WHERE user_id = $1 AND organization_id = $2",
        &[&bob.id, &org],
    )
    .await
    .unwrap();
    let (status, _) = error_of(bot.kb_list().org_id(org).send().await);
    assert_eq!(status, 403);
    cx.teardown().await;
}

#[tokio::test]
async fn a_revoked_or_expired_token_is_refused_at_once_on_every_instance() {
    let cx = TestContext::new("pat_revoked").await;
    let ada = cx.user("pat-revoker").await;
    let second = cx.second_instance(|_| {}).await;
    let there = format!("http://{}", second.local_addr());
    let created = create_token(&ada, &["*:read"]).await;
    let bot = workspace_client::Client::authenticated(&there, &created.token).unwrap();
    bot.users_me()
        .send()
        .await
        .expect("usable on the second instance");
    ada.client
        .auth_tokens_revoke()
        .token_id(created.id)
        .send()
        .await
        .expect("revoke");
    let (status, code) = error_of(bot.users_me().send().await);
    assert_eq!((status, code.as_str()), (401, "invalid_token"));
    let (status, _) = error_of(bot.org_list().send().await);
    assert_eq!(status, 401);
    // Revoking again, or another user's token: not found.
    let (status, _) = error_of(
        ada.client
            .auth_tokens_revoke()
            .token_id(created.id)
            .send()
            .await,
    );
    assert_eq!(status, 404);
    let other = create_token(&ada, &["*:read"]).await;
    let eve = cx.user("pat-eve").await;
    let (status, _) = error_of(
        eve.client
            .auth_tokens_revoke()
            .token_id(other.id)
            .send()
            .await,
    );
    assert_eq!(status, 404);

    // Expired.
    let db = cx.db().await;
    db.execute(
        "UPDATE personal_access_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&other.id],
    )
    .await
    .unwrap();
    let expired = workspace_client::Client::authenticated(&there, &other.token).unwrap();
    let (status, code) = error_of(expired.users_me().send().await);
    assert_eq!((status, code.as_str()), (401, "invalid_token"));
    let _ = second.shutdown().await;
    cx.teardown().await;
}

#[tokio::test]
async fn bad_scopes_and_look_alike_tokens_are_refused() {
    let cx = TestContext::new("pat_bad_scopes").await;
    let ada = cx.user("pat-scoper").await;
    for scopes in [vec!["nope:read"], vec!["kb"], vec![], vec!["kb:fly"]] {
        let (status, code) = error_of(
            ada.client
                .auth_tokens_create()
                .body(
                    types::TokenCreate::builder()
                        .name("x".to_string())
                        .scopes(scopes.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
                )
                .send()
                .await,
        );
        assert_eq!(status, 400, "{scopes:?}");
        assert!(
            code == "invalid_scope" || code == "invalid_request",
            "{scopes:?}: {code}"
        );
    }
    // A forged token with the right shape, and a huge one: 401.
    let forged = format!("wsp_{}", "A".repeat(38));
    let (status, _) = error_of(cx.client_with_token(&forged).users_me().send().await);
    assert_eq!(status, 401);
    let huge = format!("wsp_{}", "A".repeat(100_000));
    let (status, _) = error_of(cx.client_with_token(&huge).users_me().send().await);
    assert!(status == 401 || status == 431 || status == 400, "{status}");
    let _ = Uuid::nil();
    cx.teardown().await;
}

#[tokio::test]
async fn a_suspended_members_token_is_refused_and_no_token_leaves_or_transfers() {
    let cx = TestContext::new("pat_suspended").await;
    let owner = cx.user("pat-sus-owner").await;
    let bob = cx.user("pat-sus-bob").await;
    let org = owner
        .client
        .org_create_org()
        .name("Acme".to_string())
        .send()
        .await
        .expect("create_org")
        .id;
    let member = owner.role_id(org, "member").await;
    owner.add_member(org, bob.id, member).await;
    let bot = cx.client_with_token(&create_token(&bob, &["*:*"]).await.token);
    bot.kb_list()
        .org_id(org)
        .send()
        .await
        .expect("a member reads");
    // A token may neither leave for its user nor hand the ownership over.
    let (status, code) = error_of(bot.org_leave().org_id(org).send().await);
    assert_eq!((status, code.as_str()), (403, "token_not_allowed"));
    let owners_bot = cx.client_with_token(&create_token(&owner, &["*:*"]).await.token);
    let (status, code) = error_of(
        owners_bot
            .org_transfer_ownership()
            .org_id(org)
            .body(types::TransferOwnershipRequest::builder().user_id(bob.id))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "token_not_allowed"));
    // Suspended: the token is refused in the organization at once.
    owner
        .client
        .users_suspend()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users_suspend");
    let (status, _) = error_of(bot.kb_list().org_id(org).send().await);
    assert_eq!(status, 403);
    // Reactivated: usable again, with the same scopes.
    owner
        .client
        .users_reactivate()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .expect("users_reactivate");
    bot.kb_list().org_id(org).send().await.expect("reads again");
    cx.teardown().await;
}

/// Creating an organization is a write on the caller's own account: a
/// token needs the `organization:write` scope for it, and a service
/// account, which belongs to one organization, never creates another.
#[tokio::test]
async fn creating_an_organization_takes_the_write_scope_and_no_service_account() {
    let cx = TestContext::new("pat_create_org").await;
    let ada = cx.user("pat-org-maker").await;
    let org = ada.personal_org().await;
    let orgs_of = |client: &workspace_client::Client| {
        let client = client.clone();
        async move { client.org_list().send().await.unwrap().into_inner().len() }
    };
    let before = orgs_of(&ada.client).await;
    for scopes in [
        &["kb:read"][..],
        &["*:read"],
        &["organization:read", "kb:*"],
    ] {
        let token = cx.client_with_token(&create_token(&ada, scopes).await.token);
        let (status, code) = error_of(token.org_create_org().name("Nope".to_string()).send().await);
        assert_eq!(
            (status, code.as_str()),
            (403, "insufficient_scope"),
            "{scopes:?}"
        );
    }
    assert_eq!(orgs_of(&ada.client).await, before, "nothing was created");
    for scopes in [&["organization:write"][..], &["*:write"]] {
        let token = cx.client_with_token(&create_token(&ada, scopes).await.token);
        let made = token
            .org_create_org()
            .name(format!("Made by {}", scopes[0]))
            .send()
            .await
            .expect("a token with the write scope creates an organization");
        assert_eq!(made.user_role.role_name, "owner");
    }
    assert_eq!(orgs_of(&ada.client).await, before + 2);

    // A service account with every scope: refused, nothing created.
    let admin = workspace_tests::fixtures::role_id(&cx.db().await, org, "admin").await;
    let account = ada
        .client
        .org_service_accounts_create()
        .org_id(org)
        .body(
            types::ServiceAccountCreate::builder()
                .name("maker".to_string())
                .role_id(admin)
                .scopes(vec!["*:*".to_string()]),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let bot = cx.client_with_token(&account.token.token);
    let (status, code) = error_of(
        bot.org_create_org()
            .name("Elsewhere".to_string())
            .send()
            .await,
    );
    assert_eq!(
        (status, code.as_str()),
        (403, "service_account_not_allowed")
    );
    assert_eq!(orgs_of(&bot).await, 1, "only its own organization");
    cx.teardown().await;
}
