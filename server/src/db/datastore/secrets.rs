//! Server-generated secrets shared by every instance.

use super::Datastore;
use crate::error::Error;

impl Datastore {
    /// Returns the secret `name`, storing `candidate` first if none exists
    /// (the first instance to get here wins; the others read its value).
    pub async fn secret_get_or_insert(
        &self,
        name: &str,
        candidate: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO server_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            &[&name, &candidate],
        )
        .await?;
        let row = conn
            .query_one("SELECT value FROM server_secrets WHERE name = $1", &[&name])
            .await?;
        Ok(row.get("value"))
    }
}
