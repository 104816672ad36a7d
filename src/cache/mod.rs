//! The response cache: rendered GET/HEAD answers kept in memory and invalidated by the database
//! itself: each backend's change feed tells it what changed (`backend::postgres::changes`: the
//! triggers `rowgate cache install` creates, or logical decoding; SQLite: the writer's commits).
//! The store is here; the change log in `changes`, what a read depends on in `deps`, the key in
//! `key`, the channel's messages in `protocol`, read-your-writes across instances in `markers`,
//! the counters in `metrics`.
//!
//! Correctness does not depend on removing entries in time: every entry records the change
//! sequence number current when its query started, and a hit is served only if no change to a
//! table it read (and no flush) has been received since. A result computed from a snapshot
//! older than a change is therefore never served, whenever it was stored. The cache is
//! bypassed while the listener is not known to be current (see [`Changes::live`]).

mod changes;
mod deps;
mod key;
mod markers;
mod metrics;
mod protocol;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

pub use changes::Changes;
pub use deps::{plan_deps, row_key, Deps};
pub use markers::Marker;
pub use metrics::{Evictions, Metrics};
pub use protocol::{Message, RowChange};

use crate::config::Config;
use markers::Markers;

/// The notification channel of the triggers and of rowgate instances.
pub const CHANNEL: &str = "rowgate_cache";

/// How long a received heartbeat keeps the cache usable: an instance whose own heartbeat takes
/// longer to come back is lagging behind the database's changes and stops serving from memory.
/// Writers wait at most as long for other instances' acknowledgements, which is what makes
/// read-your-writes hold across instances (see `docs/cache.md`).
pub const FENCE: Duration = Duration::from_secs(1);

/// How often an instance sends its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_millis(200);

/// What a lookup found.
pub enum Lookup {
    /// A current answer.
    Hit(Arc<Entry>),
    /// Nothing current: compute the answer, then offer it to [`ResponseCache::store`].
    Miss,
    /// The listener is not known to be current: neither serve nor store.
    Bypass,
}

impl From<Option<Arc<Entry>>> for Lookup {
    fn from(entry: Option<Arc<Entry>>) -> Self {
        entry.map_or(Lookup::Miss, Lookup::Hit)
    }
}

/// A cached answer.
pub struct Entry {
    /// Status code.
    pub status: StatusCode,
    /// Headers (Content-Type, Content-Range, ETag, ...).
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    deps: Deps,
    start: u64,
    weight: u64,
    stored: Instant,
}

/// An entry weighs its key, body and headers in bytes (`cache-max-bytes`).
#[derive(Clone)]
pub struct EntryWeight;

impl quick_cache::Weighter<Bytes, Arc<Entry>> for EntryWeight {
    fn weight(&self, _key: &Bytes, entry: &Arc<Entry>) -> u64 {
        entry.weight
    }
}

/// The response cache of one rowgate instance.
pub struct ResponseCache {
    entries:
        quick_cache::sync::Cache<Bytes, Arc<Entry>, EntryWeight, quick_cache::DefaultHashBuilder, Evictions>,
    ttl: Option<Duration>,
    /// The change log.
    pub changes: Changes,
    /// Counters.
    pub metrics: Arc<Metrics>,
    markers: Mutex<Markers>,
    /// Schema reloads asked for and done (see [`ResponseCache::reload_requested`]).
    reloads: (AtomicU64, AtomicU64),
    /// This instance's name in marker and heartbeat messages.
    pub instance: String,
    /// Whether changes and instance messages travel by logical decoding
    /// (`backend::postgres::changes::feed`) rather than by NOTIFY; set by the listener from
    /// the database's set-up.
    pub logical: std::sync::atomic::AtomicBool,
    /// Whether the database reports changes to the exposed relations at all (on PostgreSQL,
    /// `rowgate cache install` has run); without, every answer bypasses the cache.
    feed: std::sync::atomic::AtomicBool,
    routes: Option<HashSet<String>>,
    key_claims: Option<Vec<String>>,
    outbox: tokio::sync::mpsc::UnboundedSender<Message>,
    /// Messages to send on [`CHANNEL`] (acknowledgements), drained by the listener's connection.
    outbox_rx: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Message>>>,
}

impl ResponseCache {
    /// A cache configured by `config` (`cache-max-bytes`, `cache-ttl`, `cache-routes`,
    /// `cache-key-claims`).
    pub fn new(config: &Config) -> Arc<ResponseCache> {
        let metrics = Arc::new(Metrics::default());
        // S3-FIFO (quick_cache): a hit takes a shard's read lock and sets a bit, no bookkeeping
        // queue, which matters when the cache is most of the work.
        let items = usize::try_from(config.cache.max_bytes / 2048).unwrap_or(usize::MAX).clamp(16, 4_000_000);
        let entries = quick_cache::sync::Cache::with(
            items,
            config.cache.max_bytes,
            EntryWeight,
            quick_cache::DefaultHashBuilder::default(),
            Evictions(metrics.clone()),
        );
        let (outbox, outbox_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut id = [0u8; 6];
        let _ = getrandom::fill(&mut id);
        Arc::new(ResponseCache {
            entries,
            ttl: config.cache.ttl,
            changes: Changes::new(),
            metrics,
            markers: Mutex::new(Markers::new()),
            reloads: (AtomicU64::new(0), AtomicU64::new(0)),
            instance: crate::hex(&id),
            logical: std::sync::atomic::AtomicBool::new(false),
            feed: std::sync::atomic::AtomicBool::new(true),
            routes: config.cache.routes.as_ref().map(|r| r.iter().cloned().collect()),
            key_claims: config.cache.key_claims.clone(),
            outbox,
            outbox_rx: Arc::new(tokio::sync::Mutex::new(outbox_rx)),
        })
    }

    /// Whether answers of this route (`films`, `rpc/search`) may be cached.
    pub fn route_enabled(&self, route: &str) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(route))
    }

    /// The current answer for `key`, if one is cached; `Bypass` while the cache is not usable.
    pub fn lookup(&self, key: &[u8]) -> Lookup {
        if !self.changes.live() || self.reload_pending() {
            self.metrics.bypasses.fetch_add(1, Ordering::Relaxed);
            return Lookup::Bypass;
        }
        Lookup::from(match self.entries.get(key) {
            Some(e) if self.ttl.is_some_and(|ttl| e.stored.elapsed() > ttl) => {
                self.entries.remove(key);
                self.metrics.expirations.fetch_add(1, Ordering::Relaxed);
                self.metrics.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
            Some(e) if self.changes.current(&e.deps, e.start) => {
                self.metrics.hits.fetch_add(1, Ordering::Relaxed);
                Some(e)
            }
            Some(_) => {
                self.entries.remove(key);
                self.metrics.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
            None => {
                self.metrics.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        })
    }

    /// Stores an answer computed by a query started at change position `start`, unless a
    /// change it read arrived meanwhile or the listener is not current.
    pub fn store(
        &self,
        key: Bytes,
        deps: Deps,
        start: u64,
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    ) {
        if !self.changes.live() || self.reload_pending() || !self.changes.current(&deps, start) {
            self.metrics.discarded.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.metrics.stores.fetch_add(1, Ordering::Relaxed);
        let header_bytes: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 32).sum();
        let weight = (key.len() + body.len() + header_bytes + 160) as u64;
        let entry = Entry { status, headers, body, deps, start, weight, stored: Instant::now() };
        self.entries.insert(key, Arc::new(entry));
    }

    /// Drops every entry (DDL, schema reload, a reconnection that may have missed changes).
    pub fn flush(&self) {
        self.changes.flush();
        self.entries.clear();
        self.metrics.flushes.fetch_add(1, Ordering::Relaxed);
    }

    /// The listener stopped receiving: stop serving from memory at once.
    pub fn listener_lost(&self) {
        self.changes.fence.store(0, Ordering::SeqCst);
        self.flush();
    }

    /// Any row of `table` may have changed (TRUNCATE, or a change that named no rows).
    pub fn table_changed(&self, table: u32) {
        self.changes.table_changed(table);
        self.metrics.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    /// Rows of `table` changed: `carried` gives every value (before and after) of those key
    /// columns; the values of the `unknown` ones were not reported.
    pub fn columns_changed(&self, table: u32, carried: Vec<(Arc<str>, Vec<String>)>, unknown: Vec<Arc<str>>) {
        self.changes.columns_changed(table, carried, unknown);
        self.metrics.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    /// The columns whose values `table`'s changes report (from now until the next flush).
    pub fn watched_columns(&self, table: u32, columns: Vec<Arc<str>>) {
        let mut log = self.changes.log.write().unwrap_or_else(|e| e.into_inner());
        log.carried.insert(table, columns);
    }

    /// Handles one message on [`CHANNEL`].
    pub fn notified(&self, payload: &str) {
        match Message::parse(payload) {
            Ok(Message::TableChanged(oid)) => self.table_changed(oid),
            Ok(Message::RowsChanged(change)) => {
                self.changes.rows_changed(change);
                self.metrics.invalidations.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Message::Flush) => {
                // The schema reload follows: nothing from memory until it is done.
                self.reload_requested();
                self.flush();
            }
            Ok(message) => self.instance_message(message),
            Err(_) if payload.starts_with('{') => {
                // A row notification not ours to read: flushing is the safe answer.
                self.flush();
                self.metrics.invalidations.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => tracing::debug!(payload, "ignoring an unknown cache notification"),
        }
    }

    /// A schema reload was asked for: until it is done, answers are planned with dependencies
    /// that may be out of date (a view redefined to read another table), so nothing is served
    /// from memory or stored.
    pub fn reload_requested(&self) {
        self.reloads.0.fetch_add(1, Ordering::SeqCst);
    }

    /// The reload about to read the catalogs: pass the ticket to [`ResponseCache::reload_done`].
    pub fn reload_ticket(&self) -> u64 {
        self.reloads.0.load(Ordering::SeqCst)
    }

    /// A reload that started with `ticket` has stored its schema cache (and flushed).
    pub fn reload_done(&self, ticket: u64) {
        self.reloads.1.fetch_max(ticket, Ordering::SeqCst);
    }

    fn reload_pending(&self) -> bool {
        self.reloads.0.load(Ordering::SeqCst) > self.reloads.1.load(Ordering::SeqCst)
    }

    /// Whether the database's change feed reports changes to the exposed relations (the
    /// schema cache found some of them cacheable); for `/rowgate/metrics`.
    pub fn feed_installed(&self, installed: bool) {
        self.feed.store(installed, Ordering::Relaxed);
    }

    /// Current for good, without a listener: on SQLite every change is reported by the
    /// writer at its commit, or found by a check before each lookup (another process's).
    pub fn without_listener(&self) {
        self.changes.fence.store(u64::MAX, Ordering::SeqCst);
        // Answers are current from here on (the change log starts out flushed, waiting for a
        // listener to connect).
        self.flush();
    }
}
