//! Roles and the permission catalog.

use uuid::Uuid;
use workspace_client::types::{
    AddMemberRequest, CreatePermissionRequest, CreateRoleRequest, UpdateRoleRequest,
};
use workspace_tests::{TestContext, TestUser, error_of};

async fn setup(cx: &TestContext) -> (TestUser, Uuid, Vec<workspace_client::types::Permission>) {
    let owner = cx.user("owner").await;
    let org = owner.personal_org().await;
    let catalog = owner
        .client
        .roles_list_permissions()
        .send()
        .await
        .unwrap()
        .into_inner();
    (owner, org, catalog)
}

fn perm(catalog: &[workspace_client::types::Permission], name: &str) -> Uuid {
    catalog
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .id
}

fn role(
    name: &str,
    level: i32,
    permissions: Vec<Uuid>,
) -> workspace_client::types::builder::CreateRoleRequest {
    CreateRoleRequest::builder()
        .name(name.to_string())
        .hierarchy_level(level)
        .permission_ids(permissions)
}

#[tokio::test]
async fn catalog_is_seeded_and_sorted() {
    let cx = TestContext::new("catalog").await;
    let (_, _, catalog) = setup(&cx).await;
    let names: Vec<&str> = catalog.iter().map(|p| p.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for expected in [
        "kb:read",
        "kb:write",
        "kb:delete",
        "conversation:read",
        "chats:read",
        "chats:write",
        "chats:delete",
        "mcp:read",
        "mcp:write",
        "users:read",
        "users:write",
        "roles:read",
        "roles:write",
        "roles:delete",
        "agent:execute",
        "*:*",
        "*:read",
        "*:admin",
        "kb:*",
    ] {
        assert!(names.contains(&expected), "{expected} missing");
    }
    cx.teardown().await;
}

#[tokio::test]
async fn create_update_remove_custom_roles() {
    let cx = TestContext::new("custom_roles").await;
    let (owner, org, catalog) = setup(&cx).await;

    let created = owner
        .client
        .roles_create()
        .org_id(org)
        .body(
            role(
                " Reviewer ",
                30,
                vec![perm(&catalog, "kb:read"), perm(&catalog, "chats:*")],
            )
            .description(Some("Reads".parse().unwrap())),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let created = created.into_inner();
    assert_eq!(created.name, "Reviewer");
    assert_eq!(created.organization_id, org);
    assert!(!created.is_system_role);
    let names: Vec<String> = created
        .permissions
        .clone()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["chats:*", "kb:read"]);
    let listed = owner
        .client
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["owner", "admin", "Reviewer", "member", "guest"]
    );

    // Names are unique per organization, case-insensitively, system names included.
    for name in ["reviewer", "OWNER"] {
        let (s, c) = error_of(
            owner
                .client
                .roles_create()
                .org_id(org)
                .body(role(name, 5, vec![]))
                .send()
                .await,
        );
        assert_eq!((s, c.as_str()), (409, "role_name_taken"), "{name}");
    }
    let json = |name: &str, level: i64, ids: Vec<Uuid>| serde_json::json!({"name": name, "hierarchy_level": level, "permission_ids": ids});
    let bad = [
        (json("x", 101, vec![]), 400, "invalid_hierarchy_level"),
        (json("x", -1, vec![]), 400, "invalid_hierarchy_level"),
        (json("", 5, vec![]), 400, "invalid_name"),
        (json("  ", 5, vec![]), 400, "invalid_name"),
        (json("tab\there", 5, vec![]), 400, "invalid_name"),
        (
            json("x", 5, vec![Uuid::new_v4()]),
            400,
            "unknown_permission",
        ),
        (json("x", 1 << 40, vec![]), 400, "invalid_request"),
    ];
    for (body, status, code) in bad {
        let got = workspace_tests::raw(
            &cx.base_url,
            Some(&owner.token),
            reqwest::Method::POST,
            "/api/roles/create",
            &[("org_id", org.to_string())],
            Some(body.clone()),
        )
        .await;
        assert_eq!(got, (status, code.to_string()), "{body}");
    }

    // Update: partial, permission list replaced.
    let updated = owner
        .client
        .roles_update()
        .org_id(org)
        .role_id(created.id)
        .body(
            UpdateRoleRequest::builder()
                .permission_ids(Some(vec![perm(&catalog, "conversation:read")])),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(updated.name, "Reviewer");
    assert_eq!(updated.description, "Reads");
    assert_eq!(updated.hierarchy_level, 30);
    let names: Vec<String> = updated.permissions.into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["conversation:read"]);
    let renamed = owner
        .client
        .roles_update()
        .org_id(org)
        .role_id(created.id)
        .body(
            UpdateRoleRequest::builder()
                .name(Some("Auditor".parse().unwrap()))
                .hierarchy_level(Some(40)),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (renamed.name.as_str(), renamed.hierarchy_level),
        ("Auditor", 40)
    );
    assert_eq!(
        renamed.permissions.len(),
        1,
        "omitted permission_ids keep the set"
    );
    let (s, c) = error_of(
        owner
            .client
            .roles_update()
            .org_id(org)
            .role_id(created.id)
            .body(UpdateRoleRequest::builder().name(Some("Admin".parse().unwrap())))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (409, "role_name_taken"));

    // System roles are immutable.
    let system = owner
        .client
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    let member = system.iter().find(|r| r.name == "member").unwrap().id;
    let (s, c) = error_of(
        owner
            .client
            .roles_update()
            .org_id(org)
            .role_id(member)
            .body(UpdateRoleRequest::builder().description(Some("x".parse().unwrap())))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "system_role_immutable"));
    let (s, c) = error_of(
        owner
            .client
            .roles_remove()
            .org_id(org)
            .role_id(member)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "system_role_immutable"));

    // Another organization's role is invisible.
    let other = cx.user("other").await;
    let other_org = other.personal_org().await;
    let theirs = other
        .client
        .roles_create()
        .org_id(other_org)
        .body(role("Theirs", 5, vec![]))
        .send()
        .await
        .unwrap();
    let (s, c) = error_of(
        owner
            .client
            .roles_remove()
            .org_id(org)
            .role_id(theirs.id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (404, "not_found"));
    let (s, _) = error_of(
        owner
            .client
            .roles_update()
            .org_id(org)
            .role_id(theirs.id)
            .body(UpdateRoleRequest::builder().name(Some("Mine".parse().unwrap())))
            .send()
            .await,
    );
    assert_eq!(s, 404);

    // A role in use cannot be deleted; once unused it can.
    owner
        .client
        .org_add_member()
        .body(
            AddMemberRequest::builder()
                .organization_id(org)
                .user_id(other.id)
                .role_id(created.id),
        )
        .send()
        .await
        .unwrap();
    let (s, c) = error_of(
        owner
            .client
            .roles_remove()
            .org_id(org)
            .role_id(created.id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (409, "role_in_use"));
    let db = cx.db().await;
    db.execute(
        "DELETE FROM memberships WHERE user_id = $1 AND organization_id = $2",
        &[&other.id, &org],
    )
    .await
    .unwrap();
    let removed = owner
        .client
        .roles_remove()
        .org_id(org)
        .role_id(created.id)
        .send()
        .await
        .unwrap();
    assert!(removed.message.contains("Auditor"));
    let n: i64 = db
        .query_one(
            "SELECT count(*) FROM role_permissions WHERE role_id = $1",
            &[&created.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    let (s, _) = error_of(
        owner
            .client
            .roles_remove()
            .org_id(org)
            .role_id(created.id)
            .send()
            .await,
    );
    assert_eq!(s, 404);
    cx.teardown().await;
}

#[tokio::test]
async fn nobody_grants_above_themselves() {
    let cx = TestContext::new("role_escalation").await;
    let (owner, org, catalog) = setup(&cx).await;
    let admin = cx.user("admin").await;
    let roles = owner
        .client
        .roles_list_roles()
        .org_id(org)
        .send()
        .await
        .unwrap()
        .into_inner();
    let admin_role = roles.iter().find(|r| r.name == "admin").unwrap().id;
    owner
        .client
        .org_add_member()
        .body(
            AddMemberRequest::builder()
                .organization_id(org)
                .user_id(admin.id)
                .role_id(admin_role),
        )
        .send()
        .await
        .unwrap();

    // Level above the admin's 80.
    let (s, c) = error_of(
        admin
            .client
            .roles_create()
            .org_id(org)
            .body(role("boss", 81, vec![]))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "role_level_too_high"));
    // Admins hold *:read/write/delete/execute but not *:admin or *:*.
    for name in ["organization:admin", "*:*", "*:admin"] {
        let (s, c) = error_of(
            admin
                .client
                .roles_create()
                .org_id(org)
                .body(role("sneaky", 10, vec![perm(&catalog, name)]))
                .send()
                .await,
        );
        assert_eq!((s, c.as_str()), (403, "permission_not_held"), "{name}");
    }
    // What they hold, via wildcard, they may grant.
    let ok = admin
        .client
        .roles_create()
        .org_id(org)
        .body(role(
            "helper",
            80,
            vec![perm(&catalog, "kb:read"), perm(&catalog, "*:write")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.hierarchy_level, 80);
    // Roles above the caller cannot be touched.
    let high = owner
        .client
        .roles_create()
        .org_id(org)
        .body(role("high", 90, vec![]))
        .send()
        .await
        .unwrap();
    let (s, c) = error_of(
        admin
            .client
            .roles_update()
            .org_id(org)
            .role_id(high.id)
            .body(UpdateRoleRequest::builder().description(Some("x".parse().unwrap())))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "role_level_too_high"));
    let (s, c) = error_of(
        admin
            .client
            .roles_remove()
            .org_id(org)
            .role_id(high.id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "role_level_too_high"));
    // Nor raised above the caller.
    let (s, c) = error_of(
        admin
            .client
            .roles_update()
            .org_id(org)
            .role_id(ok.id)
            .body(UpdateRoleRequest::builder().hierarchy_level(Some(95)))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "role_level_too_high"));
    cx.teardown().await;
}

#[tokio::test]
async fn system_admins_manage_the_catalog() {
    let cx = TestContext::with_config("permission_catalog", |c| {
        c.auth.system_admins = vec!["root@example.com".into()]
    })
    .await;
    let (owner, org, _) = setup(&cx).await;
    let root = cx.user("root").await;
    let flagged = cx.user("flagged").await;
    let new = |name: &str| CreatePermissionRequest::builder().name(name.to_string());

    let (s, c) = error_of(
        owner
            .client
            .roles_create_permission()
            .body(new("budget:approve"))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (403, "forbidden"));
    let created = root
        .client
        .roles_create_permission()
        .body(new("budget:approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let created = created.into_inner();
    assert_eq!(
        (created.name.as_str(), created.description.as_str()),
        ("budget:approve", "")
    );
    let (s, c) = error_of(
        root.client
            .roles_create_permission()
            .body(new("budget:approve"))
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (409, "permission_exists"));
    for bad in ["budget", "Budget:approve", "budget:ap prove", "a:b:c"] {
        let got = workspace_tests::raw(
            &cx.base_url,
            Some(&root.token),
            reqwest::Method::POST,
            "/api/roles/permission",
            &[],
            Some(serde_json::json!({"name": bad})),
        )
        .await;
        assert_eq!(got, (400, "invalid_permission_name".to_string()), "{bad}");
    }

    // The database flag works too.
    let db = cx.db().await;
    db.execute(
        "UPDATE users SET is_system_admin = true WHERE id = $1",
        &[&flagged.id],
    )
    .await
    .unwrap();
    flagged
        .client
        .roles_create_permission()
        .body(new("budget:read").description(Some("Read budgets".parse().unwrap())))
        .send()
        .await
        .unwrap();

    // The owner (*:*) can grant the new permission; deleting it removes it from roles.
    let granted = owner
        .client
        .roles_create()
        .org_id(org)
        .body(role("Treasurer", 50, vec![created.id]))
        .send()
        .await
        .unwrap();
    let (s, _) = error_of(
        owner
            .client
            .roles_delete_permission()
            .permission_id(created.id)
            .send()
            .await,
    );
    assert_eq!(s, 403);
    root.client
        .roles_delete_permission()
        .permission_id(created.id)
        .send()
        .await
        .unwrap();
    let n: i64 = db
        .query_one(
            "SELECT count(*) FROM role_permissions WHERE role_id = $1",
            &[&granted.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    let (s, c) = error_of(
        root.client
            .roles_delete_permission()
            .permission_id(created.id)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (404, "not_found"));
    let catalog = root
        .client
        .roles_list_permissions()
        .send()
        .await
        .unwrap()
        .into_inner();
    let star = perm(&catalog, "*:*");
    let (s, c) = error_of(
        root.client
            .roles_delete_permission()
            .permission_id(star)
            .send()
            .await,
    );
    assert_eq!((s, c.as_str()), (409, "permission_protected"));
    cx.teardown().await;
}
