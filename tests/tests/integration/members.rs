//! The membership lifecycle (issue #34 item 3) and renaming an
//! organization: suspend, reactivate, remove, leave, transfer of ownership;
//! who may act on whom; the last owner's refusals; what a removed member
//! keeps and what the organization keeps; the users list's states; and the
//! hostile case: a member suspended while answers stream to them, on two
//! instances, their streams and WebSocket cut off (the time measured).

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;
use workspace_client::Client;
use workspace_client::sse::SseReader;
use workspace_client::types::{
    self, ConversationSessionCreate, StreamChatRequest, TransferOwnershipRequest, UpdateOrgRequest,
    UserListStatus,
};
use workspace_server::config::Config;
use workspace_tests::sse::EventReader;
use workspace_tests::{TestContext, TestUser, error_of, resources, ws};

/// Offline answers of 50 ms per word: a long message takes seconds.
fn slow(c: &mut Config) {
    c.providers.offline_chunk_delay_ms = 50;
}

/// Creates an organization owned by `owner`; its id.
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

/// An organization "Acme" of `owner` with each of `members` added with
/// the given system role.
async fn acme(owner: &TestUser, members: &[(&TestUser, &str)]) -> Uuid {
    let org = org_named(owner, "Acme").await;
    for (user, role) in members {
        let role = owner.role_id(org, role).await;
        owner.add_member(org, user.id, role).await;
    }
    org
}

/// `user`'s status in the users list of `org` as `viewer` sees it (`None`:
/// not listed), and the list's total.
async fn listed(viewer: &Client, org: Uuid, user: Uuid) -> (Option<UserListStatus>, u64) {
    let page = viewer
        .users_list()
        .org_id(org)
        .limit(100)
        .include_suspended(true)
        .send()
        .await
        .expect("users_list")
        .into_inner();
    let status = page
        .users
        .iter()
        .find(|u| u.id == Some(user))
        .map(|u| u.status);
    (status, page.total)
}

/// The ids of the organizations `users/me` shows `user`.
async fn my_orgs(user: &Client) -> Vec<Uuid> {
    user.users_me()
        .send()
        .await
        .expect("users_me")
        .organizations
        .iter()
        .map(|m| m.id)
        .collect()
}

/// Whether `user` can read something in `org` (`org/features`, any
/// member's): the status.
async fn can_read(user: &Client, org: Uuid) -> u16 {
    match user.org_features().org_id(org).send().await {
        Ok(r) => r.status().as_u16(),
        Err(e) => e.status().map(|s| s.as_u16()).unwrap_or(0),
    }
}

async fn suspend(actor: &Client, org: Uuid, user: Uuid) -> types::UserListItem {
    actor
        .users_suspend()
        .org_id(org)
        .user_id(user)
        .send()
        .await
        .expect("users_suspend")
        .into_inner()
}

#[tokio::test]
async fn suspend_reactivate_remove_and_what_the_users_list_shows() {
    let cx = TestContext::new("members_transitions").await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = acme(&ada, &[(&bob, "member")]).await;
    let bob_personal = bob.personal_org().await;
    assert_eq!(
        listed(&ada.client, org, bob.id).await.0,
        Some(UserListStatus::Active)
    );
    assert_eq!(can_read(&bob.client, org).await, 200);

    // active -> suspended
    let row = suspend(&ada.client, org, bob.id).await;
    assert_eq!(row.status, UserListStatus::Suspended);
    assert_eq!(row.id, Some(bob.id));
    assert_eq!(row.organizations[0].role_name, "member", "the role is kept");
    assert_eq!(can_read(&bob.client, org).await, 403);
    assert_eq!(my_orgs(&bob.client).await, vec![bob_personal]);
    let bob_orgs = bob.client.org_list().send().await.unwrap().into_inner();
    assert!(bob_orgs.iter().all(|o| o.id != org), "{bob_orgs:?}");
    let (status, total) = listed(&ada.client, org, bob.id).await;
    assert_eq!(status, Some(UserListStatus::Suspended));
    assert_eq!(total, 2, "ada and the suspended bob");
    // The list puts active members before suspended ones.
    let page = ada
        .client
        .users_list()
        .org_id(org)
        .include_suspended(true)
        .send()
        .await
        .unwrap();
    assert_eq!(page.users[0].id, Some(ada.id));
    assert_eq!(page.users[1].status, UserListStatus::Suspended);
    // Unless asked for, suspended members are left out (clients of the
    // earlier contract know no `suspended`).
    let page = ada.client.users_list().org_id(org).send().await.unwrap();
    assert_eq!(page.total, 1);
    assert!(page.users.iter().all(|u| u.id != Some(bob.id)));
    // A suspended member's role does not change, and they are not
    // suspended twice.
    let member = ada.role_id(org, "guest").await;
    let (s, code) = error_of(
        ada.client
            .users_update()
            .org_id(org)
            .user_id(bob.id)
            .body(types::UpdateUserRoleRequest::builder().role_id(member))
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (400, "member_not_active"));
    let (s, code) = error_of(
        ada.client
            .users_suspend()
            .org_id(org)
            .user_id(bob.id)
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (400, "member_not_active"));
    // Nor added again as if new, nor invited.
    let (s, code) = error_of(
        ada.client
            .org_add_member()
            .body(
                types::AddMemberRequest::builder()
                    .organization_id(org)
                    .user_id(bob.id)
                    .role_id(member),
            )
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (409, "already_member"));

    // suspended -> active
    let row = ada
        .client
        .users_reactivate()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(row.status, UserListStatus::Active);
    assert_eq!(row.organizations[0].role_name, "member");
    assert_eq!(can_read(&bob.client, org).await, 200);
    assert!(my_orgs(&bob.client).await.contains(&org));
    let (s, code) = error_of(
        ada.client
            .users_reactivate()
            .org_id(org)
            .user_id(bob.id)
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (400, "member_not_suspended"));

    // active -> deleted (and suspended -> deleted)
    let removed = ada
        .client
        .users_remove()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap();
    assert!(removed.message.contains("removed"), "{}", removed.message);
    assert_eq!(can_read(&bob.client, org).await, 403);
    let (status, total) = listed(&ada.client, org, bob.id).await;
    assert_eq!(status, None, "removed members are not listed");
    assert_eq!(total, 1);
    assert_eq!(my_orgs(&bob.client).await, vec![bob_personal]);
    let db = cx.db().await;
    let kept: String = db
        .query_one(
            "SELECT status FROM memberships WHERE organization_id = $1 AND user_id = $2",
            &[&org, &bob.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, "deleted", "the row is kept");
    for call in ["suspend", "reactivate", "remove"] {
        let result = match call {
            "suspend" => ada
                .client
                .users_suspend()
                .org_id(org)
                .user_id(bob.id)
                .send()
                .await
                .map(|_| ()),
            "reactivate" => ada
                .client
                .users_reactivate()
                .org_id(org)
                .user_id(bob.id)
                .send()
                .await
                .map(|_| ()),
            _ => ada
                .client
                .users_remove()
                .org_id(org)
                .user_id(bob.id)
                .send()
                .await
                .map(|_| ()),
        };
        assert_eq!(
            error_of(result),
            (404, "not_found".to_string()),
            "{call} of a removed member"
        );
    }
    // Somebody who never was a member: 404 too.
    let (s, _) = error_of(
        ada.client
            .users_suspend()
            .org_id(org)
            .user_id(Uuid::new_v4())
            .send()
            .await,
    );
    assert_eq!(s, 404);

    // deleted -> active again through add_member.
    ada.add_member(org, bob.id, member).await;
    assert_eq!(can_read(&bob.client, org).await, 200);
    assert_eq!(
        listed(&ada.client, org, bob.id).await.0,
        Some(UserListStatus::Active)
    );

    // A suspended member can be removed too.
    suspend(&ada.client, org, bob.id).await;
    ada.client
        .users_remove()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap();
    assert_eq!(listed(&ada.client, org, bob.id).await.0, None);
    cx.teardown().await;
}

#[tokio::test]
async fn who_may_suspend_whom() {
    let cx = TestContext::new("members_ranks").await;
    let ada = cx.user("ada").await; // owner
    let carol = cx.user("carol").await; // admin
    let dan = cx.user("dan").await; // admin
    let bob = cx.user("bob").await; // member
    let eve = cx.user("eve").await; // member
    let org = acme(
        &ada,
        &[
            (&carol, "admin"),
            (&dan, "admin"),
            (&bob, "member"),
            (&eve, "member"),
        ],
    )
    .await;
    let refused = |r| error_of(r);

    // A member (no users:write) suspends nobody.
    let r = bob
        .client
        .users_suspend()
        .org_id(org)
        .user_id(eve.id)
        .send()
        .await;
    assert_eq!(refused(r), (403, "forbidden".to_string()));
    // An admin suspends a member, not another admin, not the owner.
    suspend(&carol.client, org, bob.id).await;
    let r = carol
        .client
        .users_suspend()
        .org_id(org)
        .user_id(dan.id)
        .send()
        .await;
    assert_eq!(refused(r), (403, "member_level_too_high".to_string()));
    let r = carol
        .client
        .users_suspend()
        .org_id(org)
        .user_id(ada.id)
        .send()
        .await;
    assert_eq!(refused(r), (403, "member_level_too_high".to_string()));
    let r = carol
        .client
        .users_remove()
        .org_id(org)
        .user_id(ada.id)
        .send()
        .await;
    assert_eq!(error_of(r), (403, "member_level_too_high".to_string()));
    // Nobody suspends themself.
    let r = carol
        .client
        .users_suspend()
        .org_id(org)
        .user_id(carol.id)
        .send()
        .await;
    assert_eq!(refused(r), (400, "cannot_target_self".to_string()));
    let r = carol
        .client
        .users_remove()
        .org_id(org)
        .user_id(carol.id)
        .send()
        .await;
    assert_eq!(error_of(r), (400, "cannot_target_self".to_string()));
    // The owner acts on admins.
    suspend(&ada.client, org, dan.id).await;
    // A suspended admin acts on nobody (no longer an active member).
    let r = dan
        .client
        .users_reactivate()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await;
    assert_eq!(refused(r).0, 403);

    // A custom role with users:write at level 50 acts below 50 only.
    let write = ada
        .client
        .roles_list_permissions()
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|p| p.name == "users:write")
        .unwrap()
        .id;
    let moderator = ada
        .client
        .roles_create()
        .org_id(org)
        .body(
            types::CreateRoleRequest::builder()
                .name("moderator".to_string())
                .hierarchy_level(50)
                .permission_ids(vec![write]),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let frank = cx.user("frank").await;
    let gus = cx.user("gus").await;
    ada.add_member(org, frank.id, moderator.id).await;
    ada.add_member(org, gus.id, moderator.id).await;
    suspend(&frank.client, org, eve.id).await;
    let r = frank
        .client
        .users_suspend()
        .org_id(org)
        .user_id(gus.id)
        .send()
        .await;
    assert_eq!(refused(r), (403, "member_level_too_high".to_string()));
    let r = frank
        .client
        .users_reactivate()
        .org_id(org)
        .user_id(dan.id)
        .send()
        .await;
    assert_eq!(refused(r), (403, "member_level_too_high".to_string()));
    frank
        .client
        .users_reactivate()
        .org_id(org)
        .user_id(eve.id)
        .send()
        .await
        .unwrap();
    // Removing frank, the role's only holder besides gus, keeps his row;
    // once gus is removed too the custom role can go (removed members'
    // rows do not hold it).
    for user in [&frank, &gus] {
        ada.client
            .users_remove()
            .org_id(org)
            .user_id(user.id)
            .send()
            .await
            .unwrap();
    }
    ada.client
        .roles_remove()
        .org_id(org)
        .role_id(moderator.id)
        .send()
        .await
        .expect("a role held only by removed members is deleted");
    cx.teardown().await;
}

#[tokio::test]
async fn the_last_owner_stays_and_ownership_is_transferred() {
    let cx = TestContext::new("members_last_owner").await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let carol = cx.user("carol").await;
    let org = acme(&ada, &[(&bob, "member"), (&carol, "admin")]).await;

    // The only owner can neither leave, nor be suspended or removed (by
    // themself: nobody else may act on an owner), nor demote themself.
    let (s, code) = error_of(ada.client.org_leave().org_id(org).send().await);
    assert_eq!((s, code.as_str()), (409, "last_owner"));
    let (s, code) = error_of(
        ada.client
            .users_suspend()
            .org_id(org)
            .user_id(ada.id)
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (409, "last_owner"));
    let (s, code) = error_of(
        ada.client
            .users_remove()
            .org_id(org)
            .user_id(ada.id)
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (409, "last_owner"));
    let admin = ada.role_id(org, "admin").await;
    let (s, code) = error_of(
        ada.client
            .users_update()
            .org_id(org)
            .user_id(ada.id)
            .body(types::UpdateUserRoleRequest::builder().role_id(admin))
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (403, "owner_role_not_assignable"));
    // Nobody leaves their personal organization, nor transfers it.
    let personal = ada.personal_org().await;
    let (s, code) = error_of(ada.client.org_leave().org_id(personal).send().await);
    assert_eq!((s, code.as_str()), (409, "personal_organization"));

    // Transfer: refused to non-members, suspended members, themself; by
    // anybody but the owner.
    let transfer = |c: &Client, to: Uuid| {
        let c = c.clone();
        async move {
            c.org_transfer_ownership()
                .org_id(org)
                .body(TransferOwnershipRequest::builder().user_id(to))
                .send()
                .await
                .map(|r| r.into_inner())
        }
    };
    assert_eq!(error_of(transfer(&ada.client, Uuid::new_v4()).await).0, 404);
    assert_eq!(
        error_of(transfer(&ada.client, ada.id).await),
        (400, "cannot_target_self".to_string())
    );
    assert_eq!(
        error_of(transfer(&carol.client, carol.id).await),
        (403, "forbidden".to_string())
    );
    suspend(&ada.client, org, bob.id).await;
    assert_eq!(
        error_of(transfer(&ada.client, bob.id).await),
        (400, "member_not_active".to_string())
    );
    ada.client
        .users_reactivate()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap();
    let dave = cx.user("dave").await;
    let dave_org = dave.personal_org().await;
    // A personal organization is not transferable (dave's own).
    let member = dave.role_id(dave_org, "member").await;
    dave.add_member(dave_org, ada.id, member).await;
    let (s, code) = error_of(
        dave.client
            .org_transfer_ownership()
            .org_id(dave_org)
            .body(TransferOwnershipRequest::builder().user_id(ada.id))
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (409, "personal_organization"));

    // Ada hands the organization to Bob: Bob owner, Ada admin.
    let after = transfer(&ada.client, bob.id).await.unwrap();
    assert_eq!(after.user_role.role_name, "admin");
    assert_eq!(after.user_role.level, 80);
    let bob_view = bob
        .client
        .org_list()
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|o| o.id == org)
        .unwrap();
    assert_eq!(bob_view.user_role.role_name, "owner");
    assert_eq!(
        error_of(transfer(&ada.client, carol.id).await),
        (403, "forbidden".to_string()),
        "ada is no longer the owner"
    );
    // Bob is now the last owner; Ada may leave.
    let (s, code) = error_of(bob.client.org_leave().org_id(org).send().await);
    assert_eq!((s, code.as_str()), (409, "last_owner"));
    let left = ada.client.org_leave().org_id(org).send().await.unwrap();
    assert!(left.message.contains("left"), "{}", left.message);
    assert_eq!(can_read(&ada.client, org).await, 403);
    assert!(!my_orgs(&ada.client).await.contains(&org));
    let owners: i64 = cx
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM memberships m JOIN roles r ON r.id = m.role_id \
             WHERE m.organization_id = $1 AND m.status = 'active' AND r.name = 'owner'",
            &[&org],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owners, 1);
    cx.teardown().await;
}

/// Two transfers of one organization at once, to two members: exactly one
/// succeeds and the organization ends with exactly one owner (lifecycle
/// changes of an organization wait for each other).
#[tokio::test]
async fn racing_transfers_leave_exactly_one_owner() {
    let cx = TestContext::new("members_racing_transfers").await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let carol = cx.user("carol").await;
    for round in 0..5 {
        let org = org_named(&ada, &format!("Race {round}")).await;
        let member = ada.role_id(org, "member").await;
        ada.add_member(org, bob.id, member).await;
        ada.add_member(org, carol.id, member).await;
        let go = |to: Uuid| {
            let c = ada.client.clone();
            tokio::spawn(async move {
                c.org_transfer_ownership()
                    .org_id(org)
                    .body(TransferOwnershipRequest::builder().user_id(to))
                    .send()
                    .await
                    .map(|r| r.into_inner())
            })
        };
        let (a, b) = tokio::join!(go(bob.id), go(carol.id));
        let results = [a.unwrap(), b.unwrap()];
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {results:?}");
        for r in results.into_iter().filter(|r| r.is_err()) {
            assert_eq!(error_of(r), (403, "forbidden".to_string()));
        }
        let owners: i64 = cx
            .db()
            .await
            .query_one(
                "SELECT count(*) FROM memberships m JOIN roles r ON r.id = m.role_id \
                 WHERE m.organization_id = $1 AND m.status = 'active' AND r.name = 'owner'",
                &[&org],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(owners, 1, "round {round}");
    }
    cx.teardown().await;
}

#[tokio::test]
async fn a_removed_member_keeps_their_account_and_the_org_keeps_their_work() {
    let cx = TestContext::with_config("members_keep", |c| {
        c.providers.offline_chunk_delay_ms = 0;
    })
    .await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = acme(&ada, &[(&bob, "member")]).await;
    let other = org_named(&ada, "Globex").await;
    let member = ada.role_id(other, "member").await;
    ada.add_member(other, bob.id, member).await;

    // Bob's work in Acme: a chat with an answer, a knowledge base.
    let answered = resources::chat_message(&bob.client, org, json!({"content": "hello"})).await;
    let kb = resources::knowledge_base(
        &bob.client,
        org,
        json!({"name": "Bob's notes", "description": "", "embedding_model": "all-minilm-l6-v2",
               "sources": []}),
    )
    .await;

    ada.client
        .users_remove()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap();
    // Bob: account and other organizations intact, Acme gone.
    let orgs = my_orgs(&bob.client).await;
    assert!(orgs.contains(&other) && !orgs.contains(&org), "{orgs:?}");
    assert_eq!(orgs.len(), 2, "personal + Globex");
    assert_eq!(can_read(&bob.client, other).await, 200);
    assert_eq!(can_read(&bob.client, org).await, 403);
    let (s, _) = error_of(
        bob.client
            .chat_get()
            .org_id(org)
            .chat_id(answered.chat_id)
            .send()
            .await,
    );
    assert_eq!(s, 403, "his old chat is out of reach");
    // Acme: Bob's knowledge base and chat stay.
    let kbs = ada.client.kb_list().org_id(org).send().await.unwrap();
    assert!(kbs.iter().any(|k| k.id == kb.id), "{kbs:?}");
    let db = cx.db().await;
    let chats: i64 = db
        .query_one(
            "SELECT count(*) FROM chats WHERE organization_id = $1 AND user_id = $2",
            &[&org, &bob.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(chats, 1);

    // Invited again (as an existing account) and accepted: active again.
    let token = ada
        .client
        .invitations_create()
        .org_id(org)
        .body(workspace_tests::fixtures::create_body(
            &bob.email,
            member_of(&ada, org).await,
        ))
        .send()
        .await
        .expect("a removed member can be invited again")
        .into_inner()
        .token
        .expect("a token");
    cx.anon()
        .auth_signup_invite()
        .body(
            types::SignupInviteRequest::builder()
                .first_name("Bob".to_string())
                .last_name("Tester".to_string())
                .password(workspace_tests::TEST_PASSWORD.to_string())
                .invite_token(token),
        )
        .send()
        .await
        .expect("accepting as an existing account");
    assert_eq!(can_read(&bob.client, org).await, 200);
    assert_eq!(
        listed(&ada.client, org, bob.id).await.0,
        Some(UserListStatus::Active)
    );
    // And his chat is his again.
    bob.client
        .chat_get()
        .org_id(org)
        .chat_id(answered.chat_id)
        .send()
        .await
        .expect("the chat came back with the membership");
    cx.teardown().await;
}

async fn member_of(owner: &TestUser, org: Uuid) -> Uuid {
    owner.role_id(org, "member").await
}

#[tokio::test]
async fn an_organization_is_renamed() {
    let cx = TestContext::new("members_rename").await;
    let ada = cx.user("ada").await;
    let carol = cx.user("carol").await;
    let bob = cx.user("bob").await;
    let org = acme(&ada, &[(&carol, "admin"), (&bob, "member")]).await;
    org_named(&ada, "Globex").await;
    let slug = ada
        .client
        .org_list()
        .send()
        .await
        .unwrap()
        .iter()
        .find(|o| o.id == org)
        .unwrap()
        .slug
        .clone();
    let rename = |c: &Client, name: &str| {
        let c = c.clone();
        let name = name.to_string();
        async move {
            c.org_update()
                .org_id(org)
                .body(UpdateOrgRequest::builder().name(name))
                .send()
                .await
                .map(|r| r.into_inner())
        }
    };
    // An admin renames (organization:write); the name is trimmed; the slug
    // stays.
    let renamed = rename(&carol.client, "  Acme Corporation ").await.unwrap();
    assert_eq!(renamed.name, "Acme Corporation");
    assert_eq!(renamed.slug, slug);
    assert_eq!(renamed.user_role.role_name, "admin");
    assert!(renamed.updated_at >= renamed.created_at);
    let seen = bob
        .client
        .org_list()
        .send()
        .await
        .unwrap()
        .into_inner()
        .into_iter()
        .find(|o| o.id == org)
        .unwrap();
    assert_eq!(seen.name, "Acme Corporation");
    // A member may not.
    assert_eq!(
        error_of(rename(&bob.client, "Mine now").await),
        (403, "forbidden".to_string())
    );
    // Ada already belongs to Globex: 409, as create_org would answer.
    assert_eq!(
        error_of(rename(&ada.client, "globex").await),
        (409, "org_name_taken".to_string())
    );
    let (s, code) = error_of(
        ada.client
            .org_create_org()
            .name("GLOBEX".to_string())
            .send()
            .await,
    );
    assert_eq!((s, code.as_str()), (409, "org_name_taken"));
    // Its own name in another case is no clash.
    rename(&ada.client, "ACME CORPORATION").await.unwrap();
    // Invalid names, checked by the server itself (raw requests).
    for name in ["   ", "bad\u{7}name", &"x".repeat(101)] {
        let (s, code) = workspace_tests::raw(
            &cx.base_url,
            Some(&ada.token),
            reqwest::Method::PUT,
            "/api/org/update",
            &[("org_id", org.to_string())],
            Some(json!({"name": name})),
        )
        .await;
        assert_eq!(s, 400, "{name:?}");
        assert!(
            code == "invalid_name" || code == "invalid_request",
            "{code}"
        );
    }
    cx.teardown().await;
}

/// Reads a chat answer's stream to its end in a task: the events and when
/// the stream ended.
fn read_chat(
    stream: workspace_client::ByteStream,
) -> tokio::task::JoinHandle<(Vec<Value>, Instant)> {
    tokio::spawn(async move {
        let mut reader = SseReader::from_byte_stream(stream);
        let mut events = Vec::new();
        while let Some(event) = reader.next().await {
            let Ok(event) = event else { break };
            events.push(event.json::<Value>().expect("a JSON event"));
        }
        (events, Instant::now())
    })
}

/// The hostile case: Bob is suspended while a chat answer streams to him
/// from the second instance, a conversation answer from the first, and his
/// chat WebSocket is open on the second. Each ends promptly, on its own
/// instance, with `membership_revoked` (the WebSocket with 1008), though
/// the answers had seconds to go; the times are measured. The suspension
/// is seen at once on the second instance too.
#[tokio::test]
async fn a_suspended_member_mid_stream_is_cut_off_on_every_instance() {
    let cx = TestContext::with_config("members_mid_stream", slow).await;
    let second = cx.second_instance(slow).await;
    let second_url = format!("http://{}", second.local_addr());
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = acme(&ada, &[(&bob, "member")]).await;
    let bob_second = resources::client_for(&second_url, &bob.token);
    // 200 words at 50 ms: about 10 s of answer each.
    let long = "lighthouse ".repeat(200);

    // A chat answer on the second instance.
    let stream = bob_second
        .chat_send_message()
        .org_id(org)
        .body(
            serde_json::from_value::<types::SendMessageRequest>(json!({"content": long})).unwrap(),
        )
        .send()
        .await
        .expect("send_message")
        .into_inner();
    let mut chat = SseReader::from_byte_stream(stream);
    let mut chat_seen = Vec::new();
    while chat_seen.len() < 3 {
        let e = chat.next().await.unwrap().unwrap();
        chat_seen.push(e.json::<Value>().unwrap());
    }
    let answer_id: Uuid = chat_seen[0]["message_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // A conversation answer on the first instance.
    let model = resources::offline_model(&bob.client, org).await;
    let conversation = resources::conversation(&bob.client, org, json!({"title": "long"})).await;
    let session = bob
        .client
        .conversation_create_session()
        .org_id(org)
        .body(
            ConversationSessionCreate::builder()
                .conversation_id(conversation.id)
                .model_id(model),
        )
        .send()
        .await
        .unwrap()
        .into_inner()
        .id;
    let response = bob
        .client
        .conversation_stream_chat()
        .org_id(org)
        .body(
            StreamChatRequest::builder()
                .chat_session_id(session)
                .message(long.clone()),
        )
        .send()
        .await
        .unwrap();
    let mut conv = EventReader::new(response.into_inner());
    for _ in 0..2 {
        conv.next().await.expect("a first event");
    }

    // The chat WebSocket on the second instance.
    let ticket = ws::ticket(&second_url, &bob.token, org).await;
    let mut socket = ws::open(&second_url, org, &ticket).await;
    let ready = ws::next(&mut socket, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ready["type"], "ready");

    let chat_task = {
        // Continue reading the same stream in a task.
        tokio::spawn(async move {
            let mut events = chat_seen;
            while let Some(event) = chat.next().await {
                let Ok(event) = event else { break };
                events.push(event.json::<Value>().unwrap());
            }
            (events, Instant::now())
        })
    };
    let conv_task = tokio::spawn(async move {
        let events = conv.collect().await;
        (events, Instant::now())
    });
    let ws_task = tokio::spawn(async move {
        let code = ws::close_code(&mut socket, Duration::from_secs(20)).await;
        (code, Instant::now())
    });
    // Let the answers run a little, then suspend Bob through the first
    // instance.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    suspend(&ada.client, org, bob.id).await;
    let suspended_in = t0.elapsed();
    // The second instance refuses Bob at once.
    let (s, code) = error_of(bob_second.org_features().org_id(org).send().await);
    assert_eq!((s, code.as_str()), (403, "forbidden"));
    let refused_in = t0.elapsed();

    let (chat_events, chat_end) = chat_task.await.unwrap();
    let (conv_events, conv_end) = conv_task.await.unwrap();
    let (close, ws_end) = ws_task.await.unwrap();
    let chat_after = chat_end.duration_since(t0);
    let conv_after = conv_end.duration_since(t0);
    let ws_after = ws_end.duration_since(t0);
    eprintln!(
        "suspension: request {suspended_in:?}; second instance refuses after {refused_in:?}; \
         chat stream (second instance) ended after {chat_after:?}, conversation stream \
         (first instance) after {conv_after:?}, WebSocket (second instance) closed after \
         {ws_after:?}"
    );
    let last = chat_events.last().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["error_code"], "membership_revoked", "{last}");
    assert!(
        chat_events
            .iter()
            .filter(|e| e["type"] == "content")
            .count()
            < 150,
        "the answer was cut short"
    );
    match conv_events.last() {
        Some(workspace_api::conversations::ConversationStreamEvent::Error {
            error_code, ..
        }) => {
            assert_eq!(error_code, "membership_revoked")
        }
        other => panic!("the conversation stream ended with {other:?}"),
    }
    assert_eq!(
        close,
        Some(1008),
        "the WebSocket closes with a policy violation"
    );
    for (what, after) in [
        ("chat", chat_after),
        ("conversation", conv_after),
        ("websocket", ws_after),
    ] {
        assert!(
            after < Duration::from_secs(2),
            "{what} ended {after:?} after the suspension"
        );
    }

    // The answer keeps its text, stored failed with the reason.
    let row = cx
        .db()
        .await
        .query_one(
            "SELECT status, error_code, length(content) FROM chat_messages WHERE id = $1",
            &[&answer_id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "failed");
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("membership_revoked")
    );
    assert!(row.get::<_, i32>(2) > 0, "the text so far is kept");
    // Resuming it is refused (no longer a member).
    let (s, _) = error_of(
        bob_second
            .chat_stream()
            .org_id(org)
            .message_id(answer_id)
            .send()
            .await
            .map(|_| ()),
    );
    assert_eq!(s, 403);
    // Reactivated, Bob streams again.
    ada.client
        .users_reactivate()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap();
    let stream = bob_second
        .chat_send_message()
        .org_id(org)
        .body(
            serde_json::from_value::<types::SendMessageRequest>(json!({"content": "hi"})).unwrap(),
        )
        .send()
        .await
        .unwrap()
        .into_inner();
    let (events, _) = read_chat(stream).await.unwrap();
    assert_eq!(events.last().unwrap()["type"], "end");
    second.shutdown().await.unwrap();
    cx.teardown().await;
}

/// A removal (not only a suspension) cuts a stream, and so does leaving;
/// an unrelated membership change (another member's) does not.
#[tokio::test]
async fn removal_and_leaving_end_streams_but_other_changes_do_not() {
    let cx = TestContext::with_config("members_removal_stream", slow).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let carol = cx.user("carol").await;
    let org = acme(&ada, &[(&bob, "member"), (&carol, "member")]).await;
    let long = "keeper ".repeat(60); // about 3 s

    let start = |c: &Client| {
        let c = c.clone();
        let long = long.clone();
        async move {
            c.chat_send_message()
                .org_id(org)
                .body(
                    serde_json::from_value::<types::SendMessageRequest>(json!({"content": long}))
                        .unwrap(),
                )
                .send()
                .await
                .unwrap()
                .into_inner()
        }
    };
    let bob_stream = read_chat(start(&bob.client).await);
    let carol_stream = read_chat(start(&carol.client).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    ada.client
        .users_remove()
        .org_id(org)
        .user_id(bob.id)
        .send()
        .await
        .unwrap();
    let (bob_events, bob_end) = bob_stream.await.unwrap();
    assert_eq!(
        bob_events.last().unwrap()["error_code"],
        "membership_revoked"
    );
    eprintln!(
        "removal: stream ended after {:?}",
        bob_end.duration_since(t0)
    );
    assert!(bob_end.duration_since(t0) < Duration::from_secs(2));
    // Carol's answer went on to its end.
    let (carol_events, _) = carol_stream.await.unwrap();
    assert_eq!(
        carol_events.last().unwrap()["type"],
        "end",
        "{:?}",
        carol_events.last()
    );

    // Carol leaves mid-answer: her stream ends too.
    let carol_stream = read_chat(start(&carol.client).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    carol.client.org_leave().org_id(org).send().await.unwrap();
    let (events, _) = carol_stream.await.unwrap();
    assert_eq!(events.last().unwrap()["error_code"], "membership_revoked");
    cx.teardown().await;
}

/// A streamed knowledge-base query (`POST /api/kb/query` with `stream`)
/// ends too when its member is suspended.
#[tokio::test]
async fn a_streamed_kb_query_ends_with_the_membership() {
    workspace_tests::ensure_local_model().await;
    let cx = TestContext::with_config("members_kb_query", slow).await;
    let ada = cx.user("ada").await;
    let bob = cx.user("bob").await;
    let org = acme(&ada, &[(&bob, "member")]).await;
    let kb = resources::knowledge_base(
        &bob.client,
        org,
        json!({"name": "Empty", "description": "", "embedding_model": "all-minilm-l6-v2",
               "sources": []}),
    )
    .await;
    let model = resources::offline_model(&bob.client, org).await;
    // The offline model repeats the prompt: about 10 s at 50 ms a word.
    let response = workspace_tests::http()
        .post(format!("{}/api/kb/query", cx.base_url))
        .bearer_auth(&bob.token)
        .query(&[("kb_id", kb.id.to_string())])
        .json(&json!({"query": "lamp ".repeat(150), "model_id": model, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::from_response(response);
    for _ in 0..3 {
        reader.next().await.unwrap().unwrap();
    }
    let t0 = Instant::now();
    suspend(&ada.client, org, bob.id).await;
    let mut last = Value::Null;
    while let Some(event) = reader.next().await {
        last = event.unwrap().json().unwrap();
    }
    let after = t0.elapsed();
    eprintln!("suspension: kb query stream ended after {after:?}");
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["error_code"], "membership_revoked", "{last}");
    assert!(after < Duration::from_secs(2), "{after:?}");
    cx.teardown().await;
}
