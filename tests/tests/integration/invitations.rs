//! Invitations: every transition of the invitation state table, every
//! error rule, acceptance through `signup_invite` (also concurrent), bulk
//! creation, and delivery through the outbox and a real SMTP server.

use sha2::{Digest, Sha256};
use uuid::Uuid;
use workspace_client::types::{
    InvitationBulkCreateRequest, InvitationBulkItem, InvitationBulkItemStatus, InvitationStatus,
};
use workspace_tests::fixtures::{
    NEW_PASSWORD, accept_body, add_member, create_body, outbox, role_id, token_in,
};
use workspace_tests::{TEST_PASSWORD, TestContext, error_of};

async fn stored_status(db: &tokio_postgres::Client, id: Uuid) -> String {
    db.query_one("SELECT status FROM invitations WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn create_get_list_validate_accept() {
    let cx = TestContext::with_config("inv_happy_path", |c| {
        c.mail.public_url = Some("https://app.example.test/".to_string());
    })
    .await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let member_role = role_id(&db, org, "member").await;

    // (none) -> pending: token issued, e-mail sent, expiry 7 days ahead.
    let response = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(
            create_body("  Nova@Example.COM ", member_role)
                .message(Some("Welcome aboard!".parse().unwrap())),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let created = response.into_inner();
    assert_eq!(created.email, "nova@example.com");
    assert_eq!(created.status, InvitationStatus::Pending);
    assert_eq!(created.role.id, member_role);
    assert_eq!(created.role.name, "member");
    assert_eq!(created.organization.id, org);
    assert_eq!(created.invited_by.as_ref().unwrap().id, owner.id);
    let token = created.token.clone().expect("create returns the token");
    assert!(token.len() >= 43, "at least 256 bits: {token}");
    let lifetime = created.expires_at - created.created_at;
    assert_eq!(lifetime.num_seconds(), 7 * 24 * 3600);

    // Stored as its SHA-256 (for look-ups) and sealed (for get and
    // resend): never in clear, and the sealed form is bound to this row.
    let row = db
        .query_one(
            "SELECT token_hash, row_to_json(i)::text, token_sealed FROM invitations i \
             WHERE id = $1",
            &[&created.id],
        )
        .await
        .unwrap();
    let hash: Vec<u8> = row.get(0);
    let whole_row: String = row.get(1);
    let sealed: Vec<u8> = row.get(2);
    assert_eq!(hash, Sha256::digest(token.as_bytes()).to_vec());
    assert!(!whole_row.contains(&token));
    assert!(!String::from_utf8_lossy(&sealed).contains(&token));
    assert!(
        sealed.len() >= 2 + 24 + token.len() + 16,
        "{}",
        sealed.len()
    );

    // The e-mail carries the link with the token.
    let mails = outbox(&db, "nova@example.com").await;
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].0, "invitation");
    assert!(
        mails[0].1.contains(&format!(
            "https://app.example.test/invite/accept?token={token}"
        )),
        "{}",
        mails[0].1
    );
    assert!(mails[0].1.contains("Welcome aboard!"));

    // get: the token of the creation, with organization, invited_by and
    // message.
    let got = owner
        .client
        .invitations_get()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.token.as_deref(), Some(token.as_str()));
    assert_eq!(got.message.as_deref(), Some("Welcome aboard!"));
    assert_eq!(got.organization.id, org);
    assert_eq!(got.invited_by.unwrap().name, "owner Tester");

    // list: the invitation, without token or organization.
    let raw: serde_json::Value = workspace_tests::http()
        .get(format!("{}/api/invitations/list?org_id={org}", cx.base_url))
        .bearer_auth(&owner.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = raw.as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert!(items[0].get("token").is_none() && items[0].get("organization").is_none());
    assert_eq!(items[0]["invited_by"]["id"], owner.id.to_string());

    // validate is public and shows only the spec's fields.
    let raw: serde_json::Value = workspace_tests::http()
        .get(format!("{}/api/invitations/validate", cx.base_url))
        .query(&[("token", &token)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(raw["valid"], true);
    let mut keys: Vec<&str> = raw["invitation"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "created_at",
            "email",
            "expires_at",
            "id",
            "invited_by",
            "organization",
            "role"
        ]
    );

    // pending -> accepted through signup_invite.
    let response = cx
        .anon()
        .auth_signup_invite()
        .body(accept_body(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let account = response.into_inner();
    assert_eq!(account.email, "nova@example.com");
    assert_eq!(
        (account.first_name.as_str(), account.last_name.as_str()),
        ("Nova", "Invitee")
    );
    let me = cx
        .client_with_token(&account.access_token)
        .users_me()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(me.id, account.id);
    let joined = me
        .organizations
        .iter()
        .find(|m| m.id == org)
        .expect("joined");
    assert_eq!(joined.role_id, member_role);
    assert_eq!(
        me.organizations.len(),
        2,
        "the invited org and a personal one"
    );
    // The new account logs in with its password.
    cx.anon()
        .auth_login()
        .body(
            workspace_client::types::LoginRequest::builder()
                .email("nova@example.com".to_string())
                .password(NEW_PASSWORD.to_string()),
        )
        .send()
        .await
        .unwrap();

    let got = owner
        .client
        .invitations_get()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status, InvitationStatus::Accepted);
    // The token became invalid.
    let validation = cx
        .anon()
        .invitations_validate()
        .token(token.clone())
        .send()
        .await
        .unwrap();
    assert!(!validation.valid && validation.invitation.is_none());
    assert!(
        !validation.existing_account,
        "said of valid invitations only"
    );
    assert_eq!(
        error_of(
            cx.anon()
                .auth_signup_invite()
                .body(accept_body(&token))
                .send()
                .await
        ),
        (410, "invitation_used".to_string())
    );
    // The list filter uses the state.
    let accepted = owner
        .client
        .invitations_list()
        .org_id(org)
        .status(InvitationStatus::Accepted)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.len(), 1);
    let pending = owner
        .client
        .invitations_list()
        .org_id(org)
        .status(InvitationStatus::Pending)
        .send()
        .await
        .unwrap();
    assert!(pending.is_empty());
    cx.teardown().await;
}

#[tokio::test]
async fn resend_extends_expiry_and_keeps_the_token() {
    let cx = TestContext::new("inv_resend").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "member").await;
    let created = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("late@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    let old_token = created.token.unwrap();
    db.execute(
        "UPDATE invitations SET expires_at = now() + interval '1 hour' WHERE id = $1",
        &[&created.id],
    )
    .await
    .unwrap();

    // pending -> pending: expiry extended, e-mail resent.
    let resent = owner
        .client
        .invitations_resend()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(resent.success);
    assert_eq!(resent.invitation.id, created.id);
    assert_eq!(resent.invitation.status, InvitationStatus::Pending);
    let left = resent.invitation.expires_at - chrono::Utc::now();
    assert!(left.num_hours() >= 7 * 24 - 1, "{left}");
    // The spec issues the token at creation only: the resent e-mail
    // carries the same link, so the first e-mail's link still works.
    let mails = outbox(&db, "late@example.com").await;
    assert_eq!(mails.len(), 2);
    assert_eq!(token_in(&mails[0].1), old_token);
    assert_eq!(token_in(&mails[1].1), old_token);
    assert!(
        cx.anon()
            .invitations_validate()
            .token(old_token.clone())
            .send()
            .await
            .unwrap()
            .valid
    );
    cx.anon()
        .auth_signup_invite()
        .body(accept_body(&old_token))
        .send()
        .await
        .unwrap();
    // Not pending any more: resend and revoke are refused.
    assert_eq!(
        error_of(
            owner
                .client
                .invitations_resend()
                .invitation_id(created.id)
                .send()
                .await
        ),
        (409, "invitation_not_pending".to_string())
    );
    assert_eq!(
        error_of(
            owner
                .client
                .invitations_revoke()
                .invitation_id(created.id)
                .send()
                .await
        ),
        (409, "invitation_not_pending".to_string())
    );
    cx.teardown().await;
}

#[tokio::test]
async fn revoke_makes_the_token_unusable() {
    let cx = TestContext::new("inv_revoke").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "guest").await;
    let created = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("gone@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    let token = created.token.unwrap();

    // pending -> revoked.
    let revoked = owner
        .client
        .invitations_revoke()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(revoked.success);
    assert_eq!(stored_status(&db, created.id).await, "revoked");
    let got = owner
        .client
        .invitations_get()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status, InvitationStatus::Revoked);
    assert!(
        !cx.anon()
            .invitations_validate()
            .token(token.clone())
            .send()
            .await
            .unwrap()
            .valid
    );
    assert_eq!(
        error_of(
            cx.anon()
                .auth_signup_invite()
                .body(accept_body(&token))
                .send()
                .await
        ),
        (410, "invitation_revoked".to_string())
    );
    assert_eq!(
        error_of(
            owner
                .client
                .invitations_revoke()
                .invitation_id(created.id)
                .send()
                .await
        ),
        (409, "invitation_not_pending".to_string())
    );
    assert_eq!(
        error_of(
            owner
                .client
                .invitations_resend()
                .invitation_id(created.id)
                .send()
                .await
        ),
        (409, "invitation_not_pending".to_string())
    );
    // A revoked invitation does not block a new one.
    owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("gone@example.com", role))
        .send()
        .await
        .unwrap();
    let n: i64 = db
        .query_one(
            "SELECT count(*) FROM users WHERE email_normalized = 'gone@example.com'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "no account was created");
    cx.teardown().await;
}

#[tokio::test]
async fn invitations_expire_by_time_and_are_replaced() {
    let cx = TestContext::new("inv_expiry").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "member").await;
    let created = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("slow@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    let token = created.token.unwrap();
    // pending -> expired by the passage of time (nothing runs: it is derived).
    db.execute(
        "UPDATE invitations SET created_at = now() - interval '8 days', \
                expires_at = now() - interval '1 day' WHERE id = $1",
        &[&created.id],
    )
    .await
    .unwrap();
    assert_eq!(stored_status(&db, created.id).await, "pending");
    let got = owner
        .client
        .invitations_get()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status, InvitationStatus::Expired);
    let expired = owner
        .client
        .invitations_list()
        .org_id(org)
        .status(InvitationStatus::Expired)
        .send()
        .await
        .unwrap();
    assert_eq!(expired.len(), 1);
    assert!(
        owner
            .client
            .invitations_list()
            .org_id(org)
            .status(InvitationStatus::Pending)
            .send()
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !cx.anon()
            .invitations_validate()
            .token(token.clone())
            .send()
            .await
            .unwrap()
            .valid
    );
    assert_eq!(
        error_of(
            cx.anon()
                .auth_signup_invite()
                .body(accept_body(&token))
                .send()
                .await
        ),
        (410, "invitation_expired".to_string())
    );
    for result in [
        error_of(
            owner
                .client
                .invitations_resend()
                .invitation_id(created.id)
                .send()
                .await,
        ),
        error_of(
            owner
                .client
                .invitations_revoke()
                .invitation_id(created.id)
                .send()
                .await,
        ),
    ] {
        assert_eq!(result, (409, "invitation_not_pending".to_string()));
    }
    // An expired invitation is replaced by creating a new one.
    let renewed = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("slow@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renewed.status, InvitationStatus::Pending);
    assert_eq!(stored_status(&db, created.id).await, "expired");
    cx.anon()
        .auth_signup_invite()
        .body(accept_body(&renewed.token.unwrap()))
        .send()
        .await
        .unwrap();
    cx.teardown().await;
}

#[tokio::test]
async fn create_enforces_every_rule() {
    let cx = TestContext::new("inv_rules").await;
    let owner = cx.user("owner").await;
    let admin = cx.user("admin").await;
    let member = cx.user("member").await;
    let outsider = cx.user("outsider").await;
    let org = owner.personal_org().await;
    let other_org = outsider.personal_org().await;
    let db = cx.db().await;
    add_member(&db, admin.id, org, "admin").await;
    add_member(&db, member.id, org, "member").await;
    let member_role = role_id(&db, org, "member").await;
    let owner_role = role_id(&db, org, "owner").await;
    let foreign_role = role_id(&db, other_org, "member").await;
    // A custom role above admin's level 80.
    let senior = Uuid::new_v4();
    db.execute(
        "INSERT INTO roles (id, organization_id, name, hierarchy_level) VALUES ($1, $2, 'senior', 90)",
        &[&senior, &org],
    )
    .await
    .unwrap();

    let create = |client: &workspace_client::Client, email: &str, role: Uuid| {
        let client = client.clone();
        let body = create_body(email, role);
        async move {
            client
                .invitations_create()
                .org_id(org)
                .body(body)
                .send()
                .await
        }
    };

    let cases: Vec<(&workspace_client::Client, &str, Uuid, u16, &str)> = vec![
        (
            &owner.client,
            "not-an-email",
            member_role,
            400,
            "invalid_email",
        ),
        (
            &owner.client,
            "x@example.com",
            Uuid::new_v4(),
            400,
            "invalid_role",
        ),
        (
            &owner.client,
            "x@example.com",
            foreign_role,
            400,
            "invalid_role",
        ),
        (
            &owner.client,
            "x@example.com",
            owner_role,
            403,
            "owner_role_not_assignable",
        ),
        (
            &admin.client,
            "x@example.com",
            owner_role,
            403,
            "owner_role_not_assignable",
        ),
        (
            &admin.client,
            "x@example.com",
            senior,
            403,
            "role_level_too_high",
        ),
        (
            &member.client,
            "x@example.com",
            member_role,
            403,
            "forbidden",
        ),
        (
            &outsider.client,
            "x@example.com",
            member_role,
            403,
            "forbidden",
        ),
        (
            &owner.client,
            &member.email,
            member_role,
            409,
            "already_member",
        ),
        (
            &owner.client,
            "OWNER@example.com",
            member_role,
            409,
            "already_member",
        ),
    ];
    for (client, email, role, status, code) in cases {
        assert_eq!(
            error_of(create(client, email, role).await),
            (status, code.to_string()),
            "{email}"
        );
    }
    // The owner may give a custom role up to their own level; admin may
    // give admin.
    create(&owner.client, "senior@example.com", senior)
        .await
        .unwrap();
    let admin_role = role_id(&db, org, "admin").await;
    create(&admin.client, "peer@example.com", admin_role)
        .await
        .unwrap();
    // One pending invitation per address, compared case-insensitively.
    assert_eq!(
        error_of(create(&owner.client, "PEER@example.com", member_role).await),
        (409, "invitation_pending".to_string())
    );
    // Message length.
    // (The document declares the bound, so the generated client refuses
    // to send it: sent raw.)
    assert_eq!(
        workspace_tests::raw(
            &cx.base_url,
            Some(&owner.token),
            reqwest::Method::POST,
            "/api/invitations/create",
            &[("org_id", org.to_string())],
            Some(serde_json::json!({
                "email": "m@example.com", "role_id": member_role, "message": "x".repeat(2001),
            })),
        )
        .await,
        (400, "invalid_message".to_string())
    );
    // Malformed input and no token.
    let response = workspace_tests::http()
        .post(format!(
            "{}/api/invitations/create?org_id={org}",
            cx.base_url
        ))
        .bearer_auth(&owner.token)
        .json(&serde_json::json!({"email": "y@example.com", "role_id": "not-a-uuid"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error_code"], "invalid_request");
    assert_eq!(
        error_of(
            cx.anon()
                .invitations_create()
                .org_id(org)
                .body(create_body("z@example.com", member_role))
                .send()
                .await
        ),
        (401, "unauthenticated".to_string())
    );
    // The member cannot list either; the outsider is not a member.
    assert_eq!(
        error_of(member.client.invitations_list().org_id(org).send().await),
        (403, "forbidden".to_string())
    );
    assert_eq!(
        error_of(outsider.client.invitations_list().org_id(org).send().await),
        (403, "forbidden".to_string())
    );
    let n: i64 = db
        .query_one("SELECT count(*) FROM invitations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "only the two valid invitations exist");
    assert_eq!(
        db.query_one("SELECT count(*) FROM email_outbox", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        2
    );
    cx.teardown().await;
}

#[tokio::test]
async fn invitations_of_other_organizations_look_missing() {
    let cx = TestContext::new("inv_isolation").await;
    let owner = cx.user("owner").await;
    let member = cx.user("member").await;
    let outsider = cx.user("outsider").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    add_member(&db, member.id, org, "member").await;
    let role = role_id(&db, org, "member").await;
    let created = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("secret@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    let missing = Uuid::new_v4();
    for id in [created.id, missing] {
        let not_found = (404, "not_found".to_string());
        assert_eq!(
            error_of(
                outsider
                    .client
                    .invitations_get()
                    .invitation_id(id)
                    .send()
                    .await
            ),
            not_found
        );
        assert_eq!(
            error_of(
                outsider
                    .client
                    .invitations_resend()
                    .invitation_id(id)
                    .send()
                    .await
            ),
            not_found
        );
        assert_eq!(
            error_of(
                outsider
                    .client
                    .invitations_revoke()
                    .invitation_id(id)
                    .send()
                    .await
            ),
            not_found
        );
    }
    // A member of the organization below admin level is forbidden.
    let forbidden = (403, "forbidden".to_string());
    assert_eq!(
        error_of(
            member
                .client
                .invitations_get()
                .invitation_id(created.id)
                .send()
                .await
        ),
        forbidden
    );
    assert_eq!(
        error_of(
            member
                .client
                .invitations_resend()
                .invitation_id(created.id)
                .send()
                .await
        ),
        forbidden
    );
    assert_eq!(
        error_of(
            member
                .client
                .invitations_revoke()
                .invitation_id(created.id)
                .send()
                .await
        ),
        forbidden
    );
    assert_eq!(stored_status(&db, created.id).await, "pending");
    assert_eq!(
        outbox(&db, "secret@example.com").await.len(),
        1,
        "nothing resent"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn bulk_create_reports_each_item_and_never_half_creates() {
    let cx = TestContext::new("inv_bulk").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let member = role_id(&db, org, "member").await;
    let owner_role = role_id(&db, org, "owner").await;
    let item = |email: &str, role: Uuid| InvitationBulkItem {
        email: email.parse().unwrap(),
        role_id: role,
    };
    let response = owner
        .client
        .invitations_bulk_create()
        .org_id(org)
        .body(InvitationBulkCreateRequest {
            invitations: vec![
                item("one@example.com", member),
                item("broken", member),
                item("ONE@example.com", member),
                item("boss@example.com", owner_role),
                item("two@example.com", Uuid::new_v4()),
                item("three@example.com", member),
            ],
            message: Some("Join us".parse().unwrap()),
        })
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let result = response.into_inner();
    assert!(!result.success);
    assert_eq!((result.created, result.failed), (2, 4));
    let outcome: Vec<(InvitationBulkItemStatus, Option<&str>)> = result
        .invitations
        .iter()
        .map(|r| (r.status, r.error_code.as_deref()))
        .collect();
    use InvitationBulkItemStatus::{Failed, Pending};
    assert_eq!(
        outcome,
        [
            (Pending, None),
            (Failed, Some("invalid_email")),
            (Failed, Some("invitation_pending")),
            (Failed, Some("owner_role_not_assignable")),
            (Failed, Some("invalid_role")),
            (Pending, None),
        ]
    );
    assert!(result.invitations[0].id.is_some() && result.invitations[1].id.is_none());
    let rows = db
        .query("SELECT email, message FROM invitations ORDER BY email", &[])
        .await
        .unwrap();
    let stored: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        stored,
        [
            ("one@example.com".to_string(), Some("Join us".to_string())),
            ("three@example.com".to_string(), Some("Join us".to_string())),
        ]
    );
    assert_eq!(
        db.query_one("SELECT count(*) FROM email_outbox", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        2
    );
    // All good: success.
    let ok = owner
        .client
        .invitations_bulk_create()
        .org_id(org)
        .body(InvitationBulkCreateRequest {
            invitations: vec![item("four@example.com", member)],
            message: None,
        })
        .send()
        .await
        .unwrap();
    assert!(ok.success && ok.created == 1 && ok.failed == 0);
    // Empty and oversized batches are refused whole.
    for n in [0, 101] {
        let invitations = (0..n)
            .map(|i| item(&format!("u{i}@example.com"), member))
            .collect();
        assert_eq!(
            error_of(
                owner
                    .client
                    .invitations_bulk_create()
                    .org_id(org)
                    .body(InvitationBulkCreateRequest {
                        invitations,
                        message: None
                    })
                    .send()
                    .await
            ),
            (400, "invalid_request".to_string())
        );
    }
    cx.teardown().await;
}

#[tokio::test]
async fn concurrent_acceptances_succeed_exactly_once() {
    let cx = TestContext::new("inv_concurrent_accept").await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "member").await;
    let token = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("race@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap();
    let client = cx.anon();
    let attempts = (0..10).map(|_| {
        let client = client.clone();
        let token = token.clone();
        async move {
            client
                .auth_signup_invite()
                .body(accept_body(&token))
                .send()
                .await
        }
    });
    let results = futures::future::join_all(attempts).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    for r in results.into_iter().filter(|r| r.is_err()) {
        assert_eq!(error_of(r), (410, "invitation_used".to_string()));
    }
    let row = db
        .query_one(
            "SELECT (SELECT count(*) FROM users WHERE email_normalized = 'race@example.com'), \
                    (SELECT count(*) FROM memberships m JOIN users u ON u.id = m.user_id \
                      WHERE u.email_normalized = 'race@example.com'), \
                    (SELECT count(*) FROM organizations)",
            &[],
        )
        .await
        .unwrap();
    let counts: (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(
        counts,
        (1, 2, 2),
        "one user, two memberships, one new personal org"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn signup_invite_error_rules() {
    let cx = TestContext::new("inv_signup_errors").await;
    let owner = cx.user("owner").await;
    let existing = cx.user("existing").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "member").await;
    let anon = cx.anon();

    assert_eq!(
        error_of(
            anon.auth_signup_invite()
                .body(accept_body("no-such-token"))
                .send()
                .await
        ),
        (400, "invalid_invitation".to_string())
    );
    assert_eq!(
        error_of(anon.auth_signup_invite().body(accept_body("")).send().await),
        (400, "invalid_invitation".to_string())
    );
    let token = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("weak@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap();
    assert_eq!(
        error_of(
            anon.auth_signup_invite()
                .body(accept_body(&token).first_name(" ".to_string()))
                .send()
                .await
        ),
        (400, "invalid_name".to_string())
    );
    for weak in ["short", "weak@example.com", "WEAK", "zzzzzzzzzzzz"] {
        assert_eq!(
            error_of(
                anon.auth_signup_invite()
                    .body(accept_body(&token).password(weak.to_string()))
                    .send()
                    .await
            ),
            (422, "weak_password".to_string()),
            "{weak}"
        );
    }
    // The address already has an account: it accepts with its own password.
    let existing_token = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body(&existing.email, role))
        .send()
        .await
        .unwrap()
        .into_inner()
        .token
        .unwrap();
    assert_eq!(
        error_of(
            anon.auth_signup_invite()
                .body(accept_body(&existing_token))
                .send()
                .await
        ),
        (401, "invalid_credentials".to_string()),
        "a password other than the account's"
    );
    let validation = anon
        .invitations_validate()
        .token(existing_token.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(
        validation.valid,
        "a wrong password leaves the invitation pending"
    );
    // The page learns that the address has an account (asks its password).
    assert!(validation.existing_account);
    // Nothing was written by the failures.
    let n: i64 = db
        .query_one("SELECT count(*) FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
    let accepted = anon
        .auth_signup_invite()
        .body(accept_body(&existing_token).password(workspace_tests::TEST_PASSWORD.to_string()))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(accepted.id, existing.id);
    assert_eq!(
        accepted.first_name, "existing",
        "the account's names are kept"
    );
    let me = cx
        .client_with_token(&accepted.access_token)
        .users_me()
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(me.organizations.iter().any(|m| m.id == org), "joined");
    assert_eq!(me.organizations.len(), 2, "no second personal organization");
    assert_eq!(
        error_of(
            anon.auth_signup_invite()
                .body(
                    accept_body(&existing_token)
                        .password(workspace_tests::TEST_PASSWORD.to_string())
                )
                .send()
                .await
        ),
        (410, "invitation_used".to_string())
    );
    // Malformed body.
    let response = workspace_tests::http()
        .post(format!("{}/api/auth/signup_invite", cx.base_url))
        .json(&serde_json::json!({"invite_token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    // Still acceptable with good input.
    anon.auth_signup_invite()
        .body(accept_body(&token))
        .send()
        .await
        .unwrap();
    let _ = TEST_PASSWORD;
    cx.teardown().await;
}

/// A real SMTP server (aiosmtpd) writing a maildir, killed on drop.
struct SmtpServer {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ensure_aiosmtpd() {
    let have = || {
        std::process::Command::new(workspace_tests::python())
            .args(["-c", "import aiosmtpd"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if have() {
        return;
    }
    assert!(
        have(),
        "aiosmtpd is missing: run the suite with `cargo xtask test` (it keeps the test \
         peers in target/pyenv) or set WORKSPACE_PYTHON to a Python with aiosmtpd==1.4.6"
    );
}

async fn start_smtp() -> SmtpServer {
    ensure_aiosmtpd();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("workspace-smtp-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let child = std::process::Command::new(workspace_tests::python())
        .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
        .args(["-c", "aiosmtpd.handlers.Mailbox"])
        .arg(dir.join("mail"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting aiosmtpd");
    let server = SmtpServer { child, port, dir };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return server;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("aiosmtpd did not start on port {port}");
}

/// The messages in the maildir, undoing quoted-printable soft breaks.
fn maildir_messages(server: &SmtpServer) -> Vec<String> {
    let new = server.dir.join("mail").join("new");
    let Ok(entries) = std::fs::read_dir(new) else {
        return Vec::new();
    };
    entries
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .replace("=\r\n", "")
                .replace("=\n", "")
                .replace("=3D", "=")
        })
        .collect()
}

#[tokio::test]
async fn smtp_mailer_delivers_to_a_real_smtp_server() {
    let smtp = start_smtp().await;
    let port = smtp.port;
    let cx = TestContext::with_config("inv_smtp", |c| {
        c.mail.smtp_url = Some(format!("smtp://127.0.0.1:{port}"));
        c.mail.from = "Workspace Invites <invites@workspace.test>".to_string();
        c.mail.public_url = Some("https://app.example.test".to_string());
    })
    .await;
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let db = cx.db().await;
    let role = role_id(&db, org, "member").await;
    let created = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("smtp@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    let token = created.token.unwrap();
    let messages = maildir_messages(&smtp);
    assert_eq!(messages.len(), 1, "{messages:?}");
    let message = &messages[0];
    assert!(message.contains("To: smtp@example.com"), "{message}");
    assert!(message.contains("invites@workspace.test"), "{message}");
    assert!(
        message.contains("Subject: You are invited to join"),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "https://app.example.test/invite/accept?token={token}"
        )),
        "{message}"
    );
    let queued: i64 = db
        .query_one("SELECT count(*) FROM email_outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(queued, 0, "SMTP replaces the outbox");

    // Resend goes over SMTP too, with the same token.
    owner
        .client
        .invitations_resend()
        .invitation_id(created.id)
        .send()
        .await
        .unwrap();
    let messages = maildir_messages(&smtp);
    assert_eq!(messages.len(), 2);
    assert!(messages.iter().all(|m| token_in(m) == token));
    cx.anon()
        .auth_signup_invite()
        .body(accept_body(&token))
        .send()
        .await
        .unwrap();

    // With the SMTP server gone: create still succeeds (logged, resend
    // retries); resend reports 503 mail_unavailable.
    drop(smtp);
    let created = owner
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("offline@example.com", role))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        error_of(
            owner
                .client
                .invitations_resend()
                .invitation_id(created.id)
                .send()
                .await
        ),
        (503, "mail_unavailable".to_string())
    );
    cx.teardown().await;
}
