//! System area: liveness, readiness, the API reference and the e-mail
//! outbox.

use super::Ctx;
use crate::error::Error;
use dropshot::{HttpError, HttpResponseOk};
use workspace_api::system::HealthStatus;

fn ok() -> HttpResponseOk<HealthStatus> {
    HttpResponseOk(HealthStatus {
        status: "ok".to_string(),
    })
}

/// The page of `/docs`: Redoc rendering `/openapi.json`, telemetry off.
const DOCS_PAGE: &str = "<!doctype html>\n<html lang=\"en\">\n<head>\n\
<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>Workspace API reference</title>\n</head>\n<body>\n\
<redoc spec-url=\"/openapi.json\" disable-telemetry=\"true\"></redoc>\n\
<script type=\"module\" src=\"/docs/redoc.standalone.js\"></script>\n</body>\n</html>\n";

/// What `/docs` may load: this server only. A self-hosted service calls
/// no one: should a future bundle reach for a CDN or a collector again,
/// the browser refuses before anything leaves the machine. (Redoc styles
/// its components with inline `<style>`s and runs its search in a worker
/// made from a `blob:` URL.)
const DOCS_POLICY: &str = "default-src 'self'; script-src 'self'; \
style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; \
form-action 'none'; frame-ancestors 'none'";

/// `redoc` 3.0.1's standalone bundle (server/assets/README.md).
const REDOC_SCRIPT: &[u8] = include_bytes!("../../assets/redoc.standalone.js");

/// The addresses of the "API docs by Redocly" logo, which the bundle
/// always fetches from Redocly's CDN; served as [`LOCAL_LOGO`] instead.
const REMOTE_LOGOS: [&str; 2] = [
    "https://cdn.redoc.ly/redoc/logo-mini-full.svg",
    "https://cdn.redoc.ly/redoc/logo-mini.svg",
];

/// The attribution, drawn in place (a `data:` image: no request).
const LOCAL_LOGO: &str = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' \
width='44' height='16'%3E%3Ctext x='0' y='12' font-family='sans-serif' font-size='12' \
fill='%23555'%3ERedoc%3C/text%3E%3C/svg%3E";

/// The bundle as served: the vendored file with the remote logos drawn
/// in place.
fn redoc_script() -> bytes::Bytes {
    static SCRIPT: std::sync::OnceLock<bytes::Bytes> = std::sync::OnceLock::new();
    SCRIPT
        .get_or_init(|| {
            let mut script = String::from_utf8_lossy(REDOC_SCRIPT).into_owned();
            for logo in REMOTE_LOGOS {
                script = script.replace(logo, LOCAL_LOGO);
            }
            bytes::Bytes::from(script)
        })
        .clone()
}

fn asset(
    content_type: &str,
    body: impl Into<dropshot::Body>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CACHE_CONTROL, "public, max-age=3600")
        .header(http::header::CONTENT_SECURITY_POLICY, DOCS_POLICY)
        .body(body.into())
        .map_err(|e| HttpError::for_internal_error(e.to_string()))
}

pub async fn root_redirect(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    http::Response::builder()
        .status(http::StatusCode::FOUND)
        .header(http::header::LOCATION, "/docs")
        .body(dropshot::Body::empty())
        .map_err(|e| HttpError::for_internal_error(e.to_string()))
}

pub async fn docs_page(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    asset("text/html; charset=utf-8", DOCS_PAGE)
}

pub async fn docs_script(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    asset("text/javascript; charset=utf-8", redoc_script())
}

/// The invitation page (`examples/web/invite/`).
const INVITE_PAGE: &str = include_str!("../../../examples/web/invite/accept.html");
const INVITE_SCRIPT: &str = include_str!("../../../examples/web/invite/accept.js");

/// What a page whose URL carries a secret token (the invitation and the
/// password-reset pages) may do: load its script and call this server's
/// API, nothing else.
const TOKEN_PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; \
style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; base-uri 'none'; \
frame-ancestors 'none'";

/// A file of such a page: no referrer (the token is in the URL), no cache.
pub(super) fn token_page_asset(
    content_type: &str,
    body: &'static str,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CACHE_CONTROL, "no-store")
        .header(http::header::REFERRER_POLICY, "no-referrer")
        .header(http::header::CONTENT_SECURITY_POLICY, TOKEN_PAGE_POLICY)
        .body(body.into())
        .map_err(|e| HttpError::for_internal_error(e.to_string()))
}

pub async fn invite_accept_page(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    token_page_asset("text/html; charset=utf-8", INVITE_PAGE)
}

pub async fn invite_accept_script(
    _rqctx: Ctx,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    token_page_asset("text/javascript; charset=utf-8", INVITE_SCRIPT)
}

pub async fn openapi_json(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    static DOCUMENT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let document = DOCUMENT.get_or_init(|| {
        serde_json::to_vec_pretty(&workspace_api::openapi_document()).unwrap_or_default()
    });
    asset("application/json", document.clone())
}

pub async fn healthz(_rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
    Ok(ok())
}

pub async fn readyz(rqctx: Ctx) -> Result<HttpResponseOk<HealthStatus>, HttpError> {
    // A stopping instance reports not ready first, while it still serves
    // (`http.drain_secs`): the balancer takes it out of rotation before
    // it closes anything. `server_busy` is the documented 503 code that
    // says "try another time, or another instance".
    if rqctx.server.draining() {
        return Err(Error::Busy {
            code: "server_busy",
            message: "this instance is shutting down".to_string(),
            retry_after_secs: 1,
        }
        .into());
    }
    let cx = rqctx.context();
    cx.datastore.ping().await.map_err(|e| Error::Unavailable {
        code: "database_unavailable",
        message: e.to_string(),
    })?;
    Ok(ok())
}

pub async fn outbox(
    rqctx: Ctx,
    query: workspace_api::extract::QueryParams<workspace_api::system::OutboxQuery>,
) -> Result<HttpResponseOk<workspace_api::system::OutboxPage>, HttpError> {
    let cx = rqctx.context();
    let admin = cx.authorize_system_admin(&rqctx).await?;
    let limit = query
        .into_inner()
        .limit
        .unwrap_or(workspace_api::system::OUTBOX_DEFAULT_LIMIT);
    if !(1..=100).contains(&limit) {
        return Err(Error::invalid("invalid_pagination", "limit is 1 to 100").into());
    }
    let rows = cx
        .datastore
        .email_outbox_recent(&admin, i64::from(limit))
        .await?;
    Ok(HttpResponseOk(workspace_api::system::OutboxPage {
        emails: rows
            .into_iter()
            .map(|r| workspace_api::system::OutboxEmail {
                id: r.id,
                to_address: r.to_address,
                subject: r.subject,
                body_text: r.body_text,
                kind: r.kind,
                created_at: r.created_at,
            })
            .collect(),
    }))
}

pub async fn model_deployments(
    rqctx: Ctx,
) -> Result<HttpResponseOk<workspace_api::system::ModelDeploymentsList>, HttpError> {
    let cx = rqctx.context();
    let admin = cx.authorize_system_admin(&rqctx).await?;
    Ok(HttpResponseOk(
        crate::app::models::deployments(cx, &admin).await?,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_served_bundle_names_no_remote_logo() {
        let script = super::redoc_script();
        let script = String::from_utf8_lossy(&script);
        assert!(
            super::REMOTE_LOGOS
                .iter()
                .all(|logo| String::from_utf8_lossy(super::REDOC_SCRIPT).contains(logo))
        );
        assert!(
            !script.contains("cdn.redoc.ly"),
            "a remote logo is still served"
        );
        assert!(script.len() > 2_000_000, "the bundle is whole");
    }
}
