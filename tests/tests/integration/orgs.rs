//! Organizations, membership, feature gates and the role-update rules.

use uuid::Uuid;
use workspace_client::types::{AddMemberRequest, OrgFeaturesUpdate, UpdateUserRoleRequest};
use workspace_tests::{TestContext, error_of};

fn add(org: Uuid, user: Uuid, role: Uuid) -> workspace_client::types::builder::AddMemberRequest {
    AddMemberRequest::builder()
        .organization_id(org)
        .user_id(user)
        .role_id(role)
}

#[tokio::test]
async fn create_org_lists_and_isolates() {
    let cx = TestContext::new("create_org").await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;

    let created = ada
        .client
        .org_create_org()
        .name("  Analytical Engines ")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let org = created.into_inner();
    assert_eq!(org.name, "Analytical Engines");
    assert_eq!(org.slug, "analytical-engines");
    assert_eq!(
        (org.user_role.role_name.as_str(), org.user_role.level),
        ("owner", 100)
    );

    // Four system roles, reported with organization_id null.
    let roles = ada
        .client
        .roles_list_roles()
        .org_id(org.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    let names: Vec<(&str, i32, bool)> = roles
        .iter()
        .map(|r| (r.name.as_str(), r.hierarchy_level, r.is_system_role))
        .collect();
    assert_eq!(
        names,
        [
            ("owner", 100, true),
            ("admin", 80, true),
            ("member", 20, true),
            ("guest", 10, true)
        ]
    );
    // (The document's `Role` schema has no `permissions`: listings omit it.)
    assert!(roles.iter().all(|r| r.organization_id.is_none()));

    let list = ada.client.org_list().send().await.unwrap().into_inner();
    assert_eq!(list.len(), 2, "personal and the new one");
    assert_eq!(list[1].id, org.id);

    // Same name for the same user: 409, whatever the case.
    let (s, c) = error_of(
        ada.client
            .org_create_org()
            .name("analytical ENGINES")
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (409, "org_name_taken"));
    // Another user may use the name; organizations are isolated.
    let other = bob
        .client
        .org_create_org()
        .name("Analytical Engines")
        .send()
        .await
        .unwrap();
    assert_ne!(other.slug, org.slug, "slugs stay unique");
    let (s, c) = error_of(bob.client.roles_list_roles().org_id(org.id).send().await);
    assert_eq!((s, c.as_str()), (403, "forbidden"));
    let (s, c) = error_of(
        bob.client
            .roles_list_roles()
            .org_id(Uuid::new_v4())
            .send()
            .await,
    );
    assert_eq!(
        (s, c.as_str()),
        (403, "forbidden"),
        "unknown orgs look like foreign ones"
    );

    for bad in ["", "   ", &"x".repeat(101), "nul\u{0}byte", "bell\u{7}"] {
        let got = workspace_tests::raw(
            &cx.base_url,
            Some(&ada.token),
            reqwest::Method::POST,
            "/api/org/create_org",
            &[("name", bad.to_string())],
            None,
        )
        .await;
        assert_eq!(got, (400, "invalid_name".to_string()), "{bad:?}");
    }
    cx.teardown().await;
}

#[tokio::test]
async fn add_member_rules() {
    let cx = TestContext::with_config("add_member", |c| {
        c.auth.system_admins = vec!["root@example.com".into()];
    })
    .await;
    let owner = cx.user("owner").await;
    let bob = cx.user("bob").await;
    let carol = cx.user("carol").await;
    let root = cx.user("root").await;
    let org = owner.personal_org().await;
    let member = owner.role_id(org, "member").await;
    let admin = owner.role_id(org, "admin").await;

    let response = owner
        .client
        .org_add_member()
        .body(add(org, bob.id, member))
        .send()
        .await
        .unwrap();
    assert!(response.message.contains("member"));
    let bob_orgs = bob.client.org_list().send().await.unwrap().into_inner();
    let joined = bob_orgs.iter().find(|o| o.id == org).expect("bob joined");
    assert_eq!(
        (joined.user_role.role_name.as_str(), joined.user_role.level),
        ("member", 20)
    );

    let cases = [
        (add(org, bob.id, member), 409, "already_member"),
        (add(org, Uuid::new_v4(), member), 404, "not_found"),
        (add(org, carol.id, Uuid::new_v4()), 400, "invalid_role"),
        (
            add(org, carol.id, owner.role_id(org, "owner").await),
            403,
            "owner_role_not_assignable",
        ),
        // A role of another organization.
        (
            add(
                org,
                carol.id,
                bob.role_id(bob.personal_org().await, "member").await,
            ),
            400,
            "invalid_role",
        ),
    ];
    for (body, status, code) in cases {
        let (s, c) = error_of(owner.client.org_add_member().body(body).send().await);
        assert_eq!((s, c.as_str()), (status, code));
    }
    // A member lacks users:write.
    let (s, c) = error_of(
        bob.client
            .org_add_member()
            .body(add(org, carol.id, member))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "forbidden"));

    // An admin cannot hand out a role above their own level.
    let high = owner
        .client
        .roles_create()
        .org_id(org)
        .body(
            workspace_client::types::CreateRoleRequest::builder()
                .name("deputy".to_string())
                .hierarchy_level(90)
                .permission_ids(Vec::new()),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    owner
        .client
        .org_add_member()
        .body(add(org, carol.id, admin))
        .send()
        .await
        .unwrap();
    let dave = cx.user("dave").await;
    let (s, c) = error_of(
        carol
            .client
            .org_add_member()
            .body(add(org, dave.id, high.id))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "role_level_too_high"));
    carol
        .client
        .org_add_member()
        .body(add(org, dave.id, member))
        .send()
        .await
        .unwrap();

    // Without the team_members feature: refused with a clear code.
    let (s, c) = error_of(
        owner
            .client
            .org_update_features()
            .org_id(org)
            .body(OrgFeaturesUpdate::builder().team_members(Some(false)))
            .send()
            .await,
    );
    assert_eq!(
        (s, c.as_str()),
        (403, "forbidden"),
        "owners are not system admins"
    );
    let features = root
        .client
        .org_update_features()
        .org_id(org)
        .body(
            OrgFeaturesUpdate::builder()
                .team_members(Some(false))
                .mcp_sessions(Some(2)),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!features.team_members);
    assert_eq!(features.mcp_sessions, 2);
    let eve = cx.user("eve").await;
    let (s, c) = error_of(
        owner
            .client
            .org_add_member()
            .body(add(org, eve.id, member))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "feature_disabled"));
    let db = cx.db().await;
    let n: i64 = db
        .query_one(
            "SELECT count(*) FROM memberships WHERE user_id = $1",
            &[&eve.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "only eve's own organization");

    // Members see the effective gates; null returns to the default.
    let seen = bob
        .client
        .org_features()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(seen, features);
    let reset = root
        .client
        .org_update_features()
        .org_id(org)
        .body(
            OrgFeaturesUpdate::builder()
                .reset(vec![workspace_client::types::FeatureName::McpSessions]),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reset.mcp_sessions, 10);
    let (s, c) = error_of(
        root.client
            .org_update_features()
            .org_id(org)
            .body(
                OrgFeaturesUpdate::builder()
                    .mcp_sessions(Some(3))
                    .reset(vec![workspace_client::types::FeatureName::McpSessions]),
            )
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (400, "invalid_request"));
    let (s, c) = error_of(
        root.client
            .org_update_features()
            .org_id(Uuid::new_v4())
            .body(OrgFeaturesUpdate::builder())
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (404, "not_found"));
    assert!(!reset.team_members, "untouched fields keep their override");

    // A deleted membership is reactivated by add_member.
    db.execute(
        "UPDATE memberships SET status = 'deleted' WHERE user_id = $1 AND organization_id = $2",
        &[&bob.id, &org],
    )
    .await
    .unwrap();
    root.client
        .org_update_features()
        .org_id(org)
        .body(OrgFeaturesUpdate::builder().team_members(Some(true)))
        .send()
        .await
        .unwrap();
    owner
        .client
        .org_add_member()
        .body(add(org, bob.id, admin))
        .send()
        .await
        .unwrap();
    let bob_orgs = bob.client.org_list().send().await.unwrap().into_inner();
    assert_eq!(
        bob_orgs
            .iter()
            .find(|o| o.id == org)
            .unwrap()
            .user_role
            .role_name,
        "admin"
    );
    cx.teardown().await;
}

#[tokio::test]
async fn role_update_rules() {
    let cx = TestContext::new("role_update_rules").await;
    let owner = cx.user("owner").await;
    let admin = cx.user("admin").await;
    let bob = cx.user("bob").await;
    let org = owner.personal_org().await;
    let roles = |name: &'static str| owner.role_id(org, name);
    let (member, admin_role, guest, owner_role) = (
        roles("member").await,
        roles("admin").await,
        roles("guest").await,
        roles("owner").await,
    );
    owner
        .client
        .org_add_member()
        .body(add(org, admin.id, admin_role))
        .send()
        .await
        .unwrap();
    owner
        .client
        .org_add_member()
        .body(add(org, bob.id, member))
        .send()
        .await
        .unwrap();
    let set = |role: Uuid| UpdateUserRoleRequest::builder().role_id(role);

    // Rule 1: an admin has users:write but is not the owner.
    let (s, c) = error_of(
        admin
            .client
            .users_update()
            .org_id(org)
            .user_id(bob.id)
            .body(set(guest))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "forbidden"));
    // Rule 2: the owner role is never assigned.
    let (s, c) = error_of(
        owner
            .client
            .users_update()
            .org_id(org)
            .user_id(bob.id)
            .body(set(owner_role))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "owner_role_not_assignable"));
    // Rule 3: same role, and non-active members.
    let (s, c) = error_of(
        owner
            .client
            .users_update()
            .org_id(org)
            .user_id(bob.id)
            .body(set(member))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (400, "role_already_assigned"));
    let db = cx.db().await;
    db.execute(
        "UPDATE memberships SET status = 'invited' WHERE user_id = $1 AND organization_id = $2",
        &[&bob.id, &org],
    )
    .await
    .unwrap();
    let (s, c) = error_of(
        owner
            .client
            .users_update()
            .org_id(org)
            .user_id(bob.id)
            .body(set(guest))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (400, "member_not_active"));
    db.execute(
        "UPDATE memberships SET status = 'active' WHERE user_id = $1 AND organization_id = $2",
        &[&bob.id, &org],
    )
    .await
    .unwrap();
    // Not a member at all.
    let stranger = cx.user("stranger").await;
    let (s, c) = error_of(
        owner
            .client
            .users_update()
            .org_id(org)
            .user_id(stranger.id)
            .body(set(guest))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (404, "not_found"));
    // The owner's own role is not changed here either.
    let (s, c) = error_of(
        owner
            .client
            .users_update()
            .org_id(org)
            .user_id(owner.id)
            .body(set(guest))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "owner_role_not_assignable"));

    // Success: the response carries the new role; access follows it.
    let updated = owner
        .client
        .users_update()
        .org_id(org)
        .user_id(bob.id)
        .body(set(guest))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(updated.id, bob.id);
    assert_eq!(updated.status, "active");
    assert!(updated.invite_id.is_none());
    assert!(updated.last_active_at.is_some(), "bob logged in");
    assert_eq!(updated.organizations.len(), 1);
    assert_eq!(
        (
            updated.organizations[0].id,
            updated.organizations[0].role_name.as_str()
        ),
        (org, "guest")
    );
    let (s, _) = error_of(bob.client.roles_list_roles().org_id(org).send().await);
    assert_eq!(s, 403, "guests lack roles:read");
    cx.teardown().await;
}
