//! HTTP connections and bodies, the Prometheus endpoint, and the leases
//! of streamed answers.

use anyhow::Result;
use serde::Deserialize;
use std::net::SocketAddr;

/// Leases of streamed answers (chat and conversations): the instance that
/// generates an answer renews its lease (a heartbeat on the message row);
/// every instance sweeps now and then, and at start-up, for answers whose
/// lease expired (their instance died) and closes them as `failed`
/// (`answer_interrupted`), keeping their text and ending their stream.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamsConfig {
    /// How often the generating instance renews its answers' leases, in
    /// seconds.
    pub heartbeat_secs: u64,
    /// An answer whose lease was not renewed for this long is closed, in
    /// seconds (at least twice `heartbeat_secs`).
    pub lease_secs: u64,
    /// How often every instance sweeps for expired leases, in seconds.
    pub sweep_interval_secs: u64,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        StreamsConfig {
            heartbeat_secs: 5,
            lease_secs: 30,
            sweep_interval_secs: 10,
        }
    }
}

/// Limits of the HTTP server itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Longest time to receive a request body once its headers arrived, in
    /// seconds (then `408 request_timeout`).
    pub body_read_timeout_secs: u64,
    /// Most client connections open at once (at the limit, new connections
    /// wait in the kernel's backlog until one closes). Unset: 16384, or the
    /// process's open-file limit less 256 when that is lower (the server
    /// raises its soft open-file limit to the hard one at start).
    pub max_connections: Option<usize>,
    /// A new connection that sends nothing for this long is closed, in
    /// seconds.
    pub first_byte_timeout_secs: u64,
    /// Request headers must arrive within this time once a request began,
    /// and an idle keep-alive connection is closed after it, in seconds.
    pub header_read_timeout_secs: u64,
    /// The reverse proxies and load balancers in front of the server
    /// (addresses or CIDR ranges). A request from one of them is the
    /// client's found in `X-Forwarded-For`: its rightmost address that is
    /// not itself a trusted proxy. Empty: the TCP peer is the client and
    /// `X-Forwarded-For` is ignored (anyone could write it). The client
    /// address keys the per-address rate limits.
    #[serde(deserialize_with = "deserialize_nets")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// At shutdown (SIGTERM, Ctrl-C), how long in-flight requests, the
    /// answers this instance generates and its knowledge-base jobs may take
    /// to finish, in seconds. WebSockets close at once (1001) and workers
    /// claim no new job. Past it, the instance's unfinished answers are
    /// closed `failed` (`answer_interrupted`, text kept, a last `error`
    /// event ends their streams), its jobs go back to the queue (due at
    /// once, the attempt not counted) and it stops. Keep it below the
    /// orchestrator's kill timeout (Kubernetes: 30 s by default).
    pub shutdown_grace_secs: u64,
    /// At shutdown, how long the instance keeps serving after it reports
    /// not ready (`/readyz` answers 503 at once), in seconds (fractions
    /// allowed): long enough for a load balancer's health checks to take
    /// it out of rotation (at least its check interval times its failure
    /// count, plus one check's timeout). Meanwhile every HTTP/1 response
    /// carries `Connection: close`, so clients and the balancer's pooled
    /// connections move to other instances request by request. Then it
    /// stops accepting, closes idle connections and WebSockets (1001),
    /// and `shutdown_grace_secs` begins. `0`: no window (a single
    /// instance without a balancer).
    #[serde(deserialize_with = "deserialize_drain_secs")]
    pub drain_secs: f64,
    /// Origins (`scheme://host[:port]`, exact) whose pages may call the API
    /// from a browser (CORS). Empty: same-origin only. `*` is refused: the
    /// API is called with credentials (bearer tokens), and a wildcard would
    /// let every web page read the answers of a user's requests. The
    /// deployment endpoint keeps its per-deployment origins.
    #[serde(deserialize_with = "deserialize_origins")]
    pub cors_allowed_origins: Vec<String>,
    /// How long a browser may cache a preflight answer, in seconds.
    pub cors_max_age_secs: u64,
    /// Whether every response carries `Server-Timing: app;dur=<ms>`, the
    /// time the server took to its head (default on; a page on an allowed
    /// origin may read it).
    pub server_timing: bool,
}

/// The longest drain window accepted, in seconds.
const MAX_DRAIN_SECS: f64 = 600.0;

/// A number of seconds from 0 to [`MAX_DRAIN_SECS`].
fn deserialize_drain_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let secs = f64::deserialize(d)?;
    if !(0.0..=MAX_DRAIN_SECS).contains(&secs) {
        return Err(serde::de::Error::custom(format!(
            "http.drain_secs: {secs} is not between 0 and {MAX_DRAIN_SECS} seconds"
        )));
    }
    Ok(secs)
}

/// Exact origins: `http(s)://host[:port]`, nothing after; lowercased.
fn deserialize_origins<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|o| parse_origin(o).map_err(serde::de::Error::custom))
        .collect()
}

/// An origin as browsers send it in `Origin`, lowercased.
pub fn parse_origin(origin: &str) -> Result<String, String> {
    if origin.trim() == "*" {
        return Err(
            "http.cors_allowed_origins: \"*\" is refused: list the exact origins \
             of your frontends (the API is called with credentials, and a wildcard would \
             let any web page read a user's answers)"
                .to_string(),
        );
    }
    let url = reqwest::Url::parse(origin)
        .map_err(|e| format!("http.cors_allowed_origins: {origin:?} is not an origin ({e})"))?;
    let bare = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && url.path() == "/"
        && !origin.trim_end().ends_with('/');
    if !bare {
        return Err(format!(
            "http.cors_allowed_origins: {origin:?} is not an origin: write scheme://host[:port] \
             with nothing after (for example https://app.example.com)"
        ));
    }
    Ok(url.origin().ascii_serialization())
}

/// Addresses or CIDR ranges (`10.0.0.0/8`, `::1`).
fn deserialize_nets<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ipnet::IpNet>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| {
            s.parse::<ipnet::IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "trusted proxy {s:?} is not an address or a CIDR range"
                    ))
                })
        })
        .collect()
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            body_read_timeout_secs: 30,
            max_connections: None,
            first_byte_timeout_secs: 10,
            header_read_timeout_secs: 30,
            trusted_proxies: Vec::new(),
            shutdown_grace_secs: 20,
            drain_secs: 5.0,
            cors_allowed_origins: Vec::new(),
            cors_max_age_secs: 600,
            server_timing: true,
        }
    }
}

impl HttpConfig {
    /// Request headers a cross-origin page may send.
    pub const CORS_ALLOWED_HEADERS: &[&str] =
        &["accept", "authorization", "content-type", "last-event-id"];
    /// Response headers a cross-origin page may read (besides the
    /// CORS-safelisted ones): a retry's delay, the request id of an error
    /// report, a download's file name, the answer's length, the server's
    /// time.
    pub const CORS_EXPOSED_HEADERS: &[&str] = &[
        "retry-after",
        "x-request-id",
        "content-disposition",
        "content-length",
        "server-timing",
    ];

    /// The drain window of a shutdown (see `drain_secs`).
    pub fn drain(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.drain_secs.clamp(0.0, MAX_DRAIN_SECS))
            .unwrap_or_default()
    }

    /// The CORS policy of every route but the deployment endpoint's (which
    /// answers with its deployment's origins).
    pub fn cors_policy(&self) -> dropshot::CorsPolicy {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        dropshot::CorsPolicy {
            allowed_origins: self.cors_allowed_origins.clone(),
            allowed_headers: list(Self::CORS_ALLOWED_HEADERS),
            exposed_headers: list(Self::CORS_EXPOSED_HEADERS),
            max_age_secs: self.cors_max_age_secs,
            excluded_path_prefixes: vec![workspace_api::deployments::V1_PREFIX.to_string()],
        }
    }

    /// The client of a request from `peer` (see `trusted_proxies`):
    /// `forwarded_for` are the request's `X-Forwarded-For` values in
    /// order. Walking the chain from the right, every hop added by a
    /// trusted proxy is believed; the first untrusted address is the
    /// client. An entry that is not an address (or `address:port`) stops
    /// the walk at the last hop believed.
    pub fn client_address<'a>(
        &self,
        peer: std::net::IpAddr,
        forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    ) -> std::net::IpAddr {
        let trusted = |a: std::net::IpAddr| {
            let a = a.to_canonical();
            self.trusted_proxies.iter().any(|n| n.contains(&a))
        };
        let mut client = peer.to_canonical();
        if !trusted(client) {
            return client;
        }
        for value in forwarded_for.rev() {
            for hop in value.rsplit(',') {
                let hop = hop.trim();
                let parsed = hop
                    .parse::<std::net::IpAddr>()
                    .or_else(|_| hop.parse::<std::net::SocketAddr>().map(|s| s.ip()));
                match parsed {
                    Ok(addr) => {
                        client = addr.to_canonical();
                        if !trusted(client) {
                            return client;
                        }
                    }
                    Err(_) => return client,
                }
            }
        }
        client
    }

    /// The connection cap: the configured one, else 16384 or the open-file
    /// limit less 256 (room for database connections and files).
    pub fn max_connections(&self) -> usize {
        if let Some(n) = self.max_connections {
            return n.max(1);
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
        } else {
            usize::MAX
        };
        16384.min(files.saturating_sub(256)).max(16)
    }
}

/// Raises this process's soft open-file limit to its hard limit (one file
/// per client connection: 10,000 concurrent streams need more than the
/// usual soft limit of 1024); returns the limits before and after, `None`
/// when they could not be read or changed.
pub fn raise_open_file_limit() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the struct it is given; raising the soft
        // limit up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return None;
        }
    }
    Some((before, limit.rlim_cur))
}

/// The Prometheus text endpoint `GET /metrics`, on a listener of its own.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where `/metrics` is served. Unset (the default): not served.
    /// Keep it on a private address (e.g. `127.0.0.1:9090`).
    pub bind_address: Option<SocketAddr>,
    /// When set, `/metrics` requires `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

impl std::fmt::Debug for MetricsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsConfig")
            .field("bind_address", &self.bind_address)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

#[cfg(test)]
mod origin_tests {
    use super::parse_origin;

    #[test]
    fn origins_are_exact_and_never_a_wildcard() {
        assert_eq!(
            parse_origin("https://App.Example.com").unwrap(),
            "https://app.example.com"
        );
        assert_eq!(
            parse_origin("http://localhost:5173").unwrap(),
            "http://localhost:5173"
        );
        // A default port is the origin without it (as browsers send it).
        assert_eq!(
            parse_origin("https://app.example.com:443").unwrap(),
            "https://app.example.com"
        );
        assert!(parse_origin("*").unwrap_err().contains("refused"));
        for bad in [
            "https://app.example.com/",
            "https://app.example.com/app",
            "https://app.example.com?x=1",
            "app.example.com",
            "ftp://app.example.com",
            "https://user@app.example.com",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod client_address_tests {
    use super::HttpConfig;
    use std::net::IpAddr;

    fn config(trusted: &[&str]) -> HttpConfig {
        HttpConfig {
            trusted_proxies: trusted.iter().map(|t| t.parse().unwrap()).collect(),
            ..HttpConfig::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let c = config(&[]);
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["203.0.113.7"].into_iter()),
            ip("10.0.0.5")
        );
    }

    #[test]
    fn a_trusted_proxy_forwards_the_rightmost_untrusted_hop() {
        let c = config(&["10.0.0.0/8", "192.0.2.1/32"]);
        // The load balancer (10.0.0.5) forwards for a client.
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["203.0.113.7"].into_iter()),
            ip("203.0.113.7")
        );
        // A client cannot pick its address by prepending one: the hops a
        // trusted proxy did not add are not believed.
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["198.51.100.1, 203.0.113.7"].into_iter()),
            ip("203.0.113.7")
        );
        // Two proxies, in two headers; ports and IPv4-mapped addresses.
        assert_eq!(
            c.client_address(
                ip("::ffff:10.0.0.5"),
                ["203.0.113.7:5123", "192.0.2.1"].into_iter()
            ),
            ip("203.0.113.7")
        );
        // An untrusted peer's header is ignored.
        assert_eq!(
            c.client_address(ip("198.51.100.9"), ["203.0.113.7"].into_iter()),
            ip("198.51.100.9")
        );
        // Garbage stops at the last hop believed; no header: the proxy.
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["nonsense"].into_iter()),
            ip("10.0.0.5")
        );
        assert_eq!(
            c.client_address(ip("10.0.0.5"), ["203.0.113.7", ""].into_iter()),
            ip("10.0.0.5")
        );
        assert_eq!(
            c.client_address(ip("10.0.0.5"), std::iter::empty()),
            ip("10.0.0.5")
        );
    }
}

#[cfg(test)]
mod drain_tests {
    use super::HttpConfig;

    #[test]
    fn the_drain_window_is_seconds_from_zero_to_ten_minutes() {
        let parse = |s: &str| toml::from_str::<HttpConfig>(s);
        assert_eq!(parse("drain_secs = 5").unwrap().drain().as_millis(), 5000);
        assert_eq!(parse("drain_secs = 1.2").unwrap().drain().as_millis(), 1200);
        assert!(parse("drain_secs = 0").unwrap().drain().is_zero());
        assert_eq!(HttpConfig::default().drain().as_secs(), 5);
        for bad in ["drain_secs = -1", "drain_secs = 601", "drain_secs = nan"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("drain_secs"), "{bad}: {e}");
        }
    }
}
