//! Uploaded files.

use super::Datastore;
use crate::authz::{DownloadGrant, Grant, OrgAccess, on, perm};
use crate::error::Error;
use uuid::Uuid;

pub struct NewFile {
    pub id: Uuid,
    pub chat_id: Option<Uuid>,
    pub message_id: Uuid,
    pub filename: String,
    pub content_type: String,
    pub file_size: i64,
    pub sha256: String,
    pub storage_key: String,
}

/// What text extraction needs, with any earlier result.
pub struct FileForExtraction {
    pub content_type: String,
    pub file_size: i64,
    pub storage_key: String,
    pub extracted_text: Option<String>,
    pub extraction_error: Option<String>,
}

/// What a download needs.
pub struct StoredFile {
    pub filename: String,
    pub content_type: String,
    pub file_size: i64,
    pub storage_key: String,
}

impl Datastore {
    pub async fn file_insert(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        file: &NewFile,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO files (id, organization_id, uploaded_by, chat_id, message_id, filename, \
                 content_type, file_size, sha256, storage_key) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &file.id,
                &grant.org_id(),
                &grant.user_id(),
                &file.chat_id,
                &file.message_id,
                &file.filename,
                &file.content_type,
                &file.file_size,
                &file.sha256,
                &file.storage_key,
            ],
        )
        .await?;
        Ok(())
    }

    /// A file by id, for a signed download link (the link's signature,
    /// checked before, is the authorization: no organization applies).
    pub async fn file_for_download(
        &self,
        grant: &DownloadGrant,
    ) -> Result<Option<StoredFile>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt(
                "SELECT f.filename, f.content_type, f.file_size, f.storage_key FROM files f \
                 JOIN organizations o ON o.id = f.organization_id \
                 WHERE f.id = $1 AND o.deletion_requested_at IS NULL",
                &[&grant.file_id()],
            )
            .await?
            .map(|r| StoredFile {
                filename: r.get("filename"),
                content_type: r.get("content_type"),
                file_size: r.get("file_size"),
                storage_key: r.get("storage_key"),
            }))
    }

    /// A file of the caller's organization, for text extraction.
    pub async fn file_for_extraction(
        &self,
        access: &OrgAccess,
        file_id: Uuid,
    ) -> Result<Option<FileForExtraction>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt(
                "SELECT content_type, file_size, storage_key, extracted_text, extraction_error \
                 FROM files WHERE organization_id = $1 AND id = $2",
                &[&access.org_id(), &file_id],
            )
            .await?
            .map(|r| FileForExtraction {
                content_type: r.get("content_type"),
                file_size: r.get("file_size"),
                storage_key: r.get("storage_key"),
                extracted_text: r.get("extracted_text"),
                extraction_error: r.get("extraction_error"),
            }))
    }

    /// Stores the text extracted from a file (or why extraction failed).
    pub async fn file_set_extraction(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        file_id: Uuid,
        text: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE files SET extracted_text = $3, extraction_error = $4 \
             WHERE organization_id = $1 AND id = $2",
            &[&grant.org_id(), &file_id, &text, &error],
        )
        .await?;
        Ok(())
    }
}
