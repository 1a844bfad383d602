//! The data layer: the connection pool, migrations, and one module per
//! resource under [`datastore`]. All SQL of the server lives here, always
//! parameterised; every tenant-scoped query filters by organization.

pub mod datastore;

use anyhow::{Context, Result};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

pub use datastore::Datastore;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// Applies pending migrations, serialised by an advisory lock so that
/// several instances may start at once.
pub async fn migrate(url: &str) -> Result<()> {
    let (mut client, connection) = tokio_postgres::connect(url, NoTls)
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

/// Builds the connection pool.
pub fn pool(url: &str, size: usize) -> Result<Pool> {
    let pg_config: tokio_postgres::Config = url.parse().context("parsing the database URL")?;
    let manager = Manager::from_config(
        pg_config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(std::time::Duration::from_secs(10)))
        .create_timeout(Some(std::time::Duration::from_secs(10)))
        .build()
        .context("building the connection pool")
}
