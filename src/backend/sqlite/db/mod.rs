//! The SQLite backend's connections: a file (created if missing) in WAL mode, or a shared
//! in-memory database for tests; a pool of read-only connections (`read.rs`) and one writer
//! thread that commits writes in groups (`write.rs`). A statement's parameters are bound as
//! text, like PostgreSQL's untyped ones; the column's affinity converts them.

mod read;
mod room;
mod write;

use read::reader_limit;
pub use read::ReadOutput;
use room::DiskRoom;
pub use room::Room;
pub use write::WriteOutput;
use write::{group_commits, wal_committed, Job};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

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

/// How much of a database file connections map into memory (address space, not RAM).
const MMAP_BYTES: i64 = 1 << 30;

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
    /// Told of every row the writer changes (realtime).
    capture: Arc<std::sync::OnceLock<Arc<dyn RowCapture>>>,
    readers: Mutex<Vec<Connection>>,
    /// One per reader connection: a read waits here (not on a blocking thread) for its turn,
    /// which it holds until its statements have stopped, even if its request was dropped.
    reader_turns: Arc<tokio::sync::Semaphore>,
    /// `db-statement-timeout`: how long a read may run.
    statement_timeout: Option<Duration>,
    /// The room on the file's disk: whether writes that need it are refused.
    room: Arc<DiskRoom>,
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
    /// The access rules were reloaded.
    Rules,
    /// An administrator's statements changed what they changed (the dashboard's SQL console).
    Unknown,
}

/// A callback told of every [`Changed`].
pub type Listener = Box<dyn Fn(Changed<'_>) + Send + Sync>;

/// Told of every row the writer's statements change (cascades and triggers included) by the
/// temporary triggers it keeps on the writer's connection (SQLite's pre-update hook needs a
/// build with bindgen), and of what becomes of the rows: a write's savepoint rolled back, the
/// batch's transaction committed or not.
pub trait RowCapture: Send + Sync {
    /// Inside each batch's transaction, before its writes: brings the triggers up to date with
    /// the file's schema (no other process can change it while the batch runs).
    fn prepare(&self, conn: &Connection);
    /// A trigger's report: `values` of a row of `table` (`op`: `I` inserted, `O` and then `U`
    /// the old and new row of an update, `D` deleted).
    fn row(&self, table: &str, op: &str, values: &[rusqlite::types::ValueRef<'_>]);
    /// Where the rows captured so far end (a write's savepoint begins).
    fn mark(&self) -> usize;
    /// The rows captured since `mark` were rolled back.
    fn rollback_to(&self, mark: usize);
    /// The batch's transaction ended: committed, or not.
    fn end(&self, committed: bool);
}

/// The function the capture's triggers call: `rowgate_change(table, op, value, ...)`.
fn add_change_function(
    conn: &Connection,
    capture: Arc<std::sync::OnceLock<Arc<dyn RowCapture>>>,
) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "rowgate_change",
        -1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DIRECTONLY,
        move |ctx| {
            if let Some(c) = capture.get() {
                if let (Ok(table), Ok(op)) = (ctx.get_raw(0).as_str(), ctx.get_raw(1).as_str()) {
                    let values: Vec<rusqlite::types::ValueRef<'_>> =
                        (2..ctx.len()).map(|i| ctx.get_raw(i)).collect();
                    c.row(table, op, &values);
                }
            }
            Ok(rusqlite::types::Null)
        },
    )
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
        let room = Arc::new(DiskRoom::new(match &target {
            SqliteTarget::File(path) => Some(path.into()),
            SqliteTarget::Memory(_) => None,
        }));
        if matches!(target, SqliteTarget::File(_)) {
            // Readers never block the writer, nor it them.
            let _: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            // A log that grew while readers held checkpoints off is cut back to this when it is
            // next reset, rather than keeping its largest size for good.
            writer.pragma_update(None, "journal_size_limit", room::RESERVE_BYTES as i64)?;
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
        let capture: Arc<std::sync::OnceLock<Arc<dyn RowCapture>>> = Arc::default();
        add_change_function(&writer, capture.clone())?;
        let version = writer.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))?;
        let writer_conn = Arc::new(tokio::sync::Mutex::new(writer));
        let listener: Arc<std::sync::OnceLock<Listener>> = Arc::default();
        let (jobs, queue) = std::sync::mpsc::channel();
        let (conn, told, captured, full) =
            (writer_conn.clone(), listener.clone(), capture.clone(), room.clone());
        std::thread::Builder::new()
            .name("rowgate-sqlite-writer".into())
            .spawn(move || group_commits(&conn, queue, &touched, &told, &captured, &full))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Arc::new(SqliteDb {
            target,
            writer: jobs,
            writer_conn,
            seen_version: std::sync::atomic::AtomicI64::new(version),
            listener,
            capture,
            readers: Mutex::new(Vec::new()),
            reader_turns: Arc::new(tokio::sync::Semaphore::new(reader_limit())),
            statement_timeout,
            room,
        }))
    }

    /// Sets the one listener told of every change (the response cache); later calls are
    /// ignored.
    pub fn listen(&self, listener: Listener) {
        let _ = self.listener.set(listener);
    }

    /// Runs `change` on the writer thread, between two batches, then tells the listener of
    /// `changed`: no commit's answer is stored under the state before it and announced after.
    pub async fn announce(
        self: &Arc<Self>,
        change: impl FnOnce() + Send + 'static,
        changed: Changed<'static>,
    ) -> Result<(), Error> {
        let listener = self.listener.clone();
        self.with_writer_as(Room::Freed, move |_| {
            change();
            if let Some(listener) = listener.get() {
                listener(changed);
            }
            Ok(())
        })
        .await
    }

    /// Sets the one capture told of every row the writer changes; later calls are ignored.
    pub fn capture(&self, capture: Arc<dyn RowCapture>) {
        let _ = self.capture.set(capture);
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

    /// `rowgate_sqlite_disk_full` in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        out.push_str(
            "# HELP rowgate_sqlite_disk_full Whether the SQLite file's disk was found full (1: only deletes run).\n\
             # TYPE rowgate_sqlite_disk_full gauge\n",
        );
        out.push_str(&format!("rowgate_sqlite_disk_full {}\n", u8::from(self.room.is_full())));
    }

    /// The columns of `table` (at start-up, on the calling thread).
    pub fn column_names(&self, table: &str) -> rusqlite::Result<Vec<String>> {
        let conn = connect(&self.target, true)?;
        let mut q = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
        let names = q.query_map([table], |r| r.get(0))?.collect();
        names
    }

    /// A read-only connection of its own, for a task that polls the file (webhooks' sender).
    pub fn read_connection(&self) -> rusqlite::Result<Connection> {
        connect(&self.target, true)
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
                    .with_writer_as(Room::Freed, move |c| {
                        let started = std::time::Instant::now();
                        let schema = crate::backend::sqlite::introspect::load(c, &exposed).map_err(|e| {
                            shared.load_failed();
                            sqlite_error(e)
                        })?;
                        let relations = schema.relations.len();
                        shared.store_loaded(schema, started.elapsed());
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
}

/// Runs one statement without parameters, prepared once per connection: `execute_batch` parses
/// its text every time, which shows in the profile of every read and write.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// A statement or transaction that failed for no fault of the request: busy or a full disk
/// (503), or rowgate's error.
fn transaction_failed(e: &rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            Error::api(code::CONNECTION, format!("SQLite is busy: {e}"))
        }
        Some(rusqlite::ErrorCode::DiskFull) => Error::disk_full("the SQLite file", e),
        _ => {
            tracing::error!(error = %e, "an SQLite statement or transaction failed");
            Error::api(code::INTERNAL, format!("SQLite: {e}"))
        }
    }
}

fn internal(message: &str) -> Error {
    Error::internal(message)
}

/// SQLite's errors, by their extended result codes: a broken constraint is the client's
/// mistake (PostgreSQL's SQLSTATE, PostgREST's status), a busy database or a full disk a 503
/// (retry), anything else rowgate's own: requests never put text into SQL, and what SQLite
/// would refuse by its message alone (a `match` pattern, a text search, JSON text, a conflict target) is refused
/// before a statement runs.
pub fn sqlite_error(e: rusqlite::Error) -> Error {
    use rusqlite::ffi;
    if let rusqlite::Error::SqliteFailure(f, message) = &e {
        let sqlstate = match f.extended_code {
            ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE => {
                Some(sqlstate::UNIQUE_VIOLATION)
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => Some(sqlstate::FOREIGN_KEY_VIOLATION),
            ffi::SQLITE_CONSTRAINT_NOTNULL => Some(sqlstate::NOT_NULL_VIOLATION),
            ffi::SQLITE_CONSTRAINT_CHECK => Some(sqlstate::CHECK_VIOLATION),
            // A value of the wrong type in a STRICT table, or a rowid that is no integer.
            ffi::SQLITE_CONSTRAINT_DATATYPE | ffi::SQLITE_MISMATCH => {
                Some(sqlstate::INVALID_TEXT_REPRESENTATION)
            }
            _ => None,
        };
        if let Some(sqlstate) = sqlstate {
            return Error::sql(sqlstate, message.clone().unwrap_or_else(|| f.to_string()), false);
        }
    }
    transaction_failed(&e)
}
