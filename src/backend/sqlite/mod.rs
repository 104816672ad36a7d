//! The SQLite backend: everything rowgate does that is specific to SQLite — its SQL dialect
//! (`sql`: the whole JSON body built by SQLite from a plan), the connections and the writer
//! thread (`db`), the catalog introspection (`introspect`), and the access rules that stand in
//! for roles and row-level security (`rules`).

pub mod db;
pub mod introspect;
pub mod rules;
pub mod sql;
