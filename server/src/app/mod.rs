//! Business rules, one module per resource. Handlers call into these after
//! authenticating; these call the datastore.

pub mod auth;
pub mod conversations;
pub mod models;
pub mod users;
