//! The cache's counters, and their Prometheus text for `/rowgate/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::{Entry, ResponseCache};

/// Counts evictions.
#[derive(Clone)]
pub struct Evictions(pub(super) Arc<Metrics>);

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

impl ResponseCache {
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
             # HELP rowgate_cache_live Whether the change listener is current (1) or the cache is bypassed (0).\n# TYPE rowgate_cache_live gauge\nrowgate_cache_live {}\n\
             # HELP rowgate_cache_feed_installed Whether the database reports changes to the exposed relations (0: run `rowgate cache install`).\n# TYPE rowgate_cache_feed_installed gauge\nrowgate_cache_feed_installed {}\n",
            self.entries.len(),
            self.entries.weight(),
            u8::from(self.changes.live()),
            u8::from(self.feed.load(Ordering::Relaxed)),
        ));
    }
}
