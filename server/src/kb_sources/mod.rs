//! Fetching the documents of `web` and `object_store` sources for
//! ingestion. Both go through the fetch guard (`crate::fetch`): web pages
//! with the guarded client (every connection and redirect checked after DNS
//! resolution), S3 endpoints checked before any request. Failures say
//! whether a retry may help ([`SourceError::Transient`]: network, timeouts,
//! 429 and 5xx) or not ([`SourceError::Permanent`]: robots.txt, 4xx, wrong
//! credentials, a missing bucket, a document over the size limit); messages
//! never contain credentials.

pub mod s3;
pub mod web;

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Worth retrying later.
    #[error("{0}")]
    Transient(String),
    /// Retrying will not help.
    #[error("{0}")]
    Permanent(String),
}

/// A fetched document's content: bytes for `crate::extract` (text,
/// Markdown, HTML, PDF, DOCX, ...), of their MIME type.
pub enum Content {
    Bytes {
        content_type: String,
        bytes: bytes::Bytes,
    },
}

/// A fetched document.
pub struct Fetched {
    /// Where it was found (a web page's URL after redirects; an object's
    /// key).
    pub final_locator: String,
    /// A page's title, when it has one.
    pub title: Option<String>,
    pub content: Content,
    pub size_bytes: u64,
}

/// The content of `bytes` of type `content_type` (a MIME type, parameters
/// allowed): everything, plain text included, is left to `crate::extract`
/// (parsed in the extraction worker, under its limits).
pub(crate) fn content_of(content_type: &str, bytes: bytes::Bytes) -> (Option<String>, Content) {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        // Parsed like uploads, in the extraction worker (a crafted page can
        // keep an HTML parser busy for minutes).
        "text/html" | "application/xhtml+xml" => (
            None,
            Content::Bytes {
                content_type: "text/html".to_string(),
                bytes,
            },
        ),
        // Text too: a text may be JSON nested 100,000 deep, which the
        // worker reads as its values (never raw into the chunker).
        "text/plain" | "application/json" => (
            None,
            Content::Bytes {
                content_type: mime,
                bytes,
            },
        ),
        "text/markdown" | "text/x-markdown" => (
            None,
            Content::Bytes {
                content_type: "text/markdown".to_string(),
                bytes,
            },
        ),
        _ => (
            None,
            Content::Bytes {
                content_type: mime,
                bytes,
            },
        ),
    }
}

/// A content type from a name's extension, for objects stored without a
/// useful one.
pub(crate) fn type_of_name(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "pdf" => "application/pdf",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        _ => return None,
    })
}
