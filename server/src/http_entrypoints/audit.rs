//! The audit log (issue #36): its organization's admins (a role of the
//! admin level with `audit:read`) and system administrators read, export
//! and verify it (`ServerContext::authorize_audit_reader`).

use super::Ctx;
use crate::app;
use dropshot::{HttpError, HttpResponseOk};
use workspace_api::audit::{
    AuditExportQuery, AuditListQuery, AuditPage, AuditVerification, AuditVerifyQuery,
};
use workspace_api::extract::QueryParams;

pub async fn list(
    rqctx: Ctx,
    query: QueryParams<AuditListQuery>,
) -> Result<HttpResponseOk<AuditPage>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let reader = cx.authorize_audit_reader(&rqctx, query.org_id).await?;
    Ok(HttpResponseOk(app::audit::list(cx, &reader, query).await?))
}

pub async fn export(
    rqctx: Ctx,
    query: QueryParams<AuditExportQuery>,
) -> Result<http::Response<dropshot::Body>, HttpError> {
    let cx = rqctx.context();
    let query = query.into_inner();
    let reader = cx.authorize_audit_reader(&rqctx, query.org_id).await?;
    Ok(app::audit::export(cx, reader, query).await?)
}

pub async fn verify(
    rqctx: Ctx,
    query: QueryParams<AuditVerifyQuery>,
) -> Result<HttpResponseOk<AuditVerification>, HttpError> {
    let cx = rqctx.context();
    let org_id = query.into_inner().org_id;
    let reader = cx.authorize_audit_reader(&rqctx, org_id).await?;
    Ok(HttpResponseOk(app::audit::verify(cx, &reader).await?))
}
