//! Business rules, one module per resource. Handlers call into these after
//! authenticating; these call the datastore.

pub mod auth;
pub mod invitations;
pub mod users;
