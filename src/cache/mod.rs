//! The response cache: rendered GET/HEAD answers kept in memory and invalidated by the database
//! itself. Triggers that `rowgate cache install` puts on every table `pg_notify` the changed
//! table's OID on commit; the notification listener feeds them here (see [`listener`]).
//!
//! Correctness does not depend on removing entries in time: every entry records the change
//! sequence number current when its query started, and a hit is served only if no change to a
//! table it read (and no flush) has been received since. A result computed from a snapshot
//! older than a change is therefore never served, whenever it was stored. The cache is
//! bypassed while the listener is not known to be current (see [`Changes::live`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use crate::config::Config;
use crate::plan::{Condition, EmbedPlan, Expr, ReadPlan};
use crate::schema::{Reads, SchemaCache};

/// The notification channel of the triggers and of rowgate instances.
pub const CHANNEL: &str = "rowgate_cache";

/// How long a received heartbeat keeps the cache usable: an instance whose own heartbeat takes
/// longer to come back is lagging behind the database's changes and stops serving from memory.
/// Writers wait at most as long for other instances' acknowledgements, which is what makes
/// read-your-writes hold across instances (see `docs/cache.md`).
pub const FENCE: Duration = Duration::from_secs(1);

/// How often an instance sends its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_millis(200);

/// Other instances count as running while heard from within this time.
const PEER_TIMEOUT: Duration = Duration::from_secs(3);

/// How long after it starts listening an instance may not know every running instance yet
/// (each sends a heartbeat every [`HEARTBEAT`]): its writes wait [`FENCE`] meanwhile.
const PEER_DISCOVERY: Duration = Duration::from_millis(600);

/// What a cached answer read: whole tables, rows of tables by a key value, or (a user
/// function being involved) any table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deps {
    /// Tables any change to which invalidates the answer.
    pub tables: Vec<u32>,
    /// (table, key column, [`row_key`] of the value in PostgreSQL's text form): only a change
    /// to a row with this value (before or after the change) invalidates the answer.
    pub rows: Vec<(u32, Arc<str>, String)>,
    /// A change to any table invalidates the answer.
    pub any_table: bool,
}

/// The change log's key of a row value.
pub fn row_key(table: u32, column: &str, value: &str) -> String {
    format!("{table}\u{0}{column}\u{0}{value}")
}

/// Rows map size beyond which it is cleared (answers depending on rows then count as older).
const MAX_ROW_KEYS: usize = 200_000;

/// The request headers that can change an answer (besides those the caller is known by).
const KEY_HEADERS: [http::HeaderName; 5] = [
    http::header::ACCEPT,
    http::HeaderName::from_static("accept-profile"),
    http::header::RANGE,
    http::HeaderName::from_static("range-unit"),
    http::HeaderName::from_static("prefer"),
];

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

/// Counts evictions.
#[derive(Clone)]
pub struct Evictions(Arc<Metrics>);

impl quick_cache::Lifecycle<Bytes, Arc<Entry>> for Evictions {
    type RequestState = ();

    fn on_evict(&self, _state: &mut (), _key: Bytes, _entry: Arc<Entry>) {
        self.0.evictions.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counters for `/rowgate/metrics`.
#[derive(Default)]
pub struct Metrics {
    /// Answers served from memory.
    pub hits: AtomicU64,
    /// Cacheable lookups that found nothing current.
    pub misses: AtomicU64,
    /// Lookups skipped because the listener was not current.
    pub bypasses: AtomicU64,
    /// Entries stored.
    pub stores: AtomicU64,
    /// Results not stored because a change arrived while they were computed.
    pub discarded: AtomicU64,
    /// Entries evicted by the memory bound.
    pub evictions: AtomicU64,
    /// Entries expired by `cache-ttl`.
    pub expirations: AtomicU64,
    /// Table change notifications received.
    pub invalidations: AtomicU64,
    /// Flushes (DDL, schema reload, reconnection).
    pub flushes: AtomicU64,
}

/// The change log an entry is checked against: a sequence number per received notification.
pub struct Changes {
    seq: AtomicU64,
    log: RwLock<ChangeLog>,
    any_table: AtomicU64,
    flushed: AtomicU64,
    /// Microseconds since `epoch` until which the listener is known current (0: not live).
    fence: AtomicU64,
    epoch: Instant,
}

#[derive(Default)]
struct ChangeLog {
    /// Last change of any kind, per table.
    tables: HashMap<u32, u64>,
    /// Last change reported for the whole table (TRUNCATE, bulk changes, no key columns).
    whole: HashMap<u32, u64>,
    /// Last change per (table, key column, value).
    rows: HashMap<String, u64>,
    /// The key columns each table's row notifications carry (the same until DDL, which flushes).
    carried: HashMap<u32, Vec<Arc<str>>>,
    /// Per table and carried column, the last change that did not report its values (logical
    /// decoding knows an updated row's old values of its replica identity only).
    unknown: HashMap<u32, HashMap<Arc<str>, u64>>,
    /// Answers depending on rows and older than this are stale (the rows map was cleared).
    rows_floor: u64,
}

/// A row notification: `{"t": oid, "k": {"col": ["value", ...]}}`.
#[derive(serde::Deserialize)]
struct RowChange {
    t: u32,
    k: HashMap<String, Vec<String>>,
}

impl Changes {
    fn new() -> Self {
        Changes {
            seq: AtomicU64::new(0),
            log: RwLock::new(ChangeLog::default()),
            any_table: AtomicU64::new(0),
            flushed: AtomicU64::new(1),
            fence: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The current position; a query that starts after this call sees every change before it.
    pub fn position(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Whether the listener has recently proven that it receives notifications promptly.
    pub fn live(&self) -> bool {
        self.micros() < self.fence.load(Ordering::SeqCst)
    }

    fn micros(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn table_changed(&self, oid: u32) {
        let mut log = self.log.write().unwrap_or_else(|e| e.into_inner());
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        log.tables.insert(oid, s);
        log.whole.insert(oid, s);
        self.any_table.store(s, Ordering::SeqCst);
    }

    fn rows_changed(&self, change: RowChange) {
        let mut log = self.log.write().unwrap_or_else(|e| e.into_inner());
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        log.tables.insert(change.t, s);
        if log.rows.len() > MAX_ROW_KEYS {
            log.rows.clear();
            log.rows_floor = s;
        }
        let mut carried: Vec<Arc<str>> = Vec::with_capacity(change.k.len());
        for (col, values) in change.k {
            let col: Arc<str> = col.into();
            for v in values {
                log.rows.insert(row_key(change.t, &col, &v), s);
            }
            carried.push(col);
        }
        log.carried.insert(change.t, carried);
        self.any_table.store(s, Ordering::SeqCst);
    }

    fn columns_changed(&self, table: u32, carried: Vec<(Arc<str>, Vec<String>)>, unknown: Vec<Arc<str>>) {
        let mut log = self.log.write().unwrap_or_else(|e| e.into_inner());
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        log.tables.insert(table, s);
        if log.rows.len() > MAX_ROW_KEYS {
            log.rows.clear();
            log.rows_floor = s;
        }
        for (col, values) in carried {
            for v in values {
                log.rows.insert(row_key(table, &col, &v), s);
            }
        }
        if !unknown.is_empty() {
            let columns = log.unknown.entry(table).or_default();
            for col in unknown {
                columns.insert(col, s);
            }
        }
        self.any_table.store(s, Ordering::SeqCst);
    }

    fn flush(&self) {
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.flushed.store(s, Ordering::SeqCst);
    }

    /// Whether an answer computed from a query started at `start` reading `deps` is current.
    fn current(&self, deps: &Deps, start: u64) -> bool {
        if self.flushed.load(Ordering::SeqCst) > start {
            return false;
        }
        if deps.any_table {
            return self.any_table.load(Ordering::SeqCst) <= start;
        }
        let log = self.log.read().unwrap_or_else(|e| e.into_inner());
        let before = |m: &HashMap<u32, u64>, oid: &u32| m.get(oid).is_none_or(|s| *s <= start);
        deps.tables.iter().all(|t| before(&log.tables, t))
            && deps.rows.iter().all(|(t, col, key)| {
                before(&log.tables, t)
                    || (log.rows_floor <= start
                        && before(&log.whole, t)
                        && log.carried.get(t).is_some_and(|c| c.contains(col))
                        && log.unknown.get(t).and_then(|u| u.get(&**col)).is_none_or(|s| *s <= start)
                        && log.rows.get(key.as_str()).is_none_or(|s| *s <= start))
            })
    }
}

/// Read-your-writes across instances: a write's transaction sends a marker (`x instance n`)
/// on [`CHANNEL`] as it commits, delivered after every change committed before it and with its
/// own. The writer waits until the marker has come back (this instance has received those
/// changes) and every other running instance has acknowledged it (so have they).
#[derive(Default)]
struct Markers {
    next: u64,
    /// Writers waiting, by marker number.
    waiting: HashMap<u64, tokio::sync::oneshot::Sender<()>>,
    /// Own markers received back, in the order received (the commit order every instance sees),
    /// with the instances that have yet to acknowledge them.
    pending: VecDeque<(u64, Instant, HashSet<String>)>,
    peers: HashMap<String, Instant>,
    /// Instances that said goodbye: their messages still in flight do not make them peers again.
    gone: HashSet<String>,
    /// When this instance's listener last started listening.
    listening_since: Option<Instant>,
}

impl Markers {
    fn complete(&mut self, n: u64) {
        if let Some(writer) = self.waiting.remove(&n) {
            let _ = writer.send(());
        }
    }

    /// Removes `instance` from the markers received up to position `upto` of `pending` and
    /// completes those it was the last to acknowledge.
    fn acknowledged(&mut self, instance: &str, upto: usize) {
        let mut i = 0;
        let mut seen = 0;
        while i < self.pending.len() && seen <= upto {
            seen += 1;
            let waiting = &mut self.pending[i].2;
            waiting.remove(instance);
            if waiting.is_empty() {
                let (n, _, _) = self.pending.remove(i).expect("index checked");
                self.complete(n);
            } else {
                i += 1;
            }
        }
    }
}

/// A write's read-your-writes marker: sent with its COMMIT ([`Marker::sql`]), then waited for.
/// While this instance's listener is not current it sends nothing, and waiting for it is
/// waiting [`FENCE`]: by then every other instance has seen the write or stopped serving.
pub struct Marker {
    cache: Arc<ResponseCache>,
    n: u64,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
    unheard: bool,
}

impl Marker {
    /// The statement to run just before COMMIT, in the write's transaction: it sends the marker
    /// even if the write changed nothing, since what it matched (or not) may be another client's
    /// write that some instance has not received yet; the client must not read older than that.
    pub fn sql(&self) -> Option<String> {
        (!self.unheard).then(|| {
            let message = format!("'x {} {}'", self.cache.instance, self.n);
            if self.cache.logical.load(Ordering::Relaxed) {
                format!("SELECT pg_logical_emit_message(true, '{CHANNEL}', {message})")
            } else {
                format!("SELECT pg_notify('{CHANNEL}', {message})")
            }
        })
    }

    /// Waits until every running instance has received the changes committed with the marker
    /// (at most [`FENCE`]; an instance that takes longer stops serving from memory itself).
    pub async fn wait(mut self) {
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(FENCE, done).await;
        } else if self.unheard {
            tokio::time::sleep(FENCE).await;
        }
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let mut markers = self.cache.markers.lock().unwrap_or_else(|e| e.into_inner());
        markers.waiting.remove(&self.n);
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
    /// Whether changes and instance messages travel by logical decoding (see [`decoder`])
    /// rather than by NOTIFY; set by the listener from the database's set-up.
    pub logical: std::sync::atomic::AtomicBool,
    routes: Option<HashSet<String>>,
    key_claims: Option<Vec<String>>,
    outbox: tokio::sync::mpsc::UnboundedSender<String>,
    /// Messages to send on [`CHANNEL`] (acknowledgements), drained by the listener's connection.
    outbox_rx: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

impl ResponseCache {
    /// A cache configured by `config` (`cache-max-bytes`, `cache-ttl`, `cache-routes`,
    /// `cache-key-claims`).
    pub fn new(config: &Config) -> Arc<ResponseCache> {
        let metrics = Arc::new(Metrics::default());
        // S3-FIFO (quick_cache): a hit takes a shard's read lock and sets a bit, no bookkeeping
        // queue, which matters when the cache is most of the work.
        let items = usize::try_from(config.cache_max_bytes / 2048).unwrap_or(usize::MAX).clamp(16, 4_000_000);
        let entries = quick_cache::sync::Cache::with(
            items,
            config.cache_max_bytes,
            EntryWeight,
            quick_cache::DefaultHashBuilder::default(),
            Evictions(metrics.clone()),
        );
        let (outbox, outbox_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut id = [0u8; 6];
        let _ = getrandom::fill(&mut id);
        Arc::new(ResponseCache {
            entries,
            ttl: config.cache_ttl,
            changes: Changes::new(),
            metrics,
            markers: Mutex::new(Markers { next: 1, ..Markers::default() }),
            reloads: (AtomicU64::new(0), AtomicU64::new(0)),
            instance: crate::hex(&id),
            logical: std::sync::atomic::AtomicBool::new(false),
            routes: config.cache_routes.as_ref().map(|r| r.iter().cloned().collect()),
            key_claims: config.cache_key_claims.clone(),
            outbox,
            outbox_rx: Arc::new(tokio::sync::Mutex::new(outbox_rx)),
        })
    }

    /// Whether answers of this route (`films`, `rpc/search`) may be cached.
    pub fn route_enabled(&self, route: &str) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(route))
    }

    /// The key of a GET/HEAD request: everything that can change its answer. `role` and
    /// `claims` are the caller's (with `cache-key-claims`, only the named claims).
    pub fn key(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        role: &str,
        claims: &str,
    ) -> Bytes {
        let mut key = Vec::with_capacity(256);
        let mut part = |bytes: &[u8]| {
            key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            key.extend_from_slice(bytes);
        };
        part(method.as_str().as_bytes());
        part(uri.path_and_query().map_or(b"" as &[u8], |pq| pq.as_str().as_bytes()));
        for name in &KEY_HEADERS {
            // Repeated headers are joined in order; an absent header differs from an empty one.
            let mut values = headers.get_all(name).iter().peekable();
            if values.peek().is_none() {
                part(b"\xff");
            }
            for v in values {
                part(v.as_bytes());
            }
        }
        part(role.as_bytes());
        match &self.key_claims {
            None => part(claims.as_bytes()),
            Some(names) => {
                let parsed: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(claims).unwrap_or_default();
                for name in names {
                    part(parsed.get(name).map(|v| v.to_string()).unwrap_or_default().as_bytes());
                }
            }
        }
        Bytes::from(key)
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

    /// Handles one notification on [`CHANNEL`].
    pub fn notified(&self, payload: &str) {
        if let Ok(oid) = payload.parse::<u32>() {
            self.changes.table_changed(oid);
            self.metrics.invalidations.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if payload.starts_with('{') {
            match serde_json::from_str::<RowChange>(payload) {
                Ok(change) => self.changes.rows_changed(change),
                // Not ours to read: flushing is the safe answer.
                Err(_) => self.flush(),
            }
            self.metrics.invalidations.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut words = payload.split(' ');
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("*"), None, _, _) => {
                // The schema reload follows: nothing from memory until it is done.
                self.reload_requested();
                self.flush();
            }
            (Some("h"), Some(from), Some(micros), None) => {
                if from == self.instance {
                    // A heartbeat from the future is not ours (anyone may NOTIFY this channel).
                    if let Some(sent) = micros.parse::<u64>().ok().filter(|s| *s <= self.changes.micros()) {
                        self.changes
                            .fence
                            .fetch_max(sent.saturating_add(FENCE.as_micros() as u64), Ordering::SeqCst);
                    }
                } else {
                    self.seen(from);
                }
            }
            (Some("x"), Some(from), Some(n), None) => {
                let Ok(n) = n.parse::<u64>() else { return };
                if from == self.instance {
                    let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
                    let now = Instant::now();
                    markers.peers.retain(|_, seen| now.duration_since(*seen) < PEER_TIMEOUT);
                    // Writers stop waiting after FENCE: their markers need no acknowledgements.
                    while markers.pending.front().is_some_and(|(_, at, _)| now.duration_since(*at) > FENCE) {
                        markers.pending.pop_front();
                    }
                    let discovered =
                        markers.listening_since.is_some_and(|t| now.duration_since(t) >= PEER_DISCOVERY);
                    if !discovered {
                        // Running instances may not have been heard from yet: the writer waits
                        // out FENCE.
                    } else if markers.peers.is_empty() {
                        markers.complete(n);
                    } else {
                        let peers = markers.peers.keys().cloned().collect();
                        markers.pending.push_back((n, now, peers));
                    }
                } else {
                    self.seen(from);
                    // Everything committed up to this marker has been handled: acknowledge.
                    let _ = self.outbox.send(format!("a {from} {n} {}", self.instance));
                }
            }
            (Some("b"), Some(from), None, None) => {
                let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
                markers.peers.remove(from);
                if markers.gone.len() > 1000 {
                    markers.gone.clear();
                }
                markers.gone.insert(from.to_owned());
                // Markers waiting only for it are complete.
                let all = markers.pending.len();
                markers.acknowledged(from, all);
            }
            (Some("a"), Some(to), Some(n), Some(by)) => {
                self.seen(by);
                let Ok(n) = n.parse::<u64>() else { return };
                if to != self.instance {
                    return;
                }
                let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
                // An instance receives markers in the same order as this one, so its
                // acknowledgement covers every marker received before this one too.
                if let Some(upto) = markers.pending.iter().position(|(m, _, _)| *m == n) {
                    markers.acknowledged(by, upto);
                }
            }
            _ => tracing::debug!(payload, "ignoring an unknown cache notification"),
        }
    }

    fn seen(&self, instance: &str) {
        if instance == self.instance {
            return;
        }
        let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        if !markers.gone.contains(instance) {
            markers.peers.insert(instance.to_owned(), Instant::now());
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

    /// A marker for a write about to commit (an unheard one while the listener is not current).
    pub fn marker(self: &Arc<Self>) -> Marker {
        if !self.changes.live() {
            return Marker { cache: self.clone(), n: 0, done: None, unheard: true };
        }
        let (writer, done) = tokio::sync::oneshot::channel();
        let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        let n = markers.next;
        markers.next += 1;
        markers.waiting.insert(n, writer);
        Marker { cache: self.clone(), n, done: Some(done), unheard: false }
    }

    /// Current for good, without a listener: on SQLite every change is reported by the
    /// writer at its commit, or found by a check before each lookup (another process's).
    pub fn without_listener(&self) {
        self.changes.fence.store(u64::MAX, Ordering::SeqCst);
        // Answers are current from here on (the change log starts out flushed, waiting for a
        // listener to connect).
        self.flush();
    }

    /// Rows of these SQLite tables (by name, in the exposed schema `exposed`) changed.
    pub fn tables_changed<'a>(
        &self,
        schema: &crate::schema::SchemaCache,
        exposed: &str,
        tables: impl Iterator<Item = &'a String>,
    ) {
        if schema.dependencies.writes_unreported {
            // Some writes fire no update hook (see backend::sqlite::introspect): any commit may have made them.
            self.flush();
            return;
        }
        for table in tables {
            if table.starts_with("_rowgate_") {
                // rowgate's own tables: the API does not serve them, but a view may read them.
                self.table_changed(0);
                continue;
            }
            let name = crate::schema::QualifiedName { schema: exposed.to_owned(), name: table.clone() };
            match schema.relations.get(&name) {
                Some(r) => self.table_changed(r.oid),
                // A table the API does not serve: an FTS5 index's storage, whose virtual table
                // reports no changes of its own. Whatever may read it is dropped.
                None => {
                    self.flush();
                    return;
                }
            }
        }
    }

    /// The listener has (re)started listening: which instances run is being learned again.
    pub fn listening(&self) {
        let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        markers.listening_since = Some(Instant::now());
    }

    /// Tells the other instances that this one is leaving (they stop waiting for its
    /// acknowledgements), and gives the message a moment to go out.
    pub async fn goodbye(&self) {
        self.changes.fence.store(0, Ordering::SeqCst);
        let _ = self.outbox.send(format!("b {}", self.instance));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// Messages to send on [`CHANNEL`] (acknowledgements), for the one task that sends them.
    pub fn outbox(&self) -> Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>> {
        self.outbox_rx.clone()
    }

    /// A heartbeat message stamped with the current time.
    pub fn heartbeat(&self) -> String {
        format!("h {} {}", self.instance, self.changes.micros())
    }

    /// Writes `# HELP`/`# TYPE`/value lines in Prometheus text format.
    pub fn render_metrics(&self, out: &mut String) {
        let m = &self.metrics;
        let counters = [
            ("hits", "Answers served from the response cache.", &m.hits),
            ("misses", "Cacheable requests answered by the database.", &m.misses),
            ("bypasses", "Requests not looked up because the change listener was not current.", &m.bypasses),
            ("stores", "Answers stored.", &m.stores),
            (
                "discarded",
                "Answers not stored because a change arrived while they were computed.",
                &m.discarded,
            ),
            ("evictions", "Entries evicted by cache-max-bytes.", &m.evictions),
            ("expirations", "Entries expired by cache-ttl.", &m.expirations),
            ("invalidations", "Table change notifications received.", &m.invalidations),
            ("flushes", "Whole-cache flushes (DDL, schema reload, listener reconnection).", &m.flushes),
        ];
        for (name, help, value) in counters {
            out.push_str(&format!(
                "# HELP rowgate_cache_{name}_total {help}\n# TYPE rowgate_cache_{name}_total counter\nrowgate_cache_{name}_total {}\n",
                value.load(Ordering::Relaxed)
            ));
        }
        out.push_str(&format!(
            "# HELP rowgate_cache_entries Entries in the response cache.\n# TYPE rowgate_cache_entries gauge\nrowgate_cache_entries {}\n\
             # HELP rowgate_cache_bytes Weighted size of the response cache.\n# TYPE rowgate_cache_bytes gauge\nrowgate_cache_bytes {}\n\
             # HELP rowgate_cache_live Whether the change listener is current (1) or the cache is bypassed (0).\n# TYPE rowgate_cache_live gauge\nrowgate_cache_live {}\n",
            self.entries.len(),
            self.entries.weight(),
            u8::from(self.changes.live()),
        ));
    }
}

/// What a read plan depends on, or `None` if it cannot be cached: the union of its relations'
/// dependencies, any table if it calls a user function (the RPC itself, computed fields and
/// relationships). A table the plan reads only by key values (`id=eq.5`, `id=in.(1,2)`, an
/// embed joined on such a column) depends on those rows alone.
pub fn plan_deps(plan: &ReadPlan, schema: &SchemaCache) -> Option<Deps> {
    if plan.transaction.is_some() || plan.explain.is_some() {
        return None;
    }
    let mut walk = Walk { schema, deps: Deps::default(), unbounded: false };
    let restriction = match &plan.call {
        Some(call) => {
            walk.function(&call.function);
            None
        }
        None => {
            let r = restriction(&plan.relation, &plan.conditions);
            walk.relation(&plan.relation, r.as_ref());
            r
        }
    };
    plan.columns.iter().for_each(|c| walk.expr(&c.expr, restriction.as_ref()));
    plan.conditions.iter().for_each(|c| walk.condition(c, restriction.as_ref()));
    plan.order.iter().for_each(|o| walk.expr(&o.expr, restriction.as_ref()));
    if walk.unbounded {
        return None;
    }
    let mut deps = walk.deps;
    if deps.any_table {
        deps.tables.clear();
        deps.rows.clear();
    }
    deps.tables.sort_unstable();
    deps.tables.dedup();
    deps.rows.sort();
    deps.rows.dedup();
    Some(deps)
}

/// Rows of a relation by the values of one column.
type Restriction = (String, Vec<String>);

/// A top-level `col=eq.v` or `col=in.(...)` on a column whose text form PostgreSQL prints
/// canonically, with the values in that form; anything else restricts nothing.
fn restriction(relation: &crate::schema::Relation, conditions: &[Condition]) -> Option<Restriction> {
    use rowgate_request::{CompareOp, Operation};
    let candidates = conditions.iter().filter_map(|c| {
        let Condition::Filter { expr: Expr::Column(col), filter, .. } = c else { return None };
        if filter.negated {
            return None;
        }
        let values: Vec<&str> = match &filter.operation {
            Operation::Compare { op: CompareOp::Eq, quantifier: None, value } => vec![value.as_str()],
            Operation::In(values) => values.iter().map(String::as_str).collect(),
            _ => return None,
        };
        let column = relation.column(col)?;
        let canonical: Option<Vec<String>> = values.iter().map(|v| canonical_text(column, v)).collect();
        canonical.map(|values| (col.clone(), values))
    });
    // Change notifications carry key columns only (primary, unique, foreign): a restriction on
    // another column holds only until the table's next change, so a key column is preferred.
    let is_key = |col: &str| {
        relation.primary_key.iter().any(|c| c == col)
            || relation.unique_keys.iter().flatten().any(|c| c == col)
            || relation.foreign_keys.iter().flat_map(|fk| &fk.columns).any(|c| c == col)
    };
    let mut first = None;
    for (col, values) in candidates {
        if is_key(&col) {
            return Some((col, values));
        }
        first.get_or_insert((col, values));
    }
    first
}

/// A filter value as PostgreSQL prints the column's value that equals it, for the types where
/// that is unambiguous; `None` otherwise (or when the value is not of the type at all).
fn canonical_text(column: &crate::schema::Column, value: &str) -> Option<String> {
    use crate::schema::ValueKind;
    match column.kind {
        ValueKind::Int2 | ValueKind::Int4 | ValueKind::Int8 => {
            value.trim().parse::<i64>().ok().map(|n| n.to_string())
        }
        ValueKind::Uuid => {
            let v = value.to_ascii_lowercase();
            let groups: Vec<&str> = v.split('-').collect();
            let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()));
            shape.then_some(v)
        }
        // Plain text under a deterministic collation: equal means the same bytes. (Padded
        // `character(n)`, `citext` and enums are left out.)
        ValueKind::Text
            if column.type_name == "text" || column.type_name.starts_with("character varying") =>
        {
            Some(value.to_owned())
        }
        _ => None,
    }
}

struct Walk<'s> {
    schema: &'s SchemaCache,
    deps: Deps,
    unbounded: bool,
}

impl Walk<'_> {
    fn relation(&mut self, relation: &crate::schema::Relation, restriction: Option<&Restriction>) {
        match self.schema.dependencies.relations.get(&relation.oid) {
            Some(Reads::Tables(tables)) => {
                for t in tables {
                    match restriction {
                        Some((col, values))
                            if *t == relation.oid
                                && !self.schema.dependencies.self_reading.contains(&relation.oid) =>
                        {
                            let col: Arc<str> = col.as_str().into();
                            for v in values {
                                self.deps.rows.push((*t, col.clone(), row_key(*t, &col, v)));
                            }
                        }
                        _ => self.deps.tables.push(*t),
                    }
                }
            }
            Some(Reads::AnyTable) => self.deps.any_table = true,
            Some(Reads::Unbounded) | None => self.unbounded = true,
        }
    }

    fn function(&mut self, name: &crate::schema::QualifiedName) {
        // Overloads share the name; any volatile one makes the call uncacheable.
        let volatile = self
            .schema
            .functions
            .get(name)
            .is_none_or(|fs| fs.iter().any(|f| f.volatility == crate::schema::Volatility::Volatile));
        match self.schema.dependencies.function(volatile) {
            Reads::Unbounded => self.unbounded = true,
            _ => self.deps.any_table = true,
        }
    }

    /// An embedded relation, restricted by its own filters or else through the join column
    /// its parent is restricted on.
    fn embed(&mut self, e: &EmbedPlan, parent: Option<&Restriction>) {
        let own = match (&e.computed, &e.through) {
            (Some(f), _) => {
                self.function(f);
                None
            }
            (None, Some(j)) => {
                self.relation(&j.relation, None);
                self.relation(&e.relation, None);
                None
            }
            (None, None) => {
                let inherited = parent.and_then(|(col, values)| {
                    let (_, child) = e.join.iter().find(|(p, _)| p == col)?;
                    let column = e.relation.column(child)?;
                    let values: Option<Vec<String>> =
                        values.iter().map(|v| canonical_text(column, v)).collect();
                    Some((child.clone(), values?))
                });
                let r = restriction(&e.relation, &e.conditions).or(inherited);
                self.relation(&e.relation, r.as_ref());
                r
            }
        };
        e.columns.iter().for_each(|c| self.expr(&c.expr, own.as_ref()));
        e.conditions.iter().for_each(|c| self.condition(c, own.as_ref()));
        e.order.iter().for_each(|o| self.expr(&o.expr, own.as_ref()));
    }

    fn expr(&mut self, e: &Expr, level: Option<&Restriction>) {
        match e {
            Expr::Column(_) | Expr::JsonPath { .. } => {}
            Expr::Cast(inner, _) => self.expr(inner, level),
            Expr::Embed(embed) => self.embed(embed, level),
            Expr::Computed { function, .. } => self.function(function),
            Expr::Aggregate(_, arg) => {
                if let Some(a) = arg {
                    self.expr(a, level);
                }
            }
            Expr::Related { embed, expr, .. } => {
                self.embed(embed, level);
                // The value is over the embedded relation's columns; its embeds are read
                // without a restriction.
                self.expr(expr, None);
            }
        }
    }

    fn condition(&mut self, c: &Condition, level: Option<&Restriction>) {
        match c {
            Condition::Filter { expr, .. } => self.expr(expr, level),
            Condition::Exists { embed, .. } => self.embed(embed, level),
            Condition::Logic { children, .. } => children.iter().for_each(|c| self.condition(c, level)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(t: u32, col: &str, values: &[&str]) -> RowChange {
        RowChange { t, k: HashMap::from([(col.to_owned(), values.iter().map(|v| v.to_string()).collect())]) }
    }

    fn by_key(t: u32, col: &str, value: &str) -> Deps {
        Deps { rows: vec![(t, col.into(), row_key(t, col, value))], ..Deps::default() }
    }

    #[test]
    fn an_answer_is_current_until_a_change_to_what_it_read_arrives() {
        let c = Changes::new();
        c.flush();
        let start = c.position();
        let whole = Deps { tables: vec![7], ..Deps::default() };
        assert!(c.current(&whole, start));
        c.table_changed(8);
        assert!(c.current(&whole, start), "another table");
        c.table_changed(7);
        assert!(!c.current(&whole, start));
        assert!(c.current(&whole, c.position()), "a query started after the change");
    }

    #[test]
    fn rows_by_key_are_invalidated_only_by_their_values_and_whole_table_changes() {
        let c = Changes::new();
        c.flush();
        let start = c.position();
        c.rows_changed(change(7, "id", &["2"]));
        assert!(c.current(&by_key(7, "id", "1"), start));
        assert!(!c.current(&by_key(7, "id", "2"), start));
        assert!(!c.current(&Deps { tables: vec![7], ..Deps::default() }, start), "whole-table readers");
        assert!(!c.current(&by_key(7, "other", "1"), start), "a column the notifications do not carry");
        c.table_changed(7);
        assert!(!c.current(&by_key(7, "id", "1"), start), "TRUNCATE and bulk changes");
        let any = Deps { any_table: true, ..Deps::default() };
        assert!(!c.current(&any, start));
    }

    #[test]
    fn a_flush_invalidates_everything_before_it() {
        let c = Changes::new();
        c.flush();
        let start = c.position();
        c.flush();
        assert!(!c.current(&Deps::default(), start));
    }

    #[test]
    fn filter_values_become_postgres_text() {
        let col = |kind, type_name: &str| crate::schema::Column {
            name: "c".into(),
            type_name: type_name.into(),
            type_oid: 0,
            kind,
            nullable: true,
            default: None,
            comment: None,
        };
        use crate::schema::ValueKind::*;
        assert_eq!(canonical_text(&col(Int4, "integer"), "007"), Some("7".into()));
        assert_eq!(canonical_text(&col(Int4, "integer"), "x"), None);
        assert_eq!(
            canonical_text(&col(Uuid, "uuid"), "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into())
        );
        assert_eq!(canonical_text(&col(Uuid, "uuid"), "{a0eebc999c0b4ef8bb6d6bb9bd380a11}"), None);
        assert_eq!(canonical_text(&col(Text, "text"), "Ab "), Some("Ab ".into()));
        assert_eq!(canonical_text(&col(Text, "character(3)"), "Ab"), None);
        assert_eq!(canonical_text(&col(Text, "citext"), "Ab"), None);
    }

    #[test]
    fn the_key_holds_what_changes_the_answer() {
        let mut args =
            crate::config::ServeArgs { db_uri: Some("postgres://u@h/d".into()), ..Default::default() };
        let all = ResponseCache::new(&Config::load(&args).unwrap());
        args.cache_key_claims = Some("sub, role".into());
        let narrow = ResponseCache::new(&Config::load(&args).unwrap());
        let uri: http::Uri = "/films?id=eq.1".parse().unwrap();
        let get = http::Method::GET;
        let mut h = HeaderMap::new();
        let a = r#"{"role":"u","sub":"a","exp":1}"#;
        let a2 = r#"{"role":"u","sub":"a","exp":2}"#;
        let b = r#"{"role":"u","sub":"b","exp":1}"#;
        assert_ne!(all.key(&get, &uri, &h, "u", a), all.key(&get, &uri, &h, "u", a2));
        assert_eq!(narrow.key(&get, &uri, &h, "u", a), narrow.key(&get, &uri, &h, "u", a2));
        assert_ne!(narrow.key(&get, &uri, &h, "u", a), narrow.key(&get, &uri, &h, "u", b));
        assert_ne!(all.key(&get, &uri, &h, "u", a), all.key(&get, &uri, &h, "v", a));
        assert_ne!(all.key(&get, &uri, &h, "u", a), all.key(&http::Method::HEAD, &uri, &h, "u", a));
        let plain = all.key(&get, &uri, &h, "u", a);
        h.insert("accept", "text/csv".parse().unwrap());
        assert_ne!(plain, all.key(&get, &uri, &h, "u", a));
        h.clear();
        h.insert("accept", "".parse().unwrap());
        assert_ne!(plain, all.key(&get, &uri, &h, "u", a), "an empty header differs from none");
        h.clear();
        h.insert("x-other", "1".parse().unwrap());
        assert_eq!(plain, all.key(&get, &uri, &h, "u", a));
    }
}
