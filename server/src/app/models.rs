//! The model catalog.

use crate::context::ServerContext;
use workspace_api::conversations::Model;

/// The models this server offers, sorted by name.
pub fn list(cx: &ServerContext) -> Vec<Model> {
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
