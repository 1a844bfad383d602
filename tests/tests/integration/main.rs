//! The one integration-test binary: every test starts a real server on a
//! fresh PostgreSQL database and talks to it through the generated client.

mod auth;
mod authz;
mod contract;
mod conversations;
mod database_tls;
mod hardening;
mod invitations;
mod orgs;
mod providers;
mod roles;
mod system;
mod tokens;
mod users_list;
