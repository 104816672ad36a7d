//! The SQLite backend's connections: a file (created if missing) in WAL mode, or a shared
//! in-memory database for tests; a pool of read-only connections used on blocking threads. A
//! statement's parameters are bound as text, like PostgreSQL's untyped ones; the column's
//! affinity converts them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::backend::postgres::sql::Statement;
use crate::config::SqliteTarget;
use crate::error::{code, sqlstate, Error};

/// A read-write connection to `target` (created if missing) for an admin command.
pub fn connect_admin(target: &SqliteTarget) -> rusqlite::Result<Connection> {
    connect(target, false)
}

/// Opens a connection to `target` with rowgate's settings: a busy timeout, foreign keys on,
/// the `regexp` function, and a file mapped into memory.
fn connect(target: &SqliteTarget, read_only: bool) -> rusqlite::Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    flags |= if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    };
    let conn = match target {
        SqliteTarget::File(path) => Connection::open_with_flags(path, flags)?,
        SqliteTarget::Memory(uri) => Connection::open_with_flags(uri, flags)?,
    };
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "foreign_keys", "on")?;
    add_regexp(&conn)?;
    if matches!(target, SqliteTarget::File(_)) {
        // Reads map the file instead of copying its pages into each connection's 2 MB cache:
        // a scan of a table larger than that costs a third (measured on s004's filter).
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    }
    Ok(conn)
}

/// SQLite instructions a statement may run on an async thread before it is moved to a blocking
/// one (see [`SqliteDb::with_reader`]): some tens of microseconds.
const INLINE_STEPS: std::ffi::c_int = 20_000;

/// How much of a database file connections map into memory (address space, not RAM).
const MMAP_BYTES: i64 = 1 << 30;

/// What the writer thread hands a job once its transaction has ended: the COMMIT's error, if
/// it failed.
type Delivery = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;

/// Work for the writer thread, run inside the batch's transaction (or told why there is none).
type Job = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) -> Delivery + Send>;

/// Writes committed together at most.
const MAX_BATCH: usize = 128;

/// An SQLite database: one read-write connection owned by the writer thread (which also keeps
/// a shared in-memory database alive) and a pool of readers.
pub struct SqliteDb {
    target: SqliteTarget,
    writer: std::sync::mpsc::Sender<Job>,
    /// The read-write connection, held by the writer thread while it runs a batch.
    writer_conn: Arc<tokio::sync::Mutex<Connection>>,
    /// Its `PRAGMA data_version` when [`SqliteDb::foreign_commits`] last looked.
    seen_version: std::sync::atomic::AtomicI64,
    /// Told what each commit changed, and when the schema was reloaded (the response cache).
    listener: Arc<std::sync::OnceLock<Listener>>,
    readers: Mutex<Vec<Connection>>,
    /// One per reader connection: a read waits here (not on a blocking thread) for its turn,
    /// which it holds until its statements have stopped, even if its request was dropped.
    reader_turns: Arc<tokio::sync::Semaphore>,
    /// `db-statement-timeout`: how long a read may run.
    statement_timeout: Option<Duration>,
}

/// SQLite instructions between two looks at a read's [`Watch`] on a blocking thread.
const WATCH_STEPS: std::ffi::c_int = 1_000;

/// What stops a read on a blocking thread: its deadline, or its request being dropped (the
/// client went away), which [`Abandoned`] reports. SQLite looks every [`WATCH_STEPS`]
/// instructions, through a progress handler set on the read's connection for the read alone,
/// so a late signal never reaches another read.
#[derive(Clone)]
struct Watch {
    deadline: Option<std::time::Instant>,
    abandoned: Arc<std::sync::atomic::AtomicBool>,
}

impl Watch {
    fn stop(&self) -> bool {
        self.abandoned.load(std::sync::atomic::Ordering::Relaxed)
            || self.deadline.is_some_and(|d| std::time::Instant::now() >= d)
    }

    fn timed_out(&self) -> bool {
        self.deadline.is_some_and(|d| std::time::Instant::now() >= d)
    }
}

/// Marks a [`Watch`] abandoned when dropped: held by the request's future while the read runs.
struct Abandoned(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `x REGEXP pattern` (the `match` and `imatch` filters): SQLite has the operator but no
/// function behind it. Rust's regex syntax, which shares PostgreSQL's everyday one (classes,
/// anchors, alternation, repetition, `(?i)`) and has no back-references; it runs in linear
/// time, so no pattern can stall a connection. A pattern is compiled once per statement.
fn add_regexp(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "regexp",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let regex = ctx.get_or_create_aux(0, |pattern| -> Result<regex::Regex, BoxError> {
                let pattern = pattern.as_str().map_err(|e| Box::new(e) as BoxError)?;
                compile_regex(pattern).map_err(|e| format!("invalid regular expression: {e}").into())
            })?;
            use rusqlite::types::ValueRef;
            // A number is matched by its text, as SQLite would compare it with text.
            let text: std::borrow::Cow<'_, str> = match ctx.get_raw(1) {
                ValueRef::Null | ValueRef::Blob(_) => return Ok(None),
                ValueRef::Text(t) => String::from_utf8_lossy(t),
                ValueRef::Integer(i) => i.to_string().into(),
                ValueRef::Real(f) => f.to_string().into(),
            };
            Ok(Some(regex.is_match(&text)))
        },
    )
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A `match` pattern as the `regexp` function compiles it. Rendering checks patterns with it
/// first, so that a bad one fails whether or not any row reaches the operator (an error only
/// when a row does would tell of rows the caller's rule hides).
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).size_limit(1 << 20).build()
}

/// PostgreSQL's answer to a `match` pattern that does not compile: 400 `2201B`.
pub fn invalid_regex(detail: impl std::fmt::Display) -> Error {
    Error::sql(sqlstate::INVALID_REGULAR_EXPRESSION, format!("invalid regular expression: {detail}"), false)
}

/// What changed in the database, for a [`Listener`].
pub enum Changed<'a> {
    /// A commit of rowgate's writer changed rows of these tables (cascades and triggers
    /// included).
    Tables(&'a HashSet<String>),
    /// The schema was reloaded.
    Schema,
}

/// A callback told of every [`Changed`].
pub type Listener = Box<dyn Fn(Changed<'_>) + Send + Sync>;

/// Reader connections at most: a few per core. More only adds threads and cold page caches
/// that compete for the same cores (at c=1000, unbounded readers cost 3x the time and 600 MB).
fn reader_limit() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get() * 2).max(4)
}

impl SqliteDb {
    /// Opens (creating the file if missing), switches a file to WAL mode and starts the writer
    /// thread, which commits with the `synchronous` pragma given (`FULL` or `NORMAL`).
    /// A read running past `statement_timeout` is stopped (PostgreSQL's error 57014).
    pub fn open(
        target: SqliteTarget,
        synchronous: &str,
        statement_timeout: Option<Duration>,
    ) -> rusqlite::Result<Arc<SqliteDb>> {
        let writer = connect(&target, false)?;
        writer.pragma_update(None, "synchronous", synchronous)?;
        if matches!(target, SqliteTarget::File(_)) {
            // Readers never block the writer, nor it them.
            let _: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            // Replaces SQLite's automatic checkpoint (see [`wal_committed`]).
            writer.wal_hook(Some(wal_committed));
        }
        // Every row the writer's statements change, cascades and triggers included, names its
        // table here; the batch's commit reports them.
        let touched = Arc::new(Mutex::new(HashSet::new()));
        let record = touched.clone();
        writer.update_hook(Some(move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
            let mut t = record.lock().unwrap_or_else(|e| e.into_inner());
            if !t.contains(table) {
                t.insert(table.to_owned());
            }
        }))?;
        let version = writer.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))?;
        let writer_conn = Arc::new(tokio::sync::Mutex::new(writer));
        let listener: Arc<std::sync::OnceLock<Listener>> = Arc::default();
        let (jobs, queue) = std::sync::mpsc::channel();
        let (conn, told) = (writer_conn.clone(), listener.clone());
        std::thread::Builder::new()
            .name("rowgate-sqlite-writer".into())
            .spawn(move || group_commits(&conn, queue, &touched, &told))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Arc::new(SqliteDb {
            target,
            writer: jobs,
            writer_conn,
            seen_version: std::sync::atomic::AtomicI64::new(version),
            listener,
            readers: Mutex::new(Vec::new()),
            reader_turns: Arc::new(tokio::sync::Semaphore::new(reader_limit())),
            statement_timeout,
        }))
    }

    /// Sets the one listener told of every change (the response cache); later calls are
    /// ignored.
    pub fn listen(&self, listener: Listener) {
        let _ = self.listener.set(listener);
    }

    /// Runs `changed` if another process has committed to the file since the last call: the
    /// writer's connection's `PRAGMA data_version` moves with every commit but its own. It runs
    /// before the lock is let go, so no concurrent call can see the new version and answer
    /// before it has. (Waits for a batch the writer is running, during which no other process
    /// can commit.)
    pub async fn foreign_commits(&self, changed: impl FnOnce()) {
        let conn = self.writer_conn.lock().await;
        let now = conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut q| q.query_row([], |r| r.get::<_, i64>(0)))
            .unwrap_or(-1);
        // Unknown (-1) counts as a change: the answer must never be "nothing happened" by mistake.
        if self.seen_version.swap(now, std::sync::atomic::Ordering::SeqCst) != now || now == -1 {
            changed();
        }
    }

    /// The columns of `table` (at start-up, on the calling thread).
    pub fn column_names(&self, table: &str) -> rusqlite::Result<Vec<String>> {
        let conn = connect(&self.target, true)?;
        let mut q = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
        let names = q.query_map([table], |r| r.get(0))?.collect();
        names
    }

    /// Runs set-up statements (at start-up, on the calling thread, on a connection of its own).
    pub fn setup(&self, sql: &str) -> rusqlite::Result<()> {
        connect(&self.target, false)?.execute_batch(sql)
    }

    /// Reads the schema (at start-up, on the calling thread), and the `PRAGMA schema_version`
    /// it is at least as new as.
    pub fn load_schema(&self, exposed: &str) -> rusqlite::Result<(crate::schema::SchemaCache, i64)> {
        let conn = connect(&self.target, true)?;
        let version = conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0))?;
        Ok((crate::backend::sqlite::introspect::load(&conn, exposed)?, version))
    }

    /// Reloads the schema cache whenever the file's schema changes (`PRAGMA schema_version`,
    /// which any process's DDL bumps) from `loaded` (the version it was loaded at), checking
    /// every `every`.
    pub fn watch_schema(
        self: &Arc<Self>,
        exposed: String,
        shared: Arc<crate::schema::SharedSchema>,
        loaded: i64,
        every: Duration,
    ) {
        let db = self.clone();
        tokio::spawn(async move {
            let version = |c: &Connection| c.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0));
            let mut seen = Some(loaded);
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Ok(now) = db.with_reader(version).await else { continue };
                if seen == Some(now) {
                    continue;
                }
                let (exposed, shared, listener) = (exposed.clone(), shared.clone(), db.listener.clone());
                // Installed and announced on the writer thread, between two batches: a commit's
                // tables are always named by the schema its answers were stored under.
                let reloaded = db
                    .with_writer(move |c| {
                        let schema =
                            crate::backend::sqlite::introspect::load(c, &exposed).map_err(sqlite_error)?;
                        let relations = schema.relations.len();
                        shared.store(schema);
                        if let Some(listener) = listener.get() {
                            listener(Changed::Schema);
                        }
                        Ok(relations)
                    })
                    .await;
                match reloaded {
                    Ok(relations) => {
                        tracing::info!(relations, "schema changed: schema cache reloaded");
                        seen = Some(now);
                    }
                    Err(e) => tracing::error!(error = %e, "reloading the SQLite schema failed"),
                }
            }
        });
    }

    /// Runs `f` on the read-write connection, inside the writer's next transaction; its result
    /// arrives once that has committed.
    pub async fn with_writer<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let result = match conn {
                Ok(conn) => f(conn),
                Err(e) => Err(transaction_failed(e)),
            };
            Box::new(move |commit: Option<&rusqlite::Error>| {
                let _ = tx.send(match commit {
                    Some(e) => Err(transaction_failed(e)),
                    None => result,
                });
            })
        });
        self.writer.send(job).map_err(|_| internal("the SQLite writer stopped"))?;
        rx.await.map_err(|_| internal("the SQLite writer stopped"))?
    }

    /// Runs `f` on a read-only connection from the pool. It starts on the calling (async) thread
    /// with a budget of [`INLINE_STEPS`] SQLite instructions per statement: most reads (a row by
    /// key, a short page) finish within it and skip two thread hand-offs, which cost more than
    /// the query (a quarter of the server's CPU on s004's get-one). A read that runs out is
    /// interrupted and run again, without a budget, on a blocking thread. `f` may run twice, so
    /// it must leave no transaction open when it fails.
    pub async fn with_reader<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl Fn(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, Error> {
        self.read_with(true, f).await
    }

    /// [`with_reader`](Self::with_reader), starting on the calling thread only if `inline`.
    async fn read_with<T: Send + 'static>(
        self: &Arc<Self>,
        inline: bool,
        f: impl Fn(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, Error> {
        let turn = (self.reader_turns.clone().acquire_owned().await)
            .map_err(|_| internal("the SQLite readers closed"))?;
        let pooled = if inline { self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop() } else { None };
        if let Some(conn) = pooled {
            // Setting and clearing a handler cannot fail (rusqlite's Result is for symmetry).
            let _ = conn.progress_handler(INLINE_STEPS, Some(|| true));
            let result = f(&conn);
            let _ = conn.progress_handler(0, None::<fn() -> bool>);
            let interrupted = matches!(&result, Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted));
            if !interrupted {
                self.readers.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
                return result.map_err(sqlite_error);
            }
            self.readers.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
        }
        let watch = Watch {
            deadline: self.statement_timeout.map(|t| std::time::Instant::now() + t),
            abandoned: Arc::default(),
        };
        let _abandoned = Abandoned(watch.abandoned.clone());
        let db = self.clone();
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let pooled = db.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let conn = match pooled {
                Some(c) => c,
                None => connect(&db.target, true).map_err(sqlite_error)?,
            };
            let stop = watch.clone();
            let _ = conn.progress_handler(WATCH_STEPS, Some(move || stop.stop()));
            let result = f(&conn);
            let _ = conn.progress_handler(0, None::<fn() -> bool>);
            if !conn.is_autocommit() {
                // A read stopped between its BEGIN and COMMIT.
                let _ = conn.execute_batch("ROLLBACK");
            }
            db.readers.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
            result.map_err(|e| match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::OperationInterrupted) if watch.timed_out() => Error::sql(
                    sqlstate::QUERY_CANCELED,
                    "canceling statement due to statement timeout".to_owned(),
                    false,
                ),
                _ => sqlite_error(e),
            })
        })
        .await
        .map_err(|_| internal("the SQLite task failed"))?
    }

    /// Runs a read statement whose rows are JSON objects, joined here into the body's array,
    /// and, if given, a count statement, in one read transaction (one snapshot).
    pub async fn read(
        self: &Arc<Self>,
        main: Statement,
        count: Option<Statement>,
    ) -> Result<ReadOutput, Error> {
        // A count reads every row the filters let through: it would run out of the inline budget
        // and be done twice.
        let inline = count.is_none();
        self.read_with(inline, move |conn| {
            // One statement is its own snapshot; a count beside it needs a transaction to share one.
            let snapshot = count.is_some();
            if snapshot {
                exec(conn, "BEGIN")?;
            }
            let result = (|| {
                let mut statement = conn.prepare_cached(&main.text)?;
                let mut found = statement.query(rusqlite::params_from_iter(&main.params))?;
                let mut body = String::with_capacity(1024);
                body.push('[');
                let mut rows: i64 = 0;
                while let Some(row) = found.next()? {
                    if rows > 0 {
                        body.push(',');
                    }
                    body.push_str(row.get_ref(0)?.as_str()?);
                    rows += 1;
                }
                body.push(']');
                let total = match &count {
                    Some(c) => Some(
                        conn.prepare_cached(&c.text)?
                            .query_row(rusqlite::params_from_iter(&c.params), |r| r.get::<_, i64>(0))?,
                    ),
                    None => None,
                };
                Ok(ReadOutput { body, rows: rows.max(0) as u64, total: total.map(|t| t.max(0) as u64) })
            })();
            if snapshot {
                exec(conn, "COMMIT")?;
            }
            result
        })
        .await
    }
}

/// What a write did, as far as the response needs it.
#[derive(Debug, Default)]
pub struct WriteOutput {
    /// Rows written.
    pub affected: u64,
    /// The representation's body and rows, when asked for.
    pub representation: Option<(String, u64)>,
    /// The first inserted row's primary key values, for `Location`.
    pub location: Option<Vec<Option<String>>>,
    /// Of the rows an upsert wrote, how many it inserted.
    pub inserted: Option<u64>,
}

impl SqliteDb {
    /// Runs a write in one transaction on the read-write connection (SQLite has one writer
    /// at a time; `BEGIN IMMEDIATE` takes the lock up front rather than failing midway).
    /// `respond` turns what it did into the response, before the transaction ends: it commits
    /// only if that succeeded and `rollback` is not set.
    pub async fn write<R: Send + 'static>(
        self: &Arc<Self>,
        statements: crate::backend::sqlite::sql::SqliteWrite,
        table: String,
        rollback: bool,
        respond: impl FnOnce(WriteOutput) -> Result<R, Error> + Send + 'static,
    ) -> Result<R, Error> {
        self.with_writer(move |conn| {
            // A savepoint per write: one that fails or rolls back leaves the batch's others.
            exec(conn, "SAVEPOINT rowgate_write").map_err(sqlite_error)?;
            let result = run_write(conn, statements, &table).and_then(respond);
            if result.is_err() || rollback {
                exec(conn, "ROLLBACK TO rowgate_write").map_err(sqlite_error)?;
            }
            exec(conn, "RELEASE rowgate_write").map_err(sqlite_error)?;
            result
        })
        .await
    }
}

/// The write-ahead log's length at which a commit checkpoints it (copies its pages into the
/// database file, with an fsync) before the writer goes on: SQLite's default. Tried at 4,096
/// pages: no more throughput under writes that never pause, and a third more p99 (each
/// checkpoint a longer stall).
const CHECKPOINT_PAGES: i32 = 1000;

/// How long the writer waits for more work before it checkpoints the log in the pause, once
/// the log holds [`QUIET_CHECKPOINT_PAGES`]: a burst of writes is not held up by checkpoints
/// of its own making (on s004's token refresh, in-line checkpoints cost a fifth of the time).
const QUIET: Duration = Duration::from_millis(5);

/// The log's length from which a pause is used for a checkpoint: a few writes now and then
/// leave theirs to a later one instead of an fsync each.
const QUIET_CHECKPOINT_PAGES: i32 = 256;

thread_local! {
    /// The write-ahead log's length after the last commit on this thread (the writer's).
    static WAL_PAGES: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Told of every commit on the writer's connection with the log's length in pages (SQLite's
/// own automatic checkpoint is this hook, so it stands in for it at [`CHECKPOINT_PAGES`]).
fn wal_committed(wal: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_PAGES.set(pages);
    if pages >= CHECKPOINT_PAGES {
        // As SQLite's own: a checkpoint that cannot finish (readers on older pages) is tried
        // again at the next commit, and never fails the commit that is done.
        let _ = wal.checkpoint();
    }
    Ok(())
}

/// The writer thread: takes the jobs waiting (up to [`MAX_BATCH`]), runs them in one
/// transaction and commits once — concurrent writers share a commit (and its fsync) instead
/// of queueing for one each, and none fails with `SQLITE_BUSY`. Checkpoints the log when no
/// work has come for [`QUIET`]. Ends when the database is dropped.
fn group_commits(
    conn: &tokio::sync::Mutex<Connection>,
    queue: std::sync::mpsc::Receiver<Job>,
    touched: &Mutex<HashSet<String>>,
    listener: &std::sync::OnceLock<Listener>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        let waited = if WAL_PAGES.get() >= QUIET_CHECKPOINT_PAGES {
            queue.recv_timeout(QUIET)
        } else {
            queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        let first = match waited {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => {
                let conn = conn.blocking_lock();
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                // Until the next commit says how long the log is again.
                WAL_PAGES.set(0);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let conn = conn.blocking_lock();
        let deliveries: Vec<Delivery> = match exec(&conn, "BEGIN IMMEDIATE") {
            Ok(()) => batch.into_iter().map(|job| job(Ok(&conn))).collect(),
            Err(e) => {
                batch.into_iter().map(|job| job(Err(&e))).for_each(|deliver| deliver(None));
                continue;
            }
        };
        let committed = exec(&conn, "COMMIT");
        if committed.is_err() {
            let _ = exec(&conn, "ROLLBACK");
        }
        drop(conn);
        // Before any writer hears back: a client that saw its write acknowledged never reads
        // an answer cached from before it.
        let changed = std::mem::take(&mut *touched.lock().unwrap_or_else(|e| e.into_inner()));
        if let (Ok(()), Some(listener)) = (&committed, listener.get()) {
            if !changed.is_empty() {
                listener(Changed::Tables(&changed));
            }
        }
        match committed {
            Ok(()) => deliveries.into_iter().for_each(|deliver| deliver(None)),
            Err(e) => deliveries.into_iter().for_each(|deliver| deliver(Some(&e))),
        }
    }
}

/// Runs one statement without parameters, prepared once per connection: `execute_batch` parses
/// its text every time, which shows in the profile of every read and write.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// A statement or transaction that failed for no fault of the request: busy (503), or
/// rowgate's error.
fn transaction_failed(e: &rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            Error::api(code::CONNECTION, format!("SQLite is busy: {e}"))
        }
        _ => {
            tracing::error!(error = %e, "an SQLite statement or transaction failed");
            Error::api(code::INTERNAL, format!("SQLite: {e}"))
        }
    }
}

fn run_write(
    conn: &Connection,
    s: crate::backend::sqlite::sql::SqliteWrite,
    table: &str,
) -> Result<WriteOutput, Error> {
    // `rowids`, when given, is the statement's first parameter (`?1`).
    let body = |stmt: &Statement, rowids: Option<&str>| -> Result<(String, u64), Error> {
        let mut params = stmt.params.clone();
        if let (Some(first), Some(ids)) = (params.first_mut(), rowids) {
            *first = ids.to_owned();
        }
        let (text, n): (String, i64) = conn
            .prepare_cached(&stmt.text)
            .and_then(|mut q| {
                q.query_row(rusqlite::params_from_iter(&params), |r| Ok((r.get(0)?, r.get(1)?)))
            })
            .map_err(sqlite_error)?;
        Ok((text, n.max(0) as u64))
    };
    let before = match &s.before {
        Some(stmt) => Some(body(stmt, None)?),
        None => None,
    };
    let inserted = match &s.inserted {
        Some(stmt) => Some(
            conn.prepare_cached(&stmt.text)
                .and_then(|mut q| {
                    q.query_row(rusqlite::params_from_iter(&stmt.params), |r| r.get::<_, i64>(0))
                })
                .map_err(sqlite_error)?
                .max(0) as u64,
        ),
        None => None,
    };
    let rowids: Vec<i64> = {
        let mut q = conn.prepare_cached(&s.write.text).map_err(sqlite_error)?;
        let rows =
            q.query_map(rusqlite::params_from_iter(&s.write.params), |r| r.get(0)).map_err(sqlite_error)?;
        rows.collect::<Result<_, _>>().map_err(sqlite_error)?
    };
    let ids = serde_json::to_string(&rowids).unwrap_or_else(|_| "[]".into());
    if let Some(check) = &s.check {
        let mut params = check.params.clone();
        params[0] = ids.clone();
        let violations: i64 = conn
            .prepare_cached(&check.text)
            .and_then(|mut q| q.query_row(rusqlite::params_from_iter(&params), |r| r.get(0)))
            .map_err(sqlite_error)?;
        if violations > 0 {
            // (403 for every caller, where PostgREST gives the anonymous one a 401.)
            let message = format!("new row violates row-level security policy for table \"{table}\"");
            return Err(Error::sql(sqlstate::INSUFFICIENT_PRIVILEGE, message, false));
        }
    }
    let representation = match (&s.representation, before) {
        (_, Some(b)) => Some(b),
        (Some(stmt), None) => Some(body(stmt, Some(&ids))?),
        (None, None) => None,
    };
    let location = match &s.location {
        Some(stmt) if !rowids.is_empty() => {
            let mut params = stmt.params.clone();
            params[0] = ids.clone();
            // (No row: the caller may not read the one written, so it is not named.)
            let text: Option<String> = conn
                .prepare_cached(&stmt.text)
                .and_then(|mut q| q.query_row(rusqlite::params_from_iter(&params), |r| r.get(0)).optional())
                .map_err(sqlite_error)?;
            text.and_then(|t| serde_json::from_str::<Vec<Option<String>>>(&t).ok())
        }
        _ => None,
    };
    Ok(WriteOutput { affected: rowids.len() as u64, representation, location, inserted })
}

/// The SQLite backend of a server: the database and who may do what in it.
pub struct SqliteBackend {
    /// The database.
    pub db: Arc<SqliteDb>,
    /// `db-rules`.
    pub rules: crate::backend::sqlite::rules::Rules,
}

/// What a read returned.
#[derive(Debug)]
pub struct ReadOutput {
    /// The JSON body.
    pub body: String,
    /// Rows in it.
    pub rows: u64,
    /// The exact count, when asked for.
    pub total: Option<u64>,
}

fn internal(message: &str) -> Error {
    Error::internal(message)
}

/// SQLite's errors, by their extended result codes: a broken constraint is the client's
/// mistake (PostgreSQL's SQLSTATE, PostgREST's status), a busy database a 503 (retry), anything
/// else rowgate's own: requests never put text into SQL, and what SQLite would refuse by its
/// message alone (a `match` pattern, a text search, JSON text, a conflict target) is refused
/// before a statement runs.
fn sqlite_error(e: rusqlite::Error) -> Error {
    use rusqlite::ffi;
    if let rusqlite::Error::SqliteFailure(f, message) = &e {
        let sqlstate = match f.extended_code {
            ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE => {
                Some(sqlstate::UNIQUE_VIOLATION)
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => Some(sqlstate::FOREIGN_KEY_VIOLATION),
            ffi::SQLITE_CONSTRAINT_NOTNULL => Some(sqlstate::NOT_NULL_VIOLATION),
            ffi::SQLITE_CONSTRAINT_CHECK => Some(sqlstate::CHECK_VIOLATION),
            // A value of the wrong type in a STRICT table.
            ffi::SQLITE_CONSTRAINT_DATATYPE => Some(sqlstate::INVALID_TEXT_REPRESENTATION),
            _ => None,
        };
        if let Some(sqlstate) = sqlstate {
            return Error::sql(sqlstate, message.clone().unwrap_or_else(|| f.to_string()), false);
        }
    }
    transaction_failed(&e)
}
