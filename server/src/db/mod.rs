//! The data layer: the connection pool, migrations, and one module per
//! resource under [`datastore`]. All SQL of the server lives here, always
//! parameterised; every tenant-scoped query filters by organization.

pub mod datastore;
pub mod enums;
pub mod health;
pub mod pipeline;
pub(crate) mod row;

use anyhow::{Context, Result};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::path::Path;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use datastore::Datastore;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// The TLS connector for database connections.
///
/// The URL's `sslmode` decides whether TLS is used: `disable`, `prefer` (the
/// default: TLS when the server offers it) or `require`. Whenever TLS is
/// used the server's certificate is verified (stricter than libpq's
/// `require`) against the system's roots plus, when given, the PEM
/// certificates in `ca_file` (a managed database's private CA bundle).
pub fn tls(ca_file: Option<&Path>) -> Result<MakeRustlsConnect> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let mut added = 0;
        for cert in rustls_pki_types::CertificateDer::pem_file_iter(path)
            .with_context(|| format!("reading database CA file {}", path.display()))?
        {
            let cert = cert.with_context(|| format!("parsing {}", path.display()))?;
            roots
                .add(cert)
                .with_context(|| format!("adding a CA from {}", path.display()))?;
            added += 1;
        }
        if added == 0 {
            anyhow::bail!("{} holds no PEM certificate", path.display());
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("configuring TLS")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// Applies the migrations up to and including `version` only (an upgrade
/// test's starting point: a database as an older release left it).
pub async fn migrate_to(url: &str, tls: &MakeRustlsConnect, version: i32) -> Result<()> {
    let (mut client, connection) = tokio_postgres::connect(url, tls.clone())
        .await
        .context("connecting to the database")?;
    let driver = tokio::spawn(connection);
    let result = embedded::migrations::runner()
        .set_target(refinery::Target::Version(version))
        .run_async(&mut client)
        .await;
    drop(client);
    let _ = driver.await;
    result.context("applying migrations")?;
    Ok(())
}

/// Applies pending migrations, serialised by an advisory lock so that
/// several instances may start at once.
pub async fn migrate(url: &str, tls: &MakeRustlsConnect) -> Result<()> {
    let (mut client, connection) = tokio_postgres::connect(url, tls.clone())
        .await
        .context("connecting to the database")?;
    let driver = tokio::spawn(connection);
    // An arbitrary, fixed key for "workspace migrations".
    client
        .execute("SELECT pg_advisory_lock(7262531)", &[])
        .await?;
    let result = embedded::migrations::runner().run_async(&mut client).await;
    client
        .execute("SELECT pg_advisory_unlock(7262531)", &[])
        .await?;
    drop(client);
    let _ = driver.await;
    result.context("applying migrations")?;
    Ok(())
}

/// A hash of the migrations compiled into this binary, for test template
/// databases that must be rebuilt when the migrations change.
/// Creates the database `name` on the server at `admin_url` unless it
/// exists (the embedded cluster's first start). `name` is a constant of the
/// caller: identifiers cannot be parameters, so it is checked to be a plain
/// identifier before it is put into the statement.
pub async fn ensure_database(admin_url: &str, name: &'static str) -> Result<()> {
    anyhow::ensure!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "{name:?} is not a plain database name"
    );
    let (client, connection) = tokio_postgres::connect(admin_url, tokio_postgres::NoTls)
        .await
        .context("connecting to the embedded cluster")?;
    let driver = tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some();
    if !exists {
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}

pub fn migrations_fingerprint() -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for m in embedded::migrations::runner().get_migrations() {
        hasher.update(m.name().as_bytes());
        hasher.update(m.checksum().to_le_bytes());
    }
    let digest = hasher.finalize();
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Builds the shared, pipelined connections (see [`pipeline`]).
pub fn pipelines(url: &str, count: usize, tls: MakeRustlsConnect) -> Result<pipeline::Pipelines> {
    let pg_config: tokio_postgres::Config = url.parse().context("parsing the database URL")?;
    Ok(pipeline::Pipelines::new(pg_config, tls, count))
}

/// Builds the connection pool; a checkout waits at most `wait` for a free
/// connection.
pub fn pool(
    url: &str,
    size: usize,
    wait: std::time::Duration,
    tls: MakeRustlsConnect,
) -> Result<Pool> {
    let pg_config: tokio_postgres::Config = url.parse().context("parsing the database URL")?;
    let manager = Manager::from_config(
        pg_config,
        tls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(std::time::Duration::from_secs(10)))
        .build()
        .context("building the connection pool")
}
