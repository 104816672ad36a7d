//! Read replicas (`db-uri-read-replicas`): a pool per replica, the health of each, and the
//! primary's WAL position that read-your-writes compares them with.
//!
//! Every [`TICK`] one task samples the primary's WAL position and asks each replica what it has
//! replayed. A replica's lag is how long ago the primary had written no more than that: the
//! age of the newest sample at or below the replica's position. That holds whether the primary
//! is busy or idle, and whatever the replica's clock says. A replica is used while it answers,
//! is in recovery (a standby) and lags at most `db-replica-max-lag`; one whose read fails is
//! skipped until the next tick finds it well.
//!
//! Read-your-writes: after a write, the primary's WAL insert position (past the write's commit
//! record) goes back to the client (`http::read_your_writes`). A read that carries it is sent only to a
//! replica that has replayed past it, else to the primary. The position is the primary's, so
//! it means the same to every instance.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

use super::{first_value, Db, PgTarget};
use crate::config::Config;

/// How often the primary's position and the replicas' are read.
const TICK: Duration = Duration::from_millis(100);

/// How long a position may take to read, on the primary or a replica.
const CLOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest a read waits for a replica's connection (at most `db-pool-acquisition-timeout`):
/// the primary can answer it meanwhile.
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// The read replicas of one instance.
pub struct Replicas {
    members: Vec<Replica>,
    /// Where the next pick starts (round robin).
    next: AtomicUsize,
    max_lag: Duration,
    /// The primary's WAL position over the last `max_lag` and then some, newest last.
    samples: Mutex<VecDeque<(Instant, u64)>>,
    /// A connection to the primary for its WAL position (sampling, and after writes).
    clock: tokio::sync::Mutex<Option<Arc<Client>>>,
    primary: Arc<PgTarget>,
    /// Reads the primary served while replicas are configured.
    primary_reads: AtomicU64,
    /// The primary's position when the schema cache in use was read: a replica behind it may
    /// lack a table or column requests are now planned with.
    schema_lsn: AtomicU64,
}

/// One replica.
pub struct Replica {
    /// `host:port`, for logs and metrics.
    pub name: String,
    /// Its pool.
    pub db: Db,
    target: PgTarget,
    /// Usable: it answers, is a standby, and lags at most `db-replica-max-lag`.
    usable: AtomicBool,
    /// The WAL position it has replayed, as of the last tick.
    replayed: AtomicU64,
    /// Its lag in milliseconds, as of the last tick (`u64::MAX` when unknown).
    lag_ms: AtomicU64,
    /// Reads it served.
    reads: AtomicU64,
}

impl Replicas {
    /// The replicas of `db-uri-read-replicas`, with their health task; `None` when there are none.
    pub fn start(config: &Config, primary: Arc<PgTarget>) -> Result<Option<Arc<Replicas>>, String> {
        if config.db.uri_read_replicas.is_empty() {
            return Ok(None);
        }
        let mut busy = config.clone();
        busy.db.pool_acquisition_timeout = config.db.pool_acquisition_timeout.min(BUSY_WAIT);
        let mut members = Vec::new();
        for uri in &config.db.uri_read_replicas {
            let target = PgTarget::parse(uri).map_err(|e| e.replace("db-uri", "db-uri-read-replicas"))?;
            members.push(Replica {
                name: target.describe(),
                db: Db::new(&busy, &target),
                target,
                usable: AtomicBool::new(false),
                replayed: AtomicU64::new(0),
                lag_ms: AtomicU64::new(u64::MAX),
                reads: AtomicU64::new(0),
            });
        }
        let replicas = Arc::new(Replicas {
            members,
            next: AtomicUsize::new(0),
            max_lag: config.db.replica_max_lag,
            samples: Mutex::new(VecDeque::new()),
            clock: tokio::sync::Mutex::new(None),
            primary,
            primary_reads: AtomicU64::new(0),
            schema_lsn: AtomicU64::new(0),
        });
        tokio::spawn(watch(Arc::downgrade(&replicas)));
        Ok(Some(replicas))
    }

    /// A replica for a read by a client whose last write is at `since`, if one may serve it:
    /// usable, and past both `since` and the schema cache's position. Round robin among those.
    pub fn pick(&self, since: Option<u64>) -> Option<&Replica> {
        let n = self.members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let needed = since.unwrap_or(0).max(self.schema_lsn.load(Ordering::Acquire));
        (0..n)
            .map(|i| &self.members[(start + i) % n])
            .find(|r| r.usable.load(Ordering::Acquire) && r.replayed.load(Ordering::Acquire) >= needed)
    }

    /// The schema cache about to be used was read when the primary was at `lsn`: replicas are
    /// used once they have replayed that far.
    pub fn schema_read_at(&self, lsn: u64) {
        self.schema_lsn.fetch_max(lsn, Ordering::AcqRel);
    }

    /// Retires the replicas' pooled connections, as [`Db::retire`] does the primary's.
    pub fn retire(&self) {
        for r in &self.members {
            r.db.retire();
        }
    }

    /// Counts a read the primary served.
    pub fn served_by_primary(&self) {
        self.primary_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// The primary's WAL insert position now: past the commit record of every write that has
    /// committed, for the client's cookie. [`crate::lsn::UNKNOWN`] when it cannot be read.
    pub async fn write_position(&self) -> u64 {
        match self.position("SELECT pg_catalog.pg_current_wal_insert_lsn()::text").await {
            Some(lsn) => lsn,
            None => crate::lsn::UNKNOWN,
        }
    }

    /// One position read on the clock connection (opened again if it closed), within
    /// [`CLOCK_TIMEOUT`]: a primary that does not answer holds up neither a write's response
    /// nor the health task.
    async fn position(&self, sql: &str) -> Option<u64> {
        let held = self.clock.lock().await.clone().filter(|c| !c.is_closed());
        let client = match held {
            Some(c) => c,
            None => {
                let c = Arc::new(
                    tokio::time::timeout(CLOCK_TIMEOUT, super::connect(&self.primary)).await.ok()?.ok()?,
                );
                *self.clock.lock().await = Some(c.clone());
                c
            }
        };
        let answer = tokio::time::timeout(CLOCK_TIMEOUT, client.simple_query(sql)).await.ok()?.ok()?;
        first_value(&answer).as_deref().and_then(crate::lsn::parse)
    }

    /// The lag of a replica that has replayed up to `replayed`, from the primary's samples:
    /// `None` when it is behind all of them (older than the window kept).
    fn lag(&self, replayed: u64, now: Instant) -> Option<Duration> {
        let samples = self.samples.lock().expect("not poisoned");
        samples.iter().rev().find(|(_, lsn)| *lsn <= replayed).map(|(at, _)| now.duration_since(*at))
    }

    /// The replicas' metrics in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str(
            "# HELP rowgate_replica_up Whether the read replica is used (answers, is a standby, lags at most db-replica-max-lag)\n\
             # TYPE rowgate_replica_up gauge\n",
        );
        // By position in db-uri-read-replicas, from 1: `/rowgate/metrics` may be public, and
        // the replicas' addresses are not for every client to read.
        for (i, r) in self.members.iter().enumerate() {
            let _ = writeln!(
                out,
                "rowgate_replica_up{{replica=\"{}\"}} {}",
                i + 1,
                u8::from(r.usable.load(Ordering::Relaxed))
            );
        }
        out.push_str(
            "# HELP rowgate_replica_lag_seconds How far the read replica's replay is behind the primary\n\
             # TYPE rowgate_replica_lag_seconds gauge\n",
        );
        for (i, r) in self.members.iter().enumerate() {
            let lag = r.lag_ms.load(Ordering::Relaxed);
            let lag = if lag == u64::MAX { "NaN".to_owned() } else { format!("{:.3}", lag as f64 / 1000.0) };
            let _ = writeln!(out, "rowgate_replica_lag_seconds{{replica=\"{}\"}} {lag}", i + 1);
        }
        out.push_str(
            "# HELP rowgate_reads_total Reads (GET, HEAD, non-volatile calls) by the server that answered them\n\
             # TYPE rowgate_reads_total counter\n",
        );
        let _ = writeln!(
            out,
            "rowgate_reads_total{{server=\"primary\"}} {}",
            self.primary_reads.load(Ordering::Relaxed)
        );
        for (i, r) in self.members.iter().enumerate() {
            let _ = writeln!(
                out,
                "rowgate_reads_total{{server=\"replica {}\"}} {}",
                i + 1,
                r.reads.load(Ordering::Relaxed)
            );
        }
    }
}

impl Replica {
    /// Counts a read it served.
    pub fn served(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Its read failed as a replica's may (down, restarting, a recovery conflict): skipped
    /// until the next tick finds it well.
    pub fn failed(&self, why: &crate::error::Error) {
        if self.usable.swap(false, Ordering::AcqRel) {
            tracing::warn!(replica = %self.name, error = %why, "a read replica failed a read; skipped until its next check");
        }
    }
}

/// The health task: runs while the replicas are in use.
async fn watch(replicas: std::sync::Weak<Replicas>) {
    let mut health: Vec<Option<Client>> = Vec::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(replicas) = replicas.upgrade() else { return };
        health.resize_with(replicas.members.len(), || None);
        let now = Instant::now();
        if let Some(lsn) = replicas.position("SELECT pg_catalog.pg_current_wal_lsn()::text").await {
            let mut samples = replicas.samples.lock().expect("not poisoned");
            samples.push_back((now, lsn));
            let keep = replicas.max_lag + Duration::from_secs(2);
            while samples.front().is_some_and(|(at, _)| now.duration_since(*at) > keep) {
                samples.pop_front();
            }
        }
        let checks =
            replicas.members.iter().zip(health.iter_mut()).map(|(r, conn)| check(&replicas, r, conn, now));
        futures_util::future::join_all(checks).await;
    }
}

/// Reads what `replica` has replayed, on its health connection (opened again if needed), and
/// decides whether it is usable.
async fn check(replicas: &Replicas, replica: &Replica, conn: &mut Option<Client>, now: Instant) {
    if conn.as_ref().is_none_or(Client::is_closed) {
        *conn = tokio::time::timeout(CLOCK_TIMEOUT, super::connect(&replica.target))
            .await
            .ok()
            .and_then(Result::ok);
    }
    let asked = match conn.as_ref() {
        Some(c) => tokio::time::timeout(
            CLOCK_TIMEOUT,
            c.simple_query(
                "SELECT pg_catalog.pg_is_in_recovery()::text, pg_catalog.pg_last_wal_replay_lsn()::text",
            ),
        )
        .await
        .ok()
        .and_then(Result::ok),
        None => None,
    };
    let state = asked.as_deref().and_then(|messages| {
        let row = messages.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })?;
        Some((row.get(0)? == "true", row.get(1).and_then(crate::lsn::parse)))
    });
    let usable = match state {
        Some((true, Some(replayed))) => {
            replica.replayed.store(replayed, Ordering::Release);
            let lag = replicas.lag(replayed, now);
            replica.lag_ms.store(lag.map_or(u64::MAX, |l| l.as_millis() as u64), Ordering::Relaxed);
            lag.is_some_and(|l| l <= replicas.max_lag)
        }
        Some(_) => {
            if replica.usable.load(Ordering::Relaxed) {
                tracing::warn!(replica = %replica.name, "the read replica is not a standby (promoted?); not used");
            }
            false
        }
        None => {
            *conn = None;
            false
        }
    };
    if replica.usable.swap(usable, Ordering::AcqRel) != usable {
        match usable {
            true => tracing::info!(replica = %replica.name, "read replica in use"),
            false => {
                tracing::warn!(replica = %replica.name, "read replica down or lagging; reads go elsewhere")
            }
        }
    }
}
