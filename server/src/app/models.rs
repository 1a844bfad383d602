//! The model catalog.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
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
