//! Web pages of `web` sources.
//!
//! One fetch: the site's `robots.txt` is read first and obeyed for the
//! configured user agent (RFC 9309: a missing or 4xx robots.txt allows
//! everything, a 5xx or unreachable one is a transient failure); then the
//! page is fetched with the guarded client (redirects followed up to
//! `fetch.max_redirects`, each hop checked), its body read up to
//! `fetch.max_bytes` (counted, whatever `Content-Length` says), robots.txt
//! and page within one deadline of `fetch.timeout_secs`. No answer by the
//! deadline may be a busy server (transient); a body still arriving at it
//! (a slow-loris site) or ending short of its `Content-Length` is final. HTML becomes readable
//! text: the main article (`dom_smoothie`, a Readability port) when one is
//! found, else the whole page as text (`html2text`); scripts, styles and
//! navigation do not reach the chunks.

use super::{Fetched, SourceError};
use std::time::Duration;

/// Limits of one fetch.
pub struct WebLimits {
    pub max_bytes: u64,
    pub timeout: Duration,
    pub user_agent: String,
    /// `fetch.allow_private_networks`.
    pub allow_private: bool,
}

fn transient_or_permanent(status: reqwest::StatusCode, what: &str) -> SourceError {
    let message = format!("{what} answered HTTP {}", status.as_u16());
    if status.as_u16() == 429 || status.is_server_error() {
        SourceError::Transient(message)
    } else {
        SourceError::Permanent(message)
    }
}

fn request_error(e: reqwest::Error, what: &str) -> SourceError {
    // A refused address (the guard) or too many redirects will not change.
    let text = format!("{e:#}");
    let chain = {
        let mut s = text.clone();
        let mut source = std::error::Error::source(&e);
        while let Some(inner) = source {
            s.push_str(&format!(": {inner}"));
            source = inner.source();
        }
        s
    };
    if e.is_redirect()
        || chain.contains("not allowed")
        || chain.contains("refused to connect to")
        || chain.contains("non-public")
    {
        SourceError::Permanent(format!("fetching {what} failed: {chain}"))
    } else if e.is_timeout() {
        SourceError::Transient(format!("fetching {what} timed out"))
    } else {
        SourceError::Transient(format!("fetching {what} failed: {chain}"))
    }
}

/// Reads a body up to `max` bytes (counted as they arrive, whatever the
/// `Content-Length` says) until `deadline`. The server has answered by
/// now, so a body still arriving at the deadline (a slow-loris site
/// dripping bytes) is a permanent failure, and so is a body that ends
/// before the length its `Content-Length` declared: another attempt would
/// meet the same server.
async fn read_capped(
    mut response: reqwest::Response,
    max: u64,
    what: &str,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<bytes::Bytes, SourceError> {
    let declared = response.content_length();
    if declared.is_some_and(|n| n > max) {
        return Err(SourceError::Permanent(format!(
            "{what} is larger than the limit of {max} bytes"
        )));
    }
    let too_slow = |received: usize| {
        SourceError::Permanent(format!(
            "{what} was still arriving after {} s ({received} bytes received): \
             the server sends too slowly (fetch.timeout_secs)",
            timeout.as_secs()
        ))
    };
    let mut out = Vec::new();
    loop {
        let chunk = match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => return Err(too_slow(out.len())),
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => break,
            Ok(Err(e)) if e.is_timeout() => return Err(too_slow(out.len())),
            Ok(Err(e)) => {
                return Err(match declared {
                    Some(n) if (out.len() as u64) < n => SourceError::Permanent(format!(
                        "{what} ended after {} of the {n} bytes its Content-Length declared",
                        out.len()
                    )),
                    _ => request_error(e, what),
                });
            }
        };
        if out.len() as u64 + chunk.len() as u64 > max {
            return Err(SourceError::Permanent(format!(
                "{what} is larger than the limit of {max} bytes"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.into())
}

/// Sends `request`, waiting for the answer's head until `deadline`; no
/// answer in time is transient (the server may be down or busy).
async fn send_by(
    request: reqwest::RequestBuilder,
    what: &str,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<reqwest::Response, SourceError> {
    tokio::time::timeout_at(deadline, request.send())
        .await
        .map_err(|_| {
            SourceError::Transient(format!(
                "fetching {what} got no answer within {} s",
                timeout.as_secs()
            ))
        })?
        .map_err(|e| request_error(e, what))
}

/// Whether robots.txt lets `limits.user_agent` fetch `url`.
async fn robots_allow(
    client: &reqwest::Client,
    url: &reqwest::Url,
    limits: &WebLimits,
    deadline: tokio::time::Instant,
) -> Result<bool, SourceError> {
    let mut robots = url.clone();
    robots.set_path("/robots.txt");
    robots.set_query(None);
    robots.set_fragment(None);
    let response = send_by(client.get(robots), "robots.txt", deadline, limits.timeout).await?;
    let status = response.status();
    if status.is_client_error() {
        return Ok(true);
    }
    if !status.is_success() {
        return Err(SourceError::Transient(format!(
            "robots.txt answered HTTP {}",
            status.as_u16()
        )));
    }
    let body = read_capped(response, 512 * 1024, "robots.txt", deadline, limits.timeout).await?;
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok(crate::fetch::robots::allows(
        &String::from_utf8_lossy(&body),
        &limits.user_agent,
        &path,
    ))
}

/// Fetches one page (see the module documentation).
pub async fn fetch(
    client: &reqwest::Client,
    url: &str,
    limits: &WebLimits,
) -> Result<Fetched, SourceError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|_| SourceError::Permanent(format!("{url:?} is not a URL")))?;
    crate::fetch::check_url(&parsed, limits.allow_private)
        .map_err(|e| SourceError::Permanent(format!("{url} cannot be fetched: {e}")))?;
    // One deadline for the whole fetch, robots.txt included.
    let deadline = tokio::time::Instant::now() + limits.timeout;
    if !robots_allow(client, &parsed, limits, deadline).await? {
        return Err(SourceError::Permanent(format!(
            "robots.txt of {} disallows {} for {}",
            parsed.host_str().unwrap_or_default(),
            parsed.path(),
            limits.user_agent
        )));
    }
    let response = send_by(client.get(parsed.clone()), url, deadline, limits.timeout).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(transient_or_permanent(status, url));
    }
    let final_url = response.url().to_string();
    let header_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = read_capped(response, limits.max_bytes, url, deadline, limits.timeout).await?;
    let content_type = header_type
        .or_else(|| super::type_of_name(parsed.path()).map(str::to_string))
        .unwrap_or_else(|| {
            if bytes.trim_ascii_start().starts_with(b"<") {
                "text/html".to_string()
            } else {
                "text/plain".to_string()
            }
        });
    let size = bytes.len() as u64;
    let (title, content) = super::content_of(&content_type, bytes);
    Ok(Fetched {
        final_locator: final_url,
        title,
        content,
        size_bytes: size,
    })
}
