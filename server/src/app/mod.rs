//! Business rules, one module per resource. Handlers call into these after
//! authenticating and authorizing; these call the datastore.

pub mod auth;
pub mod invitations;
pub mod orgs;
pub mod roles;
pub mod users;
