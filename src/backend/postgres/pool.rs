//! The connection pool (deadpool): its manager, which makes, learns and recycles connections,
//! and the two doors a connection leaves it by (`Db::get_for_request`, `Db::get_as_server`).
//! What each pooled connection remembers is `pooled.rs`.

use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, Pool, PoolError, RecycleError, RecycleResult, Timeouts};
use tokio_postgres::types::{Kind, Type};
use tokio_postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::pooled::{Mode, PgConn};
use super::settings::{SessionSettings, Setting};
use super::tls::PgTarget;
use crate::config::Config;
use crate::error::Error;

/// Opens one connection to `target` (with the TLS it asks for) and drives it on a background
/// task.
pub async fn connect(target: &PgTarget) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = target.config.connect(target.connector()).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "database connection closed");
        }
    });
    Ok(client)
}

/// The first value of the first row of a simple query's answer.
pub fn first_value(messages: &[tokio_postgres::SimpleQueryMessage]) -> Option<String> {
    messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    })
}

/// `SELECT set_config($1, $2, local), ...` for `n` settings, their names and values the
/// parameters in pairs.
pub fn set_config_sql(n: usize, local: bool) -> String {
    let calls: Vec<String> =
        (0..n).map(|i| format!("set_config(${}, ${}, {local})", 2 * i + 1, 2 * i + 2)).collect();
    format!("SELECT {}", calls.join(", "))
}

/// Opens one connection without TLS, whatever `config` says: for the PostgreSQL rowgate starts
/// itself (`rowgate cluster`, the tests), which listens on the loopback address only.
pub async fn connect_without_tls(config: &tokio_postgres::Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "database connection closed");
        }
    });
    Ok(client)
}

/// Creates and checks pooled connections.
pub struct Manager {
    target: PgTarget,
    mode: Mode,
    /// Bumped by a schema reload in transaction mode: connections made before it are retired.
    generation: std::sync::atomic::AtomicU64,
}

/// The types a result column may have that tokio-postgres does not know by itself: enums,
/// domains, ranges, base types of extensions, composite types (not tables' row types), and
/// arrays of them; `information_schema.sql_identifier` (a domain every database has) first.
const USER_TYPES: &str = "SELECT 'information_schema.sql_identifier'::regtype::oid UNION ALL (
  SELECT t.oid FROM pg_catalog.pg_type t
  JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
  LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
  JOIN pg_catalog.pg_type b ON b.oid = coalesce(e.oid, t.oid)
  WHERE n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
    AND t.typisdefined AND t.typtype <> 'p'
    AND (b.typtype IN ('b', 'e', 'd', 'r', 'm') OR (b.typtype = 'c'
      AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = b.typrelid AND c.relkind = 'c')))
  ORDER BY 1)";

/// Teaches a new connection's client the database's types (see [`USER_TYPES`]), in one
/// transaction that ends by deallocating the statements tokio-postgres prepared to look them
/// up. Behind a pooler in transaction mode a named statement prepared in one transaction may be
/// missing in the next (another server session), or left behind on a session another client
/// then gets: so the lookups happen here, where they are safe, and none is left prepared. A type
/// created later fails its lookup with 26000, and the reload that follows retires the
/// connection ([`Db::retire`]). The types are declared as a statement's parameters, by OID:
/// naming them would need `USAGE` on their schemas, which the authenticator may lack.
async fn learn_types(client: &Client) -> Result<(), tokio_postgres::Error> {
    use futures_util::TryStreamExt;
    // A session the pooler lends may hold statements another client left: none may clash.
    client.batch_execute("BEGIN READ ONLY; DEALLOCATE ALL").await?;
    let learned = async {
        let oids: Vec<u32> = client
            .query_typed_raw(USER_TYPES, std::iter::empty::<(&str, Type)>())
            .await?
            .map_ok(|row| row.get::<_, u32>(0))
            .try_collect()
            .await?;
        for chunk in oids.chunks(1000) {
            let declared: Vec<Type> =
                chunk.iter().map(|oid| Type::new(String::new(), *oid, Kind::Simple, String::new())).collect();
            // Its parameter description names each type, which tokio-postgres then looks up.
            client.prepare_typed("SELECT 1", &declared).await?;
        }
        Ok::<_, tokio_postgres::Error>(())
    }
    .await;
    let ended =
        // A rollback does not undo PREPARE: deallocated either way.
        client.batch_execute(if learned.is_ok() { "DEALLOCATE ALL; COMMIT" } else { "ROLLBACK; DEALLOCATE ALL" }).await;
    learned.and(ended)
}

/// What a new connection's session holds before any request sets anything: the server's own
/// time zone, search path and transaction mode, no role switched to, and no `request.*` value.
/// A request leaves unset what it does not ask for at these values, and work the server does
/// on its own ([`Db::get_as_server`]) runs with all of them.
async fn server_settings(client: &Client) -> Result<SessionSettings, tokio_postgres::Error> {
    let answer = client
        .simple_query(
            "SELECT current_setting('timezone'), current_setting('search_path'), \
             current_setting('default_transaction_read_only')",
        )
        .await?;
    let row = answer.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    });
    let value = |i: usize, or: &str| row.and_then(|r| r.get(i)).unwrap_or(or).to_owned();
    let mut s = SessionSettings::default();
    s.set(Setting::TimeZone, value(0, "UTC"));
    s.set(Setting::SearchPath, value(1, "\"$user\", public"));
    s.set(Setting::ReadOnly, value(2, "off"));
    s.set(Setting::Role, "none".into());
    for unset in [Setting::JwtClaims, Setting::Method, Setting::Path, Setting::Headers, Setting::Cookies] {
        s.set(unset, String::new());
    }
    Ok(s)
}

impl managed::Manager for Manager {
    type Type = PgConn;
    type Error = tokio_postgres::Error;

    async fn create(&self) -> Result<PgConn, tokio_postgres::Error> {
        let generation = self.generation.load(std::sync::atomic::Ordering::Acquire);
        let client = connect(&self.target).await?;
        let defaults = server_settings(&client).await?;
        if let Mode::Transaction { .. } = self.mode {
            learn_types(&client).await?;
        }
        Ok(PgConn::new(client, defaults, self.mode.clone(), generation))
    }

    async fn recycle(&self, conn: &mut PgConn, _: &Metrics) -> RecycleResult<tokio_postgres::Error> {
        if conn.client.is_closed() || conn.broken {
            return Err(RecycleError::message("connection closed"));
        }
        if conn.generation < self.generation.load(std::sync::atomic::Ordering::Acquire) {
            return Err(RecycleError::message("retired after a schema reload"));
        }
        if conn.in_transaction {
            conn.client.batch_execute("ROLLBACK").await?;
            conn.in_transaction = false;
            // Session settings set inside the abandoned transaction are gone with it.
            conn.settings.forget();
        }
        Ok(())
    }
}

/// The pool of connections to PostgreSQL.
#[derive(Clone)]
pub struct Db {
    pool: Pool<Manager>,
    /// Writes in progress are held below the pool size, so that reads (cache misses above all,
    /// which are short) find a connection without queueing behind a burst of writes.
    writers: Arc<tokio::sync::Semaphore>,
    /// Writes queued whole on connections that are back in the pool
    /// ([`PgConn::write_committed`]): bounded, so that reads never find long queues ahead.
    pipelined: Arc<tokio::sync::Semaphore>,
    acquisition_timeout: Duration,
    /// What connections are made from (and cancel requests sent with).
    tls: MakeRustlsConnect,
    /// Requests that found no connection within `db-pool-acquisition-timeout`.
    timeouts: Arc<std::sync::atomic::AtomicU64>,
}

/// A connection for a write, holding one of the write slots until it is dropped.
pub struct WriteConn {
    /// The connection.
    pub conn: Object<Manager>,
    _slot: tokio::sync::OwnedSemaphorePermit,
    running: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl WriteConn {
    /// Gives the connection and the write slot back, for a write whose requests are all queued
    /// on the connection; the returned permit counts it among the pipelined writes until dropped.
    pub fn release_connection(self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.running
    }
}

/// One setting as PostgreSQL's startup `options` read it: it splits on any whitespace unless a
/// backslash precedes it, so every whitespace character and backslash is escaped (a value can
/// never become a second `-c`); NUL, which the startup packet cannot carry, is dropped.
fn escape_option(setting: &str) -> String {
    let mut out = String::with_capacity(setting.len());
    for c in setting.chars().filter(|c| *c != '\0') {
        if c == '\\' || c.is_ascii_whitespace() || c == '\u{0b}' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Db {
    /// Builds the pool of connections to `target`; none is opened until one is needed.
    pub fn new(config: &Config, target: &PgTarget) -> Db {
        let mut target = target.clone();
        let pg = &mut target.config;
        pg.application_name("rowgate");
        // Session settings every request runs with, sent once as each connection opens:
        // `db-statement-timeout` and PostgREST's `app.settings.*` (PostgREST sets those in every
        // transaction; a function that changes one changes it for later requests here).
        let startup: Vec<(String, String)> = config
            .db
            .statement_timeout
            .map(|t| ("statement_timeout".to_owned(), t.as_millis().to_string()))
            .into_iter()
            .chain(config.app_settings.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect();
        let mode = match config.db.prepared_statements {
            true => Mode::Session,
            // A pooler refuses startup options or drops them: they go in each transaction.
            false => Mode::Transaction { startup: Arc::new(startup.clone()) },
        };
        let mut options: Vec<String> = match mode {
            Mode::Session => {
                startup.iter().map(|(k, v)| format!("-c {}", escape_option(&format!("{k}={v}")))).collect()
            }
            Mode::Transaction { .. } => Vec::new(),
        };
        if !options.is_empty() {
            options.sort();
            // After the options the URI gives, which stay.
            let given = pg.get_options().map(str::to_owned);
            options.insert(0, given.unwrap_or_default());
            pg.options(options.join(" ").trim_start());
        }
        pg.connect_timeout(Duration::from_secs(5));
        let tls = target.connector();
        let pool = Pool::builder(Manager { target, mode, generation: Default::default() })
            .max_size(config.db.pool)
            .timeouts(Timeouts {
                wait: Some(config.db.pool_acquisition_timeout),
                create: Some(Duration::from_secs(5)),
                recycle: Some(Duration::from_secs(5)),
            })
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("a runtime is set");
        // One connection in five (at least one) is kept for reads.
        let writers = config.db.pool.saturating_sub((config.db.pool / 5).max(1)).max(1);
        Db {
            pool,
            writers: Arc::new(tokio::sync::Semaphore::new(writers)),
            pipelined: Arc::new(tokio::sync::Semaphore::new(config.db.pool.saturating_mul(4).max(1))),
            acquisition_timeout: config.db.pool_acquisition_timeout,
            tls,
            timeouts: Arc::default(),
        }
    }

    /// Behind a pooler in transaction mode, retires every connection made so far (as each
    /// comes back to the pool), so the next ones learn the types a schema change created.
    pub fn retire(&self) {
        let manager = self.pool.manager();
        if let Mode::Transaction { .. } = manager.mode {
            manager.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            self.pool.retain(|_, _| false);
        }
    }

    /// The TLS connections are made with, for a [`Running`] statement's cancel request.
    pub fn tls(&self) -> MakeRustlsConnect {
        self.tls.clone()
    }

    /// A connection for a write (see [`Db`]'s write slots).
    /// For a write to be pipelined ([`WriteConn::release_connection`]), also one of the
    /// pipelined writes' permits.
    pub async fn get_for_write(&self, pipelined: bool) -> Result<WriteConn, Error> {
        let acquire = |s: &Arc<tokio::sync::Semaphore>| {
            tokio::time::timeout(self.acquisition_timeout, s.clone().acquire_owned())
        };
        let running = match pipelined {
            true => {
                Some(acquire(&self.pipelined).await.map_err(|_| Error::PoolTimeout)?.expect("never closed"))
            }
            false => None,
        };
        let slot = acquire(&self.writers).await.map_err(|_| Error::PoolTimeout)?.expect("never closed");
        Ok(WriteConn { conn: self.get_for_request().await?, _slot: slot, running })
    }

    /// A connection for a request of the API, whose statements run only through
    /// [`PgConn::read`] and [`PgConn::write`]: they bring every setting to the request's own
    /// (from what the session holds, or in full when that is unknown) before its statement,
    /// so nothing a previous borrower set is inherited. 504 PGRST003 when none frees up in
    /// time, 503 when PostgreSQL cannot be reached.
    pub async fn get_for_request(&self) -> Result<Object<Manager>, Error> {
        self.get().await
    }

    /// A connection for work the server does outside a request's pipeline (storage's rows,
    /// API keys, realtime's rights, the API's description), its session brought back to what
    /// the authenticator had on connecting ([`server_settings`]): no role switched to,
    /// read-write, no request's claims or headers. Behind a pooler in transaction mode
    /// nothing is held past a transaction, and such work sets what it needs in its own.
    pub async fn get_as_server(&self) -> Result<Object<Manager>, Error> {
        let mut conn = self.get().await?;
        conn.reset_session().await.map_err(|e| super::db_error(e, false))?;
        Ok(conn)
    }

    async fn get(&self) -> Result<Object<Manager>, Error> {
        // Boxed: deadpool's future is ~6.7 KB, carried by every request's future and copied at
        // each `.await` on the way down; one allocation costs less.
        Box::pin(self.pool.get()).await.map_err(|e| match e {
            PoolError::Timeout(managed::TimeoutType::Wait) => {
                self.timeouts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Error::PoolTimeout
            }
            PoolError::Backend(e) => match e.as_db_error() {
                Some(db) => Error::Unavailable(format!("{}: {}", db.code().code(), db.message())),
                None => Error::Unavailable(e.to_string()),
            },
            other => Error::Unavailable(other.to_string()),
        })
    }

    /// Pool size and idle connections, for `/ready`.
    pub fn status(&self) -> managed::Status {
        self.pool.status()
    }

    /// PostgREST's pool metrics, in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let s = self.pool.status();
        let _ = write!(
            out,
            "# HELP pgrst_db_pool_timeouts_total The total number of pool connection timeouts\n\
             # TYPE pgrst_db_pool_timeouts_total counter\n\
             pgrst_db_pool_timeouts_total {}\n\
             # HELP pgrst_db_pool_available Available connections in the pool\n\
             # TYPE pgrst_db_pool_available gauge\n\
             pgrst_db_pool_available {}\n\
             # HELP pgrst_db_pool_waiting Requests waiting to acquire a pool connection\n\
             # TYPE pgrst_db_pool_waiting gauge\n\
             pgrst_db_pool_waiting {}\n\
             # HELP pgrst_db_pool_max Max pool connections\n\
             # TYPE pgrst_db_pool_max gauge\n\
             pgrst_db_pool_max {}\n",
            self.timeouts.load(std::sync::atomic::Ordering::Relaxed),
            s.available,
            s.waiting,
            s.max_size
        );
    }
}

#[cfg(test)]
mod tests {
    use super::escape_option;

    #[test]
    fn a_setting_stays_one_startup_option() {
        assert_eq!(
            escape_option("app.settings.x=a b\t-c\nsearch_path=evil\\"),
            "app.settings.x=a\\ b\\\t-c\\\nsearch_path=evil\\\\"
        );
        assert_eq!(escape_option("k=v\0w"), "k=vw");
    }
}
