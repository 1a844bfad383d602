//! The server's keys live apart from the data (a key file or the
//! configuration, never the database): an installation that kept them in
//! the database moves them into the key file without logging anyone out or
//! losing a sealed secret; with a database URL a missing key is a start
//! error naming the command that makes one; a key file other than the one
//! the data was made with is refused. (The binary's side, backups and a
//! restore onto a new machine, is in `server/tests/binary.rs`.)

use workspace_client::Client;
use workspace_server::keys::{KEY_FILE_NAME, KeyFile};
use workspace_tests::fixtures::{create_body, outbox, role_id, token_in};
use workspace_tests::{TEST_JWT_SECRET, TestContext};

/// Keys as a version before 0.3 kept them: in `server_secrets`.
async fn plant_legacy_keys(db: &tokio_postgres::Client, seal: &[u8; 32], links: &[u8; 32]) {
    for (name, value) in [
        ("jwt_hs256", TEST_JWT_SECRET.as_bytes()),
        ("secrets_key_0", &seal[..]),
        ("download_links_hmac", &links[..]),
    ] {
        db.execute(
            "INSERT INTO server_secrets (name, value) VALUES ($1, $2)",
            &[&name, &value],
        )
        .await
        .unwrap();
    }
}

fn keys_only_from(
    file: &std::path::Path,
    may_create: bool,
) -> impl FnOnce(&mut workspace_server::config::Config) {
    let file = file.to_path_buf();
    move |c| {
        c.auth.jwt_secret = None;
        c.secrets.keys.clear();
        c.secrets.key_file = Some(file);
        c.secrets.generate_key_file = may_create;
    }
}

#[tokio::test]
async fn keys_kept_in_the_database_move_into_the_key_file() {
    let ctx = TestContext::new("keys_legacy_move").await;
    let ada = ctx.user("ada").await;
    let org = ada.personal_org().await;
    let db = ctx.db().await;
    let member = role_id(&db, org, "member").await;
    let invitation = ada
        .client
        .invitations_create()
        .org_id(org)
        .body(create_body("nova@example.com", member))
        .send()
        .await
        .unwrap()
        .into_inner();
    let token = token_in(&outbox(&db, "nova@example.com").await[0].1);

    // The installation as an older version left it: the generated keys in
    // the database, the invitation's token sealed with key 0.
    let legacy_seal = [5u8; 32];
    let legacy_links = [6u8; 32];
    plant_legacy_keys(&db, &legacy_seal, &legacy_links).await;
    let sealed = workspace_server::secrets::Secrets::new(&[(0, legacy_seal)], 0)
        .unwrap()
        .seal(
            token.as_bytes(),
            format!("invitation-token:{}", invitation.id).as_bytes(),
        );
    db.execute(
        "UPDATE invitations SET token_sealed = $1 WHERE id = $2",
        &[&sealed, &invitation.id],
    )
    .await
    .unwrap();

    // With a database URL nothing is generated at start: the keys must be
    // exported first, and the error says how.
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("data").join(KEY_FILE_NAME);
    let refused = ctx
        .try_instance(keys_only_from(&key_file, false))
        .await
        .err()
        .expect("started with its keys still in the database")
        .to_string();
    assert!(
        refused.contains("workspace-server keys export --file"),
        "{refused}"
    );
    assert!(!key_file.exists());

    // As the embedded database's server starts: the keys move into the
    // key file (0600) and leave the database.
    let moved = ctx.second_instance(keys_only_from(&key_file, true)).await;
    let file = KeyFile::read(&key_file).unwrap();
    assert_eq!(file.jwt_secret, TEST_JWT_SECRET.as_bytes());
    assert_eq!(file.sealing_keys, vec![(0, legacy_seal)]);
    assert_eq!(file.link_key.as_deref(), Some(&legacy_links[..]));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let left: i64 = db
        .query_one("SELECT count(*) FROM server_secrets", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "keys left in the database");

    // Nobody is logged out, and the secret sealed with the old key opens:
    // the resent e-mail carries the same token.
    let base = format!("http://{}", moved.local_addr());
    let on_moved = Client::authenticated(&base, &ada.token).unwrap();
    let me = on_moved.users_me().send().await.unwrap().into_inner();
    assert_eq!(me.id, ada.id);
    let resent = on_moved
        .invitations_resend()
        .invitation_id(invitation.id)
        .send()
        .await
        .unwrap();
    assert_eq!(resent.status().as_u16(), 200);
    let mails = outbox(&db, "nova@example.com").await;
    assert_eq!(mails.len(), 2);
    assert_eq!(token_in(&mails[1].1), token);
    moved.shutdown().await.unwrap();

    // The same file on another instance, as an operator sets it with a
    // database URL: it starts (nothing generated, nothing moved).
    let again = ctx.second_instance(keys_only_from(&key_file, false)).await;
    again.shutdown().await.unwrap();

    // Another key file (a restore onto a machine without the right one):
    // refused, before anyone is logged out.
    let other = dir.path().join("other.keys");
    KeyFile::generate().write_new(&other).unwrap();
    let refused = ctx
        .try_instance(keys_only_from(&other, false))
        .await
        .err()
        .expect("started with other keys")
        .to_string();
    assert!(refused.contains("does not hold the keys"), "{refused}");
    // A missing key file where the database's data was made with one is
    // not silently replaced by new keys either.
    let missing = dir.path().join("missing").join(KEY_FILE_NAME);
    let refused = ctx
        .try_instance(keys_only_from(&missing, true))
        .await
        .err()
        .expect("generated new keys over sealed data")
        .to_string();
    assert!(refused.contains("is missing"), "{refused}");
    assert!(!missing.exists());
    ctx.teardown().await;
}

#[tokio::test]
async fn with_a_database_url_a_missing_key_is_a_start_error() {
    let ctx = TestContext::new("keys_missing").await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join(KEY_FILE_NAME);
    let refused = ctx
        .try_instance(keys_only_from(&key_file, false))
        .await
        .err()
        .expect("started without keys")
        .to_string();
    assert!(
        refused.contains(&format!(
            "workspace-server keys generate --file {}",
            key_file.display()
        )),
        "{refused}"
    );
    // No key file configured at all: the same advice.
    let refused = ctx
        .try_instance(|c| {
            c.auth.jwt_secret = None;
            c.secrets.keys.clear();
        })
        .await
        .err()
        .expect("started without keys")
        .to_string();
    assert!(
        refused.contains("workspace-server keys generate"),
        "{refused}"
    );
    // Nothing was written into the database in either case.
    let db = ctx.db().await;
    let rows: i64 = db
        .query_one(
            "SELECT (SELECT count(*) FROM server_secrets) \
             + (SELECT count(*) FROM server_key_fingerprints)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    // The configured keys alone suffice (the harness's servers run so).
    ctx.teardown().await;
}
