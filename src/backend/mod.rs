//! The databases rowgate serves, each in a folder of its own: `postgres` and `sqlite` own
//! everything specific to them (dialect, connections, catalog, transactions, change feed,
//! and for SQLite the access rules). [`Backend`] is the seam the rest of rowgate calls, and
//! the only place that asks which database it is: a capability both backends have is one
//! method here and one implementation in each folder.

mod admin;
pub mod collections;
pub mod dashboard;
pub mod postgres;
mod rights;
pub mod sqlite;

pub use admin::Install;
pub use rights::Rights;

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::accounts::AccountStore;
use crate::apikey::{KeyLookup, StoredKey};
use crate::auth::Principal;
use crate::cache::ResponseCache;
use crate::config::Config;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::plan::{MutatePlan, ReadPlan};
use crate::realtime::Realtime;
use crate::schema::{SchemaCache, SharedSchema};

/// The database a server serves.
pub enum Backend {
    /// PostgreSQL: roles and row-level security decide what a caller sees.
    Postgres(Box<postgres::PgBackend>),
    /// An SQLite file: the access rules (`db-rules`) decide.
    Sqlite(sqlite::SqliteBackend),
}

/// Who makes a request, and what of its HTTP form a backend may need beside its plan.
pub struct Caller<'r> {
    /// Who asks.
    pub principal: &'r Principal,
    /// The request as PostgreSQL's `request.*` settings show it.
    pub request: RequestInfo<'r>,
    /// The schema cache snapshot the request was planned with.
    pub schema: &'r SchemaCache,
    /// How current the answer must be: one the response cache will store may not lag.
    pub current: Current,
    /// The primary's WAL position after the client's last write, as it carries it
    /// (read-your-writes): a replica answers only once it has replayed it.
    pub written_at: Option<u64>,
}

/// How current a read's answer must be, for where it may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Current {
    /// As any client's read: a replica within `db-replica-max-lag` will do.
    Lagging,
    /// Stored as current by the response cache: on a replica only once it has replayed this
    /// WAL position, which covers every change the cache counted before the read started.
    Replayed(u64),
    /// Read on the primary (the cache's feed gives no WAL positions; realtime's rights check
    /// of a change just made visible there).
    Primary,
}

/// The HTTP request's method, path and headers (names lower-case).
#[derive(Clone, Copy)]
pub struct RequestInfo<'r> {
    /// `GET`, `POST`, ...
    pub method: &'r str,
    /// The path, below `api-prefix`.
    pub path: &'r str,
    /// Every header, in order.
    pub headers: &'r [(&'r str, &'r str)],
}

impl KeyLookup for Backend {
    fn lookup<'a>(&'a self, hash: &'a [u8; 32]) -> BoxFuture<'a, Result<Option<StoredKey>, Error>> {
        match self {
            Backend::Postgres(pg) => Box::pin(postgres::apikey::lookup(pg.db(), hash)),
            Backend::Sqlite(lite) => Box::pin(sqlite::apikey::lookup(&lite.db, hash)),
        }
    }
}

impl Backend {
    /// Opens the database `config` names and starts keeping `schema` current with it (and the
    /// response `cache`, when on, and `realtime`'s feed of changes); `keys_changed` is told
    /// when the API-key store changes.
    pub fn start(
        config: Arc<Config>,
        schema: Arc<SharedSchema>,
        cache: Option<Arc<ResponseCache>>,
        realtime: Option<Arc<Realtime>>,
        keys_changed: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Backend, String> {
        Ok(match config.db.sqlite.clone() {
            Some(target) => Backend::Sqlite(sqlite::SqliteBackend::open(
                config,
                target,
                schema,
                cache,
                realtime,
                keys_changed,
            )?),
            None => Backend::Postgres(Box::new(postgres::PgBackend::start(
                config,
                schema,
                cache,
                realtime,
                keys_changed,
            )?)),
        })
    }

    /// What a read did.
    pub async fn read(&self, plan: &ReadPlan, caller: &Caller<'_>) -> Result<Outcome, Error> {
        match self {
            Backend::Postgres(pg) => pg.read(plan, caller).await,
            Backend::Sqlite(lite) => lite.read(plan, caller).await,
        }
    }

    /// What a write did, its transaction committed (or rolled back: as asked, on an error, or
    /// when its outcome is refused).
    pub async fn write(&self, plan: Arc<MutatePlan>, caller: &Caller<'_>) -> Result<Outcome, Error> {
        match self {
            Backend::Postgres(pg) => pg.write(plan, caller).await,
            Backend::Sqlite(lite) => lite.write(plan, caller).await,
        }
    }

    /// What `who` may use of `schema` (tables and views by the methods its grants or the access
    /// rules allow, functions it may execute), which the OpenAPI description shows.
    pub async fn usable(
        &self,
        who: &Principal,
        schema: &str,
        cache: &SchemaCache,
    ) -> Result<crate::openapi::Usable, Error> {
        match self {
            Backend::Postgres(pg) => pg.usable(&who.role, schema).await,
            Backend::Sqlite(lite) => Ok(lite.usable(who, schema, cache)),
        }
    }

    /// Brings the response cache up to date with commits rowgate has not been told of (another
    /// process's, on SQLite), before a look-up.
    pub async fn sync_cache(&self, cache: &ResponseCache) {
        if let Backend::Sqlite(lite) = self {
            lite.sync_cache(cache).await;
        }
    }

    /// The connection pool's metrics under PostgREST's names, where there is a pool (an SQLite
    /// file has none).
    pub fn render_metrics(&self, out: &mut String) {
        match self {
            Backend::Postgres(pg) => {
                pg.db().render_metrics(out);
                pg.render_replica_metrics(out);
            }
            Backend::Sqlite(lite) => lite.db.render_metrics(out),
        }
    }

    /// Whether requests can be served: a connection can be had.
    pub async fn ready(&self) -> bool {
        match self {
            Backend::Postgres(pg) => pg.ready().await,
            Backend::Sqlite(_) => true,
        }
    }

    /// Whether a pre-request function runs before every request (PostgreSQL's `db-pre-request`):
    /// it reads the whole request and may refuse it or change what it sees, so no answer can be
    /// served from the response cache.
    pub fn calls_pre_request(&self) -> bool {
        match self {
            Backend::Postgres(pg) => pg.pre_request().is_some(),
            Backend::Sqlite(_) => false,
        }
    }

    /// The schema changed under a request: reload the schema cache.
    pub fn reload_schema(&self) {
        match self {
            Backend::Postgres(pg) => pg.reload_schema(),
            // SQLite's schema is watched, and reloaded within half a second.
            Backend::Sqlite(_) => {}
        }
    }

    /// Where the built-in accounts live (SQLite's tables are created here).
    pub fn account_store(&self) -> Result<Arc<dyn AccountStore>, String> {
        Ok(match self {
            Backend::Postgres(pg) => Arc::new(pg.account_store()),
            Backend::Sqlite(lite) => Arc::new(sqlite::accounts::SqliteAccounts::open(lite.db.clone())?),
        })
    }

    /// Where storage's buckets and objects live.
    pub fn storage_store(&self) -> Result<Arc<dyn crate::storage::store::StorageStore>, String> {
        match self {
            Backend::Postgres(pg) => Ok(Arc::new(pg.storage_store())),
            Backend::Sqlite(lite) => Ok(Arc::new(lite.storage_store()?)),
        }
    }
}

/// Waits (at most 10 s) until the schema cache shows what a change of the schema (the
/// dashboard's table editor, a PocketBase collection) made: a reload already under way when
/// the change committed may not have seen it, so one is asked for now and then.
pub async fn schema_shows(
    backend: &Backend,
    schema: &SharedSchema,
    shows: impl Fn(&SchemaCache) -> bool,
) -> Result<(), Error> {
    for attempt in 0..200 {
        if attempt % 40 == 0 {
            backend.reload_schema();
        }
        if schema.load().is_some_and(|s| shows(&s)) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Err(Error::internal("the schema changed but the schema cache did not show it within 10 s"))
}

/// SQL text with its parameters, all sent as text (as PostgREST binds them), so that the
/// database's own input functions judge them: `id=eq.abc` on an integer column is
/// PostgreSQL's own 22P02.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL, with `$1`... (PostgreSQL) or `?1`... (SQLite) placeholders.
    pub text: String,
    /// The parameter values, in placeholder order.
    pub params: Vec<String>,
}

/// Appends `name` as a quoted identifier (both dialects quote with `"`).
pub fn push_ident(sql: &mut String, name: &str) {
    sql.push('"');
    for c in name.chars() {
        if c == '"' {
            sql.push('"');
        }
        sql.push(c);
    }
    sql.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_and_escaped() {
        let mut s = String::new();
        push_ident(&mut s, "Order \"Items\"");
        assert_eq!(s, "\"Order \"\"Items\"\"\"");
    }
}
