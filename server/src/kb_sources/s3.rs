//! Objects of `object_store` sources: an S3-compatible bucket (AWS S3,
//! MinIO, R2, Ceph) listed under a prefix (ListObjectsV2) and read object
//! by object (GetObject), with the source's own credentials (opened from
//! their sealed form only for the request), signed with SigV4
//! (`object_store`'s signer) and sent by the guarded client of
//! [`crate::fetch`], every answer read up to a limit.
//!
//! With `endpoint_url` the bucket is addressed path-style at that endpoint
//! (`http://` allowed); its host is resolved first and refused unless every
//! address is public (or `fetch.allow_private_networks`; link-local and
//! metadata addresses never), and every connection resolves through the
//! same guard ([`crate::fetch::GuardedResolver`]), so a name that changes
//! its answer between the check and the request (DNS rebinding) still
//! reaches no internal address. Without it the bucket is on AWS
//! (virtual-hosted). `prefix` is a folder path (`docs/2024/`): objects whose
//! keys are under it, folder markers (keys ending in `/`) skipped.
//!
//! Keys are taken as the listing gives them (decoded once if the answer
//! says `EncodingType` `url`; it is not asked for) and encoded
//! once in the object's URL, as S3 wants: every byte but `A-Z a-z 0-9 - _ .
//! ~` and `/` percent-encoded. A key that no URL can name as such (a `.` or
//! `..` segment, which URL parsers resolve, a leading `/`) fails alone,
//! with the reason, when its document is read; the others are ingested.
//!
//! A listing is bounded: at most `kb.s3_max_list_pages` pages and
//! `kb.s3_max_keys` keys, and a page that says more follow must give a new
//! continuation token; past that the source fails with the reason.

use super::{Fetched, SourceError};
use crate::kb_config::KbConfig;

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

/// Largest ListObjectsV2 page read (1,000 keys of up to 1,024 bytes,
/// percent-encoded, with their XML).
const MAX_PAGE_BYTES: u64 = 16 << 20;

/// Refuses an endpoint whose host resolves to a non-public address.
async fn check_endpoint(endpoint: &str, allow_private: bool) -> Result<(), SourceError> {
    let url = reqwest::Url::parse(endpoint)
        .map_err(|_| SourceError::Permanent("endpoint_url is not a URL".into()))?;
    crate::fetch::check_url(&url, allow_private)
        .map_err(|e| SourceError::Permanent(format!("endpoint_url cannot be used: {e}")))?;
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
    if addrs.is_empty()
        || addrs
            .iter()
            .any(|a| !crate::fetch::allowed(a.ip(), allow_private))
    {
        return Err(SourceError::Permanent(format!(
            "endpoint_url {host} resolves to a non-public address (set \
             fetch.allow_private_networks to allow it; link-local addresses never are)"
        )));
    }
    Ok(())
}

/// The guarded client for bucket requests (one per setting, built once).
fn http(allow_private: bool) -> Result<reqwest::Client, SourceError> {
    static CLIENTS: [std::sync::OnceLock<reqwest::Client>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    let slot = &CLIENTS[usize::from(allow_private)];
    if let Some(c) = slot.get() {
        return Ok(c.clone());
    }
    let client = crate::fetch::guarded_builder(allow_private, 0)
        .timeout(std::time::Duration::from_secs(120))
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| SourceError::Transient(format!("building the S3 client: {e}")))?;
    Ok(slot.get_or_init(|| client).clone())
}

/// Bytes S3 leaves as they are in a URL path; everything else is
/// percent-encoded (`/` separates, it is not encoded).
const KEY_ENCODE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// `key` encoded once for a URL path, per S3's rules.
pub fn encode_key(key: &str) -> String {
    percent_encoding::utf8_percent_encode(key, KEY_ENCODE).to_string()
}

/// Why `key` cannot be requested as itself, if it cannot: URL parsers
/// resolve `.` and `..` segments (also as `%2E`), and a leading `/` makes
/// an empty segment that proxies and stores merge.
pub fn key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        return Some("the key is empty");
    }
    if key.starts_with('/') {
        return Some("the key starts with /");
    }
    if key.split('/').any(|s| s == "." || s == "..") {
        return Some("the key has a . or .. segment");
    }
    None
}

/// The bucket's base URL, ending in `/`.
fn bucket_url(src: &S3Source) -> Result<reqwest::Url, SourceError> {
    let bucket = &src.bucket;
    if bucket.is_empty()
        || bucket.len() > 255
        || !bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(SourceError::Permanent(
            "the bucket name is not a valid S3 bucket name".into(),
        ));
    }
    let text = match &src.endpoint_url {
        Some(endpoint) => format!("{}/{bucket}/", endpoint.trim_end_matches('/')),
        None => format!("https://{bucket}.s3.{}.amazonaws.com/", region(src)),
    };
    reqwest::Url::parse(&text)
        .map_err(|_| SourceError::Permanent("the bucket cannot be addressed".into()))
}

fn region(src: &S3Source) -> &str {
    if src.region.is_empty() {
        "us-east-1"
    } else {
        &src.region
    }
}

/// A signed GET of `url`, its answer's status and headers.
async fn signed_get(
    src: &S3Source,
    allow_private: bool,
    url: reqwest::Url,
) -> Result<reqwest::Response, SourceError> {
    crate::fetch::check_url(&url, allow_private)
        .map_err(|e| SourceError::Permanent(format!("the bucket cannot be reached: {e}")))?;
    let credential = object_store::aws::AwsCredential {
        key_id: src.access_key_id.clone(),
        secret_key: src.secret_access_key.clone(),
        token: None,
    };
    let mut request = http::Request::builder()
        .method(http::Method::GET)
        .uri(url.as_str())
        .body(object_store::client::HttpRequestBody::from(Vec::new()))
        .map_err(|_| SourceError::Permanent("the bucket URL is not valid".into()))?;
    object_store::aws::AwsAuthorizer::new(&credential, "s3", region(src))
        .try_authorize(&mut request, None)
        .map_err(|e| SourceError::Permanent(format!("signing the request failed: {e}")))?;
    let mut builder = http(allow_private)?.get(url);
    for (name, value) in request.headers() {
        builder = builder.header(name, value);
    }
    builder.send().await.map_err(|e| {
        SourceError::Transient(format!(
            "the bucket cannot be reached: {}",
            crate::error::chain(&e)
        ))
    })
}

/// A failed answer as an error naming its status and, when the body gives
/// one that looks like it, S3's error code (never the body itself).
async fn failure(response: reqwest::Response, what: &str) -> SourceError {
    let status = response.status();
    let body = crate::fetch::read_limited(response, 64 * 1024)
        .await
        .unwrap_or_default();
    let code = xml_field(&body, "Code")
        .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    let message = format!("{what}: the bucket answered {status}{code}");
    if status.is_client_error() && status.as_u16() != 429 && status.as_u16() != 408 {
        SourceError::Permanent(message)
    } else {
        SourceError::Transient(message)
    }
}

/// The text of the first `<name>` element of an XML answer.
fn xml_field(xml: &[u8], name: &str) -> Option<String> {
    let page = parse_page(xml, Some(name)).ok()?;
    page.field
}

/// One ListObjectsV2 page.
#[derive(Debug, Default, PartialEq)]
struct Page {
    /// (key, size), keys decoded when the answer is URL-encoded.
    contents: Vec<(String, u64)>,
    truncated: bool,
    next_token: Option<String>,
    /// The first element named as asked ([`xml_field`]).
    field: Option<String>,
}

/// Parses a ListObjectsV2 answer (or, with `field`, finds one element).
fn parse_page(xml: &[u8], field: Option<&str>) -> Result<Page, String> {
    use quick_xml::events::Event;
    let text = std::str::from_utf8(xml).map_err(|_| "the listing is not UTF-8".to_string())?;
    let mut reader = quick_xml::Reader::from_str(text);
    let mut path: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut page = Page::default();
    let (mut key, mut size, mut url_encoded) = (None::<String>, 0u64, false);
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("the listing is not XML: {e}"))?
        {
            Event::Start(e) => {
                if path.len() > 8 {
                    return Err("the listing nests too deep".into());
                }
                path.push(e.local_name().as_ref().to_string());
                current.clear();
            }
            Event::Text(t) => current.push_str(&t),
            Event::GeneralRef(r) => {
                let entity = format!("&{};", &*r);
                current.push_str(
                    &quick_xml::escape::unescape(&entity)
                        .map_err(|e| format!("the listing is not XML: {e}"))?,
                );
            }
            Event::CData(c) => current.push_str(&c.into_inner()),
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                let value = std::mem::take(&mut current);
                if field == Some(name.as_str()) && page.field.is_none() {
                    page.field = Some(value.clone());
                }
                let parent = path.last().map(String::as_str);
                match (parent, name.as_str()) {
                    (Some("Contents"), "Key") => key = Some(value),
                    (Some("Contents"), "Size") => size = value.trim().parse().unwrap_or(0),
                    (_, "Contents") => {
                        if let Some(k) = key.take() {
                            page.contents.push((k, size));
                        }
                        size = 0;
                    }
                    (Some("ListBucketResult"), "IsTruncated") => {
                        page.truncated = value.trim() == "true"
                    }
                    (Some("ListBucketResult"), "NextContinuationToken") => {
                        page.next_token = Some(value)
                    }
                    (Some("ListBucketResult"), "EncodingType") => {
                        url_encoded = value.trim().eq_ignore_ascii_case("url")
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if url_encoded {
        for (k, _) in &mut page.contents {
            // encoding-type=url encodes with `+` for spaces as forms do.
            let plus = k.replace('+', " ");
            *k = percent_encoding::percent_decode_str(&plus)
                .decode_utf8()
                .map_err(|_| "a listed key is not UTF-8".to_string())?
                .into_owned();
        }
    }
    Ok(page)
}

/// The objects under the source's prefix (at most
/// `kb.max_documents_per_source`, more is a permanent failure naming the
/// limit), in at most `kb.s3_max_list_pages` pages and `kb.s3_max_keys`
/// keys.
pub async fn list(
    src: &S3Source,
    allow_private: bool,
    limits: &KbConfig,
) -> Result<Vec<ObjectEntry>, SourceError> {
    if let Some(endpoint) = &src.endpoint_url {
        check_endpoint(endpoint, allow_private).await?;
    }
    let base = bucket_url(src)?;
    let prefix = src.prefix.trim_matches('/');
    let prefix = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let max_objects = limits.max_documents_per_source;
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let (mut pages, mut keys) = (0usize, 0usize);
    loop {
        if pages >= limits.s3_max_list_pages {
            return Err(SourceError::Permanent(format!(
                "the bucket's listing did not end within {} pages (kb.s3_max_list_pages)",
                limits.s3_max_list_pages
            )));
        }
        pages += 1;
        let mut url = base.clone();
        {
            let mut q = url.query_pairs_mut();
            // No `encoding-type=url`: s3s-fs (and servers built on s3s)
            // echo it without encoding the keys, and a key holding `%2e`
            // would then be decoded twice.
            q.append_pair("list-type", "2")
                .append_pair("max-keys", "1000");
            if !prefix.is_empty() {
                q.append_pair("prefix", &prefix);
            }
            if let Some(t) = &token {
                q.append_pair("continuation-token", t);
            }
        }
        let response = signed_get(src, allow_private, url).await?;
        if !response.status().is_success() {
            return Err(failure(response, "listing the bucket failed").await);
        }
        let body = crate::fetch::read_limited(response, MAX_PAGE_BYTES)
            .await
            .map_err(|e| SourceError::Permanent(format!("listing the bucket failed: {e}")))?;
        let page = parse_page(&body, None)
            .map_err(|e| SourceError::Permanent(format!("listing the bucket failed: {e}")))?;
        keys += page.contents.len();
        if keys > limits.s3_max_keys {
            return Err(SourceError::Permanent(format!(
                "the bucket's listing holds more than {} keys (kb.s3_max_keys)",
                limits.s3_max_keys
            )));
        }
        for (key, size) in page.contents {
            if key.ends_with('/') || !key.starts_with(&prefix) {
                continue;
            }
            if out.len() >= max_objects {
                return Err(SourceError::Permanent(format!(
                    "the prefix holds more than {max_objects} objects (kb.max_documents_per_source)"
                )));
            }
            out.push(ObjectEntry { key, size });
        }
        if !page.truncated {
            break;
        }
        match page.next_token {
            Some(next)
                if !next.is_empty() && token.as_ref() != Some(&next) && next.len() <= 4096 =>
            {
                token = Some(next)
            }
            _ => {
                return Err(SourceError::Permanent(
                    "the bucket's listing says more keys follow but gives no new continuation token"
                        .into(),
                ));
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    Ok(out)
}

/// Reads one object (at most `max_bytes`).
pub async fn get(
    src: &S3Source,
    allow_private: bool,
    key: &str,
    max_bytes: u64,
) -> Result<Fetched, SourceError> {
    if let Some(problem) = key_problem(key) {
        return Err(SourceError::Permanent(format!(
            "the object cannot be requested by its key: {problem}"
        )));
    }
    if let Some(endpoint) = &src.endpoint_url {
        check_endpoint(endpoint, allow_private).await?;
    }
    let base = bucket_url(src)?;
    // The path is set already encoded: the URL parser keeps escapes as
    // they are, and `.`/`..` segments were refused above.
    let url = reqwest::Url::parse(&format!("{}{}", base.as_str(), encode_key(key)))
        .map_err(|_| SourceError::Permanent("the object's URL is not valid".into()))?;
    let what = "reading the object failed";
    let response = signed_get(src, allow_private, url).await?;
    if !response.status().is_success() {
        return Err(failure(response, what).await);
    }
    let bytes = crate::fetch::read_limited(response, max_bytes)
        .await
        .map_err(|e| match e {
            crate::fetch::BodyError::TooLarge(_) => SourceError::Permanent(format!(
                "the object is larger than the limit of {max_bytes} bytes"
            )),
            e => SourceError::Transient(format!("{what}: {e}")),
        })?;
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

    fn source(endpoint: String) -> S3Source {
        S3Source {
            bucket: "docs".into(),
            prefix: String::new(),
            region: "us-east-1".into(),
            endpoint_url: Some(endpoint),
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "secret".into(),
        }
    }

    /// DNS rebinding: a name that passed the endpoint check can answer
    /// with an internal address at connection time. The bucket's
    /// connections resolve through the guard, so such a request never
    /// leaves: here `localhost` stands for the rebound name, and the
    /// request is made without the check.
    #[tokio::test]
    async fn bucket_connections_resolve_through_the_guard() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let src = source(format!("http://localhost:{port}"));
        let url = reqwest::Url::parse(&format!("http://localhost:{port}/docs/a.txt")).unwrap();
        let request = signed_get(&src, false, url.clone());
        let err = match tokio::time::timeout(std::time::Duration::from_secs(5), request)
            .await
            .expect("refused at once, not waiting on the address")
        {
            Ok(_) => panic!("the guard refuses loopback"),
            Err(e) => e,
        };
        assert!(
            format!("{err:?}").contains("not a public address"),
            "{err:?}"
        );
        let accepted =
            tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept());
        assert!(accepted.await.is_err(), "no connection reached the address");

        // Allowed (fetch.allow_private_networks), the same request connects.
        let request = tokio::spawn(async move { signed_get(&src, true, url).await.is_ok() });
        let accepted = tokio::time::timeout(std::time::Duration::from_secs(5), listener.accept());
        assert!(
            accepted.await.is_ok_and(|a| a.is_ok()),
            "the request connected"
        );
        request.abort();
    }

    #[test]
    fn keys_are_encoded_once_per_s3_rules() {
        assert_eq!(encode_key("r\u{e9}sum\u{e9}.txt"), "r%C3%A9sum%C3%A9.txt");
        assert_eq!(encode_key("back\\slash.txt"), "back%5Cslash.txt");
        assert_eq!(encode_key("a b/c?d#e"), "a%20b/c%3Fd%23e");
        assert_eq!(encode_key("%2e%2e"), "%252e%252e");
        assert_eq!(encode_key("\u{202e}txt.exe"), "%E2%80%AEtxt.exe");
        assert_eq!(encode_key("A-z_0.9~"), "A-z_0.9~");
        assert_eq!(key_problem("a/../b"), Some("the key has a . or .. segment"));
        assert_eq!(key_problem("/lead"), Some("the key starts with /"));
        assert_eq!(key_problem("a..b/c.d"), None);
        assert_eq!(key_problem("%2e%2e"), None);
    }

    #[test]
    fn listing_pages_are_parsed_and_decoded() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>docs</Name><EncodingType>url</EncodingType>
  <Contents><Key>r%C3%A9sum%C3%A9.txt</Key><Size>12</Size></Contents>
  <Contents><Key>a+b%2B%252e.txt</Key><Size>3</Size></Contents>
  <IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;2</NextContinuationToken>
</ListBucketResult>"#;
        let page = parse_page(xml, None).unwrap();
        assert_eq!(
            page.contents,
            vec![
                ("r\u{e9}sum\u{e9}.txt".to_string(), 12),
                ("a b+%2e.txt".to_string(), 3)
            ]
        );
        assert!(page.truncated);
        assert_eq!(page.next_token.as_deref(), Some("t&2"));
        // Without EncodingType the keys are taken as they are.
        let raw = br#"<ListBucketResult><Contents><Key>50%25 &lt;off&gt;.txt</Key><Size>1</Size></Contents><IsTruncated>false</IsTruncated></ListBucketResult>"#;
        let page = parse_page(raw, None).unwrap();
        assert_eq!(page.contents, vec![("50%25 <off>.txt".to_string(), 1)]);
        assert!(!page.truncated);
        assert_eq!(
            xml_field(
                b"<Error><Code>NoSuchKey</Code><Message>x</Message></Error>",
                "Code"
            ),
            Some("NoSuchKey".into())
        );
    }
}
