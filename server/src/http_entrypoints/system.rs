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

/// The page of `/docs`: Redoc rendering `/openapi.json`.
const DOCS_PAGE: &str = "<!doctype html>\n<html lang=\"en\">\n<head>\n\
<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>Workspace API reference</title>\n</head>\n<body>\n\
<redoc spec-url=\"/openapi.json\"></redoc>\n\
<script type=\"module\" src=\"/docs/redoc.standalone.js\"></script>\n</body>\n</html>\n";

/// `redoc` 3.0.1's standalone bundle (server/assets/README.md).
const REDOC_SCRIPT: &[u8] = include_bytes!("../../assets/redoc.standalone.js");

fn asset(
    content_type: &str,
    body: impl Into<dropshot::Body>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CACHE_CONTROL, "public, max-age=3600")
        .body(body.into())
        .map_err(|e| HttpError::for_internal_error(e.to_string()))
}

pub async fn docs_page(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    asset("text/html; charset=utf-8", DOCS_PAGE)
}

pub async fn docs_script(_rqctx: Ctx) -> Result<http::Response<dropshot::Body>, HttpError> {
    asset(
        "text/javascript; charset=utf-8",
        bytes::Bytes::from_static(REDOC_SCRIPT),
    )
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
