//! Objects of `object_store` sources: an S3-compatible bucket (AWS S3,
//! MinIO, R2, Ceph) listed under a prefix and read object by object, with
//! the source's own credentials (opened from their sealed form only for
//! the request), through `object_store`'s S3 client (SigV4).
//!
//! With `endpoint_url` the bucket is addressed path-style at that endpoint
//! (`http://` allowed); its host is resolved first and refused unless every
//! address is public (or `fetch.allow_private_networks`), and every
//! connection the store makes resolves through the same guard
//! ([`crate::fetch::GuardedResolver`]), so a name that changes its answer
//! between the check and the request (DNS rebinding) still reaches no
//! internal address. Without it the
//! bucket is on AWS. `prefix` is a folder path (`docs/2024/`): objects whose
//! keys are under it, folder markers (keys ending in `/`) skipped.

use super::{Fetched, SourceError};
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path as StorePath;

/// An object_store source, credentials opened.
pub struct S3Source {
    pub bucket: String,
    pub prefix: String,
    pub region: String,
    pub endpoint_url: Option<String>,
    pub access_key_id: String,
    pub secret_access_key: String,
}

/// One listed object.
pub struct ObjectEntry {
    pub key: String,
    pub size: u64,
}

/// Refuses an endpoint whose host resolves to a non-public address.
async fn check_endpoint(endpoint: &str, allow_private: bool) -> Result<(), SourceError> {
    let url = reqwest::Url::parse(endpoint)
        .map_err(|_| SourceError::Permanent("endpoint_url is not a URL".into()))?;
    crate::fetch::check_url(&url, allow_private)
        .map_err(|e| SourceError::Permanent(format!("endpoint_url cannot be used: {e}")))?;
    if allow_private {
        return Ok(());
    }
    let host = url
        .host_str()
        .ok_or_else(|| SourceError::Permanent("endpoint_url has no host".into()))?
        .trim_matches(['[', ']'])
        .to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| SourceError::Transient(format!("resolving {host} failed: {e}")))?
        .collect();
    if addrs.is_empty() || addrs.iter().any(|a| !crate::fetch::is_public(a.ip())) {
        return Err(SourceError::Permanent(format!(
            "endpoint_url {host} resolves to a non-public address (set \
             fetch.allow_private_networks to allow it)"
        )));
    }
    Ok(())
}

async fn store(
    src: &S3Source,
    allow_private: bool,
) -> Result<object_store::aws::AmazonS3, SourceError> {
    if let Some(endpoint) = &src.endpoint_url {
        check_endpoint(endpoint, allow_private).await?;
    }
    guarded_store(src, allow_private)
}

/// The store, its connections through the SSRF guard; [`store`] checks the
/// endpoint first, for a clear message before any request.
fn guarded_store(
    src: &S3Source,
    allow_private: bool,
) -> Result<object_store::aws::AmazonS3, SourceError> {
    // Every connection the store makes resolves through the SSRF guard
    // (set first: with_client_options replaces the options set before it).
    let options = object_store::ClientOptions::new().with_dns_resolver(std::sync::Arc::new(
        crate::fetch::GuardedResolver { allow_private },
    ));
    let mut builder = object_store::aws::AmazonS3Builder::new()
        .with_client_options(options)
        .with_bucket_name(&src.bucket)
        .with_region(&src.region)
        .with_access_key_id(&src.access_key_id)
        .with_secret_access_key(&src.secret_access_key)
        .with_retry(object_store::RetryConfig {
            max_retries: 2,
            ..Default::default()
        });
    if let Some(endpoint) = &src.endpoint_url {
        builder = builder
            .with_endpoint(endpoint)
            .with_virtual_hosted_style_request(false)
            .with_allow_http(endpoint.starts_with("http://"));
    }
    builder.build().map_err(|e| {
        SourceError::Permanent(format!(
            "the bucket cannot be addressed: {}",
            clean(&e, src)
        ))
    })
}

/// A store error's message, without the secret (object_store never puts it
/// in one; this makes sure).
fn clean(e: &object_store::Error, src: &S3Source) -> String {
    let text = e.to_string();
    if src.secret_access_key.is_empty() {
        text
    } else {
        text.replace(&src.secret_access_key, "[redacted]")
    }
}

fn classify(e: object_store::Error, src: &S3Source, what: &str) -> SourceError {
    use object_store::Error as E;
    let message = format!("{what}: {}", clean(&e, src));
    match &e {
        E::NotFound { .. } | E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            SourceError::Permanent(message)
        }
        _ => {
            let lower = message.to_ascii_lowercase();
            let permanent = [
                "403",
                "forbidden",
                "signaturedoesnotmatch",
                "invalidaccesskeyid",
                "accessdenied",
                "nosuchbucket",
                "404",
                "400",
            ]
            .iter()
            .any(|m| lower.contains(m));
            if permanent {
                SourceError::Permanent(message)
            } else {
                SourceError::Transient(message)
            }
        }
    }
}

/// The objects under the source's prefix (at most `max_objects`, more is a
/// permanent failure naming the limit).
pub async fn list(
    src: &S3Source,
    allow_private: bool,
    max_objects: usize,
) -> Result<Vec<ObjectEntry>, SourceError> {
    let store = store(src, allow_private).await?;
    let prefix = src.prefix.trim_matches('/');
    let prefix = (!prefix.is_empty()).then(|| StorePath::from(prefix));
    let mut stream = store.list(prefix.as_ref());
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        let meta = item.map_err(|e| classify(e, src, "listing the bucket failed"))?;
        let key = meta.location.to_string();
        if key.ends_with('/') {
            continue;
        }
        if out.len() >= max_objects {
            return Err(SourceError::Permanent(format!(
                "the prefix holds more than {max_objects} objects (kb.max_documents_per_source)"
            )));
        }
        out.push(ObjectEntry {
            key,
            size: meta.size,
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// Reads one object (at most `max_bytes`).
pub async fn get(
    src: &S3Source,
    allow_private: bool,
    key: &str,
    max_bytes: u64,
) -> Result<Fetched, SourceError> {
    let store = store(src, allow_private).await?;
    let location = StorePath::from(key);
    let result = store
        .get_opts(&location, Default::default())
        .await
        .map_err(|e| classify(e, src, &format!("reading {key} failed")))?;
    if result.meta.size > max_bytes {
        return Err(SourceError::Permanent(format!(
            "{key} is larger than the limit of {max_bytes} bytes"
        )));
    }
    let bytes = result
        .bytes()
        .await
        .map_err(|e| classify(e, src, &format!("reading {key} failed")))?;
    let content_type = super::type_of_name(key)
        .map(str::to_string)
        .unwrap_or_else(|| {
            crate::extract::sniff::sniff(&bytes[..bytes.len().min(8192)], true, key)
                .unwrap_or("application/octet-stream")
                .to_string()
        });
    let size = bytes.len() as u64;
    let (title, content) = super::content_of(&content_type, bytes);
    Ok(Fetched {
        final_locator: key.to_string(),
        title,
        content,
        size_bytes: size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    /// DNS rebinding: a name that passed the endpoint check can answer
    /// with an internal address at connection time. The store's own
    /// connections resolve through the guard, so such a request never
    /// leaves: here `localhost` stands for the rebound name, and the store
    /// is built without the check.
    #[tokio::test]
    async fn store_connections_resolve_through_the_guard() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let src = S3Source {
            bucket: "docs".into(),
            prefix: String::new(),
            region: "us-east-1".into(),
            endpoint_url: Some(format!("http://localhost:{port}")),
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "secret".into(),
        };
        let store = guarded_store(&src, false).unwrap();
        let object = StorePath::from("a.txt");
        let head = store.head(&object);
        let err = tokio::time::timeout(std::time::Duration::from_secs(5), head)
            .await
            .expect("refused at once, not waiting on the address")
            .expect_err("the guard refuses loopback");
        assert!(
            format!("{err:?}").contains("Private(\"localhost ("),
            "{err:?}"
        );
        let accepted =
            tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept());
        assert!(accepted.await.is_err(), "no connection reached the address");

        // Allowed (fetch.allow_private_networks), the same store connects.
        let store = guarded_store(&src, true).unwrap();
        let request = tokio::spawn(async move { store.head(&StorePath::from("a.txt")).await });
        let accepted = tokio::time::timeout(std::time::Duration::from_secs(5), listener.accept());
        assert!(
            accepted.await.is_ok_and(|a| a.is_ok()),
            "the store connected"
        );
        request.abort();
    }
}
