//! Folders of chats, and what puts a chat into one or pins it (issue #35).
//! A folder is private to its user in one organization, as a chat is:
//! every query filters by organization AND user, and the foreign key from
//! `chats` names the owner too (`chats_folder_fkey`), so a chat can only
//! be in a folder of its own user.

use super::{Datastore, is_unique_violation};
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::ChatStatus;
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// At most this many folders per user and organization.
pub const FOLDERS_MAX: i64 = 1000;

/// What `chat_list` keeps (besides the organization and the caller).
#[derive(Clone, Copy, Debug, Default)]
pub struct ChatFilter {
    /// One state, or (`None`) active and archived.
    pub status: Option<ChatStatus>,
    /// Only the chats in this folder.
    pub folder_id: Option<Uuid>,
    /// Only pinned (`true`) or unpinned (`false`) chats.
    pub pinned: Option<bool>,
}

/// The organizing fields a chat's create or update sets.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChatPlacement {
    /// Pin (`true`) or unpin (`false`); `None`: as it is.
    pub pinned: Option<bool>,
    /// Into this folder (the caller's, else `404`); `None`: where it is.
    pub folder_id: Option<Uuid>,
}

db_row! {
    pub struct FolderRow {
        pub id: Uuid = "f.id",
        pub org_id: Uuid = "f.organization_id",
        pub user_id: Uuid = "f.user_id",
        pub name: String = "f.name",
        pub created_at: DateTime<Utc> = "f.created_at",
        pub updated_at: DateTime<Utc> = "f.updated_at",
        pub chat_count: i64 = "(SELECT count(*) FROM chats c \
             WHERE c.folder_id = f.id AND c.status <> 'DELETED')",
    }
}

const FOLDER_COLUMNS: &str = FolderRow::COLUMNS;

/// A chat's write naming a folder that is not the caller's (the owner's
/// foreign key refused it) is `404`, as an unknown id is.
pub(crate) fn folder_not_found(e: tokio_postgres::Error) -> Error {
    let refused = e.as_db_error().is_some_and(|db| {
        db.code() == &tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION
            && db.constraint() == Some("chats_folder_fkey")
    });
    if refused {
        Error::NotFound { what: "folder" }
    } else {
        e.into()
    }
}

fn name_taken(e: tokio_postgres::Error) -> Error {
    if is_unique_violation(&e, "chat_folders_name_key") {
        Error::conflict(
            "folder_name_taken",
            "you already have a folder with this name in this organization",
        )
    } else {
        e.into()
    }
}

impl Datastore {
    /// The caller's folders, by name (case-insensitively), then id.
    pub async fn chat_folder_list(&self, access: &OrgAccess) -> Result<Vec<FolderRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {FOLDER_COLUMNS} FROM chat_folders f \
                     WHERE f.organization_id = $1 AND f.user_id = $2 \
                     ORDER BY chat_fold(f.name), f.id"
                ),
                &[&access.org_id(), &access.user_id()],
            )
            .await?;
        Ok(rows.iter().map(FolderRow::from_row).collect())
    }

    /// Creates a folder of the caller's; `409` when the name is taken or
    /// the caller has [`FOLDERS_MAX`] folders already.
    pub async fn chat_folder_create(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        name: &str,
    ) -> Result<FolderRow, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // One creation at a time per user and organization, so the count
        // holds.
        let n: i64 = tx
            .query_one(
                "SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || $2::uuid::text, 35)), \
                     (SELECT count(*) FROM chat_folders \
                      WHERE organization_id = $1 AND user_id = $2) AS n",
                &[&grant.org_id(), &grant.user_id()],
            )
            .await?
            .get("n");
        if n >= FOLDERS_MAX {
            return Err(Error::conflict(
                "too_many_folders",
                format!("at most {FOLDERS_MAX} folders; delete one first"),
            ));
        }
        let row = tx
            .query_one(
                &format!(
                    "WITH f AS (INSERT INTO chat_folders (id, organization_id, user_id, name) \
                         VALUES ($1, $2, $3, $4) RETURNING *) \
                     SELECT {FOLDER_COLUMNS} FROM f"
                ),
                &[&Uuid::new_v4(), &grant.org_id(), &grant.user_id(), &name],
            )
            .await
            .map_err(name_taken)?;
        tx.commit().await?;
        Ok(FolderRow::from_row(&row))
    }

    /// Renames one of the caller's folders.
    pub async fn chat_folder_rename(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        id: Uuid,
        name: &str,
    ) -> Result<FolderRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "WITH f AS (UPDATE chat_folders SET name = $4, updated_at = now() \
                         WHERE organization_id = $1 AND user_id = $2 AND id = $3 RETURNING *) \
                     SELECT {FOLDER_COLUMNS} FROM f"
                ),
                &[&grant.org_id(), &grant.user_id(), &id, &name],
            )
            .await
            .map_err(name_taken)?
            .ok_or(Error::NotFound { what: "folder" })?;
        Ok(FolderRow::from_row(&row))
    }

    /// Deletes one of the caller's folders; its chats move out of it (into
    /// no folder, their `updated_at` kept). Returns how many moved.
    pub async fn chat_folder_delete(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        id: Uuid,
    ) -> Result<i64, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&grant.org_id(), &grant.user_id(), &id];
        // The folder first (locked, so no chat moves in meanwhile), then its
        // chats (their rows would be set null by the foreign key anyway:
        // moved explicitly to count them).
        let [found, moved, _] = tx
            .pipeline([
                (
                    "SELECT id FROM chat_folders \
                     WHERE organization_id = $1 AND user_id = $2 AND id = $3 FOR UPDATE",
                    &params,
                ),
                (
                    "UPDATE chats SET folder_id = NULL \
                     WHERE organization_id = $1 AND user_id = $2 AND folder_id = $3 \
                     RETURNING id",
                    &params,
                ),
                (
                    "DELETE FROM chat_folders \
                     WHERE organization_id = $1 AND user_id = $2 AND id = $3",
                    &params,
                ),
            ])
            .await?;
        if found.is_empty() {
            return Err(Error::NotFound { what: "folder" });
        }
        tx.commit().await?;
        Ok(moved.len() as i64)
    }

    /// Moves the caller's chats `ids` into the caller's folder `folder_id`
    /// (`None`: out of any folder), all or none: `404` when one of them, or
    /// the folder, is not the caller's. Returns how many moved.
    pub async fn chat_folder_move(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        ids: &[Uuid],
        folder_id: Option<Uuid>,
    ) -> Result<i64, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let moved = tx
            .query(
                "UPDATE chats SET folder_id = $4 \
                 WHERE organization_id = $1 AND user_id = $2 AND id = ANY($3) \
                 RETURNING id",
                &[&grant.org_id(), &grant.user_id(), &ids, &folder_id],
            )
            .await
            .map_err(folder_not_found)?;
        if moved.len() != ids.len() {
            // Rolled back: one of the ids is not the caller's chat.
            return Err(Error::NotFound { what: "chat" });
        }
        tx.commit().await?;
        Ok(moved.len() as i64)
    }
}
