//! The dashboard on SQLite: its administrators and sessions in `_rowgate_admins` and
//! `_rowgate_admin_sessions` (hidden from the API by their prefix), its SQL console and table
//! editor run on the writer thread as writes are (realtime sees their rows, the response cache
//! is flushed), and the access rules file read and replaced.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use super::db::{sqlite_error, SqliteDb};
use crate::backend::push_ident;
use crate::dashboard::store::{Admin, AdminSession, AdminStore, SqlResult};
use crate::dashboard::tables::{self, Dialect, NewColumn, NewTable};
use crate::error::Error;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS _rowgate_admins (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE COLLATE NOCASE,
  password_hash TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS _rowgate_admin_sessions (
  token_hash TEXT PRIMARY KEY,
  admin_id TEXT NOT NULL REFERENCES _rowgate_admins (id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);";

/// The column types the table editor offers (declared types SQLite's affinity and rowgate's
/// schema cache both read).
pub const TYPES: [&str; 8] = ["text", "integer", "real", "numeric", "boolean", "json", "timestamp", "blob"];

/// The administrators' tables in an SQLite file.
pub struct SqliteAdmins {
    db: Arc<SqliteDb>,
}

impl SqliteAdmins {
    /// The store, its tables created if missing.
    pub fn open(db: Arc<SqliteDb>) -> Result<SqliteAdmins, String> {
        db.setup(SCHEMA).map_err(|e| format!("creating the dashboard's tables: {e}"))?;
        Ok(SqliteAdmins { db })
    }
}

/// Adds an administrator on a connection of its own (`rowgate admin create`), the tables made
/// if missing; `false` if one has that address. With `replace`, the one with that address gets
/// this password instead (`rowgate superuser upsert`).
pub fn add_directly(c: &Connection, admin: &Admin, replace: bool) -> rusqlite::Result<bool> {
    c.execute_batch(SCHEMA)?;
    match replace {
        true => upsert(c, admin),
        false => {
            let sql = "INSERT OR IGNORE INTO _rowgate_admins (id, email, password_hash) VALUES (?1, ?2, ?3)";
            Ok(c.execute(sql, [&admin.id, &admin.email, &admin.password_hash])? == 1)
        }
    }
}

/// Adds `admin`, or gives the one with that address its password and ends their sessions (a
/// password replaced is one that may have leaked); whether it was added.
fn upsert(c: &Connection, admin: &Admin) -> rusqlite::Result<bool> {
    let ended = c.execute(
        "DELETE FROM _rowgate_admin_sessions WHERE admin_id IN (SELECT id FROM _rowgate_admins WHERE email = ?1)",
        [&admin.email],
    );
    ended?;
    let replaced = c.execute(
        "UPDATE _rowgate_admins SET password_hash = ?2 WHERE email = ?1",
        [&admin.email, &admin.password_hash],
    )?;
    if replaced == 1 {
        return Ok(false);
    }
    let sql = "INSERT INTO _rowgate_admins (id, email, password_hash) VALUES (?1, ?2, ?3)";
    c.execute(sql, [&admin.id, &admin.email, &admin.password_hash])?;
    Ok(true)
}

impl AdminStore for SqliteAdmins {
    fn count(&self) -> BoxFuture<'_, Result<u64, Error>> {
        Box::pin(self.db.with_reader(|c| {
            c.query_row("SELECT count(*) FROM _rowgate_admins", [], |r| r.get::<_, i64>(0).map(|n| n as u64))
        }))
    }

    fn add(&self, admin: Admin, first: bool) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            let sql = match first {
                true => {
                    "INSERT OR IGNORE INTO _rowgate_admins (id, email, password_hash) SELECT ?1, ?2, ?3
                         WHERE NOT EXISTS (SELECT 1 FROM _rowgate_admins)"
                }
                false => {
                    "INSERT OR IGNORE INTO _rowgate_admins (id, email, password_hash) VALUES (?1, ?2, ?3)"
                }
            };
            let added = c
                .execute(sql, [&admin.id, &admin.email, &admin.password_hash])
                .map_err(super::accounts::sqlite_error)?;
            Ok(added == 1)
        }))
    }

    fn upsert(&self, admin: Admin) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.db.with_writer(move |c| upsert(c, &admin).map_err(super::accounts::sqlite_error)))
    }

    fn by_email(&self, email: String) -> BoxFuture<'_, Result<Option<Admin>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.prepare_cached(
                "SELECT id, email, password_hash, created_at FROM _rowgate_admins WHERE email = ?1",
            )?
            .query_row([&email], |r| {
                Ok(Admin { id: r.get(0)?, email: r.get(1)?, password_hash: r.get(2)?, created: r.get(3)? })
            })
            .optional()
        }))
    }

    fn start_session(
        &self,
        token_hash: String,
        admin_id: String,
        now: i64,
        expires_at: i64,
    ) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute("DELETE FROM _rowgate_admin_sessions WHERE expires_at <= ?1", [now]).map_err(super::accounts::sqlite_error)?;
            c.execute(
                "INSERT INTO _rowgate_admin_sessions (token_hash, admin_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![token_hash, admin_id, now, expires_at],
            )
            .map_err(super::accounts::sqlite_error)?;
            Ok(())
        }))
    }

    fn session(&self, token_hash: String, now: i64) -> BoxFuture<'_, Result<Option<AdminSession>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.prepare_cached(
                "SELECT s.admin_id, a.email, s.expires_at FROM _rowgate_admin_sessions AS s
                 JOIN _rowgate_admins AS a ON a.id = s.admin_id WHERE s.token_hash = ?1 AND s.expires_at > ?2",
            )?
            .query_row(rusqlite::params![token_hash, now], |r| {
                Ok(AdminSession { admin_id: r.get(0)?, email: r.get(1)?, expires_at: r.get(2)? })
            })
            .optional()
        }))
    }

    fn end_session(&self, token_hash: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute("DELETE FROM _rowgate_admin_sessions WHERE token_hash = ?1", [&token_hash])
                .map_err(super::accounts::sqlite_error)?;
            Ok(())
        }))
    }
}

/// Runs an administrator's SQL (one or more statements) as a write; the rows of the last
/// statement that returns any, at most `max_rows` of them. Statements that would end the
/// writer's transaction, attach files or change a setting are refused.
pub async fn console(
    db: &Arc<SqliteDb>,
    sql: String,
    max_rows: usize,
    limit: std::time::Duration,
) -> Result<SqlResult, Error> {
    db.run_admin(move |c| {
        c.authorizer(Some(guard)).map_err(sqlite_error)?;
        // Every write waits while the console's statements run: they are stopped at the limit.
        let deadline = std::time::Instant::now() + limit;
        c.progress_handler(10_000, Some(move || std::time::Instant::now() > deadline))
            .map_err(sqlite_error)?;
        let result = run_statements(c, &sql, max_rows);
        // Unsetting a hook only frees it (rusqlite's Result is for symmetry).
        let _ = c.progress_handler(0, None::<fn() -> bool>);
        let _ = c.authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
        result.map_err(|e| match e {
            Error::Database(db) if db.message == "interrupted" => Error::sql(
                "57014",
                format!("the console's statements ran past {} s and were stopped", limit.as_secs()),
                false,
            ),
            e => e,
        })
    })
    .await
}

/// What the console may not do on the writer's connection.
fn guard(ctx: AuthContext<'_>) -> Authorization {
    // Nothing is made, changed or dropped in the connection's own `temp` schema (`temp.t` is
    // reported as an ordinary table's creation).
    let changes =
        !matches!(ctx.action, AuthAction::Read { .. } | AuthAction::Select | AuthAction::Function { .. });
    if changes && ctx.database_name == Some("temp") {
        return Authorization::Deny;
    }
    match ctx.action {
        AuthAction::Transaction { .. }
        | AuthAction::Savepoint { .. }
        | AuthAction::Attach { .. }
        | AuthAction::Detach { .. }
        | AuthAction::Pragma { pragma_value: Some(_), .. }
        // Temporary objects would stay on the writer's connection, where realtime keeps its
        // triggers, after the statement.
        | AuthAction::CreateTempTable { .. }
        | AuthAction::CreateTempIndex { .. }
        | AuthAction::CreateTempTrigger { .. }
        | AuthAction::CreateTempView { .. }
        | AuthAction::DropTempTable { .. }
        | AuthAction::DropTempIndex { .. }
        | AuthAction::DropTempTrigger { .. }
        | AuthAction::DropTempView { .. } => Authorization::Deny,
        _ => Authorization::Allow,
    }
}

fn run_statements(c: &Connection, sql: &str, max_rows: usize) -> Result<SqlResult, Error> {
    use rusqlite::fallible_iterator::FallibleIterator;
    let mut out = SqlResult::default();
    let mut batch = rusqlite::Batch::new(c, sql);
    while let Some(mut statement) = batch.next().map_err(console_error)? {
        let columns: Vec<String> = statement.column_names().into_iter().map(str::to_owned).collect();
        if columns.is_empty() {
            out.affected += statement.raw_execute().map_err(console_error)? as u64;
            continue;
        }
        let mut rows = statement.raw_query();
        let mut kept = Vec::new();
        let mut truncated = false;
        while let Some(row) = rows.next().map_err(console_error)? {
            if kept.len() == max_rows {
                truncated = true;
                break;
            }
            kept.push((0..columns.len()).map(|i| json_value(row.get_ref_unwrap(i))).collect());
        }
        out.columns = columns;
        out.rows = kept;
        out.truncated = truncated;
    }
    Ok(out)
}

/// A console statement's failure: a constraint as a write's, a busy file as a 503, anything
/// else (a syntax error, an unknown table, a refused statement) SQLite's message as the
/// client's mistake.
fn console_error(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode::{ConstraintViolation, DatabaseBusy, DatabaseLocked};
    let mistake = match &e {
        rusqlite::Error::SqliteFailure(f, Some(message))
            if !matches!(f.code, DatabaseBusy | DatabaseLocked | ConstraintViolation) =>
        {
            Some(message.clone())
        }
        rusqlite::Error::SqlInputError { msg, .. } => Some(msg.clone()),
        _ => None,
    };
    match mistake {
        // The guard's refusal (SQLite says only "not authorized").
        Some(message) if message == "not authorized" => Error::sql(
            "42501",
            "the console runs inside rowgate's own transaction, on its writer's connection: BEGIN, COMMIT, SAVEPOINT, ATTACH, setting a PRAGMA and temporary objects are refused",
            false,
        ),
        Some(message) => Error::sql("42601", message, false),
        None => sqlite_error(e),
    }
}

fn json_value(v: ValueRef<'_>) -> serde_json::Value {
    use base64::Engine;
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, Into::into),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
        ValueRef::Blob(b) => format!("base64:{}", base64::engine::general_purpose::STANDARD.encode(b)).into(),
    }
}

/// SQLite's table editor statements: names unqualified, declared types its affinity reads.
struct Ddl;

impl Dialect for Ddl {
    fn types(&self) -> &[&str] {
        &TYPES
    }

    fn push_ident(&self, sql: &mut String, name: &str) {
        push_ident(sql, name);
    }

    fn push_table(&self, sql: &mut String, name: &str) {
        push_ident(sql, name);
    }

    fn push_type(&self, sql: &mut String, kind: &str) {
        sql.push_str(&kind.to_ascii_uppercase());
    }

    fn now_and_uuid(&self) -> (&str, &str) {
        (
            "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            "(lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' || substr(lower(hex(randomblob(2))), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))))",
        )
    }

    fn key_with_column(&self) -> bool {
        true
    }
}

/// Creates a table.
pub async fn create_table(db: &Arc<SqliteDb>, table: NewTable) -> Result<(), Error> {
    ddl(db, tables::create_table(&Ddl, &table)?).await
}

/// Adds a column to a table.
pub async fn add_column(db: &Arc<SqliteDb>, table: &str, column: NewColumn) -> Result<(), Error> {
    ddl(db, tables::add_column(&Ddl, table, &column)?).await
}

/// Drops a table, or a column of one.
pub async fn drop_named(db: &Arc<SqliteDb>, table: &str, column: Option<&str>) -> Result<(), Error> {
    ddl(db, tables::drop(&Ddl, table, column)?).await
}

async fn ddl(db: &Arc<SqliteDb>, sql: String) -> Result<(), Error> {
    db.run_admin(move |c| c.execute_batch(&sql).map_err(console_error)).await
}
