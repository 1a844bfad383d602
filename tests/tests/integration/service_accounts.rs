//! Organization service accounts (`/api/org/service_accounts`): a
//! principal of one organization with a role there, acting through
//! personal access tokens; rotated and deleted tokens are refused at once
//! on every instance.

use uuid::Uuid;
use workspace_client::{Client, types};
use workspace_tests::{TestContext, TestUser, error_of};

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

async fn create(
    by: &Client,
    org: Uuid,
    role: Uuid,
    scopes: &[&str],
) -> Result<types::ServiceAccountCreated, (u16, String)> {
    by.org_service_accounts_create()
        .org_id(org)
        .body(
            types::ServiceAccountCreate::builder()
                .name("ci-deploy".to_string())
                .role_id(role)
                .scopes(scopes.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
        )
        .send()
        .await
        .map(|r| r.into_inner())
        .map_err(|e| error_of::<()>(Err(e)))
}

fn kb_body(name: &str) -> types::builder::KbCreate {
    types::KbCreate::builder()
        .name(name.to_string())
        .description("d".to_string())
        .embedding_model("all-minilm-l6-v2".to_string())
        .sources(Vec::new())
}

#[tokio::test]
async fn a_service_account_acts_in_its_organization_within_its_role() {
    let cx = TestContext::new("sa_basics").await;
    let owner = cx.user("sa-owner").await;
    let org = org_named(&owner, "Acme").await;
    let member = owner.role_id(org, "member").await;
    let created = create(&owner.client, org, member, &["*:*"])
        .await
        .expect("service account");
    let account = &created.service_account;
    assert_eq!(
        (
            account.name.as_str(),
            account.role_name.as_str(),
            account.status.as_str()
        ),
        ("ci-deploy", "member", "active")
    );
    assert_eq!(account.created_by, Some(owner.id));
    assert!(created.token.token.starts_with("wsp_"));
    let bot = cx.client_with_token(&created.token.token);

    // It is itself, a member of this organization only.
    let me = bot.users_me().send().await.expect("users/me").into_inner();
    assert_eq!(me.id, account.id);
    assert_eq!(me.organizations.len(), 1);
    bot.kb_create()
        .org_id(org)
        .body(kb_body("from CI"))
        .send()
        .await
        .expect("a member writes knowledge bases");
    let personal = owner.personal_org().await;
    let (status, _) = error_of(bot.kb_list().org_id(personal).send().await);
    assert_eq!(status, 403, "another organization");
    // Within its role: a member does not manage members.
    let (status, code) = error_of(
        bot.users_suspend()
            .org_id(org)
            .user_id(owner.id)
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "forbidden"));
    // It makes no tokens and no service accounts.
    let (status, code) = error_of(
        bot.auth_tokens_create()
            .body(
                types::TokenCreate::builder()
                    .name("more".to_string())
                    .scopes(vec!["*:*".to_string()]),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "token_not_allowed"));
    let refused = create(&bot, org, member, &["*:*"]).await.unwrap_err();
    assert_eq!(refused, (403, "token_not_allowed".to_string()));

    // Listed with its live token (no secret), and by users/list.
    let listed = owner
        .client
        .org_service_accounts_list()
        .org_id(org)
        .send()
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tokens.len(), 1);
    assert_eq!(listed[0].tokens[0].prefix, created.token.prefix);
    let users = owner
        .client
        .users_list()
        .org_id(org)
        .send()
        .await
        .expect("users/list")
        .into_inner();
    assert!(users.users.iter().any(|u| u.id == Some(account.id)));

    // Its address is no e-mail address: nobody can be invited as it.
    let db = cx.db().await;
    let address: String = db
        .query_one("SELECT email FROM users WHERE id = $1", &[&account.id])
        .await
        .unwrap()
        .get(0);
    let personal_member = owner.role_id(personal, "member").await;
    let (status, code) = error_of(
        owner
            .client
            .users_invite()
            .org_id(personal)
            .body(
                types::UserInviteRequest::builder()
                    .email(address.clone())
                    .first_name("Not".to_string())
                    .last_name("Me".to_string())
                    .role(personal_member),
            )
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (400, "invalid_email"), "{address}");
    cx.teardown().await;
}

#[tokio::test]
async fn rotated_suspended_and_deleted_accounts_are_refused_on_every_instance() {
    let cx = TestContext::new("sa_lifecycle").await;
    let owner = cx.user("sa-rotator").await;
    let org = org_named(&owner, "Acme").await;
    let member = owner.role_id(org, "member").await;
    let created = create(&owner.client, org, member, &["kb:read"])
        .await
        .expect("service account");
    let id = created.service_account.id;
    let second = cx.second_instance(|_| {}).await;
    let there = format!("http://{}", second.local_addr());
    let on_second = |token: &str| Client::authenticated(&there, token).unwrap();
    let old = on_second(&created.token.token);
    old.kb_list().org_id(org).send().await.expect("reads");
    let (status, code) = error_of(old.kb_create().org_id(org).body(kb_body("x")).send().await);
    assert_eq!((status, code.as_str()), (403, "insufficient_scope"));

    // Rotated: the old token is refused at once, the new one keeps the
    // scopes.
    let rotated = owner
        .client
        .org_service_accounts_rotate()
        .org_id(org)
        .service_account_id(id)
        .body(types::ServiceAccountRotate::builder())
        .send()
        .await
        .expect("rotate")
        .into_inner();
    assert_eq!(rotated.scopes, vec!["kb:read".to_string()]);
    let (status, _) = error_of(old.kb_list().org_id(org).send().await);
    assert_eq!(status, 401);
    let new = on_second(&rotated.token);
    new.kb_list()
        .org_id(org)
        .send()
        .await
        .expect("the new token");

    // Suspended like a member: refused until reactivated.
    owner
        .client
        .users_suspend()
        .org_id(org)
        .user_id(id)
        .send()
        .await
        .expect("suspend");
    let (status, _) = error_of(new.kb_list().org_id(org).send().await);
    assert_eq!(status, 403);
    owner
        .client
        .users_reactivate()
        .org_id(org)
        .user_id(id)
        .send()
        .await
        .expect("reactivate");
    new.kb_list().org_id(org).send().await.expect("again");

    // Deleted: gone from the list, its token refused.
    owner
        .client
        .org_service_accounts_delete()
        .org_id(org)
        .service_account_id(id)
        .send()
        .await
        .expect("delete");
    let (status, _) = error_of(new.kb_list().org_id(org).send().await);
    assert_eq!(status, 401);
    let listed = owner
        .client
        .org_service_accounts_list()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(listed.is_empty());
    let (status, code) = error_of(
        owner
            .client
            .org_service_accounts_delete()
            .org_id(org)
            .service_account_id(id)
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));
    cx.teardown().await;
}

#[tokio::test]
async fn roles_bound_what_a_service_account_may_be() {
    let cx = TestContext::new("sa_roles").await;
    let owner = cx.user("sa-role-owner").await;
    let admin = cx.user("sa-role-admin").await;
    let guest = cx.user("sa-role-guest").await;
    let org = org_named(&owner, "Acme").await;
    let owner_role = owner.role_id(org, "owner").await;
    let admin_role = owner.role_id(org, "admin").await;
    let guest_role = owner.role_id(org, "guest").await;
    owner.add_member(org, admin.id, admin_role).await;
    owner.add_member(org, guest.id, guest_role).await;
    // Never the owner role.
    let refused = create(&owner.client, org, owner_role, &["*:*"])
        .await
        .unwrap_err();
    assert_eq!(refused, (403, "owner_role_not_assignable".to_string()));
    // A guest has no users:write.
    let refused = create(&guest.client, org, guest_role, &["*:*"])
        .await
        .unwrap_err();
    assert_eq!(refused.0, 403);
    // Scopes name permissions.
    let refused = create(&admin.client, org, guest_role, &["kb:burn"])
        .await
        .unwrap_err();
    assert_eq!(refused, (400, "invalid_scope".to_string()));
    // An admin makes an admin-level account; its `*:*` is an admin's, not
    // an owner's: it cannot change roles.
    let created = create(&admin.client, org, admin_role, &["*:*"])
        .await
        .expect("admin-level account");
    let bot = cx.client_with_token(&created.token.token);
    let (status, code) = error_of(
        bot.users_update()
            .org_id(org)
            .user_id(guest.id)
            .body(types::UpdateUserRoleRequest::builder().role_id(admin_role))
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (403, "token_not_allowed"));
    // Another organization's account is not found.
    let elsewhere = org_named(&owner, "Elsewhere").await;
    let (status, code) = error_of(
        owner
            .client
            .org_service_accounts_delete()
            .org_id(elsewhere)
            .service_account_id(created.service_account.id)
            .send()
            .await,
    );
    assert_eq!((status, code.as_str()), (404, "not_found"));
    cx.teardown().await;
}
