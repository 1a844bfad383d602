//! Test fixtures shared by every test module: roles by name, members,
//! invitation bodies and the e-mail outbox. Fixtures that go through the
//! API are methods of [`crate::TestUser`]; the ones here read or write the
//! test database directly, to set up states the API would take several
//! steps to reach.

use uuid::Uuid;
use workspace_client::types::{InvitationCreateRequest, SignupInviteRequest};

/// The password [`accept_body`] signs up with.
pub const NEW_PASSWORD: &str = "a fine new password";

/// The id of the role `name` in `org`, read from the database.
pub async fn role_id(db: &tokio_postgres::Client, org: Uuid, name: &str) -> Uuid {
    db.query_one(
        "SELECT id FROM roles WHERE organization_id = $1 AND name = $2",
        &[&org, &name],
    )
    .await
    .unwrap()
    .get(0)
}

/// Makes `user` an active member of `org` with the role `role`, in the
/// database (no feature gate, no hierarchy rule).
pub async fn add_member(db: &tokio_postgres::Client, user: Uuid, org: Uuid, role: &str) {
    db.execute(
        "INSERT INTO memberships (user_id, organization_id, role_id, status) \
         SELECT $1, $2, id, 'active' FROM roles WHERE organization_id = $2 AND name = $3",
        &[&user, &org, &role],
    )
    .await
    .unwrap();
}

/// The body of `POST /api/invitations/create`.
pub fn create_body(
    email: &str,
    role: Uuid,
) -> workspace_client::types::builder::InvitationCreateRequest {
    InvitationCreateRequest::builder()
        .email(email.to_string())
        .role_id(role)
}

/// The body of `POST /api/auth/signup_invite` with [`NEW_PASSWORD`].
pub fn accept_body(token: &str) -> workspace_client::types::builder::SignupInviteRequest {
    SignupInviteRequest::builder()
        .first_name("Nova".to_string())
        .last_name("Invitee".to_string())
        .password(NEW_PASSWORD.to_string())
        .invite_token(token.to_string())
}

/// The kinds and bodies of the e-mails in the outbox for `to`, oldest
/// first.
pub async fn outbox(db: &tokio_postgres::Client, to: &str) -> Vec<(String, String)> {
    db.query(
        "SELECT kind, body_text FROM email_outbox WHERE to_address = $1 ORDER BY created_at",
        &[&to],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// The token in an e-mail body's acceptance link.
pub fn token_in(body: &str) -> String {
    let start = body.find("token=").expect("a link with a token") + "token=".len();
    body[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// Appends messages to the end of a chat's active path in the database (a
/// long history without answering each one): `(role, content)` pairs,
/// role `USER` or `MODEL`, each the child of the one before, the first the
/// child of the chat's leaf; the last becomes the leaf. Keeps the tree's
/// columns as the server does (see `migrations/V34__chat_tree.sql`).
pub async fn append_chat_messages(
    db: &tokio_postgres::Client,
    org: Uuid,
    chat: Uuid,
    model: Option<Uuid>,
    messages: &[(&str, String)],
) -> Vec<Uuid> {
    let roles: Vec<&str> = messages.iter().map(|(r, _)| *r).collect();
    let texts: Vec<&str> = messages.iter().map(|(_, t)| t.as_str()).collect();
    let count = messages.len() as i64;
    db.query(
        "WITH leaf AS ( \
             SELECT c.leaf_id AS id, coalesce(m.depth, -1) AS depth, c.roots \
             FROM chats c LEFT JOIN chat_messages m ON m.id = c.leaf_id WHERE c.id = $2), \
         fresh AS ( \
             SELECT u.n, gen_random_uuid() AS id, u.r, u.t \
             FROM unnest($3::text[], $4::text[]) WITH ORDINALITY u(r, t, n)), \
         ins AS ( \
             INSERT INTO chat_messages (id, organization_id, chat_id, role, content, model_id, \
                 parent_message_id, depth, sibling_index, children, on_path) \
             SELECT f.id, $1, $2, f.r, f.t, $5, \
                 COALESCE(lag(f.id) OVER (ORDER BY f.n), (SELECT id FROM leaf)), \
                 ((SELECT depth FROM leaf) + f.n)::int, \
                 CASE WHEN f.n = 1 AND (SELECT id FROM leaf) IS NULL \
                      THEN (SELECT roots FROM leaf) + 1 ELSE 1 END, \
                 CASE WHEN f.n < $6 THEN 1 ELSE 0 END, true \
             FROM fresh f ORDER BY f.n RETURNING id), \
         bump AS ( \
             UPDATE chat_messages SET children = children + 1 \
             WHERE id = (SELECT id FROM leaf) AND $6 > 0) \
         UPDATE chats SET leaf_id = COALESCE((SELECT id FROM fresh ORDER BY n DESC LIMIT 1), leaf_id), \
             roots = roots + CASE WHEN (SELECT id FROM leaf) IS NULL AND $6 > 0 THEN 1 ELSE 0 END \
         WHERE id = $2",
        &[&org, &chat, &roles, &texts, &model, &count],
    )
    .await
    .expect("messages appended");
    db.query(
        "SELECT id FROM chat_messages WHERE chat_id = $1 AND on_path ORDER BY depth DESC LIMIT $2",
        &[&chat, &count],
    )
    .await
    .expect("the appended messages")
    .iter()
    .rev()
    .map(|r| r.get(0))
    .collect()
}
