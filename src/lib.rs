//! rowgate: a PostgREST-compatible REST API for PostgreSQL.
//!
//! A request flows through one stage per module: `http` (server, routing, errors to HTTP) →
//! `rowgate_request` (parsing, a crate of its own) → `plan` (names resolved against the
//! `schema` cache) → `sql` (statements) → `db` (pool, settings, execution) → `response`.
//! See ARCHITECTURE.md for the invariants each stage keeps.

pub mod accounts;
pub mod apikey;
pub mod auth;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod db;
pub mod error;
pub mod http;
pub mod plan;
pub mod response;
pub mod schema;
pub mod server;
pub mod sql;
