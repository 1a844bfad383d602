// Workspace patch (not in upstream dropshot 0.18.0): cross-origin resource
// sharing for every route, set with `ServerBuilder::cors`.

//! CORS (the Fetch standard's cross-origin protocol) for every route.
//!
//! A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`)
//! to a path whose route has no `OPTIONS` handler of its own is answered
//! here: `204` with the methods the router has for the path, the allowed
//! request headers and a `max-age`, when the origin is allowed and the
//! requested method is one of the path's; `403` with the usual JSON error
//! otherwise. Every other response to an allowed origin (errors included)
//! carries `Access-Control-Allow-Origin` (the origin itself, never `*`),
//! `Access-Control-Expose-Headers` and `Vary: Origin`. Paths under an
//! excluded prefix answer cross-origin requests themselves.

use http::HeaderMap;
use http::HeaderValue;
use http::Method;
use http::Response;
use http::StatusCode;
use http::header;

/// Which origins may call the server from a browser, and how.
#[derive(Clone, Debug, Default)]
pub struct CorsPolicy {
    /// Exact origins (`scheme://host[:port]`), compared byte for byte
    /// after ASCII lowercasing.
    pub allowed_origins: Vec<String>,
    /// Request headers a cross-origin request may send (lowercase).
    pub allowed_headers: Vec<String>,
    /// Response headers a cross-origin client may read.
    pub exposed_headers: Vec<String>,
    /// How long a browser may cache a preflight answer.
    pub max_age_secs: u64,
    /// Paths under these prefixes handle CORS themselves.
    pub excluded_path_prefixes: Vec<String>,
}

impl CorsPolicy {
    fn applies(&self, path: &str) -> bool {
        !self.allowed_origins.is_empty()
            && !self.excluded_path_prefixes.iter().any(|p| path.starts_with(p))
    }

    fn allowed<'a>(&self, origin: Option<&'a HeaderValue>) -> Option<&'a HeaderValue> {
        let origin = origin?;
        let text = origin.to_str().ok()?.to_ascii_lowercase();
        self.allowed_origins.iter().any(|o| *o == text).then_some(origin)
    }

    /// Whether this request is a preflight this policy answers.
    pub(crate) fn is_preflight(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> bool {
        method == Method::OPTIONS
            && self.applies(path)
            && headers.contains_key(header::ORIGIN)
            && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    }

    /// The answer to a preflight for a path whose route accepts `methods`
    /// (empty: no route).
    pub(crate) fn preflight(
        &self,
        headers: &HeaderMap,
        methods: &[String],
        request_id: &str,
    ) -> Response<crate::Body> {
        let requested = headers
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .and_then(|m| m.to_str().ok())
            .unwrap_or("");
        let Some(origin) = self.allowed(headers.get(header::ORIGIN)) else {
            return refusal(
                request_id,
                "origin_not_allowed",
                "this origin may not call the API (see http.cors_allowed_origins)",
            );
        };
        if !methods.iter().any(|m| m.eq_ignore_ascii_case(requested)) {
            return refusal(
                request_id,
                "method_not_allowed",
                "the route does not accept this method",
            );
        }
        let mut methods: Vec<&str> = methods.iter().map(String::as_str).collect();
        methods.sort_unstable();
        let mut response = Response::new(crate::Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        insert_list(h, header::ACCESS_CONTROL_ALLOW_METHODS, &methods);
        let allowed: Vec<&str> =
            self.allowed_headers.iter().map(String::as_str).collect();
        insert_list(h, header::ACCESS_CONTROL_ALLOW_HEADERS, &allowed);
        if let Ok(v) = HeaderValue::from_str(&self.max_age_secs.to_string()) {
            h.insert(header::ACCESS_CONTROL_MAX_AGE, v);
        }
        h.append(header::VARY, HeaderValue::from_static("origin"));
        response
    }

    /// Adds the CORS headers to a response for `origin` at `path`.
    pub(crate) fn decorate(
        &self,
        path: &str,
        origin: Option<&HeaderValue>,
        response: &mut Response<crate::Body>,
    ) {
        if !self.applies(path) {
            return;
        }
        let h = response.headers_mut();
        h.append(header::VARY, HeaderValue::from_static("origin"));
        if h.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
            return;
        }
        let Some(origin) = self.allowed(origin) else {
            return;
        };
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        // Workspace patch: the page may read `Server-Timing` (the Resource
        // Timing API's timing-allow check).
        h.insert("timing-allow-origin", origin.clone());
        let exposed: Vec<&str> =
            self.exposed_headers.iter().map(String::as_str).collect();
        insert_list(h, header::ACCESS_CONTROL_EXPOSE_HEADERS, &exposed);
    }
}

fn insert_list(h: &mut HeaderMap, name: header::HeaderName, values: &[&str]) {
    if values.is_empty() {
        return;
    }
    if let Ok(v) = HeaderValue::from_str(&values.join(", ")) {
        h.insert(name, v);
    }
}

/// A `403` with the JSON error body every other error carries.
fn refusal(
    request_id: &str,
    code: &str,
    message: &str,
) -> Response<crate::Body> {
    let body = serde_json::json!({
        "request_id": request_id,
        "error_code": code,
        "message": message,
    });
    let mut response = Response::new(crate::Body::from(body.to_string()));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("origin"));
    response
}
