//! The SQLite backend: everything rowgate does that is specific to SQLite — its SQL dialect
//! (`sql`: the whole JSON body built by SQLite from a plan), the connections and the writer
//! thread (`db`), the catalog introspection (`introspect`), and the access rules that stand in
//! for roles and row-level security (`rules`, applied to a plan's tables by `access`).

mod access;
pub mod accounts;
pub mod apikey;
pub mod collections;
mod cron;
mod csv;
pub mod dashboard;
pub mod db;
mod deleted;
pub mod introspect;
mod net;
mod realtime;
pub mod rules;
pub mod sql;
pub mod storage;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use self::access::{both, Access};
use self::db::{Changed, Room, SqliteDb};
use self::rules::{Operation, Rules};
use crate::auth::Principal;
use crate::backend::Caller;
use crate::cache::ResponseCache;
use crate::config::{Config, SqliteTarget};
use crate::error::Error;
use crate::outcome::{self, Done, Outcome, Written};
use crate::plan::{Media, MutatePlan, Mutation, ReadPlan, Returning};
use crate::schema::{QualifiedName, SchemaCache, SharedSchema};

/// How often the file's schema is looked at for changes by any process.
const SCHEMA_WATCH: Duration = Duration::from_millis(500);

/// A server's SQLite database and who may do what in it.
pub struct SqliteBackend {
    /// The database.
    pub db: Arc<SqliteDb>,
    /// `db-rules`, as last read: a change to the file takes effect without a restart.
    rules: Arc<arc_swap::ArcSwap<Rules>>,
    /// Where the rules are read from ([`crate::config::DbSettings::rules_file`]).
    pub rules_path: Option<std::path::PathBuf>,
    config: Arc<Config>,
    /// The realtime engine, told when the rules change.
    realtime: Option<Arc<crate::realtime::Realtime>>,
    /// The file's rules, which the rules in force are made of with the collections' access.
    sources: Arc<RuleSources>,
}

/// The rules file's rules as last taken, and one turn for making the rules in force of them
/// and the collections' access as stored: a change of either remakes them whole, so no
/// access of a dropped collection outlives it.
struct RuleSources {
    file: arc_swap::ArcSwap<Rules>,
    turn: tokio::sync::Mutex<()>,
}

impl SqliteBackend {
    /// Opens the database (created if missing) and its access rules, loads the schema cache
    /// before the first request and keeps it current; with the response cache on, tells it of
    /// every commit's tables.
    pub fn open(
        config: Arc<Config>,
        target: SqliteTarget,
        shared: Arc<SharedSchema>,
        cache: Option<Arc<ResponseCache>>,
        realtime: Option<Arc<crate::realtime::Realtime>>,
        keys_changed: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<SqliteBackend, String> {
        let exposed = config.db.schemas[0].clone();
        let rules_path = config.db.rules_file();
        let rules = match (&config.db.rules, &rules_path) {
            (Some(path), _) => {
                Rules::load(path).map_err(|e| format!("the access rules could not be loaded: {e}"))?
            }
            // The default file is made by the dashboard's rules editor (or by hand) when wanted.
            (None, Some(path)) if path.exists() => {
                Rules::load(path).map_err(|e| format!("the access rules could not be loaded: {e}"))?
            }
            _ => {
                tracing::warn!("no access rules file: no caller may read any table");
                Rules::default()
            }
        };
        if let Some(missing) = unkeyed_claims(&config, &rules) {
            // Callers that differ in such a claim would share cached answers.
            return Err(format!(
                "the access rules read claims that cache-key-claims leaves out of the cache key: {missing}"
            ));
        }
        let db = SqliteDb::open(target, config.db.sqlite_synchronous, config.db.statement_timeout)
            .map_err(|e| format!("opening the SQLite database failed: {e}"))?;
        let sources = Arc::new(RuleSources {
            file: arc_swap::ArcSwap::from_pointee(rules.clone()),
            turn: Default::default(),
        });
        let rules = rules.with_collections(&collection_accesses(&db)?);
        let started = std::time::Instant::now();
        let (schema, version) =
            db.load_schema(&exposed).map_err(|e| format!("reading the SQLite schema failed: {e}"))?;
        tracing::info!(relations = schema.relations.len(), "schema cache loaded");
        shared.store_loaded(schema, started.elapsed());
        db.watch_schema(exposed.clone(), shared.clone(), version, SCHEMA_WATCH);
        watch_keys(db.clone(), keys_changed);
        net::start(&db, &config.net, &exposed)?;
        cron::start(&db, &config.cron, &config.net)?;
        if let Some(cache) = cache {
            // rowgate's writer reports every commit's tables; other processes' commits are
            // looked for before each look-up ([`SqliteBackend::sync_cache`]).
            cache.without_listener();
            db.listen(Box::new(move |changed| match changed {
                Changed::Tables(tables) => match shared.load() {
                    Some(s) => tables_changed(&cache, &s, &exposed, tables),
                    None => cache.flush(),
                },
                Changed::Schema | Changed::Rules | Changed::Unknown => cache.flush(),
            }));
        }
        let rules = Arc::new(arc_swap::ArcSwap::from_pointee(rules));
        if let Some(path) = &rules_path {
            let watched = (rules.clone(), sources.clone());
            watch_rules(db.clone(), watched, config.clone(), path.clone(), realtime.clone());
        }
        if let Some(rt) = &realtime {
            realtime::start(&db, rt, &config);
        }
        Ok(SqliteBackend { db, rules, rules_path, config, realtime, sources })
    }

    /// What `who` may read of `table` (realtime's question): every column, and rows by the
    /// rules' `select` entry.
    pub fn table_access(
        &self,
        who: &Principal,
        table: &str,
        columns: Vec<String>,
    ) -> crate::realtime::TableAccess {
        use rules::Access;
        match self.rules.load().access(who, table, rules::Operation::Select) {
            Access::Denied => {
                crate::realtime::TableAccess { columns: Vec::new(), by_claims: false, by_row: false }
            }
            Access::All => crate::realtime::TableAccess { columns, by_claims: false, by_row: false },
            Access::Rows(filters) => {
                let by_claims = filters.iter().any(rules::reads_claims);
                crate::realtime::TableAccess { columns, by_claims, by_row: true }
            }
        }
    }

    /// Whether `who` could have read the deleted row `old` of `table` by the rules' `select`
    /// entry; `None` where its filters cannot be told on the row alone.
    pub fn could_read_deleted(
        &self,
        who: &Principal,
        table: &str,
        old: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<bool> {
        let access = self.rules.load().access(who, table, rules::Operation::Select);
        deleted::could_read(&access, &who.claims, old)
    }

    /// What `who` may use of `schema`'s tables and views, by the access rules.
    pub fn usable(
        &self,
        who: &Principal,
        schema: &str,
        cache: &crate::schema::SchemaCache,
    ) -> crate::openapi::Usable {
        use rules::Operation::*;
        let mut usable = crate::openapi::Usable::default();
        let rules = self.rules.load();
        for name in cache.relations.keys().filter(|q| q.schema == schema) {
            let may = |op| rules.allows(who, &name.name, op);
            let grants = crate::openapi::Grants {
                read: may(Select),
                insert: may(Insert),
                update: may(Update),
                delete: may(Delete),
            };
            usable.relations.insert(name.clone(), grants);
        }
        usable
    }

    /// Storage's rows in the file, under the rules' `storage.buckets` and `storage.objects`.
    pub fn storage_store(&self) -> Result<storage::SqliteStorage, String> {
        storage::SqliteStorage::open(self.db.clone(), self.rules.clone(), self.config.clone())
    }

    /// Flushes the response cache if another process has written the file: what it changed
    /// is unknown.
    pub async fn sync_cache(&self, cache: &ResponseCache) {
        self.db.foreign_commits(|| cache.flush()).await;
    }

    fn access<'a>(&'a self, schema_name: &'a str, caller: &'a Caller<'a>) -> Access<'a> {
        Access {
            rules: self.rules.load_full(),
            schema: caller.schema,
            schema_name,
            principal: caller.principal,
            config: &self.config,
        }
    }

    /// A read: the body is built by SQLite itself (see `sql`), of the rows the caller's read
    /// rules allow in every table it reads.
    pub async fn read(&self, plan: &ReadPlan, caller: &Caller<'_>) -> Result<Outcome, Error> {
        let rules = self.access(&plan.schema, caller).read_rules(&sql::tables(plan))?;
        let statements = sql::render_read(plan, &rules)?;
        let out = self.db.read(statements.main, statements.count).await?;
        let rows = if plan.media == Media::Csv {
            let header: Vec<String> =
                plan.columns.iter().filter(|c| c.is_output()).map(|c| c.key.clone()).collect();
            outcome::rows(plan, out.rows, out.total, || Ok(csv::from_json(&out.body, &header)))?
        } else {
            let single = matches!(plan.media, Media::Single { .. });
            outcome::rows(plan, out.rows, out.total, || {
                if single {
                    if out.rows != 1 {
                        return Err(outcome::singular(out.rows));
                    }
                    return Ok(one_element(out.body));
                }
                Ok(out.body.into_bytes())
            })?
        };
        Ok(Outcome::of(Done::Read(rows)))
    }

    /// A write: the operation's rule restricts and checks the rows, the read rules shape the
    /// representation.
    pub async fn write(&self, plan: Arc<MutatePlan>, caller: &Caller<'_>) -> Result<Outcome, Error> {
        let access = self.access(&plan.schema, caller);
        let table = plan.relation.name.name.clone();
        let op = match plan.mutation {
            Mutation::Insert { .. } => Operation::Insert,
            Mutation::Update { .. } | Mutation::UpdateByKey { .. } => Operation::Update,
            Mutation::Delete => Operation::Delete,
        };
        let mut rule = access.rule(&table, op)?;
        if op != Operation::Insert && !plan.conditions.is_empty() {
            // Filters read the rows: as PostgreSQL applies SELECT policies to an UPDATE or
            // DELETE with a WHERE clause, only rows the caller may read are matched (else a
            // count or a representation would tell of rows it may not see).
            rule = both(rule, access.rule(&table, Operation::Select)?);
        }
        // What the write reads besides its table: embedded resources its filters test, and for
        // a representation or a Location the written rows as the caller may read them.
        let mut tables = sql::tables_of(&table, &[], &plan.conditions, &[]).split_off(1);
        match &plan.returning {
            Returning::Representation(columns) => {
                tables.extend(sql::tables_of(&table, columns, &plan.output_conditions, &[]))
            }
            Returning::Location(_) => tables.push(&table),
            _ => {}
        }
        let read_rules = access.read_rules(&tables)?;
        // A merging upsert may update rows: the caller needs the update rule too, and the
        // select rule — PostgreSQL checks the row an ON CONFLICT DO UPDATE finds, and the rows
        // it writes, against SELECT policies as well, so a row the caller may not read is
        // never updated.
        let update_rule = match &plan.mutation {
            Mutation::Insert { on_conflict: Some(c), .. } if c.merge => {
                both(access.rule(&table, Operation::Update)?, access.rule(&table, Operation::Select)?)
            }
            _ => None,
        };
        let statements = sql::render_write(&plan, rule.as_ref(), update_rule.as_ref(), &read_rules)?;
        // A delete frees room: it runs on a full disk too.
        let room = match plan.mutation {
            Mutation::Delete => Room::Freed,
            _ => Room::Needed,
        };
        let rollback = plan.rollback;
        let written = self
            .db
            .write(statements, table, (rollback, room), move |out| {
                let key = match (&plan.returning, out.location) {
                    (Returning::Location(_), Some(values)) => Some(values),
                    _ => None,
                };
                let (body, page) = out.representation.unwrap_or_default();
                let written = Written {
                    affected: out.affected,
                    inserted: out.inserted.unwrap_or(out.affected),
                    page,
                    key,
                    body: None,
                };
                let single = matches!(plan.media, Media::Single { .. });
                outcome::written(&plan, written, || {
                    Ok(if single { one_element(body) } else { body.into_bytes() })
                })
            })
            .await?;
        Ok(Outcome::of(Done::Written(written)))
    }
}

/// The singular object of a one-element JSON array SQLite built: `[` + object + `]`.
fn one_element(array: String) -> Vec<u8> {
    match array.len() {
        n if n >= 2 => array.as_bytes()[1..n - 1].to_vec(),
        _ => array.into_bytes(),
    }
}

/// Tells the response cache that a commit of the writer changed rows of `tables` (by name, in
/// the exposed schema `exposed`).
fn tables_changed(cache: &ResponseCache, schema: &SchemaCache, exposed: &str, tables: &HashSet<String>) {
    if schema.dependencies.writes_unreported {
        // Some writes fire no update hook (see `introspect`): any commit may have made them.
        cache.flush();
        return;
    }
    for table in tables {
        if table.starts_with("_rowgate_") {
            // rowgate's own tables: the API does not serve them, but a view may read them.
            cache.table_changed(0);
            continue;
        }
        let name = QualifiedName { schema: exposed.to_owned(), name: table.clone() };
        match schema.relations.get(&name) {
            Some(r) => cache.table_changed(r.oid),
            // A table the API does not serve: an FTS5 index's storage, whose virtual table
            // reports no changes of its own. Whatever may read it is dropped.
            None => {
                cache.flush();
                return;
            }
        }
    }
}

/// Tells `keys_changed` when keys were created, revoked or deleted (by `rowgate apikey`, in
/// another process), looking every [`SCHEMA_WATCH`].
fn watch_keys(db: Arc<SqliteDb>, keys_changed: Arc<dyn Fn() + Send + Sync>) {
    tokio::spawn(async move {
        let mut seen = None;
        let mut tick = tokio::time::interval(SCHEMA_WATCH);
        loop {
            tick.tick().await;
            let Ok(now) = db.with_reader(apikey::fingerprint).await else { continue };
            if seen.is_some_and(|seen| seen != now) {
                keys_changed();
            }
            seen = Some(now);
        }
    });
}

/// Reloads the access rules whenever their file changes (its modification time or size), looking
/// every [`SCHEMA_WATCH`]. A file that does not parse, or whose rules read claims the cache key
/// leaves out, is refused in the log and the rules in force are kept. The response cache is told
/// on the writer thread, between two batches, so that no answer of the old rules outlives them.
fn watch_rules(
    db: Arc<SqliteDb>,
    (rules, sources): (Arc<arc_swap::ArcSwap<Rules>>, Arc<RuleSources>),
    config: Arc<Config>,
    path: std::path::PathBuf,
    realtime: Option<Arc<crate::realtime::Realtime>>,
) {
    let stamp = |path: &std::path::Path| std::fs::metadata(path).ok().map(|m| (m.modified().ok(), m.len()));
    let mut seen = stamp(&path);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SCHEMA_WATCH);
        loop {
            tick.tick().await;
            let now = stamp(&path);
            if now == seen {
                continue;
            }
            seen = now;
            let turn = sources.turn.lock().await;
            let loaded = Rules::load(&path).map_err(|e| e.to_string()).and_then(|file| {
                let new = file.clone().with_collections(&collection_accesses(&db)?);
                match unkeyed_claims(&config, &new) {
                    Some(missing) => {
                        Err(format!("its rules read claims cache-key-claims leaves out: {missing}"))
                    }
                    None => {
                        sources.file.store(Arc::new(file));
                        Ok(new)
                    }
                }
            });
            let new = match loaded {
                Ok(new) => new,
                Err(e) => {
                    tracing::error!(error = %e, "the access rules changed but were not taken; the rules in force are kept");
                    continue;
                }
            };
            let taken = in_force(&db, &rules, new, realtime.as_deref()).await;
            drop(turn);
            match taken {
                Ok(()) => tracing::warn!(file = %path.display(), "the access rules changed: reloaded"),
                Err(e) => tracing::error!(error = %e, "reloading the access rules failed"),
            }
        }
    });
}

/// Puts `new` in force: stored on the writer thread, between two batches, so that no answer of
/// the old rules outlives them (the response cache hears of it there), and realtime told.
async fn in_force(
    db: &Arc<SqliteDb>,
    rules: &Arc<arc_swap::ArcSwap<Rules>>,
    new: Rules,
    realtime: Option<&crate::realtime::Realtime>,
) -> Result<(), Error> {
    let rules = rules.clone();
    db.announce(move || rules.store(Arc::new(new)), Changed::Rules).await?;
    if let Some(rt) = realtime {
        rt.rights_changed();
    }
    Ok(())
}

/// Each PocketBase collection's table and access, which the rules take over the file's.
fn collection_accesses(
    db: &SqliteDb,
) -> Result<Vec<(String, crate::backend::collections::TableAccess)>, String> {
    let read = db.read_connection().and_then(|c| collections::accesses(&c));
    read.map_err(|e| format!("reading the collections' access failed: {e}"))
}

impl SqliteBackend {
    /// Remakes the rules in force of the file's (as last taken) and the collections' access as
    /// now stored: the next request runs under them.
    async fn collections_changed(&self) -> Result<(), Error> {
        let _turn = self.sources.turn.lock().await;
        let accesses = collection_accesses(&self.db).map_err(Error::internal)?;
        let new = (*self.sources.file.load_full()).clone().with_collections(&accesses);
        in_force(&self.db, &self.rules, new, self.realtime.as_deref()).await
    }

    /// The rules file's text (empty when there is none yet) and where it is.
    pub fn rules_text(&self) -> Result<(String, std::path::PathBuf), Error> {
        let path = self.rules_path.clone().ok_or_else(no_rules_file)?;
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok((text, path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), path)),
            Err(e) => Err(Error::internal(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Replaces the rules file with `text` if it parses (and the cache key covers its claims),
    /// then waits until the file's watcher has taken it: the next request runs under it.
    pub async fn save_rules(&self, text: &str) -> Result<(), Error> {
        let path = self.rules_path.clone().ok_or_else(no_rules_file)?;
        let parsed = Rules::parse(text).map_err(|e| Error::api(crate::error::code::DASHBOARD_INVALID, e))?;
        if let Some(missing) = unkeyed_claims(&self.config, &parsed) {
            return Err(Error::api(
                crate::error::code::DASHBOARD_INVALID,
                format!("the rules read claims cache-key-claims leaves out: {missing}"),
            ));
        }
        let before = self.rules.load_full();
        let staged = path.with_extension("toml.saving");
        let written = std::fs::write(&staged, text).and_then(|()| std::fs::rename(&staged, &path));
        written.map_err(|e| Error::internal(format!("writing {}: {e}", path.display())))?;
        for _ in 0..100 {
            if !Arc::ptr_eq(&before, &self.rules.load_full()) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::internal("the rules were written but not taken within 5 s; see the log"))
    }
}

fn no_rules_file() -> Error {
    Error::api(
        crate::error::code::DASHBOARD_INVALID,
        "an in-memory database has no rules file: start rowgate with --db-rules FILE",
    )
}

/// The claims the access rules read that a narrowed response-cache key (`cache-key-claims`)
/// leaves out, comma-separated; `None` when the key covers them all.
fn unkeyed_claims(config: &Config, rules: &Rules) -> Option<String> {
    let keyed = config.cache.key_claims.as_ref().filter(|_| config.cache.enabled)?;
    let missing: Vec<String> = rules.claims().into_iter().filter(|c| !keyed.contains(c)).collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}
