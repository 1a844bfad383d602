//! System area: liveness and readiness.

use super::Ctx;
use crate::error::Error;
use dropshot::{HttpError, HttpResponseOk};
use workspace_api::system::HealthStatus;

fn ok() -> HttpResponseOk<HealthStatus> {
    HttpResponseOk(HealthStatus {
        status: "ok".to_string(),
    })
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
