//! Business rules, one module per resource. Handlers call into these after
//! authenticating and authorizing; these call the datastore.

pub mod agents;
pub mod auth;
pub mod conversations;
pub mod files;
pub mod invitations;
pub mod kb;
pub mod models;
pub mod orgs;
pub mod roles;
pub mod tools;
pub mod users;
