//! Every outbound HTTP request of the server is made by a client built
//! here, and every answer body is read through [`read_limited`] (a
//! streaming read that stops at a given size).
//!
//! Two kinds of URL:
//! - **Operator URLs** (providers, the embedder, transcription, configured
//!   MCP servers): the operator chose them, so private and loopback
//!   addresses are allowed (Ollama on localhost); [`operator_client`].
//! - **Upstream URLs**, which come from an upstream's answer or from a user
//!   (OAuth metadata endpoints, redirects, web sources, S3 endpoints):
//!   guarded, [`guarded_builder`] / [`client`]. Link-local addresses
//!   (169.254/16, fe80::/10) and the other cloud-metadata addresses
//!   ([`is_metadata`]) are refused for them always, even with
//!   `fetch.allow_private_networks`.
//!
//! Unless `fetch.allow_private_networks` is set, a fetch refuses any
//! address that is not publicly routable: loopback, unspecified, private
//! (RFC 1918, unique-local), shared (100.64/10), link-local (169.254/16,
//! fe80::/10, so cloud metadata services), multicast and broadcast, IPv4
//! inside IPv6 included. Names are checked after DNS resolution, by the
//! client's resolver, so every connection (the first and each redirect's)
//! goes only to addresses that passed; literal addresses, which skip the
//! resolver, are checked before the request and in the redirect policy,
//! which also caps redirects at `fetch.max_redirects`.

pub mod robots;

use crate::kb_config::FetchConfig;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Why a URL may not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("only http and https URLs can be fetched")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("{0} is not a public address; fetching it is refused")]
    Private(String),
    #[error("{0} is a link-local or cloud-metadata address; fetching it is refused")]
    Metadata(String),
}

/// Whether `ip` is link-local (169.254/16, fe80::/10) or another address
/// where clouds serve instance metadata and credentials (AWS's IPv6
/// `fd00:ec2::254`, Alibaba's `100.100.100.200`), IPv4 inside IPv6
/// included. Refused for upstream URLs whatever the configuration.
pub fn is_metadata(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_metadata_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_metadata_v4(v4);
            }
            if is_v4_compatible(v6) {
                let [.., a, b, c, d] = v6.octets();
                return is_metadata_v4(Ipv4Addr::new(a, b, c, d));
            }
            let s = v6.segments();
            (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || v6 == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)
                || (s[0] == 0x0064 && s[1] == 0xff9b && {
                    let [.., a, b, c, d] = v6.octets();
                    is_metadata_v4(Ipv4Addr::new(a, b, c, d))
                })
        }
    }
}

fn is_metadata_v4(ip: Ipv4Addr) -> bool {
    ip.is_link_local() || ip == Ipv4Addr::new(100, 100, 100, 200)
}

/// Whether an upstream URL may reach `ip`: never a metadata address;
/// a non-public one only when `allow_private`.
pub fn allowed(ip: IpAddr, allow_private: bool) -> bool {
    !is_metadata(ip) && (allow_private || is_public(ip))
}

/// Whether `ip` is publicly routable.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || (first == 0x0064 && v6.segments()[1] == 0xff9b) // NAT64 of any v4
                || is_v4_compatible(v6))
        }
    }
}

fn is_v4_compatible(v6: Ipv6Addr) -> bool {
    v6.segments()[..6].iter().all(|s| *s == 0)
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240)
}

/// Checks a URL's scheme and, when its host is a literal address, the
/// address (names are checked by the resolver).
pub fn check_url(url: &reqwest::Url, allow_private: bool) -> Result<(), GuardError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(GuardError::Scheme);
    }
    let literal = match url.host() {
        None => return Err(GuardError::NoHost),
        Some(url::Host::Domain(_)) => None,
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
    };
    match literal {
        Some(ip) if is_metadata(ip) => Err(GuardError::Metadata(ip.to_string())),
        Some(ip) if !allow_private && !is_public(ip) => Err(GuardError::Private(ip.to_string())),
        _ => Ok(()),
    }
}

/// A resolver that drops non-public addresses (unless allowed) and fails
/// when none is left. It serves both HTTP clients that fetch for sources:
/// reqwest's (web pages) and object_store's (S3 endpoints), so the address
/// a connection goes to is the one that was checked: a name cannot resolve
/// to a public address for a check and to an internal one for the request.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

type DnsError = Box<dyn std::error::Error + Send + Sync>;

impl GuardedResolver {
    /// The addresses of `host` that may be connected to.
    async fn addresses(self, host: String) -> Result<Vec<IpAddr>, DnsError> {
        let resolved: Vec<IpAddr> = tokio::net::lookup_host((host.as_str(), 0))
            .await?
            .map(|a| a.ip())
            .collect();
        let kept: Vec<IpAddr> = resolved
            .iter()
            .copied()
            .filter(|ip| allowed(*ip, self.allow_private))
            .collect();
        if kept.is_empty() {
            return Err(Box::new(match resolved.first() {
                Some(ip) if is_metadata(*ip) => GuardError::Metadata(format!("{host} ({ip})")),
                Some(ip) => GuardError::Private(format!("{host} ({ip})")),
                None => GuardError::Private(host),
            }));
        }
        Ok(kept)
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let addresses = self.clone().addresses(name.as_str().to_string());
        Box::pin(async move {
            // Port 0: reqwest puts the URL's port in.
            let addrs = addresses
                .await?
                .into_iter()
                .map(|ip| SocketAddr::new(ip, 0));
            Ok(Box::new(addrs) as reqwest::dns::Addrs)
        })
    }
}

impl object_store::client::DnsResolver for GuardedResolver {
    fn resolve(&self, host: &str) -> object_store::client::DnsFuture {
        let addresses = self.clone().addresses(host.to_string());
        Box::pin(async move {
            // Shuffled, as object_store's own resolver does by default, so
            // connections spread over a bucket endpoint's addresses.
            let mut kept = addresses.await?;
            rand::seq::SliceRandom::shuffle(kept.as_mut_slice(), &mut rand::rng());
            Ok(kept)
        })
    }
}

/// The builder of every client for upstream URLs: the guard on every
/// connection (names through [`GuardedResolver`]) and redirect (literal
/// addresses through [`check_url`]), at most `max_redirects` redirects
/// (0: none followed). Call [`check_url`] on the first URL too: a literal
/// address skips the resolver.
pub fn guarded_builder(allow_private: bool, max_redirects: usize) -> reqwest::ClientBuilder {
    let policy = if max_redirects == 0 {
        reqwest::redirect::Policy::none()
    } else {
        reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max_redirects {
                attempt.error(format!("more than {max_redirects} redirects"))
            } else if let Err(e) = check_url(attempt.url(), allow_private) {
                attempt.error(e)
            } else {
                attempt.follow()
            }
        })
    };
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .redirect(policy)
}

/// The builder of every client for operator URLs (providers, embedders,
/// transcription, configured MCP servers): any address the operator
/// configured, at most 5 redirects and none to a literal link-local or
/// metadata address (a compromised upstream cannot bounce the server
/// there). Bodies are still read with [`read_limited`].
pub fn operator_client() -> reqwest::ClientBuilder {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() > 5 {
            attempt.error("more than 5 redirects")
        } else if let Err(e @ (GuardError::Metadata(_) | GuardError::Scheme)) =
            check_url(attempt.url(), true)
        {
            attempt.error(e)
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder().redirect(policy)
}

/// Why an answer's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the answer is larger than the limit of {0} bytes")]
    TooLarge(u64),
    #[error("reading the answer failed: {0}")]
    Read(String),
}

/// Largest answer read for a small JSON or XML answer (OAuth endpoints,
/// S3 listings, error bodies): 1 MiB.
pub const MAX_ANSWER_BYTES: u64 = 1 << 20;

/// An answer's `Retry-After` in seconds (the HTTP-date form is not
/// honoured: peers that throttle send seconds).
pub fn retry_after(headers: &http::HeaderMap) -> Option<std::time::Duration> {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_secs)
}

/// Reads `response`'s body, at most `max` bytes: a declared
/// `Content-Length` above it is refused before reading, and the read stops
/// (and fails) as soon as more arrived, so an endless answer costs at most
/// `max` bytes of memory.
pub async fn read_limited(
    response: reqwest::Response,
    max: u64,
) -> Result<bytes::Bytes, BodyError> {
    use futures::StreamExt;
    if response.content_length().is_some_and(|n| n > max) {
        return Err(BodyError::TooLarge(max));
    }
    let mut body = bytes::BytesMut::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Read(crate::error::chain(&e)))?;
        if (body.len() + chunk.len()) as u64 > max {
            return Err(BodyError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// An HTTP client for source fetches: [`guarded_builder`] with the
/// configured redirects, timeout and user agent. Call [`check_url`] on the
/// first URL too.
pub fn client(config: &FetchConfig) -> reqwest::Result<reqwest::Client> {
    guarded_builder(config.allow_private_networks, config.max_redirects)
        .timeout(Duration::from_secs(config.timeout_secs))
        .connect_timeout(Duration::from_secs(config.timeout_secs.min(10)))
        .user_agent(config.user_agent.clone())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn classifies_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "172.32.0.1"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn checks_literal_urls() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert_eq!(
            check_url(&url("http://169.254.169.254/latest"), false),
            Err(GuardError::Metadata("169.254.169.254".into()))
        );
        // Link-local and metadata addresses stay refused when private
        // networks are allowed.
        for metadata in [
            "http://169.254.169.254/latest",
            "http://169.254.1.2:8080/",
            "http://[fe80::1]/",
            "http://[fd00:ec2::254]/",
            "http://100.100.100.200/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            assert!(
                matches!(
                    check_url(&url(metadata), true),
                    Err(GuardError::Metadata(_))
                ),
                "{metadata}"
            );
        }
        assert!(check_url(&url("http://10.0.0.1/"), true).is_ok());
        assert!(check_url(&url("http://[::1]:8080/"), false).is_err());
        assert!(check_url(&url("http://[::1]:8080/"), true).is_ok());
        assert_eq!(
            check_url(&url("file:///etc/passwd"), true),
            Err(GuardError::Scheme)
        );
        assert!(check_url(&url("https://example.com/"), false).is_ok());
    }

    /// A one-shot HTTP server on 127.0.0.1 answering every request with
    /// `response`.
    async fn serve(response: String) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let response = response.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket.write_all(response.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        addr
    }

    fn config(allow_private: bool) -> FetchConfig {
        FetchConfig {
            allow_private_networks: allow_private,
            max_redirects: 2,
            timeout_secs: 5,
            ..FetchConfig::default()
        }
    }

    /// An answer larger than the limit, declared or endless, fails with
    /// the limit named; one within it is read whole.
    #[tokio::test]
    async fn bodies_are_read_up_to_the_limit() {
        let declared = serve(
            "HTTP/1.1 200 OK\r\ncontent-length: 10737418240\r\nconnection: close\r\n\r\nxx"
                .to_string(),
        )
        .await;
        let endless = serve(format!(
            "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{}",
            "a".repeat(64 * 1024)
        ))
        .await;
        let http = client(&config(true)).unwrap();
        let get = |addr: SocketAddr| http.get(format!("http://{addr}/")).send();
        let err = read_limited(get(declared).await.unwrap(), 1024)
            .await
            .unwrap_err();
        assert!(matches!(err, BodyError::TooLarge(1024)), "{err:?}");
        let err = read_limited(get(endless).await.unwrap(), 1024)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the answer is larger than the limit of 1024 bytes"
        );
        let body = read_limited(get(endless).await.unwrap(), 1 << 20)
            .await
            .unwrap();
        assert_eq!(body.len(), 64 * 1024);
    }

    #[tokio::test]
    async fn refuses_loopback_by_name_and_caps_redirects() {
        let page = serve(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello".to_string(),
        )
        .await;
        // Allowed (as tests run): the page is fetched by name.
        let allowed = client(&config(true)).unwrap();
        let by_name = format!("http://localhost:{}/", page.port());
        let body = allowed
            .get(&by_name)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(body, "hello");

        // Refused: the name resolves to loopback only.
        let guarded = client(&config(false)).unwrap();
        let err = guarded.get(&by_name).send().await.unwrap_err();
        assert!(
            crate::error::chain(&err).contains("not a public address"),
            "{err:?}"
        );

        // Redirect loops stop at the limit.
        let looping = serve(
            "HTTP/1.1 302 Found\r\nlocation: /again\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                .to_string(),
        )
        .await;
        let err = allowed
            .get(format!("http://localhost:{}/", looping.port()))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_redirect(), "{err:?}");
    }
}
