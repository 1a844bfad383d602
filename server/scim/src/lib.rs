//! SCIM 2.0 (RFC 7643, RFC 7644) without I/O: what the server publishes
//! about itself (schemas, resource types, service provider config), the
//! validation of a resource a client sends, filters (compiled to a
//! PostgreSQL `jsonpath` predicate over the stored resource, and evaluated
//! in memory for PATCH paths), PATCH operations and the `attributes` /
//! `excludedAttributes` projection.
//!
//! The server (workspace-server) stores each resource as one JSON document
//! and maps a few attributes to its own accounts; everything here is pure.

pub mod error;
pub mod filter;
pub mod patch;
pub mod project;
pub mod schema;

pub use error::{
    ENTERPRISE_USER_URN, ERROR_URN, GROUP_URN, LIST_RESPONSE_URN, PATCH_OP_URN, SEARCH_REQUEST_URN,
    ScimError, USER_URN,
};
pub use schema::Kind;
