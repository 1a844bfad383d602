//! `GET /api/users/list` and `POST /api/users/invite`, including the
//! membership transitions (none) -> invited -> active.

use uuid::Uuid;
use workspace_client::types::{UserInviteRequest, UserListStatus};
use workspace_tests::fixtures::{accept_body, add_member, create_body, outbox, role_id, token_in};
use workspace_tests::{TestContext, error_of};

fn invite_body(email: &str, role: Uuid) -> workspace_client::types::builder::UserInviteRequest {
    UserInviteRequest::builder()
        .email(email.to_string())
        .first_name("Grace".to_string())
        .last_name("Hopper".to_string())
        .role(role)
}

async fn membership_status(db: &tokio_postgres::Client, email: &str, org: Uuid) -> Option<String> {
    db.query_opt(
        "SELECT m.status FROM memberships m JOIN users u ON u.id = m.user_id \
         WHERE u.email_normalized = $1 AND m.organization_id = $2",
        &[&email, &org],
    )
    .await
    .unwrap()
    .map(|r| r.get(0))
}

#[tokio::test]
async fn users_invite_precreates_an_invited_membership_that_acceptance_activates() {
    let cx = TestContext::new("users_invite_flow").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "member").await;

    // (none) -> invited.
    let response = owner
        .client
        .users_invite()
        .org_id(org)
        .body(invite_body("Grace@Example.com", role))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let invited = response.into_inner();
    assert_eq!(invited.email, "grace@example.com");
    assert_eq!(invited.full_name, "Grace Hopper");
    assert_eq!(invited.organizations.id, org);
    assert_eq!(invited.organizations.role_id, role);
    assert_eq!(invited.organizations.role_name, "member");
    // The id is the invitation's.
    let invitation = owner
        .client
        .invitations_get()
        .invitation_id(invited.id)
        .send()
        .await
        .unwrap();
    assert_eq!(invitation.email, "grace@example.com");
    assert_eq!(
        membership_status(&db, "grace@example.com", org)
            .await
            .as_deref(),
        Some("invited")
    );
    let pre: (Uuid, Option<String>) = {
        let row = db
            .query_one(
                "SELECT id, password_hash FROM users WHERE email_normalized = 'grace@example.com'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(pre.1.is_none(), "pre-created without a password");
    // The pre-created user cannot log in.
    assert_eq!(
        error_of(
            cx.anon()
                .auth_login()
                .body(
                    workspace_client::types::LoginRequest::builder()
                        .email("grace@example.com".to_string())
                        .password("anything at all".to_string())
                )
                .send()
                .await
        ),
        (401, "invalid_credentials".to_string())
    );
    // The magic link went out.
    let mails = outbox(&db, "grace@example.com").await;
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].0, "user_invite");
    let token = token_in(&mails[0].1);

    // Shown as a pending row with the names, id null.
    let list = owner.client.users_list().org_id(org).send().await.unwrap();
    assert_eq!(list.total, 2);
    let row = &list.users[1];
    assert_eq!(
        (row.id, row.invite_id, row.status),
        (None, Some(invited.id), UserListStatus::Pending)
    );
    assert_eq!(row.full_name, "Grace Hopper");
    assert_eq!(row.organizations[0].role_name, "member");

    // invited -> active on acceptance; the pre-created user is completed.
    let account = cx
        .anon()
        .auth_signup_invite()
        .body(accept_body(&token))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(account.id, pre.0);
    assert_eq!(account.first_name, "Nova", "names from signup_invite");
    assert_eq!(
        membership_status(&db, "grace@example.com", org)
            .await
            .as_deref(),
        Some("active")
    );
    let me = cx
        .client_with_token(&account.access_token)
        .users_me()
        .send()
        .await
        .unwrap();
    assert!(
        me.organizations
            .iter()
            .any(|m| m.id == org && m.role_id == role)
    );
    let list = owner.client.users_list().org_id(org).send().await.unwrap();
    assert_eq!(list.total, 2);
    assert!(
        list.users
            .iter()
            .all(|u| u.status == UserListStatus::Active)
    );
    cx.teardown().await;
}

#[tokio::test]
async fn users_invite_rules_and_revocation() {
    let cx = TestContext::new("users_invite_rules").await;
    let owner = cx.user("owner").await;
    let member = cx.user("member").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    add_member(&db, member.id, org, "member").await;
    let role = role_id(&db, org, "member").await;
    let owner_role = role_id(&db, org, "owner").await;

    // users:write is needed (member has only users:read).
    assert_eq!(
        error_of(
            member
                .client
                .users_invite()
                .org_id(org)
                .body(invite_body("a@example.com", role))
                .send()
                .await
        ),
        (403, "forbidden".to_string())
    );
    let cases = [
        (invite_body("bad", role), 400, "invalid_email"),
        (
            invite_body("a@example.com", role).first_name(" ".to_string()),
            400,
            "invalid_name",
        ),
        (
            invite_body("a@example.com", Uuid::new_v4()),
            400,
            "invalid_role",
        ),
        (
            invite_body("a@example.com", owner_role),
            403,
            "owner_role_not_assignable",
        ),
        (invite_body(&member.email, role), 409, "already_member"),
    ];
    for (body, status, code) in cases {
        assert_eq!(
            error_of(
                owner
                    .client
                    .users_invite()
                    .org_id(org)
                    .body(body)
                    .send()
                    .await
            ),
            (status, code.to_string())
        );
    }
    let invited = owner
        .client
        .users_invite()
        .org_id(org)
        .body(invite_body("a@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        error_of(
            owner
                .client
                .users_invite()
                .org_id(org)
                .body(invite_body("A@example.com", role))
                .send()
                .await
        ),
        (409, "invitation_pending".to_string())
    );
    // Also through the invitations area.
    assert_eq!(
        error_of(
            owner
                .client
                .invitations_create()
                .org_id(org)
                .body(create_body("a@example.com", role))
                .send()
                .await
        ),
        (409, "invitation_pending".to_string())
    );
    // Revoking removes the invited membership.
    owner
        .client
        .invitations_revoke()
        .invitation_id(invited.id)
        .send()
        .await
        .unwrap();
    assert_eq!(membership_status(&db, "a@example.com", org).await, None);
    let list = owner.client.users_list().org_id(org).send().await.unwrap();
    assert_eq!(list.total, 2, "owner and member only");
    // And a new invitation can be made, reusing the pre-created user.
    owner
        .client
        .users_invite()
        .org_id(org)
        .body(invite_body("a@example.com", role).first_name("Ada".to_string()))
        .send()
        .await
        .unwrap();
    let n: i64 = db
        .query_one(
            "SELECT count(*) FROM users WHERE email_normalized = 'a@example.com'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let list = owner.client.users_list().org_id(org).send().await.unwrap();
    assert!(
        list.users
            .iter()
            .any(|u| u.first_name == "Ada" && u.status == UserListStatus::Pending)
    );
    cx.teardown().await;
}

#[tokio::test]
async fn users_list_mixes_orders_and_pages() {
    let cx = TestContext::new("users_list_order").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let mut members = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let user = cx.user(name).await;
        add_member(&db, user.id, org, "member").await;
        members.push(user);
    }
    let guest = cx.user("guest").await;
    add_member(&db, guest.id, org, "guest").await;
    // Joined: owner first, then alpha, beta, gamma, guest (one day apart).
    for (i, id) in [
        owner.id,
        members[0].id,
        members[1].id,
        members[2].id,
        guest.id,
    ]
    .iter()
    .enumerate()
    {
        db.execute(
            "UPDATE memberships SET created_at = now() - make_interval(days => $3) \
             WHERE user_id = $1 AND organization_id = $2",
            &[id, &org, &(10 - i as i32)],
        )
        .await
        .unwrap();
    }
    let role = role_id(&db, org, "member").await;
    let mut invitations = Vec::new();
    for email in [
        "p1@example.com",
        "p2@example.com",
        "old@example.com",
        "used@example.com",
        "revoked@example.com",
    ] {
        let created = owner
            .client
            .invitations_create()
            .org_id(org)
            .body(create_body(email, role))
            .send()
            .await
            .unwrap()
            .into_inner();
        invitations.push(created);
    }
    // Created: old (3 days ago, now expired), p1 (2 days ago), p2 (1 day ago).
    for (email, days) in [
        ("old@example.com", 3),
        ("p1@example.com", 2),
        ("p2@example.com", 1),
    ] {
        db.execute(
            "UPDATE invitations SET created_at = now() - make_interval(days => $2) WHERE email = $1",
            &[&email, &days],
        )
        .await
        .unwrap();
    }
    db.execute(
        "UPDATE invitations SET expires_at = now() - interval '1 hour' WHERE email = 'old@example.com'",
        &[],
    )
    .await
    .unwrap();
    // Accepted and revoked invitations are not listed (the accepted one
    // shows as an active user).
    cx.anon()
        .auth_signup_invite()
        .body(accept_body(invitations[3].token.as_deref().unwrap()))
        .send()
        .await
        .unwrap();
    db.execute(
        "UPDATE memberships m SET created_at = now() - interval '20 days' FROM users u \
         WHERE u.id = m.user_id AND u.email_normalized = 'used@example.com'",
        &[],
    )
    .await
    .unwrap();
    owner
        .client
        .invitations_revoke()
        .invitation_id(invitations[4].id)
        .send()
        .await
        .unwrap();

    let all = owner
        .client
        .users_list()
        .org_id(org)
        .limit(100u32)
        .send()
        .await
        .unwrap();
    let order: Vec<(&str, UserListStatus)> = all
        .users
        .iter()
        .map(|u| (u.email.as_str(), u.status))
        .collect();
    use UserListStatus::{Active, Expired, Pending};
    assert_eq!(
        order,
        [
            ("guest@example.com", Active),
            ("gamma@example.com", Active),
            ("beta@example.com", Active),
            ("alpha@example.com", Active),
            ("owner@example.com", Active),
            ("used@example.com", Active),
            ("p2@example.com", Pending),
            ("p1@example.com", Pending),
            ("old@example.com", Expired),
        ]
    );
    assert_eq!(all.total, 9);
    for user in &all.users {
        match user.status {
            Active => {
                assert!(user.id.is_some() && user.invite_id.is_none() && user.invited_at.is_none())
            }
            _ => {
                assert!(user.id.is_none() && user.invite_id.is_some() && user.invited_at.is_some())
            }
        }
    }
    // Pending rows from invitations/create have no names.
    assert_eq!(all.users[6].full_name, "");
    assert_eq!(all.users[0].organizations[0].role_name, "guest");

    // Default limit 10; offset is a page number.
    let default = owner.client.users_list().org_id(org).send().await.unwrap();
    assert_eq!(default.users.len(), 9);
    let mut paged = Vec::new();
    for page in 0..5u32 {
        let p = owner
            .client
            .users_list()
            .org_id(org)
            .offset(page)
            .limit(2u32)
            .send()
            .await
            .unwrap();
        assert_eq!(p.total, 9);
        assert_eq!(p.users.len(), if page < 4 { 2 } else { 1 });
        paged.extend(p.into_inner().users.into_iter().map(|u| u.email));
    }
    let expected: Vec<String> = all.users.iter().map(|u| u.email.clone()).collect();
    assert_eq!(paged, expected);
    let past = owner
        .client
        .users_list()
        .org_id(org)
        .offset(9u32)
        .limit(2u32)
        .send()
        .await
        .unwrap();
    assert!(past.users.is_empty());
    assert_eq!(past.total, 9);
    // Raw requests: the generated client already refuses a zero limit.
    for limit in [0u32, 101] {
        assert_eq!(
            workspace_tests::raw(
                &cx.base_url,
                Some(&owner.token),
                reqwest::Method::GET,
                "/api/users/list",
                &[("org_id", org.to_string()), ("limit", limit.to_string())],
                None,
            )
            .await,
            (400, "invalid_pagination".to_string())
        );
    }

    // users:read: members have it, guests do not; outsiders are refused.
    members[0]
        .client
        .users_list()
        .org_id(org)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_of(guest.client.users_list().org_id(org).send().await),
        (403, "forbidden".to_string())
    );
    let outsider = cx.user("outsider").await;
    assert_eq!(
        error_of(outsider.client.users_list().org_id(org).send().await),
        (403, "forbidden".to_string())
    );
    assert_eq!(
        error_of(cx.anon().users_list().org_id(org).send().await),
        (401, "unauthenticated".to_string())
    );
    cx.teardown().await;
}

/// A person pre-created by `users/invite` may sign up normally (taking the
/// placeholder over) and still accept the invitation with their new
/// password; an existing account with an `invited` membership can also be
/// added directly by `add_member`.
#[tokio::test]
async fn invited_placeholders_can_sign_up_then_accept() {
    let cx = TestContext::new("invited_placeholder_signup").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role: Uuid = db
        .query_one(
            "SELECT id FROM roles WHERE organization_id = $1 AND name = 'member'",
            &[&org],
        )
        .await
        .unwrap()
        .get(0);
    owner
        .client
        .users_invite()
        .org_id(org)
        .body(invite_body("lin@example.com", role))
        .send()
        .await
        .unwrap();
    let token: String = {
        let body: String = db
            .query_one(
                "SELECT body_text FROM email_outbox WHERE to_address = 'lin@example.com'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let start = body.find("token=").unwrap() + "token=".len();
        body[start..]
            .split(|c: char| c.is_whitespace())
            .next()
            .unwrap()
            .to_string()
    };

    // Plain signup takes the password-less placeholder over.
    let anon = cx.anon();
    let created = workspace_tests::raw(
        &cx.base_url,
        None,
        reqwest::Method::POST,
        "/api/auth/signup",
        &[],
        Some(serde_json::json!({
            "email": "lin@example.com", "first_name": "Lin", "last_name": "Ok",
            "password": workspace_tests::TEST_PASSWORD
        })),
    )
    .await;
    assert_eq!(created.0, 201);
    let again = workspace_tests::raw(
        &cx.base_url,
        None,
        reqwest::Method::POST,
        "/api/auth/signup",
        &[],
        Some(serde_json::json!({
            "email": "lin@example.com", "first_name": "Lin", "last_name": "Ok",
            "password": workspace_tests::TEST_PASSWORD
        })),
    )
    .await;
    assert_eq!(again, (409, "email_taken".to_string()));
    let n: i64 = db
        .query_one(
            "SELECT count(*) FROM users WHERE email_normalized = 'lin@example.com'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the placeholder was reused, not duplicated");

    // The invitation is accepted with the account's password.
    let accepted = anon
        .auth_signup_invite()
        .body(
            workspace_client::types::SignupInviteRequest::builder()
                .first_name("Ignored".to_string())
                .last_name("Ignored".to_string())
                .password(workspace_tests::TEST_PASSWORD.to_string())
                .invite_token(token),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(accepted.first_name, "Lin");
    let status: String = db
        .query_one(
            "SELECT m.status FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE u.email_normalized = 'lin@example.com' AND m.organization_id = $1",
            &[&org],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "active");

    // An existing account with an invited membership: add_member activates it.
    let sam = cx.user("sam").await;
    owner
        .client
        .users_invite()
        .org_id(org)
        .body(invite_body(&sam.email, role))
        .send()
        .await
        .unwrap();
    owner
        .client
        .org_add_member()
        .body(
            workspace_client::types::AddMemberRequest::builder()
                .organization_id(org)
                .user_id(sam.id)
                .role_id(role),
        )
        .send()
        .await
        .unwrap();
    let orgs = sam.client.org_list().send().await.unwrap().into_inner();
    assert!(orgs.iter().any(|o| o.id == org));
    cx.teardown().await;
}
