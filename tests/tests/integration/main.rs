//! The one integration-test binary: every test starts a real server on a
//! fresh PostgreSQL database and talks to it through the generated client.

mod agents;
mod auth;
mod authz;
mod chat;
mod contract;
mod conversations;
mod cors;
mod database_tls;
mod deletion;
mod deployments;
mod embeddings;
mod hardening;
mod history;
mod hostile_files;
mod hostile_upstreams;
mod invitations;
mod kb;
mod kb_ingest;
mod keys;
mod mcp;
mod members;
mod orgs;
mod passwords;
mod pats;
mod providers;
mod roles;
mod rolling;
mod sdk;
mod sessions;
mod stream_writer;
mod system;
mod tokens;
mod tools;
mod users_list;
mod web;
