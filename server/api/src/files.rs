//! Types of the chat uploads (`POST /api/chat/upload_file`) and of the
//! signed download links.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Query of `POST /api/chat/upload_file`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct UploadQuery {
    /// The organization.
    pub org_id: Uuid,
    /// The chat the file belongs to, if any.
    #[serde(default)]
    pub chat_id: Option<Uuid>,
}

/// Response of `POST /api/chat/upload_file`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Upload {
    /// The file's id (usable in a `file` knowledge-base source).
    pub id: Uuid,
    /// The id of the chat message the upload is attached to.
    pub message_id: Uuid,
    pub filename: String,
    pub file_size: i64,
    /// Decided by content sniffing, not by the client's header.
    pub content_type: String,
    /// A download link valid for 7 days.
    pub url: String,
}

/// Query of `GET /api/files/download` (the signed link of the local store).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct DownloadQuery {
    /// The uploaded file.
    pub file_id: Uuid,
    /// Expiry, seconds since the Unix epoch.
    pub expires: i64,
    /// HMAC-SHA256 of the file id and expiry, hex.
    #[schemars(length(equal = 64))]
    pub signature: String,
}

/// A `multipart/form-data` body (like dropshot's `MultipartBody`, with the
/// stable `invalid_request` error code when the body is not multipart).
pub struct MultipartForm(pub dropshot::MultipartBody);

#[async_trait::async_trait]
impl dropshot::ExclusiveExtractor for MultipartForm {
    async fn from_request<Context: dropshot::ServerContext>(
        rqctx: &dropshot::RequestContext<Context>,
        request: hyper::Request<dropshot::Body>,
    ) -> Result<Self, dropshot::HttpError> {
        <dropshot::MultipartBody as dropshot::ExclusiveExtractor>::from_request(rqctx, request)
            .await
            .map(MultipartForm)
            .map_err(|mut e| {
                if e.error_code.is_none() {
                    e.error_code = Some(crate::extract::INVALID_REQUEST.to_string());
                }
                e
            })
    }

    fn metadata(content_type: dropshot::ApiEndpointBodyContentType) -> dropshot::ExtractorMetadata {
        <dropshot::MultipartBody as dropshot::ExclusiveExtractor>::metadata(content_type)
    }
}
