//! Reads: a pool of read-only connections, a read tried first on the calling thread within a
//! budget, then on a blocking thread, stopped when its client goes away or its time is up.

use std::sync::Arc;

use rusqlite::Connection;

use super::{connect, exec, internal, sqlite_error, SqliteDb};
use crate::backend::postgres::sql::Statement;
use crate::error::{sqlstate, Error};

/// SQLite instructions a statement may run on an async thread before it is moved to a blocking
/// one (see [`SqliteDb::with_reader`]): some tens of microseconds.
const INLINE_STEPS: std::ffi::c_int = 20_000;

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

/// Reader connections at most: a few per core. More only adds threads and cold page caches
/// that compete for the same cores (at c=1000, unbounded readers cost 3x the time and 600 MB).
pub(super) fn reader_limit() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get() * 2).max(4)
}

impl SqliteDb {
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
