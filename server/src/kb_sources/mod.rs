//! Fetching the documents of web and object_store sources. (Placeholder
//! until the fetchers land: every fetch fails permanently.)

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    Transient(String),
    #[error("{0}")]
    Permanent(String),
}

/// A fetched document's content.
pub enum Content {
    Text(String),
    Bytes {
        content_type: String,
        bytes: bytes::Bytes,
    },
}

/// A fetched document.
pub struct Fetched {
    pub final_locator: String,
    pub title: Option<String>,
    pub content: Content,
    pub size_bytes: u64,
}

pub mod web {
    use super::{Fetched, SourceError};

    pub struct WebLimits {
        pub max_bytes: u64,
        pub timeout: std::time::Duration,
        pub user_agent: String,
    }

    pub async fn fetch(
        _client: &reqwest::Client,
        _url: &str,
        _limits: &WebLimits,
    ) -> Result<Fetched, SourceError> {
        Err(SourceError::Permanent(
            "web sources are not available yet".into(),
        ))
    }
}

pub mod s3 {
    use super::{Fetched, SourceError};

    pub struct S3Source {
        pub bucket: String,
        pub prefix: String,
        pub region: String,
        pub endpoint_url: Option<String>,
        pub access_key_id: String,
        pub secret_access_key: String,
    }

    pub struct ObjectEntry {
        pub key: String,
        pub size: u64,
    }

    pub async fn list(
        _src: &S3Source,
        _allow_private: bool,
        _max_objects: usize,
    ) -> Result<Vec<ObjectEntry>, SourceError> {
        Err(SourceError::Permanent(
            "object_store sources are not available yet".into(),
        ))
    }

    pub async fn get(
        _src: &S3Source,
        _allow_private: bool,
        _key: &str,
        _max_bytes: u64,
    ) -> Result<Fetched, SourceError> {
        Err(SourceError::Permanent(
            "object_store sources are not available yet".into(),
        ))
    }
}
