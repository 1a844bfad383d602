//! Where file bytes live: one trait ([`FileStore`]) over object_store's
//! local filesystem store (the zero-configuration default, under the data
//! directory) and its S3 store (any S3-compatible service). Download links
//! expire: presigned URLs for S3, HMAC-signed server URLs
//! (`GET /api/files/download`) for the local store.

use crate::kb_config::{S3Config, StorageBackend, StorageConfig};
use anyhow::Context;
use bytes::Bytes;
use futures::stream::BoxStream;
use hmac::{Hmac, Mac};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Duration;

/// How long download links stay valid: 7 days (the spec's limit).
pub const DOWNLOAD_LINK_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// A storage failure (details for the log only).
#[derive(Debug, thiserror::Error)]
#[error("object storage: {0}")]
pub struct StorageError(pub String);

impl From<object_store::Error> for StorageError {
    fn from(e: object_store::Error) -> Self {
        StorageError(e.to_string())
    }
}

/// An upload in progress: bytes are streamed in parts, never held whole.
pub struct Writer {
    inner: WriteMultipart,
    /// The local store's root and the object's key: the file is made
    /// private to the server's user once written.
    local: Option<(std::path::PathBuf, String)>,
}

impl Writer {
    /// Adds bytes, waiting while too many parts are in flight.
    pub async fn write(&mut self, bytes: Bytes) -> Result<(), StorageError> {
        self.inner.wait_for_capacity(4).await?;
        self.inner.put(bytes);
        Ok(())
    }

    pub async fn finish(self) -> Result<(), StorageError> {
        self.inner.finish().await?;
        if let Some((root, key)) = self.local {
            tokio::task::spawn_blocking(move || make_private(&root, &key))
                .await
                .map_err(|e| StorageError(e.to_string()))?
                .map_err(|e| StorageError(format!("restricting the stored file: {e}")))?;
        }
        Ok(())
    }

    /// Abandons the upload and removes what was written.
    pub async fn abort(self) {
        let _ = self.inner.abort().await;
    }
}

/// The file store of this server.
#[async_trait::async_trait]
pub trait FileStore: Send + Sync {
    /// Starts a streamed upload to `key`.
    async fn writer(&self, key: &str) -> Result<Writer, StorageError>;
    /// Streams the object at `key`.
    async fn read(
        &self,
        key: &str,
    ) -> Result<BoxStream<'static, Result<Bytes, StorageError>>, StorageError>;
    async fn delete(&self, key: &str) -> Result<(), StorageError>;
    /// A link that downloads the object until `DOWNLOAD_LINK_LIFETIME`
    /// passes. `file_id` names it in server links.
    async fn download_url(&self, key: &str, file_id: uuid::Uuid) -> Result<String, StorageError>;
    /// Deletes the object at `key`; one that is already gone is not an
    /// error (deletions that resume after a crash delete again).
    async fn remove(&self, key: &str) -> Result<(), StorageError>;
    /// Deletes at most `max` objects under `prefix` (a folder: `orgs/<id>/`);
    /// returns how many (fewer than `max`: none is left).
    async fn remove_prefix(&self, prefix: &str, max: usize) -> Result<usize, StorageError>;
}

/// [`FileStore::remove`] on an object_store store.
async fn remove_from(store: &dyn ObjectStore, key: &str) -> Result<(), StorageError> {
    match store.delete(&StorePath::from(key)).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// [`FileStore::remove_prefix`] on an object_store store.
async fn remove_prefix_from(
    store: &dyn ObjectStore,
    prefix: &str,
    max: usize,
) -> Result<usize, StorageError> {
    use futures::{StreamExt, TryStreamExt};
    let listed: Vec<object_store::ObjectMeta> = store
        .list(Some(&StorePath::from(prefix)))
        .take(max)
        .try_collect()
        .await
        .or_else(|e| match e {
            // The folder does not exist (the local store): nothing there.
            object_store::Error::NotFound { .. } => Ok(Vec::new()),
            e => Err(e),
        })?;
    for meta in &listed {
        remove_from(store, meta.location.as_ref()).await?;
    }
    Ok(listed.len())
}

async fn start_writer(store: &dyn ObjectStore, key: &str) -> Result<Writer, StorageError> {
    let upload = store
        .put_multipart_opts(&StorePath::from(key), Default::default())
        .await?;
    Ok(Writer {
        inner: WriteMultipart::new_with_chunk_size(upload, 5 * 1024 * 1024),
        local: None,
    })
}

/// Mode 0600 for the stored file at `key` under `root` and 0700 for every
/// folder from `root` down to it: only the server's user reads uploads,
/// whatever the process's umask (defence in depth besides the tool
/// sandbox, which sees none of the data directory).
fn make_private(root: &std::path::Path, key: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let private = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    };
    private(root, 0o700)?;
    let mut path = root.to_path_buf();
    let parts: Vec<&str> = key.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        path.push(part);
        private(&path, if i + 1 == parts.len() { 0o600 } else { 0o700 })?;
    }
    Ok(())
}

async fn read_from(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<BoxStream<'static, Result<Bytes, StorageError>>, StorageError> {
    use futures::StreamExt;
    let result = store
        .get_opts(&StorePath::from(key), Default::default())
        .await?;
    Ok(result
        .into_stream()
        .map(|r| r.map_err(StorageError::from))
        .boxed())
}

/// The local filesystem store and its signed server links.
pub struct LocalStore {
    store: object_store::local::LocalFileSystem,
    root: std::path::PathBuf,
    links: Arc<LinkSigner>,
}

#[async_trait::async_trait]
impl FileStore for LocalStore {
    async fn writer(&self, key: &str) -> Result<Writer, StorageError> {
        let mut writer = start_writer(&self.store, key).await?;
        writer.local = Some((self.root.clone(), key.to_string()));
        Ok(writer)
    }
    async fn read(
        &self,
        key: &str,
    ) -> Result<BoxStream<'static, Result<Bytes, StorageError>>, StorageError> {
        read_from(&self.store, key).await
    }
    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.store.delete(&StorePath::from(key)).await?;
        Ok(())
    }
    async fn download_url(&self, _key: &str, file_id: uuid::Uuid) -> Result<String, StorageError> {
        let expires = chrono::Utc::now().timestamp() + DOWNLOAD_LINK_LIFETIME.as_secs() as i64;
        Ok(self.links.url(file_id, expires))
    }
    async fn remove(&self, key: &str) -> Result<(), StorageError> {
        remove_from(&self.store, key).await
    }
    async fn remove_prefix(&self, prefix: &str, max: usize) -> Result<usize, StorageError> {
        let removed = remove_prefix_from(&self.store, prefix, max).await?;
        let folder = prefix.trim_matches('/');
        if removed < max && !folder.is_empty() && !folder.contains("..") {
            // The folders left empty.
            let _ = tokio::fs::remove_dir_all(self.root.join(folder)).await;
        }
        Ok(removed)
    }
}

/// An S3-compatible bucket; links are presigned GET URLs.
pub struct S3Store {
    store: object_store::aws::AmazonS3,
}

#[async_trait::async_trait]
impl FileStore for S3Store {
    async fn writer(&self, key: &str) -> Result<Writer, StorageError> {
        start_writer(&self.store, key).await
    }
    async fn read(
        &self,
        key: &str,
    ) -> Result<BoxStream<'static, Result<Bytes, StorageError>>, StorageError> {
        read_from(&self.store, key).await
    }
    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.store.delete(&StorePath::from(key)).await?;
        Ok(())
    }
    async fn download_url(&self, key: &str, _file_id: uuid::Uuid) -> Result<String, StorageError> {
        use object_store::signer::Signer;
        let url = self
            .store
            .signed_url(
                http::Method::GET,
                &StorePath::from(key),
                DOWNLOAD_LINK_LIFETIME,
            )
            .await?;
        Ok(url.to_string())
    }
    async fn remove(&self, key: &str) -> Result<(), StorageError> {
        remove_from(&self.store, key).await
    }
    async fn remove_prefix(&self, prefix: &str, max: usize) -> Result<usize, StorageError> {
        remove_prefix_from(&self.store, prefix, max).await
    }
}

/// Builds an S3 store for a bucket. Credentials not configured come from
/// the environment (`AWS_ACCESS_KEY_ID`, ...).
pub fn s3_store(config: &S3Config) -> anyhow::Result<object_store::aws::AmazonS3> {
    let mut builder = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(&config.bucket)
        .with_region(&config.region)
        .with_allow_http(config.allow_http)
        .with_virtual_hosted_style_request(!config.path_style);
    if let Some(endpoint) = &config.endpoint_url {
        builder = builder.with_endpoint(endpoint);
    }
    if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
        builder = builder
            .with_access_key_id(id)
            .with_secret_access_key(secret);
    }
    builder.build().context("configuring the S3 store")
}

/// Signs and checks the local store's download links:
/// `{base}/api/files/download?file_id=..&expires=..&signature=HMAC`.
pub struct LinkSigner {
    key: Vec<u8>,
    /// Set once: from `files.public_base_url`, else from the address the
    /// server bound.
    base_url: std::sync::OnceLock<String>,
}

impl LinkSigner {
    pub fn new(key: Vec<u8>, base_url: Option<String>) -> LinkSigner {
        let cell = std::sync::OnceLock::new();
        if let Some(url) = base_url {
            let _ = cell.set(url.trim_end_matches('/').to_string());
        }
        LinkSigner {
            key,
            base_url: cell,
        }
    }

    /// Sets the base URL unless one is configured.
    pub fn default_base_url(&self, url: String) {
        let _ = self.base_url.set(url);
    }

    fn mac(&self, file_id: uuid::Uuid, expires: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(format!("download:{file_id}:{expires}").as_bytes());
        mac
    }

    pub fn signature(&self, file_id: uuid::Uuid, expires: i64) -> String {
        self.mac(file_id, expires)
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub fn url(&self, file_id: uuid::Uuid, expires: i64) -> String {
        format!(
            "{}/api/files/download?file_id={file_id}&expires={expires}&signature={}",
            self.base_url.get().map(String::as_str).unwrap_or(""),
            self.signature(file_id, expires)
        )
    }

    /// Whether `signature` is this link's (compared in constant time).
    pub fn verify(&self, file_id: uuid::Uuid, expires: i64, signature: &str) -> bool {
        let Some(bytes) = decode_hex(signature) else {
            return false;
        };
        self.mac(file_id, expires).verify_slice(&bytes).is_ok()
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Builds the configured store. `data_dir` holds the local store's
/// `files/` by default; `links` signs its download links.
pub fn from_config(
    config: &StorageConfig,
    data_dir: &std::path::Path,
    links: Arc<LinkSigner>,
) -> anyhow::Result<Arc<dyn FileStore>> {
    match config.backend {
        StorageBackend::Local => {
            let root = config
                .local_dir
                .clone()
                .unwrap_or_else(|| data_dir.join("files"));
            std::fs::create_dir_all(&root)
                .with_context(|| format!("creating the file store {}", root.display()))?;
            // Folders made by an earlier version were 0755: closing the
            // root closes everything below it.
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
                    .with_context(|| format!("restricting the file store {}", root.display()))?;
            }
            let store = object_store::local::LocalFileSystem::new_with_prefix(&root)
                .with_context(|| format!("opening the file store {}", root.display()))?;
            Ok(Arc::new(LocalStore { store, root, links }))
        }
        StorageBackend::S3 => Ok(Arc::new(S3Store {
            store: s3_store(&config.s3)?,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_files_are_private_to_the_server_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("files");
        let config = StorageConfig {
            local_dir: Some(root.clone()),
            ..Default::default()
        };
        let links = Arc::new(LinkSigner::new(b"k".repeat(32), None));
        let store = from_config(&config, dir.path(), links).unwrap();
        let mut writer = store.writer("org/abc/file.bin").await.unwrap();
        writer.write(Bytes::from_static(b"secret")).await.unwrap();
        writer.finish().await.unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&root.join("org")), 0o700);
        assert_eq!(mode(&root.join("org/abc")), 0o700);
        assert_eq!(mode(&root.join("org/abc/file.bin")), 0o600);
    }

    #[test]
    fn links_verify_and_reject_tampering() {
        let signer = LinkSigner::new(b"k".repeat(32), Some("http://h/".into()));
        let id = uuid::Uuid::new_v4();
        let sig = signer.signature(id, 100);
        assert!(signer.verify(id, 100, &sig));
        assert!(!signer.verify(id, 101, &sig));
        assert!(!signer.verify(uuid::Uuid::new_v4(), 100, &sig));
        assert!(!signer.verify(id, 100, "zz"));
        assert!(
            signer
                .url(id, 100)
                .starts_with("http://h/api/files/download?file_id=")
        );
    }
}
