//! Business rules, one module per resource. Handlers call into these after
//! authenticating and authorizing; these call the datastore.

pub mod agents;
pub mod answer;
pub mod audit;
pub mod auth;
pub mod chat;
pub mod chat_folders;
pub mod chat_search;
pub mod chat_shares;
pub mod chat_transfer;
pub mod conversations;
pub mod deletion;
pub mod deployments;
pub mod doc_stream;
pub mod feedback;
pub mod files;
pub mod invitations;
pub mod jobs;
pub mod kb;
pub mod kb_ingest;
pub mod lifecycle;
pub mod mcp;
pub mod mcp_gateway;
pub mod mcp_playground;
pub mod models;
pub mod orgs;
pub mod passwords;
pub mod rate_limits;
pub mod roles;
pub mod scim;
pub mod service_accounts;
pub mod sessions;
pub mod sso;
pub mod streams;
pub mod tokens;
pub mod tools;
pub mod usage;
pub mod users;
pub mod webhooks;

use crate::db::datastore::Page;
use crate::error::Error;
use workspace_api::orgs::{LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT};

/// The page of a list operation: `limit` 1 to [`LIST_MAX_LIMIT`] (default
/// [`LIST_DEFAULT_LIMIT`]), `offset` default 0.
pub fn page(limit: Option<u32>, offset: Option<u32>) -> Result<Page, Error> {
    let limit = limit.unwrap_or(LIST_DEFAULT_LIMIT);
    if !(1..=LIST_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {LIST_MAX_LIMIT}"),
        ));
    }
    Ok(Page {
        limit: i64::from(limit),
        offset: i64::from(offset.unwrap_or(0)),
    })
}

/// Longest chat or conversation title, in characters (the contract's
/// `maxLength`).
pub const TITLE_MAX_CHARS: usize = 200;
/// Longest chat or conversation message, in characters.
pub const MESSAGE_MAX_CHARS: usize = 100_000;

/// What each area does about its answers closed `failed` without their
/// generator (see [`streams::OnClosed`]): the chat area tells the owners'
/// WebSocket clients; conversations' clients learn it from the stream
/// itself.
pub fn on_answers_closed(
    datastore: crate::db::Datastore,
    kind: crate::db::datastore::streams::StreamKind,
    ids: Vec<uuid::Uuid>,
    log: slog::Logger,
) -> futures::future::BoxFuture<'static, ()> {
    use crate::db::datastore::streams::StreamKind;
    Box::pin(async move {
        match kind {
            StreamKind::Chat => chat::live::announce_swept(&datastore, &ids, &log).await,
            StreamKind::Conversation => {}
        }
    })
}
