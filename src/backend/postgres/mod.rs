//! The PostgreSQL backend: everything rowgate does that is specific to PostgreSQL — its SQL
//! dialect (`sql`), a pool of connections that remember their prepared statements and session
//! settings (`pool`, `settings`, `conn`), the catalog introspection and reloads (`introspect`,
//! `dependencies`, `reload`), and the response cache's change feed (`changes`).
//!
//! How a request reaches PostgreSQL, and why: a GET needs its role and `request.*` settings in
//! force before its query starts (RLS and grants are checked then). Instead of PostgREST's
//! BEGIN / set_config / query / COMMIT, each connection remembers the session-level settings it
//! holds; a request sends one `SELECT set_config(..., false), ...` for the settings that differ
//! (role, search_path, claims, `request.*`, read-only mode), pipelined ahead of its prepared
//! query in the same round trip, and nothing else. Single-statement reads need no explicit
//! transaction: the statement's implicit transaction is read-only through
//! `default_transaction_read_only`. If the settings statement fails, the query's result is
//! discarded and the connection forgets what it holds, so the next request sets everything.

pub mod changes;
mod conn;
pub mod dependencies;
pub mod introspect;
mod pool;
pub mod reload;
mod settings;
pub mod sql;
mod value;

pub use conn::{db_error, Pipelined, ReadResult, WriteResult};
pub use pool::{connect, Db, PgConn};
pub use settings::{SessionSettings, Setting};
pub use value::{RawValue, TextParam};
