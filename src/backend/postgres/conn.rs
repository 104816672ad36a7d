//! Running a request's statements on a pooled connection: reads with their settings pipelined
//! ahead, writes in a transaction left open until their outcome is checked, and writes queued whole.

use super::pooled::{unspecified, Prepared};
use super::{PgConn, RawValue, SessionSettings, Setting, TextParam};
use tokio_postgres::Row;

use crate::backend::Statement;
use crate::error::Error;
use crate::outcome::SetBySql;

/// The rows of a read, and the count statement's answer when one was asked for.
pub struct ReadResult {
    /// Rows of the main statement.
    pub rows: Vec<Row>,
    /// The plan of the count query (`EXPLAIN (FORMAT JSON)` output), for planned counts.
    pub explain: Option<String>,
    /// What SQL left in `response.headers` and `response.status`, when [`Hooks::response`].
    pub gucs: SetBySql,
}

/// PostgREST's hooks around a request's statement, in its transaction: `db-pre-request` called
/// before it, and `response.headers` / `response.status` read after it. Either one makes a read
/// run in an explicit transaction (still one round trip), as the settings they see and leave
/// are transaction-local.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hooks<'a> {
    /// `SELECT "schema"."fn"()`, from `db-pre-request`.
    pub pre_request: Option<&'a str>,
    /// Read `response.headers` and `response.status` after the statement.
    pub response: bool,
}

impl Hooks<'_> {
    fn wrap(&self) -> bool {
        self.pre_request.is_some() || self.response
    }
}

/// Reads [`SetBySql`]; an unset setting is NULL, one set by an earlier transaction of the
/// session is ''.
const READ_GUCS: &str = "SELECT nullif(pg_catalog.current_setting('response.headers', true), ''), \
                         nullif(pg_catalog.current_setting('response.status', true), '')";

/// [`SetBySql`], when `statement` (a prepared [`READ_GUCS`]) is given.
async fn read_gucs(
    client: &tokio_postgres::Client,
    statement: Option<&Prepared>,
) -> Result<SetBySql, tokio_postgres::Error> {
    let Some(statement) = statement else { return Ok(SetBySql::default()) };
    let rows = query(client, statement, &[]).await?;
    Ok(rows.first().map(|r| SetBySql { headers: r.get(0), status: r.get(1) }).unwrap_or_default())
}

/// One simple-protocol step of a pipeline, when there is one (BEGIN, db-pre-request, COMMIT).
async fn simple(client: &tokio_postgres::Client, sql: Option<&str>) -> Result<(), tokio_postgres::Error> {
    match sql {
        Some(sql) => client.batch_execute(sql).await,
        None => Ok(()),
    }
}

/// A settings statement of a pipeline, when there is one.
async fn set(
    client: &tokio_postgres::Client,
    settings: Option<&(Prepared, Vec<String>)>,
) -> Result<(), tokio_postgres::Error> {
    match settings {
        Some((stmt, values)) => execute(client, stmt, values).await.map(drop),
        None => Ok(()),
    }
}

impl PgConn {
    /// The BEGIN of a request's transaction: in transaction mode it says whether the
    /// transaction may write, as no session-level `default_transaction_read_only` does.
    fn begin_sql(&self, wanted: &SessionSettings) -> &'static str {
        match (self.transaction_pooled(), wanted.get(Setting::ReadOnly)) {
            (false, _) => "BEGIN",
            (true, Some("on")) => "BEGIN READ ONLY",
            (true, _) => "BEGIN READ WRITE",
        }
    }
}

impl PgConn {
    /// Runs a read: the settings that differ, the main statement and an optional EXPLAIN, in one
    /// pipelined round trip once the statements are prepared; with `hooks`, in a transaction
    /// of their own.
    pub async fn read(
        &mut self,
        wanted: &SessionSettings,
        main: &Statement,
        explain: Option<&Statement>,
        hooks: Hooks<'_>,
        anonymous: bool,
    ) -> Result<ReadResult, Error> {
        match self.read_once(wanted, main, explain, hooks, anonymous).await {
            // A column changed type since the statement was prepared (a migration followed by a
            // schema reload): prepare again, once.
            Err(Error::Database(db)) if is_stale_plan(&db) => {
                self.forget_statements();
                self.read_once(wanted, main, explain, hooks, anonymous).await
            }
            // Behind a pooler, a type this connection never learned: a schema change the cache
            // has not seen. The reload that SchemaChanged asks for makes connections that know it.
            Err(Error::Database(db)) if self.lost_type_lookup(&db) => Err(Error::SchemaChanged),
            other => other,
        }
    }

    async fn read_once(
        &mut self,
        wanted: &SessionSettings,
        main: &Statement,
        explain: Option<&Statement>,
        hooks: Hooks<'_>,
        anonymous: bool,
    ) -> Result<ReadResult, Error> {
        let pooled = self.transaction_pooled();
        let mut settings_stmt = match pooled {
            // After BEGIN, transaction-local.
            true => None,
            false => self.settings_statement(wanted).await.map_err(|e| db_error(e, anonymous))?,
        };
        let local = self.in_transaction_settings(wanted).await.map_err(|e| db_error(e, anonymous))?;
        // The settings statement and the query run as two implicit transactions: if switching
        // the role failed (a token's role that does not exist or cannot be switched to), the
        // query would still run, as whoever the connection was before. The other settings
        // cannot fail (values are strings, time zones are checked against the schema cache).
        let role_changes = settings_stmt.is_some()
            && (self.settings.get(Setting::Role).is_none()
                || self.settings.get(Setting::Role) != wanted.get(Setting::Role));
        if settings_stmt.is_some() {
            // Until the settings statement is known to have run, the connection holds unknown
            // settings: a read dropped midway (its client went away) must not leave the record
            // saying otherwise, or a later write could run read-only or as the wrong role.
            self.settings.forget();
        }
        let cached = self.is_prepared(&main.text) && explain.is_none_or(|s| self.is_prepared(&s.text));
        if !cached || role_changes {
            // Settings first, on their own: so a failure stops the request, and because parsing
            // checks schema privileges as the current role, a statement is prepared only once
            // the request's role is in force.
            if let Some((stmt, values)) = settings_stmt.take() {
                let applied = execute(&self.client, &stmt, &values).await;
                if let Err(e) = applied {
                    self.settings.forget();
                    return Err(db_error(e, anonymous));
                }
                self.remember(wanted);
            }
        }
        let main_stmt = self.prepare_cached(&main.text).await.map_err(|e| db_error(e, anonymous))?;
        let explain_stmt = match explain {
            Some(s) => Some(self.prepare_cached(&s.text).await.map_err(|e| db_error(e, anonymous))?),
            None => None,
        };
        let gucs_stmt = self.gucs_statement(hooks, anonymous).await?;
        // Behind a pooler every request is a transaction of its own, its settings inside.
        let wrap = hooks.wrap() || pooled;
        // Should the request be dropped midway, the pool rolls back whatever is left open.
        self.in_transaction = wrap;
        let begin_sql = self.begin_sql(wanted);
        let client = &self.client;
        let settings_fut = set(client, settings_stmt.as_ref());
        let begin_fut = simple(client, wrap.then_some(begin_sql));
        let local_fut = set(client, local.as_ref());
        let pre_fut = simple(client, hooks.pre_request);
        let main_fut = query(client, &main_stmt, &main.params);
        let explain_fut = async {
            match (&explain_stmt, explain) {
                (Some(stmt), Some(s)) => {
                    let rows = query(client, stmt, &s.params).await?;
                    let mut plan = String::new();
                    for row in rows {
                        if let Some(RawValue(text)) = row.get::<_, Option<RawValue>>(0) {
                            plan.push_str(&String::from_utf8_lossy(text));
                        }
                    }
                    Ok(Some(plan))
                }
                _ => Ok::<_, tokio_postgres::Error>(None),
            }
        };
        let gucs_fut = read_gucs(client, gucs_stmt.as_ref());
        // A failed transaction's COMMIT rolls it back, and answers without an error.
        let commit_fut = simple(client, wrap.then_some("COMMIT"));
        let (set, begun, local_set, pre, rows, plan, gucs, committed) = futures_util::join!(
            settings_fut,
            begin_fut,
            local_fut,
            pre_fut,
            main_fut,
            explain_fut,
            gucs_fut,
            commit_fut
        );
        self.in_transaction = false;
        if let Err(e) = set {
            self.settings.forget();
            return Err(db_error(e, anonymous));
        }
        if settings_stmt.is_some() {
            self.remember(wanted);
        }
        self.forget_after(hooks);
        // The first failure in pipeline order is the cause; the ones after it are "current
        // transaction is aborted".
        begun.and(local_set).and(pre).map_err(|e| db_error(e, anonymous))?;
        let rows = rows.map_err(|e| db_error(e, anonymous))?;
        let explain = plan.map_err(|e| db_error(e, anonymous))?;
        let gucs = gucs.map_err(|e| db_error(e, anonymous))?;
        committed.map_err(|e| db_error(e, anonymous))?;
        Ok(ReadResult { rows, explain, gucs })
    }
}

impl PgConn {
    /// Whether `db` is tokio-postgres's look-up of a type failing behind a pooler (its
    /// statement was deallocated when the connection learned the types it knew); if so, the
    /// connection is marked broken.
    fn lost_type_lookup(&mut self, db: &crate::error::DatabaseError) -> bool {
        let lost = self.transaction_pooled() && db.code == "26000";
        self.broken |= lost;
        lost
    }

    /// In transaction mode, sets the startup settings (`statement_timeout`, `app.settings.*`)
    /// for the transaction just begun, for work outside a request's pipeline (storage).
    pub async fn set_startup_locally(&mut self) -> Result<(), tokio_postgres::Error> {
        let super::pooled::Mode::Transaction { startup } = &self.mode else { return Ok(()) };
        if startup.is_empty() {
            return Ok(());
        }
        let values: Vec<String> = startup.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect();
        let sql = Prepared::Unnamed(super::pool::set_config_sql(startup.len(), true).into());
        execute(&self.client, &sql, &values).await.map(drop)
    }

    /// Runs `sql` on its own (an implicit transaction) with text-format parameters.
    pub async fn query_text(
        &mut self,
        sql: &str,
        params: &[String],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let stmt = self.prepare_cached(sql).await?;
        query(&self.client, &stmt, params).await
    }
}

/// What a write's statement returned, its transaction still open.
pub struct WriteResult {
    /// The rows (for statements that return rows).
    pub rows: Vec<Row>,
    /// Rows the bare statement affected (for statements that return none).
    pub affected: u64,
    /// What SQL left in `response.headers` and `response.status`, when [`Hooks::response`].
    pub gucs: SetBySql,
}

impl PgConn {
    /// Runs a write's statement in a transaction left open for [`PgConn::finish`], so the
    /// outcome's checks can still roll it back (a failed singular, max-affected or PUT check,
    /// `Prefer: tx=rollback`). If the statement fails, the transaction is rolled back here.
    pub async fn write(
        &mut self,
        wanted: &SessionSettings,
        main: &Statement,
        returns_rows: bool,
        hooks: Hooks<'_>,
        anonymous: bool,
    ) -> Result<WriteResult, Error> {
        self.apply_settings(wanted, anonymous).await?;
        let local = self.in_transaction_settings(wanted).await.map_err(|e| db_error(e, anonymous))?;
        let stmt = self.prepare_cached(&main.text).await.map_err(|e| db_error(e, anonymous))?;
        let gucs_stmt = self.gucs_statement(hooks, anonymous).await?;
        self.in_transaction = true;
        let client = &self.client;
        // BEGIN, the hooks and the statement travel in one round trip.
        let begin = client.batch_execute(self.begin_sql(wanted));
        let local_set = set(client, local.as_ref());
        let pre = simple(client, hooks.pre_request);
        let run = run_write(client, &stmt, &main.params, returns_rows);
        let gucs = read_gucs(client, gucs_stmt.as_ref());
        let ran = futures_util::join!(begin, local_set, pre, run, gucs);
        self.forget_after(hooks);
        match ran {
            (Ok(()), Ok(()), Ok(()), Ok((rows, affected)), Ok(gucs)) => {
                Ok(WriteResult { rows, affected, gucs })
            }
            (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), ..) | (_, _, _, Err(e), _) | (.., Err(e)) => {
                let _ = self.finish(false, anonymous).await;
                let e = db_error(e, anonymous);
                if let Error::Database(db) = &e {
                    self.lost_type_lookup(db);
                }
                Err(e)
            }
        }
    }

    /// Queues a write's whole transaction on the connection — BEGIN READ WRITE, the request's
    /// settings (transaction-local), the statement, `before_commit` (one statement, rowgate's
    /// own text) and COMMIT — and returns it running, for writes whose response cannot fail
    /// ([`crate::plan::MutatePlan::commits_blind`]). Every request is on the connection when
    /// this returns, and the COMMIT ends the transaction whatever fails before it (PostgreSQL
    /// rolls back an aborted one), leaving the session as it was: the connection can go back to
    /// the pool at once and serve the next request behind this one while it runs.
    pub async fn write_committed(
        &mut self,
        wanted: &SessionSettings,
        main: &Statement,
        returns_rows: bool,
        before_commit: Option<String>,
        hooks: Hooks<'_>,
        anonymous: bool,
    ) -> Result<Pipelined, Error> {
        let pooled = self.transaction_pooled();
        let local = if pooled || self.is_prepared(&main.text) {
            self.local_settings_statement(wanted).await.map_err(|e| db_error(e, anonymous))?
        } else {
            // Parsing checks privileges as the current role: the request's settings first.
            self.apply_settings(wanted, anonymous).await?;
            None
        };
        let stmt = self.prepare_cached(&main.text).await.map_err(|e| db_error(e, anonymous))?;
        let gucs_stmt = self.gucs_statement(hooks, anonymous).await?;
        let pre_request_sql = hooks.pre_request.map(str::to_owned);
        // Queued behind this write, the next request on the connection sets everything again.
        self.forget_after(hooks);
        let client = self.client.clone();
        let params = main.params.clone();
        let mut running = Box::pin(async move {
            let client = &client;
            // READ WRITE: the session may hold a read's `default_transaction_read_only`, which
            // the local settings cannot change for a transaction already begun.
            let begin = client.batch_execute("BEGIN READ WRITE");
            let set = set(client, local.as_ref());
            let pre = simple(client, pre_request_sql.as_deref());
            let run = run_write(client, &stmt, &params, returns_rows);
            let gucs = read_gucs(client, gucs_stmt.as_ref());
            let marker = simple(client, before_commit.as_deref());
            let commit = client.batch_execute("COMMIT");
            match futures_util::join!(begin, set, pre, run, gucs, marker, commit) {
                (Ok(()), Ok(()), Ok(()), Ok((rows, affected)), Ok(gucs), Ok(()), Ok(())) => {
                    Ok(WriteResult { rows, affected, gucs })
                }
                (Err(e), ..)
                | (_, Err(e), ..)
                | (_, _, Err(e), ..)
                | (_, _, _, Err(e), ..)
                | (.., Err(e), _, _)
                | (.., Err(e), _)
                | (.., Err(e)) => Err(db_error(e, anonymous)),
            }
        });
        if pooled {
            // A pooler may hand the server session to another client once a transaction ends:
            // none is queued behind this one.
            let done = running.await;
            if let Err(Error::Database(db)) = &done {
                self.lost_type_lookup(db);
            }
            return Ok(Pipelined(Box::pin(std::future::ready(done))));
        }
        // The first poll puts every request on the connection, in order.
        if let std::task::Poll::Ready(done) = futures_util::poll!(running.as_mut()) {
            return Ok(Pipelined(Box::pin(std::future::ready(done))));
        }
        Ok(Pipelined(running))
    }

    /// Brings the connection's session settings to `wanted`, in a statement (and implicit
    /// transaction) of its own: no later rollback can undo them behind the back of the
    /// connection's record of what it holds.
    async fn apply_settings(&mut self, wanted: &SessionSettings, anonymous: bool) -> Result<(), Error> {
        if self.transaction_pooled() {
            // Transaction-local, after BEGIN (in_transaction_settings).
            return Ok(());
        }
        if let Some((stmt, values)) =
            self.settings_statement(wanted).await.map_err(|e| db_error(e, anonymous))?
        {
            self.settings.forget();
            if let Err(e) = execute(&self.client, &stmt, &values).await {
                self.settings.forget();
                return Err(db_error(e, anonymous));
            }
            self.remember(wanted);
        }
        Ok(())
    }

    /// The prepared read of the response settings, when `hooks` asks for it.
    async fn gucs_statement(&mut self, hooks: Hooks<'_>, anonymous: bool) -> Result<Option<Prepared>, Error> {
        if !hooks.response {
            return Ok(None);
        }
        self.prepare_cached(READ_GUCS).await.map(Some).map_err(|e| db_error(e, anonymous))
    }

    /// Forgets what the connection holds after a pre-request function ran: it may have
    /// changed session settings (`SET ROLE`, `set_config(.., false)`) behind the record's back.
    fn forget_after(&mut self, hooks: Hooks<'_>) {
        if hooks.pre_request.is_some() {
            self.settings.forget();
        }
    }

    /// Opens a transaction with the request's settings in force and calls the pre-request
    /// function, for a write of several statements ([`PgConn::run`] each, then
    /// [`PgConn::finish`]).
    pub async fn begin(
        &mut self,
        wanted: &SessionSettings,
        hooks: Hooks<'_>,
        anonymous: bool,
    ) -> Result<(), Error> {
        self.apply_settings(wanted, anonymous).await?;
        let local = self.in_transaction_settings(wanted).await.map_err(|e| db_error(e, anonymous))?;
        self.in_transaction = true;
        self.forget_after(hooks);
        let client = &self.client;
        let (begun, local_set, pre) = futures_util::join!(
            client.batch_execute(self.begin_sql(wanted)),
            set(client, local.as_ref()),
            simple(client, hooks.pre_request)
        );
        if let Err(e) = begun.and(local_set).and(pre) {
            let _ = self.finish(false, anonymous).await;
            return Err(db_error(e, anonymous));
        }
        Ok(())
    }

    /// What SQL left in `response.headers` and `response.status` in the open transaction.
    /// On error the transaction is rolled back.
    pub async fn response_gucs(&mut self, anonymous: bool) -> Result<SetBySql, Error> {
        let read = match self.prepare_cached(READ_GUCS).await {
            Ok(stmt) => read_gucs(&self.client, Some(&stmt)).await,
            Err(e) => Err(e),
        };
        if read.is_err() {
            let _ = self.finish(false, anonymous).await;
        }
        read.map_err(|e| db_error(e, anonymous))
    }

    /// Runs one statement inside the transaction of [`PgConn::begin`]; on error the transaction
    /// is rolled back.
    pub async fn run(&mut self, statement: &Statement, anonymous: bool) -> Result<Vec<Row>, Error> {
        let ran = match self.prepare_cached(&statement.text).await {
            Ok(stmt) => query(&self.client, &stmt, &statement.params).await,
            Err(e) => Err(e),
        };
        match ran {
            Ok(rows) => Ok(rows),
            Err(e) => {
                let _ = self.finish(false, anonymous).await;
                Err(db_error(e, anonymous))
            }
        }
    }

    /// Ends the open transaction of [`PgConn::write`]: COMMIT or ROLLBACK. A commit can still
    /// fail (deferred constraints), which is the request's error.
    pub async fn finish(&mut self, commit: bool, anonymous: bool) -> Result<(), Error> {
        let ended = self.client.batch_execute(if commit { "COMMIT" } else { "ROLLBACK" }).await;
        // Whether it worked or not, PostgreSQL has left the transaction (or the connection is
        // gone, and the pool drops it).
        self.in_transaction = false;
        ended.map_err(|e| db_error(e, anonymous))
    }

    /// Runs `before_commit` (one statement, rowgate's own text) and COMMIT in one round trip.
    /// On failure the transaction is rolled back.
    pub async fn commit_after(&mut self, before_commit: &str, anonymous: bool) -> Result<(), Error> {
        let ran = self.client.batch_execute(&format!("{before_commit}; COMMIT")).await;
        self.in_transaction = false;
        match ran {
            Ok(()) => Ok(()),
            Err(e) => {
                // If the first statement failed, the transaction is still open (aborted).
                let _ = self.client.batch_execute("ROLLBACK").await;
                Err(db_error(e, anonymous))
            }
        }
    }
}

/// A write queued whole on a connection ([`PgConn::write_committed`]): its result.
pub struct Pipelined(std::pin::Pin<Box<dyn std::future::Future<Output = Committed> + Send>>);

/// What a [`Pipelined`] write ends with.
type Committed = Result<WriteResult, Error>;

impl std::future::Future for Pipelined {
    type Output = Committed;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// Runs a write's statement: its rows if it returns rows, else the number of rows it affected.
async fn run_write(
    client: &tokio_postgres::Client,
    statement: &Prepared,
    params: &[String],
    returns_rows: bool,
) -> Result<(Vec<Row>, u64), tokio_postgres::Error> {
    if returns_rows {
        query(client, statement, params).await.map(|rows| (rows, 0))
    } else {
        execute(client, statement, params).await.map(|n| (Vec::new(), n))
    }
}

/// Runs a statement with text-format parameters and collects its rows.
async fn query(
    client: &tokio_postgres::Client,
    statement: &Prepared,
    params: &[String],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    use futures_util::TryStreamExt;
    match statement {
        Prepared::Named(s) => {
            client.query_raw(s, params.iter().map(|v| TextParam(v))).await?.try_collect().await
        }
        Prepared::Unnamed(sql) => {
            client.query_typed_raw(sql, unnamed_params(params)).await?.try_collect().await
        }
    }
}

/// Runs a statement with text-format parameters: the rows it affected.
pub(super) async fn execute(
    client: &tokio_postgres::Client,
    statement: &Prepared,
    params: &[String],
) -> Result<u64, tokio_postgres::Error> {
    use futures_util::TryStreamExt;
    match statement {
        Prepared::Named(s) => client.execute_raw(s, params.iter().map(|v| TextParam(v))).await,
        Prepared::Unnamed(sql) => {
            let rows = client.query_typed_raw(sql, unnamed_params(params)).await?;
            futures_util::pin_mut!(rows);
            while rows.try_next().await?.is_some() {}
            Ok(rows.rows_affected().unwrap_or(0))
        }
    }
}

/// Parameters of an unnamed statement: text, their types inferred as preparing infers them.
fn unnamed_params(params: &[String]) -> impl Iterator<Item = (TextParam<'_>, tokio_postgres::types::Type)> {
    params.iter().map(|v| (TextParam(v), unspecified()))
}

/// PostgreSQL's refusal to run a prepared statement whose result columns changed type.
fn is_stale_plan(db: &crate::error::DatabaseError) -> bool {
    db.code == tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED.code()
        && db.message.starts_with("cached plan must not change result type")
}

/// Converts a driver error: a database error keeps its SQLSTATE (or is the response a
/// `RAISE SQLSTATE 'PGRST'` wrote), anything else means the connection is unusable (503).
pub fn db_error(e: tokio_postgres::Error, anonymous: bool) -> Error {
    match e.as_db_error() {
        Some(db) => Error::database(crate::error::DatabaseError {
            code: db.code().code().to_owned(),
            message: db.message().to_owned(),
            details: db.detail().map(str::to_owned),
            hint: db.hint().map(str::to_owned),
            anonymous,
        }),
        None => Error::Unavailable(e.to_string()),
    }
}
