//! The model catalog.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::error::Error;
use crate::providers::ModelEntry;
use uuid::Uuid;
use workspace_api::conversations::Model;

/// The models this server offers to the caller's organization, sorted by
/// name (every organization may use every configured model).
pub fn list(cx: &ServerContext, _access: &OrgAccess) -> Vec<Model> {
    cx.models
        .list()
        .iter()
        .map(|m| Model {
            id: m.id,
            name: m.name.clone(),
            provider: m.provider.clone(),
        })
        .collect()
}

/// The model of a request: the given one, else the first offered.
pub(crate) fn pick(cx: &ServerContext, id: Option<Uuid>) -> Result<ModelEntry, Error> {
    let model = match id {
        Some(id) => cx.models.get(id),
        None => cx.models.list().first(),
    };
    model.cloned().ok_or_else(|| {
        Error::invalid(
            "model_unavailable",
            "no such model is offered (see GET /api/models/list)",
        )
    })
}
