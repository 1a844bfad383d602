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
