//! Backups with the S3 file store: the objects stay in the bucket, so
//! `db dump` names the bucket and the objects the database refers to (and
//! says the bucket must be backed up on its own), and `db restore` refuses,
//! putting the database back, while an object the restored database refers
//! to is not in the configured bucket. (The local store's side, files in
//! the archive and a restore onto a new data directory, is in
//! `server/tests/binary.rs`.)

use workspace_server::backup;
use workspace_server::config::Config;
use workspace_tests::TestContext;
use workspace_tests::s3::{ACCESS_KEY, LocalS3, SECRET_KEY};

#[tokio::test]
async fn with_s3_a_backup_names_the_bucket_and_a_restore_checks_it() {
    let s3 = LocalS3::start().await;
    let bucket = s3.bucket("uploads");
    let storage = workspace_server::kb_config::StorageConfig {
        backend: workspace_server::kb_config::StorageBackend::S3,
        local_dir: None,
        s3: workspace_server::kb_config::S3Config {
            bucket: "uploads".into(),
            region: "us-east-1".into(),
            endpoint_url: Some(s3.endpoint()),
            path_style: true,
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            allow_http: true,
        },
    };
    let cx = TestContext::with_config("backup_s3", {
        let storage = storage.clone();
        move |c| {
            c.storage = storage;
            c.kb.workers = 0;
        }
    })
    .await;
    let ada = cx.user("backup-ada").await;
    let org = ada.personal_org().await;
    let upload = ada
        .client
        .chat_upload_file(org, None, "minutes.md", b"# Minutes\nKept in S3.".to_vec())
        .await
        .unwrap()
        .into_inner();
    let key = format!("orgs/{org}/files/{}", upload.id);
    assert!(bucket.join(&key).is_file());

    // What `workspace-server db dump` runs, on this test's database.
    let mut config = Config::default();
    config.database.url = Some(cx.db_url.clone());
    config.database.data_dir = Some(workspace_tests::data_root());
    config.storage = storage;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.dump");
    let notes = backup::dump(&config, &file).await.unwrap().notes();
    assert!(
        notes.contains(&format!(
            "NOT the uploaded files: they are 1 objects in the bucket uploads at {}",
            s3.endpoint()
        )) && notes.contains("Back the bucket up on its own (versioning"),
        "{notes}"
    );
    let archive = std::fs::read(&file).unwrap();
    let text = String::from_utf8_lossy(&archive);
    assert!(
        text.contains(&format!("\"bucket_objects\":[\"{key}\"]")),
        "the manifest names the object"
    );
    assert!(
        !text.contains("Kept in S3."),
        "the object's bytes are not in it"
    );

    // Restored with the server stopped. The object gone from the bucket:
    // refused, naming it, and the database is as it was.
    let workspace_tests::TestContext {
        server, database, ..
    } = cx;
    server.shutdown().await.unwrap();
    let aside = dir.path().join("aside");
    std::fs::rename(bucket.join(&key), &aside).unwrap();
    let error = backup::restore(&config, &file, false).await.unwrap_err();
    let said = format!("{error:#}");
    assert!(
        said.contains(
            "refused: 1 uploaded files the database refers to are not in the bucket uploads"
        ) && said.contains(&key)
            && said.contains("--without-files")
            && said.contains("the database and the files are as they were"),
        "{said}"
    );
    let db = connect(&config).await;
    let files: i64 = db
        .query_one("SELECT count(*) AS n FROM files", &[])
        .await
        .unwrap()
        .get("n");
    assert_eq!(files, 1);
    // Back in the bucket: restored.
    std::fs::rename(&aside, bucket.join(&key)).unwrap();
    let notes = backup::restore(&config, &file, false)
        .await
        .unwrap()
        .notes();
    assert!(!notes.contains("WARNING"), "{notes}");
    drop(db);

    let admin = workspace_tests::admin_url().unwrap();
    let (admin, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        .await
        .unwrap();
}

async fn connect(config: &Config) -> tokio_postgres::Client {
    let url = config.database.url.as_deref().unwrap();
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db
}
