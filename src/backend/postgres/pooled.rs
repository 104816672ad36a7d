//! A pooled connection and what it remembers: its prepared statements (bounded), the session
//! settings it holds, whether a write's transaction is open, how its statements reach
//! PostgreSQL (`Mode`: prepared, or unnamed behind a pooler in transaction mode); and `Running`,
//! which cancels the statement of a request dropped midway.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::types::{Kind, Type};
use tokio_postgres::{Client, Statement};

use deadpool::managed::Object;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::pool::{set_config_sql, Manager};
use super::settings::SessionSettings;

/// Prepared statements kept per connection before the cache is cleared, bounding memory when
/// clients send many different query shapes.
const MAX_PREPARED: usize = 2000;

/// The SQL text those statements may hold per connection before the cache is cleared: a
/// statement's text grows with its URL (up to `server-max-url-length`), so a count alone would
/// let long ones hold tens of MB per connection, in rowgate and in PostgreSQL's backend.
const MAX_PREPARED_BYTES: usize = 4 * 1024 * 1024;

/// How a connection's statements and settings reach PostgreSQL.
#[derive(Clone)]
pub enum Mode {
    /// Statements prepared once and kept, session settings remembered and sent only when they
    /// differ: a connection is one PostgreSQL session.
    Session,
    /// Behind a pooler in transaction mode (`db-prepared-statements = false`), where each
    /// transaction may run on another server session: every statement is sent whole (unnamed),
    /// every request runs in a transaction of its own with all its settings transaction-local,
    /// and nothing is left on the session.
    Transaction {
        /// The settings sent as startup options in session mode (`statement_timeout`,
        /// `app.settings.*`), which a pooler refuses or drops: set in each transaction instead.
        startup: Arc<Vec<(String, String)>>,
    },
}

/// A statement as a connection runs it.
#[derive(Clone)]
pub enum Prepared {
    /// Prepared on the connection, run by name.
    Named(Statement),
    /// Sent whole with its parameters each time ([`Mode::Transaction`]).
    Unnamed(Arc<str>),
}

/// The type of a parameter left for PostgreSQL to infer (OID 0), as preparing does.
pub fn unspecified() -> Type {
    static UNSPECIFIED: std::sync::OnceLock<Type> = std::sync::OnceLock::new();
    UNSPECIFIED.get_or_init(|| Type::new("unspecified".into(), 0, Kind::Simple, "pg_catalog".into())).clone()
}

/// A pooled connection with its prepared statements and the session settings it holds.
pub struct PgConn {
    /// The client, shared with the requests a pipelined write left queued on it
    /// ([`PgConn::write_committed`]).
    pub client: Arc<Client>,
    statements: HashMap<String, Statement>,
    /// The length of their SQL texts.
    statement_bytes: usize,
    /// `SELECT set_config(...), ...` statements by number of settings: session-level, and
    /// transaction-local (`is_local`).
    settings_statements: [Vec<Option<Prepared>>; 2],
    /// The session settings this connection holds.
    pub settings: SessionSettings,
    /// Values of settings a request may leave unset (the server's own time zone).
    pub defaults: SessionSettings,
    /// A write's transaction is open: if its request is dropped midway (the client went
    /// away), the pool rolls it back before anyone else uses the connection.
    pub in_transaction: bool,
    /// How statements and settings are sent.
    pub mode: Mode,
    /// The pool's generation when this connection was made: behind a pooler, a schema reload
    /// retires older connections (their type cache may lack a type created since).
    pub(super) generation: u64,
    /// Behind a pooler, a type lookup failed (a type created since the connection was made):
    /// the pool drops it rather than hand it out again.
    pub broken: bool,
}

impl PgConn {
    /// A new connection whose server's own settings are `defaults`, holding nothing else yet.
    pub(super) fn new(client: Client, defaults: SessionSettings, mode: Mode, generation: u64) -> PgConn {
        PgConn {
            client: Arc::new(client),
            statements: HashMap::new(),
            statement_bytes: 0,
            settings_statements: [Vec::new(), Vec::new()],
            settings: SessionSettings::default(),
            defaults,
            in_transaction: false,
            broken: false,
            mode,
            generation,
        }
    }

    /// Forgets every prepared statement (PostgreSQL deallocates them as their handles drop).
    pub fn forget_statements(&mut self) {
        self.statements.clear();
        self.statement_bytes = 0;
    }

    /// Brings the session back to [`server_settings`] (nothing to do when it holds them, and
    /// nothing behind a pooler in transaction mode, where no setting outlives a transaction).
    pub(super) async fn reset_session(&mut self) -> Result<(), tokio_postgres::Error> {
        if self.transaction_pooled() {
            return Ok(());
        }
        let server = SessionSettings::default();
        let Some((stmt, values)) = self.settings_statement(&server).await? else { return Ok(()) };
        // Unknown until it has run: an abandoned reset must not leave a record saying otherwise.
        self.settings.forget();
        super::conn::execute(&self.client, &stmt, &values).await?;
        self.remember(&server);
        Ok(())
    }

    /// Whether `sql` is prepared on this connection.
    pub fn is_prepared(&self, sql: &str) -> bool {
        self.statements.contains_key(sql)
    }

    /// Whether this connection is behind a pooler in transaction mode.
    pub fn transaction_pooled(&self) -> bool {
        matches!(self.mode, Mode::Transaction { .. })
    }

    /// Records that the session holds `wanted` (with `defaults` for what it leaves unset); in
    /// transaction mode nothing is held past a transaction, so nothing is recorded.
    pub fn remember(&mut self, wanted: &SessionSettings) {
        if !self.transaction_pooled() {
            self.settings = SessionSettings::merged(wanted, &self.defaults);
        }
    }

    /// The statement for `sql`: prepared on first use and kept, or in transaction mode sent
    /// whole each time.
    pub async fn prepare_cached(&mut self, sql: &str) -> Result<Prepared, tokio_postgres::Error> {
        if self.transaction_pooled() {
            return Ok(Prepared::Unnamed(sql.into()));
        }
        if let Some(s) = self.statements.get(sql) {
            return Ok(Prepared::Named(s.clone()));
        }
        let stmt = self.client.prepare(sql).await?;
        if self.statements.len() >= MAX_PREPARED || self.statement_bytes + sql.len() > MAX_PREPARED_BYTES {
            self.statements.clear();
            self.statement_bytes = 0;
        }
        self.statement_bytes += sql.len();
        self.statements.insert(sql.to_owned(), stmt.clone());
        Ok(Prepared::Named(stmt))
    }

    /// The statement and its parameters that bring this connection's settings to `wanted`,
    /// or `None` when it already holds them.
    pub async fn settings_statement(
        &mut self,
        wanted: &SessionSettings,
    ) -> Result<Option<(Prepared, Vec<String>)>, tokio_postgres::Error> {
        self.settings_statement_scoped(wanted, false).await
    }

    /// Like [`PgConn::settings_statement`], but the settings last only until the end of the
    /// current transaction (what the connection holds is unchanged).
    pub async fn local_settings_statement(
        &mut self,
        wanted: &SessionSettings,
    ) -> Result<Option<(Prepared, Vec<String>)>, tokio_postgres::Error> {
        self.settings_statement_scoped(wanted, true).await
    }

    /// In transaction mode, every setting of `wanted` and the startup ones, transaction-local,
    /// for the statement after BEGIN; in session mode none (they were set before BEGIN).
    pub async fn in_transaction_settings(
        &mut self,
        wanted: &SessionSettings,
    ) -> Result<Option<(Prepared, Vec<String>)>, tokio_postgres::Error> {
        match self.mode {
            Mode::Transaction { .. } => self.settings_statement_scoped(wanted, true).await,
            Mode::Session => Ok(None),
        }
    }

    async fn settings_statement_scoped(
        &mut self,
        wanted: &SessionSettings,
        local: bool,
    ) -> Result<Option<(Prepared, Vec<String>)>, tokio_postgres::Error> {
        let diff = self.settings.differing(wanted, &self.defaults);
        let startup = match &self.mode {
            Mode::Transaction { startup } => Some(startup.clone()),
            Mode::Session => None,
        };
        let mut values: Vec<String> = Vec::with_capacity(2 * diff.len());
        for (k, v) in startup.iter().flat_map(|s| s.iter()).map(|(k, v)| (k.as_str(), v.as_str())).chain(diff)
        {
            values.push(k.to_owned());
            values.push(v.to_owned());
        }
        if values.is_empty() {
            return Ok(None);
        }
        let n = values.len() / 2;
        let transaction_pooled = startup.is_some();
        let cache = &mut self.settings_statements[usize::from(local)];
        if cache.len() <= n {
            cache.resize(n + 1, None);
        }
        let stmt = match &cache[n] {
            Some(s) => s.clone(),
            None => {
                let sql = set_config_sql(n, local);
                let s = match transaction_pooled {
                    true => Prepared::Unnamed(sql.into()),
                    false => Prepared::Named(self.client.prepare(&sql).await?),
                };
                self.settings_statements[usize::from(local)][n] = Some(s.clone());
                s
            }
        };
        Ok(Some((stmt, values)))
    }
}

/// A pooled connection while a request's statement runs on it. If the request is dropped
/// before [`Running::done`] (its client went away), the statement is cancelled (a cancel
/// request beside the connection) and the connection comes back to the pool only once a
/// statement after it has answered, so the cancel can only ever reach the abandoned one.
pub struct Running {
    conn: Option<Object<Manager>>,
    /// The TLS the cancel request is sent with.
    tls: MakeRustlsConnect,
}

impl Running {
    /// Watches `conn` until [`Running::done`].
    pub fn new(conn: Object<Manager>, tls: MakeRustlsConnect) -> Running {
        Running { conn: Some(conn), tls }
    }

    /// The statements are over (whatever they answered): the connection goes back to the pool
    /// as usual when dropped.
    pub fn done(mut self) -> Object<Manager> {
        self.conn.take().expect("a connection until finished")
    }
}

impl std::ops::Deref for Running {
    type Target = PgConn;
    fn deref(&self) -> &PgConn {
        self.conn.as_ref().expect("a connection until finished")
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut PgConn {
        self.conn.as_mut().expect("a connection until finished")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else { return };
        // Whatever the abandoned request set may be half-applied.
        conn.settings.forget();
        let tls = self.tls.clone();
        tokio::spawn(async move {
            let _ = conn.client.cancel_token().cancel_query(tls).await;
            // Statements run in order: once this answers, the abandoned one is over (finished
            // or cancelled) and a late cancel signal finds the connection idle, which ignores it.
            let _ = conn.client.simple_query("SELECT 1").await;
            drop(conn);
        });
    }
}
