//! The state shared by every request handler.

use crate::authn::{Actor, TokenKeys};
use crate::config::Config;
use crate::db::Datastore;
use crate::error::Error;

pub struct ServerContext {
    pub config: Config,
    pub datastore: Datastore,
    pub tokens: TokenKeys,
    pub log: slog::Logger,
}

impl ServerContext {
    /// Authenticates the request (its bearer token).
    pub async fn authenticate(&self, headers: &http::HeaderMap) -> Result<Actor, Error> {
        self.tokens.authenticate(headers, &self.datastore).await
    }
}
