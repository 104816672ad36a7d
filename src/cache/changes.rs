//! The change log an answer is checked against: a sequence number per change received, per
//! table and per key value, and the fence that says whether the feed is current.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use super::deps::{row_key, Deps};
use super::protocol::RowChange;

/// Rows map size beyond which it is cleared (answers depending on rows then count as older).
const MAX_ROW_KEYS: usize = 200_000;

/// The change log an entry is checked against: a sequence number per received notification.
pub struct Changes {
    seq: AtomicU64,
    pub(super) log: RwLock<ChangeLog>,
    any_table: AtomicU64,
    flushed: AtomicU64,
    /// Microseconds since `epoch` until which the listener is known current (0: not live).
    pub(super) fence: AtomicU64,
    epoch: Instant,
    /// The primary's WAL position that covers every change recorded once its transaction was
    /// visible (logical decoding's positions; 0 where the feed gives none).
    applied: AtomicU64,
}

#[derive(Default)]
pub(super) struct ChangeLog {
    /// Last change of any kind, per table.
    tables: HashMap<u32, u64>,
    /// Last change reported for the whole table (TRUNCATE, bulk changes, no key columns).
    whole: HashMap<u32, u64>,
    /// Last change per (table, key column, value).
    rows: HashMap<String, u64>,
    /// The key columns each table's row notifications carry (the same until DDL, which flushes).
    pub(super) carried: HashMap<u32, Vec<Arc<str>>>,
    /// Per table and carried column, the last change that did not report its values (logical
    /// decoding knows an updated row's old values of its replica identity only).
    unknown: HashMap<u32, HashMap<Arc<str>, u64>>,
    /// Answers depending on rows and older than this are stale (the rows map was cleared).
    rows_floor: u64,
}

impl Changes {
    pub(super) fn new() -> Self {
        Changes {
            seq: AtomicU64::new(0),
            log: RwLock::new(ChangeLog::default()),
            any_table: AtomicU64::new(0),
            flushed: AtomicU64::new(1),
            fence: AtomicU64::new(0),
            epoch: Instant::now(),
            applied: AtomicU64::new(0),
        }
    }

    /// The current position; a query that starts after this call sees every change before it.
    pub fn position(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// The WAL position that covers every change recorded once visible, if the feed gives
    /// positions. Read after [`Changes::position`], it covers each such change numbered at most
    /// that position. (A change is also recorded on arrival, before it is visible; that record
    /// only ever makes answers count as older, and the visible one follows with a higher
    /// number, so an answer that lacks it is never served.)
    pub fn applied(&self) -> Option<u64> {
        Some(self.applied.load(Ordering::SeqCst)).filter(|lsn| *lsn > 0)
    }

    /// Changes committed through `lsn` are about to be recorded as visible: called before they
    /// are, so that a position read after a change's number covers it.
    pub fn applying_through(&self, lsn: u64) {
        self.applied.fetch_max(lsn, Ordering::SeqCst);
    }

    /// The feed gives no positions (triggers' notifications): misses are read on the primary.
    pub fn forget_applied(&self) {
        self.applied.store(0, Ordering::SeqCst);
    }

    /// Whether the listener has recently proven that it receives notifications promptly.
    pub fn live(&self) -> bool {
        self.micros() < self.fence.load(Ordering::SeqCst)
    }

    pub(super) fn micros(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    pub(super) fn table_changed(&self, oid: u32) {
        let mut log = self.log.write().unwrap_or_else(|e| e.into_inner());
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        log.tables.insert(oid, s);
        log.whole.insert(oid, s);
        self.any_table.store(s, Ordering::SeqCst);
    }

    pub(super) fn rows_changed(&self, change: RowChange) {
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

    pub(super) fn columns_changed(
        &self,
        table: u32,
        carried: Vec<(Arc<str>, Vec<String>)>,
        unknown: Vec<Arc<str>>,
    ) {
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

    pub(super) fn flush(&self) {
        let s = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.flushed.store(s, Ordering::SeqCst);
    }

    /// Whether an answer computed from a query started at `start` reading `deps` is current.
    pub(super) fn current(&self, deps: &Deps, start: u64) -> bool {
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
}
