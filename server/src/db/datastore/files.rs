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

crate::db::row::db_row! {
    /// The form of an upload a model is sent (see `file_renditions`).
    pub struct RenditionRow {
        pub file_id: Uuid = "file_id",
        pub media_type: Option<String> = "media_type",
        pub width: Option<i32> = "width",
        pub height: Option<i32> = "height",
        pub data: Option<Vec<u8>> = "data",
        pub pages: Option<i32> = "pages",
        pub error_code: Option<String> = "error_code",
        pub error: Option<String> = "error",
    }
}

/// A rendition to keep: the prepared image, a PDF's pages, or why the
/// upload could not be prepared.
pub enum NewRendition<'a> {
    Image {
        media_type: &'a str,
        width: u32,
        height: u32,
        data: &'a [u8],
    },
    Pdf {
        pages: u32,
    },
    Failed {
        code: &'a str,
        message: &'a str,
    },
}

impl Datastore {
    /// The kept renditions of the caller's organization's `file_ids` (those
    /// made so far).
    pub async fn file_renditions(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        file_ids: &[Uuid],
    ) -> Result<Vec<RenditionRow>, Error> {
        if file_ids.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM file_renditions \
                     WHERE organization_id = $1 AND file_id = ANY($2)",
                    RenditionRow::COLUMNS
                ),
                &[&grant.org_id(), &file_ids],
            )
            .await?;
        Ok(rows.iter().map(RenditionRow::from_row).collect())
    }

    /// Keeps a file's rendition (the first one kept wins: two instances
    /// preparing the same upload at once make the same one).
    pub async fn file_rendition_put(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        file_id: Uuid,
        rendition: &NewRendition<'_>,
    ) -> Result<(), Error> {
        let (mut media_type, mut width, mut height, mut data) = (None, None, None, None);
        let (mut pages, mut code, mut message) = (None, None, None);
        match rendition {
            NewRendition::Image {
                media_type: m,
                width: w,
                height: h,
                data: d,
            } => {
                media_type = Some(*m);
                width = i32::try_from(*w).ok();
                height = i32::try_from(*h).ok();
                data = Some(*d);
            }
            NewRendition::Pdf { pages: p } => pages = i32::try_from(*p).ok(),
            NewRendition::Failed {
                code: c,
                message: m,
            } => {
                code = Some(*c);
                message = Some(*m);
            }
        }
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO file_renditions \
                 (file_id, organization_id, media_type, width, height, data, pages, error_code, error) \
             SELECT id, organization_id, $3, $4, $5, $6, $7, $8, $9 FROM files \
             WHERE organization_id = $1 AND id = $2 \
             ON CONFLICT (file_id) DO NOTHING",
            &[
                &grant.org_id(),
                &file_id,
                &media_type,
                &width,
                &height,
                &data,
                &pages,
                &code,
                &message,
            ],
        )
        .await?;
        Ok(())
    }
}
