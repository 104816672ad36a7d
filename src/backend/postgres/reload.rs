//! Keeping the schema cache current: a reload on SIGUSR1 and on `NOTIFY <db-channel>` with the
//! payload `reload schema` or an empty one (which `notifications.rs` receives), each building a
//! new cache beside the old one and swapping it in; requests in flight keep the snapshot they
//! started with. And the pre-request function, read with the schema.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::config::Config;
use crate::schema::SharedSchema;

/// Reloads the schema cache on demand; reloads asked for while one runs are merged into one.
#[derive(Clone)]
pub struct Reloader {
    pub(super) config: Arc<Config>,
    /// What the schema is read from and LISTEN connects to: `db-uri-direct`, or `db-uri`.
    pub(super) target: Arc<super::PgTarget>,
    /// What the change feed connects to: `db-uri-replication`, or as `target`.
    pub(super) replication: Arc<super::PgTarget>,
    /// The pool, whose connections a reload retires behind a pooler in transaction mode.
    pub(super) db: super::Db,
    /// The read replicas, told where the primary was when the schema was read.
    replicas: Option<Arc<super::replicas::Replicas>>,
    schema: Arc<SharedSchema>,
    wake: Arc<Notify>,
    pub(super) cache: Option<Arc<crate::cache::ResponseCache>>,
    pub(super) realtime: Option<Arc<crate::realtime::Realtime>>,
    /// The statement that calls the pre-request function, if there is one.
    pub(super) pre_request: Arc<arc_swap::ArcSwapOption<String>>,
}

/// The pre-request function the connecting role's settings name (PostgREST's in-database
/// configuration, `ALTER ROLE .. SET pgrst.db_pre_request`, which overrides the file's): the
/// database's own setting before the role-wide one.
const PRE_REQUEST_IN_DATABASE: &str = "
SELECT substr(c, strpos(c, '=') + 1) FROM pg_catalog.pg_db_role_setting s, unnest(s.setconfig) c
WHERE s.setrole = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
  AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))
  AND (c LIKE 'pgrst.db\\_pre\\_request=%' OR c LIKE 'pgrst.pre\\_request=%')
ORDER BY s.setdatabase DESC, c LIKE 'pgrst.db\\_pre\\_request=%' DESC LIMIT 1";

/// `SELECT "schema"."fn"()` for `db-pre-request`'s `schema.fn` (or `fn`, found on the
/// request's search path), as PostgREST calls it.
pub fn pre_request_statement(function: &str) -> String {
    let mut sql = String::from("SELECT ");
    match function.split_once('.') {
        Some((schema, name)) => {
            crate::backend::push_ident(&mut sql, schema);
            sql.push('.');
            crate::backend::push_ident(&mut sql, name);
        }
        None => crate::backend::push_ident(&mut sql, function),
    }
    sql.push_str("()");
    sql
}

/// Where the reloader connects, past any pooler: the schema's reads and LISTEN
/// (`db-uri-direct`, or `db-uri`), and the change feed (`db-uri-replication`, or as those).
pub struct Direct {
    /// `db-uri-direct`, or `db-uri`.
    pub target: Arc<super::PgTarget>,
    /// `db-uri-replication`, or as `target`.
    pub replication: Arc<super::PgTarget>,
}

impl Reloader {
    /// Starts the reload task; it loads the cache at once and retries until it succeeds. Each
    /// load flushes the response `cache`, if any.
    pub fn start(
        config: Arc<Config>,
        direct: Direct,
        db: super::Db,
        replicas: Option<Arc<super::replicas::Replicas>>,
        schema: Arc<SharedSchema>,
        cache: Option<Arc<crate::cache::ResponseCache>>,
        realtime: Option<Arc<crate::realtime::Realtime>>,
    ) -> Reloader {
        let pre_request = config.db.pre_request.as_deref().map(|f| Arc::new(pre_request_statement(f)));
        let reloader = Reloader {
            config,
            target: direct.target,
            replication: direct.replication,
            db,
            replicas,
            schema,
            wake: Arc::new(Notify::new()),
            cache,
            realtime,
            pre_request: Arc::new(arc_swap::ArcSwapOption::new(pre_request)),
        };
        let task = reloader.clone();
        tokio::spawn(async move {
            let mut attempt = 0u32;
            loop {
                match task.load_once().await {
                    Ok(()) => {
                        attempt = 0;
                        task.wake.notified().await;
                        // A burst of notifications (a migration) becomes one reload.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => {
                        task.schema.load_failed();
                        attempt = attempt.saturating_add(1);
                        // A catalog query can fail on an object dropped while it ran (DDL
                        // during a migration): retry soon, then back off.
                        let wait = Duration::from_millis(50 * 2u64.pow(attempt.min(10)));
                        let reason =
                            e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned());
                        tracing::error!(error = %reason, retry_in = ?wait, "loading the schema cache failed");
                        tokio::time::sleep(wait.min(Duration::from_secs(32))).await;
                    }
                }
            }
        });
        reloader
    }

    /// The statement that calls the pre-request function, if one is set (in the database or
    /// by `db-pre-request`), as of the last load.
    pub fn pre_request(&self) -> Option<Arc<String>> {
        self.pre_request.load_full()
    }

    /// Asks for a reload.
    pub fn request(&self) {
        if let Some(c) = &self.cache {
            c.reload_requested();
        }
        self.wake.notify_one();
    }

    async fn load_once(&self) -> Result<(), tokio_postgres::Error> {
        let started = std::time::Instant::now();
        let ticket = self.cache.as_ref().map(|c| c.reload_ticket());
        let mut client = crate::backend::postgres::connect(&self.target).await?;
        // PostgREST also reads its options from the role's settings (`db-config`); of those,
        // the pre-request function decides who gets in, so it is read here too. In a
        // transaction, as every statement here, so that a pooler in transaction mode keeps
        // a statement's parse and its execution on one server session.
        // Where the primary is before the catalog is read: replicas serve requests planned with
        // this cache once they have replayed that far (None when db-uri is a standby).
        let position = match &self.replicas {
            Some(_) => client
                .simple_query("SELECT pg_catalog.pg_current_wal_lsn()::text")
                .await
                .ok()
                .and_then(|m| super::first_value(&m))
                .and_then(|t| crate::lsn::parse(&t)),
            None => None,
        };
        let tx = client.build_transaction().read_only(true).start().await?;
        let in_database: Option<String> =
            tx.query_opt(PRE_REQUEST_IN_DATABASE, &[]).await?.map(|row| row.get(0));
        tx.commit().await?;
        let function = in_database.filter(|f| !f.is_empty()).or_else(|| self.config.db.pre_request.clone());
        self.pre_request.store(function.as_deref().map(|f| Arc::new(pre_request_statement(f))));
        let keyed = self.config.cache.key_claims.as_deref();
        let cache = super::introspect::load(&mut client, &self.config.db.schemas, keyed).await?;
        let relations = cache.relations.len();
        let functions = cache.functions.values().map(Vec::len).sum::<usize>();
        if let Some(rt) = &self.realtime {
            let tx = client.build_transaction().read_only(true).start().await?;
            let published = super::changes::install::published(&tx).await?;
            tx.commit().await?;
            rt.set_published(published);
        }
        if let (Some(replicas), Some(lsn)) = (&self.replicas, position) {
            replicas.schema_read_at(lsn);
        }
        self.schema.store_loaded(cache, started.elapsed());
        // Behind a pooler, pooled connections know the types of when they were made.
        self.db.retire();
        if let Some(replicas) = &self.replicas {
            replicas.retire();
        }
        // After the store: an answer planned with the old snapshot started before this flush.
        if let Some(c) = &self.cache {
            c.flush();
            c.reload_done(ticket.unwrap_or_default());
            let nothing_cacheable = relations > 0
                && self.schema.load().is_some_and(|s| {
                    s.dependencies.relations.values().all(|r| matches!(r, crate::schema::Reads::Unbounded))
                });
            c.feed_installed(!nothing_cacheable);
            if nothing_cacheable {
                // An error, so that the default log level shows it: every answer says
                // `X-Cache: bypass` until this is fixed.
                tracing::error!(
                    "cache-enabled, but no exposed table or view can be cached: is the change feed \
                     installed? Run `rowgate cache install --db-uri <a superuser's or the tables' owner's URI>`"
                );
            }
        }
        tracing::info!(relations, functions, elapsed = ?started.elapsed(), "schema cache loaded");
        Ok(())
    }
}

/// Reloads on SIGUSR1.
pub fn spawn_sigusr1(reloader: Reloader) {
    tokio::spawn(async move {
        let Ok(mut signal) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        else {
            tracing::error!("cannot listen for SIGUSR1; schema reloads by signal are off");
            return;
        };
        while signal.recv().await.is_some() {
            tracing::info!("SIGUSR1: reloading the schema cache");
            reloader.request();
        }
    });
}
