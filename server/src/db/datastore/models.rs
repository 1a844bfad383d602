//! The model catalog. Models are global (not tenant-scoped): every
//! organization may use every configured model.

use super::Datastore;
use crate::error::Error;
use uuid::Uuid;

impl Datastore {
    /// Upserts the configured models by name (`(name, provider)` pairs) and
    /// returns their ids in the same order. A model keeps its id across
    /// restarts; rows of models no longer configured stay for the sessions
    /// that refer to them. Rows are written in name order so that instances
    /// starting at once cannot deadlock.
    pub async fn models_sync(&self, models: &[(&str, &str)]) -> Result<Vec<Uuid>, Error> {
        let mut order: Vec<usize> = (0..models.len()).collect();
        order.sort_by_key(|&i| models[i].0);
        let mut ids = vec![Uuid::nil(); models.len()];
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        for i in order {
            let (name, provider) = models[i];
            let row = tx
                .query_one(
                    "INSERT INTO models (id, name, provider) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO UPDATE \
                        SET provider = EXCLUDED.provider, \
                            updated_at = CASE WHEN models.provider = EXCLUDED.provider \
                                              THEN models.updated_at ELSE now() END \
                     RETURNING id",
                    &[&Uuid::new_v4(), &name, &provider],
                )
                .await?;
            ids[i] = row.get("id");
        }
        tx.commit().await?;
        Ok(ids)
    }
}
