//! What the database keeps of the server's keys: nothing secret. Keys
//! older versions kept in `server_secrets` are read here only to be moved
//! into the key file and deleted (see `crate::keys`); the fingerprints of
//! the key file's keys are recorded so that a server started with other
//! keys refuses to start.

use super::Datastore;
use crate::error::Error;

impl Datastore {
    /// The keys an older version kept in the database, by name.
    pub async fn legacy_server_keys(&self) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query("SELECT name, value FROM server_secrets ORDER BY name", &[])
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get("name"), r.get("value")))
            .collect())
    }

    /// Deletes the named keys from the database (once the key file holds
    /// them).
    pub async fn legacy_server_keys_remove(&self, names: &[String]) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute("DELETE FROM server_secrets WHERE name = ANY($1)", &[&names])
            .await?;
        Ok(())
    }

    /// The recorded key fingerprints, by name.
    pub async fn key_fingerprints(&self) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT name, fingerprint FROM server_key_fingerprints ORDER BY name",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get("name"), r.get("fingerprint")))
            .collect())
    }

    /// Records the fingerprints not recorded yet (the first instance to get
    /// here wins) and returns every recorded one, to compare.
    pub async fn key_fingerprints_record(
        &self,
        fingerprints: &[(String, Vec<u8>)],
    ) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let names: Vec<&str> = fingerprints.iter().map(|(n, _)| n.as_str()).collect();
        let values: Vec<&[u8]> = fingerprints.iter().map(|(_, f)| f.as_slice()).collect();
        {
            let conn = self.conn().await?;
            conn.execute(
                "INSERT INTO server_key_fingerprints (name, fingerprint) \
                 SELECT * FROM unnest($1::text[], $2::bytea[]) ON CONFLICT (name) DO NOTHING",
                &[&names, &values],
            )
            .await?;
        }
        self.key_fingerprints().await
    }
}
