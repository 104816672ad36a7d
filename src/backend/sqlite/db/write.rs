//! Writes: one thread owns the read-write connection and commits the writes waiting for it
//! together, checkpointing the write-ahead log in the pauses.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

use super::room::{DiskRoom, Room};
use super::{exec, internal, sqlite_error, transaction_failed, Changed, Listener, RowCapture, SqliteDb};
use crate::backend::postgres::sql::Statement;
use crate::error::{sqlstate, Error};

/// What the writer thread hands a job once its transaction has ended: the COMMIT's error, if
/// it failed.
type Delivery = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;

/// Work for the writer thread, run inside the batch's transaction (or told why there is none).
pub(super) type Job = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) -> Delivery + Send>;

/// Writes committed together at most.
const MAX_BATCH: usize = 128;

impl SqliteDb {
    /// Runs `f` on the read-write connection, inside the writer's next transaction; its result
    /// arrives once that has committed. Refused (503 RG008) while the disk is full.
    pub async fn with_writer<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        self.with_writer_as(Room::Needed, f).await
    }

    /// [`SqliteDb::with_writer`] for work that needs `room`: what frees it (or writes nothing)
    /// runs on a full disk too. A write that finds the disk full tells the [`DiskRoom`].
    pub async fn with_writer_as<T: Send + 'static>(
        self: &Arc<Self>,
        room: Room,
        f: impl FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        if room == Room::Needed && self.room.refuses() {
            return Err(Error::disk_full("the SQLite file", &"writes wait for room"));
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let disk = self.room.clone();
        let job: Job = Box::new(move |conn| {
            let result = match conn {
                Ok(conn) => f(conn),
                Err(e) => Err(transaction_failed(e)),
            };
            Box::new(move |commit: Option<&rusqlite::Error>| {
                // A job that failed says why itself (an interrupted statement ends the whole
                // transaction, which then cannot commit).
                let answer = match (commit, result) {
                    (_, Err(e)) => Err(e),
                    (Some(e), Ok(_)) => Err(transaction_failed(e)),
                    (None, result) => result,
                };
                if answer.as_ref().is_err_and(Error::is_disk_full) {
                    disk.filled();
                }
                let _ = tx.send(answer);
            })
        });
        self.writer.send(job).map_err(|_| internal("the SQLite writer stopped"))?;
        rx.await.map_err(|_| internal("the SQLite writer stopped"))?
    }
}

/// What a write did, as far as its outcome needs it.
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
    /// `respond` turns what it did into its outcome, before the transaction ends: it commits
    /// only if that succeeded and `rollback` is not set.
    /// `room` says whether it may run on a full disk (a delete).
    pub async fn write<R: Send + 'static>(
        self: &Arc<Self>,
        statements: crate::backend::sqlite::sql::SqliteWrite,
        table: String,
        (rollback, room): (bool, Room),
        respond: impl FnOnce(WriteOutput) -> Result<R, Error> + Send + 'static,
    ) -> Result<R, Error> {
        let capture = self.capture.get().cloned();
        self.with_writer_as(room, move |conn| {
            in_savepoint(conn, capture.as_deref(), rollback, |conn| {
                run_write(conn, statements, &table).and_then(respond)
            })
        })
        .await
    }

    /// Runs an administrator's statements (the dashboard's SQL console and table editor) in a
    /// savepoint of the writer's next batch, as a write runs: realtime sees the rows they
    /// change. Which tables they changed is not known, so the listener hears of
    /// [`Changed::Unknown`] (the response cache keeps nothing). They run on a full disk too:
    /// an administrator's `DELETE` is how room is made.
    pub async fn run_admin<R: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<R, Error> + Send + 'static,
    ) -> Result<R, Error> {
        let capture = self.capture.get().cloned();
        let listener = self.listener.clone();
        self.with_writer_as(Room::Freed, move |conn| {
            let result = in_savepoint(conn, capture.as_deref(), false, f);
            if let (Ok(_), Some(listener)) = (&result, listener.get()) {
                listener(Changed::Unknown);
            }
            result
        })
        .await
    }
}

/// Runs `f` in a savepoint: one that fails (or is to be rolled back) leaves the batch's other
/// writes, and the rows the capture took from it are dropped.
fn in_savepoint<R>(
    conn: &Connection,
    capture: Option<&dyn RowCapture>,
    rollback: bool,
    f: impl FnOnce(&Connection) -> Result<R, Error>,
) -> Result<R, Error> {
    exec(conn, "SAVEPOINT rowgate_write").map_err(sqlite_error)?;
    let mark = capture.map(|c| c.mark());
    let result = f(conn);
    if result.is_err() || rollback {
        if let (Some(c), Some(mark)) = (capture, mark) {
            c.rollback_to(mark);
        }
        // Gone with the whole transaction (an interrupted write ends it): the write's own
        // failure is the answer.
        if let (Err(_), true) = (&result, conn.is_autocommit()) {
            return result;
        }
        exec(conn, "ROLLBACK TO rowgate_write").map_err(sqlite_error)?;
    }
    exec(conn, "RELEASE rowgate_write").map_err(sqlite_error)?;
    result
}

/// The answer of the writes of a batch that cannot commit because one of them failed it.
fn batch_failed() -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
        Some("a write committed with this one failed".into()),
    )
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
pub(super) fn wal_committed(wal: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
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
/// work has come for [`QUIET`], and on a full disk after every commit, truncating it: the
/// room a delete freed is the disk's again. Ends when the database is dropped.
pub(super) fn group_commits(
    conn: &tokio::sync::Mutex<Connection>,
    queue: std::sync::mpsc::Receiver<Job>,
    touched: &Mutex<HashSet<String>>,
    listener: &std::sync::OnceLock<Listener>,
    capture: &std::sync::OnceLock<Arc<dyn RowCapture>>,
    room: &DiskRoom,
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
        let (mut panicked, mut ended) = (false, false);
        let deliveries: Vec<Delivery> = match exec(&conn, "BEGIN IMMEDIATE") {
            Ok(()) => {
                if let Some(c) = capture.get() {
                    c.prepare(&conn);
                }
                // A job that panics (a bug) fails its own request, and its batch with it (what
                // it wrote is unknown): never the writer, which every later write needs.
                let run =
                    |job: Job| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(Ok(&conn))));
                let mut deliveries = Vec::with_capacity(batch.len());
                let mut jobs = batch.into_iter();
                for job in jobs.by_ref() {
                    match run(job) {
                        Ok(deliver) => deliveries.push(deliver),
                        Err(_) => panicked = true,
                    }
                    // A statement that ended the transaction (an interrupted write rolls it
                    // back whole): the batch's writes so far are gone, and the rest must not run
                    // outside one.
                    if conn.is_autocommit() {
                        ended = true;
                        break;
                    }
                }
                let gone = batch_failed();
                jobs.map(|job| job(Err(&gone))).for_each(|deliver| deliver(None));
                deliveries
            }
            Err(e) => {
                batch.into_iter().map(|job| job(Err(&e))).for_each(|deliver| deliver(None));
                continue;
            }
        };
        let committed = match (panicked, ended) {
            (false, false) => exec(&conn, "COMMIT"),
            _ => {
                if panicked {
                    tracing::error!("an SQLite write panicked: the writes committed with it are rolled back");
                }
                Err(batch_failed())
            }
        };
        if committed.is_err() {
            let _ = exec(&conn, "ROLLBACK");
        }
        if room.is_full() {
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            WAL_PAGES.set(0);
        }
        drop(conn);
        if let Some(c) = capture.get() {
            c.end(committed.is_ok());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A job that inserts `x` and reports whether its batch committed.
    fn insert(x: i64, told: std::sync::mpsc::Sender<bool>) -> Job {
        Box::new(move |conn| {
            let _ = conn.map(|c| c.execute("INSERT INTO t VALUES (?1)", [x]));
            Box::new(move |commit: Option<&rusqlite::Error>| {
                let _ = told.send(commit.is_none());
            })
        })
    }

    #[test]
    fn a_write_that_panics_fails_its_batch_and_the_writer_goes_on() {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let conn = tokio::sync::Mutex::new(db);
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let (told, results) = std::sync::mpsc::channel();
        // Queued before the writer starts: one batch.
        jobs.send(insert(1, told.clone())).unwrap();
        jobs.send(Box::new(|_| panic!("a bug in a write"))).unwrap();
        let (touched, listener, capture) =
            (Mutex::default(), std::sync::OnceLock::new(), std::sync::OnceLock::new());
        let room = DiskRoom::new(None);
        std::thread::scope(|s| {
            s.spawn(|| group_commits(&conn, queue, &touched, &listener, &capture, &room));
            assert!(!results.recv().unwrap(), "the batch of a panicking write is not committed");
            jobs.send(insert(2, told)).unwrap();
            assert!(results.recv().unwrap(), "a later write is");
            drop(jobs);
        });
        let rows: Vec<i64> = conn
            .blocking_lock()
            .prepare("SELECT x FROM t")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, [2]);
    }
}
