//! The one integration-test binary: every test starts a real server on a
//! fresh PostgreSQL database and talks to it through the generated client.

mod auth;
mod contract;
mod conversations;
mod providers;
mod system;
mod tokens;
