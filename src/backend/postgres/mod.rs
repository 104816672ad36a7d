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

pub mod accounts;
pub mod accounts_install;
pub mod apikey;
mod background;
pub mod changes;
pub mod collections;
mod conn;
pub mod cron;
pub mod dashboard;
pub mod dependencies;
mod hooks;
mod identities;
pub mod introspect;
mod mfa;
pub mod net;
mod notifications;
mod oauth_server;
mod passkeys;
mod policy;
mod pool;
mod pooled;
pub mod reload;
mod render;
pub mod replicas;
mod rights;
mod settings;
pub mod sql;
pub mod storage;
pub mod supabase_install;
mod tls;
mod value;

pub use conn::{db_error, Hooks, Pipelined, ReadResult, WriteResult};
pub use pool::{connect, connect_without_tls, first_value, Db};
pub use pooled::{PgConn, Running};
pub use settings::{SessionSettings, Setting};
pub use tls::PgTarget;
pub use value::{RawValue, TextParam};
mod transaction;

use std::sync::Arc;

use crate::backend::{Caller, Current};
use crate::cache::{Marker, ResponseCache};
use crate::config::Config;
use crate::error::{code, Error};
use crate::outcome::{Done, Outcome, SetBySql};
use crate::plan::{MutatePlan, ReadPlan};
use crate::schema::SharedSchema;

/// A server's PostgreSQL: the pool, the schema cache's reloader, and the response cache whose
/// markers a write's COMMIT carries.
pub struct PgBackend {
    config: Arc<Config>,
    /// `db-uri`, read once: every connection is made from it.
    target: Arc<PgTarget>,
    db: Db,
    /// `db-uri-read-replicas`, if any.
    replicas: Option<Arc<replicas::Replicas>>,
    cache: Option<Arc<ResponseCache>>,
    reloader: reload::Reloader,
}

impl PgBackend {
    /// The pool (no connection is opened until one is needed) and the schema cache's loading,
    /// with its reloads on SIGUSR1 and on notifications; `keys_changed` is told when the
    /// API-key store changes.
    pub fn start(
        config: Arc<Config>,
        schema: Arc<SharedSchema>,
        cache: Option<Arc<ResponseCache>>,
        realtime: Option<Arc<crate::realtime::Realtime>>,
        keys_changed: notifications::KeysChanged,
    ) -> Result<PgBackend, String> {
        // An unreadable certificate stops the start, with the file's name.
        let target = Arc::new(PgTarget::parse(&config.db.uri)?);
        let direct = match &config.db.uri_direct {
            Some(uri) => Arc::new(PgTarget::parse(uri).map_err(|e| e.replace("db-uri", "db-uri-direct"))?),
            None => target.clone(),
        };
        let replication = match &config.db.uri_replication {
            Some(uri) => {
                Arc::new(PgTarget::parse(uri).map_err(|e| e.replace("db-uri", "db-uri-replication"))?)
            }
            None => direct.clone(),
        };
        let db = Db::new(&config, &target);
        let replicas = replicas::Replicas::start(&config, target.clone())?;
        net::spawn(direct.clone(), config.net.clone());
        let jobs = match &config.cron.db_uri {
            Some(uri) => Arc::new(PgTarget::parse(uri).map_err(|e| e.replace("db-uri", "cron-db-uri"))?),
            None => direct.clone(),
        };
        cron::spawn(jobs, config.cron.history);
        let reloader = reload::Reloader::start(
            config.clone(),
            reload::Direct { target: direct, replication },
            db.clone(),
            replicas.clone(),
            schema,
            cache.clone(),
            realtime,
        );
        reload::spawn_sigusr1(reloader.clone());
        notifications::spawn_listener(config.clone(), reloader.clone(), keys_changed);
        Ok(PgBackend { db, replicas, target, config, cache, reloader })
    }

    /// A read, in one round trip with its settings: a GET, HEAD or a function call (POST /rpc
    /// runs in a transaction rowgate ends once it has seen the result). With read replicas, a
    /// read that cannot write goes to one that has replayed the client's last write (and, for
    /// the response cache, every change the cache has counted), if one has; a call that may
    /// write tells where its write left the primary.
    pub async fn read(&self, plan: &ReadPlan, caller: &Caller<'_>) -> Result<Outcome, Error> {
        let Some(replicas) = &self.replicas else { return self.read_on(&self.db, plan, caller).await };
        let may_write = plan.transaction.is_some() || plan.call.as_ref().is_some_and(|c| c.volatile);
        // The position a replica must have replayed (None: any), or None for the primary alone.
        let wanted = match caller.current {
            Current::Lagging => Some(caller.written_at),
            Current::Replayed(applied) => Some(caller.written_at.max(Some(applied))),
            Current::Primary => None,
        };
        if let Some(since) = wanted.filter(|_| !may_write) {
            if let Some(replica) = replicas.pick(since) {
                match self.read_on(&replica.db, plan, caller).await {
                    Err(e) if replica_down(&e) => replica.failed(&e),
                    // Answered on the primary instead, the replica left in use.
                    Err(e) if replica_conflict(&e) => {}
                    Ok(mut outcome) => {
                        replica.served();
                        // Behind the primary by up to db-replica-max-lag: never the response
                        // cache's current answer.
                        outcome.may_lag = caller.current == Current::Lagging;
                        return Ok(outcome);
                    }
                    other => return other,
                }
            }
        }
        replicas.served_by_primary();
        let mut outcome = self.read_on(&self.db, plan, caller).await?;
        // Whatever its status (SQL may set one), a call that may write may have committed.
        if may_write {
            outcome.written_at = Some(replicas.write_position().await);
        }
        Ok(outcome)
    }

    /// A read on the connections of `db`, the primary's or a replica's.
    async fn read_on(&self, db: &Db, plan: &ReadPlan, caller: &Caller<'_>) -> Result<Outcome, Error> {
        let config = &*self.config;
        let mut settings =
            SessionSettings::of_request(config, caller, &plan.schema, plan.timezone.as_deref());
        if plan.transaction.is_some_and(|t| t.read_only) {
            settings.set(Setting::ReadOnly, "on".into());
        }
        let pre_request = self.reloader.pre_request();
        // Watched while its statements run: a client that goes away cancels them.
        let mut conn = Running::new(db.get_for_request().await?, db.tls());
        let ran = self
            .run_read(&mut conn, plan, &settings, pre_request.as_deref(), caller.principal.anonymous)
            .await;
        let mut conn = conn.done();
        if plan.call.as_ref().is_some_and(|c| c.volatile) {
            // A volatile function may have changed session settings behind the record's back.
            conn.settings.forget();
        }
        drop(conn);
        let (outcome, marker) = ran?;
        if let Some(marker) = marker {
            marker.wait().await;
        }
        outcome
    }

    /// The statements of a read on `conn`, and what they did; for POST /rpc the marker its
    /// COMMIT carried. A call of a function that may set `response.headers` or
    /// `response.status` (any read, with a pre-request function) runs in a transaction that
    /// ends with reading them.
    async fn run_read(
        &self,
        conn: &mut PgConn,
        plan: &ReadPlan,
        settings: &SessionSettings,
        pre_request: Option<&String>,
        anonymous: bool,
    ) -> Result<(Result<Outcome, Error>, Option<Marker>), Error> {
        let config = &*self.config;
        let statements = sql::render_read(plan, config.db.max_rows);
        let pre_request = pre_request.map(String::as_str);
        if let Some(explain) = &plan.explain {
            let stmt = sql::explain(&statements.main, explain);
            let hooks = Hooks { pre_request, response: false };
            if plan.transaction.is_some_and(|t| !t.read_only) {
                // EXPLAIN ANALYZE runs the call: whatever it writes is rolled back.
                let result = conn.write(settings, &stmt, true, hooks, anonymous).await?;
                conn.finish(false, anonymous).await?;
                return Ok((Ok(Outcome::of(Done::Explained(render::plan(explain, &result.rows)))), None));
            }
            let result = conn.read(settings, &stmt, None, hooks, anonymous).await?;
            return Ok((Ok(Outcome::of(Done::Explained(render::plan(explain, &result.rows)))), None));
        }
        // Reading what SQL left in `response.*` takes a transaction around the read, so it is
        // read only where SQL may have set it: after a function whose source may, and after
        // everything once a pre-request function runs.
        let sets_response = plan.call.as_ref().is_some_and(|c| c.sets_response);
        let hooks = Hooks { pre_request, response: sets_response || pre_request.is_some() };
        match plan.transaction {
            None => {
                if plan.call.as_ref().is_some_and(|c| c.volatile) {
                    // It may change session settings: if the request is dropped midway, the
                    // record must not claim to know them.
                    conn.settings.forget();
                }
                let mut result = conn
                    .read(settings, &statements.main, statements.explain.as_ref(), hooks, anonymous)
                    .await?;
                let set_by_sql = std::mem::take(&mut result.gucs);
                let rows = render::read(plan, &statements, result, config.db.max_rows);
                Ok((rows.map(|rows| Outcome { set_by_sql, ..Outcome::of(Done::Read(rows)) }), None))
            }
            Some(tx) => {
                // POST /rpc: its transaction is there anyway, and what it writes may fire
                // triggers that set them.
                let post_hooks = Hooks { pre_request, response: true };
                let result = conn.write(settings, &statements.main, true, post_hooks, anonymous).await?;
                let read = ReadResult { rows: result.rows, explain: None, gucs: SetBySql::default() };
                let rows = render::read(plan, &statements, read, config.db.max_rows);
                let commit = rows.is_ok() && !tx.rollback;
                let marker = transaction::end_write(conn, commit, self.cache.as_ref(), anonymous).await?;
                let set_by_sql = result.gucs;
                Ok((rows.map(|rows| Outcome { set_by_sql, ..Outcome::of(Done::Read(rows)) }), marker))
            }
        }
    }

    /// A write: on a task of its own unless its whole transaction is queued at once.
    pub async fn write(&self, plan: Arc<MutatePlan>, caller: &Caller<'_>) -> Result<Outcome, Error> {
        let settings =
            SessionSettings::of_request(&self.config, caller, &plan.schema, plan.timezone.as_deref());
        let blind = plan.commits_blind();
        let pre_request = self.reloader.pre_request();
        // Boxed: the write's future (~9 KB) would otherwise be part of every request's,
        // reads included, and copied whole at each `.await` above this one.
        let write = Box::pin(transaction::write(
            self.db.clone(),
            self.cache.clone(),
            plan,
            settings,
            caller.principal.anonymous,
            pre_request,
        ));
        let mut outcome = if blind {
            // Its whole transaction is queued on the connection at once (PgConn::write_committed):
            // a client going away cannot interrupt it midway, so no task of its own is needed.
            write.await
        } else {
            // The write runs on a task of its own, so that a client going away mid-write
            // cannot leave its transaction open on a pooled connection: it commits or rolls back.
            tokio::spawn(write)
                .await
                .unwrap_or_else(|_| Err(Error::api(code::INTERNAL, "Internal server error")))
        }?;
        // Whatever its status (`response.status` may set one), the write may have committed.
        if let Some(replicas) = &self.replicas {
            outcome.written_at = Some(replicas.write_position().await);
        }
        Ok(outcome)
    }

    /// The statement calling the pre-request function, if one is set.
    pub fn pre_request(&self) -> Option<Arc<String>> {
        self.reloader.pre_request()
    }

    /// The pool.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The read replicas' metrics, if there are replicas.
    pub fn render_replica_metrics(&self, out: &mut String) {
        if let Some(r) = &self.replicas {
            r.render_metrics(out);
        }
    }

    /// Whether a pooled connection can be had.
    pub async fn ready(&self) -> bool {
        self.db.get_for_request().await.is_ok()
    }

    /// Asks for a schema cache reload.
    pub fn reload_schema(&self) {
        self.reloader.request();
    }

    /// What `role` may read of `table` (realtime's question), from the catalog.
    pub async fn table_access(
        &self,
        role: &str,
        table: &crate::schema::QualifiedName,
    ) -> Result<crate::realtime::TableAccess, Error> {
        rights::table_access(&self.db, role, table).await
    }

    /// What `role` may use of `schema`, for the OpenAPI description.
    pub async fn usable(&self, role: &str, schema: &str) -> Result<crate::openapi::Usable, Error> {
        rights::usable(&self.db, role, schema).await
    }

    /// Storage's rows, on the pool's connections.
    pub fn storage_store(&self) -> storage::PgStorage {
        storage::PgStorage::new(self.db.clone())
    }

    /// The built-in accounts' store, on a connection of its own as the authenticator.
    pub fn account_store(&self) -> accounts::PgAccounts {
        accounts::PgAccounts::new((*self.target).clone())
    }
}

/// Whether a replica's read failed because the replica is unwell: no connection, or shutting
/// down (57P01..57P03). It is skipped until its next check; the read goes to the primary.
/// A statement that stops an install (its transaction) when a function it would replace in
/// `schema` belongs to another role: `CREATE OR REPLACE` keeps a function's owner, who could
/// then change what it does when rowgate (or a trigger) calls it — as the server, for the
/// SECURITY DEFINER ones. The names are rowgate's own.
pub(crate) fn refuse_functions_owned_elsewhere(schema: &str, functions: &[&str]) -> String {
    let names = functions.iter().map(|f| format!("'{f}'")).collect::<Vec<_>>().join(", ");
    format!(
        "DO $guard$ DECLARE who text; what text; BEGIN
           SELECT r.rolname, p.proname INTO who, what FROM pg_catalog.pg_proc p
             JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
             JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
             WHERE n.nspname = '{schema}' AND p.proname IN ({names}) AND r.rolname <> current_user LIMIT 1;
           IF who IS NOT NULL THEN
             RAISE EXCEPTION '{schema}.% belongs to %, who could change what it does when rowgate calls it: drop it or install as %', what, who, who;
           END IF;
         END $guard$;"
    )
}

fn replica_down(e: &Error) -> bool {
    match e {
        Error::Unavailable(_) => true,
        Error::Database(db) => matches!(db.code.as_str(), "57P01" | "57P02" | "57P03"),
        _ => false,
    }
}

/// Whether a replica's read failed as only a replica's can while the replica is well: every
/// connection busy for the replicas' short wait, a recovery conflict (40001), a column type it
/// has not replayed yet, or a standby's refusals (0A000: an unlogged table, which a standby
/// cannot read). The read goes to the primary. What a request makes fail everywhere (a GET
/// that writes: 25006) is answered as it is, and never takes a replica out of use.
fn replica_conflict(e: &Error) -> bool {
    match e {
        Error::SchemaChanged | Error::PoolTimeout => true,
        Error::Database(db) => matches!(db.code.as_str(), "40001" | "0A000"),
        _ => false,
    }
}
