//! The change feed's realtime side: rows of tables realtime has subscribers for, kept as the
//! stream sent them (text) until their transactions are visible, then converted to typed JSON
//! ([`values`](super::values)) and handed to realtime's [`Feed`] in commit order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio_postgres::Client;

use super::values::{self, TypeInfo};
use crate::realtime::{Change, Commit, Feed, Kind, Relation};
use crate::schema::QualifiedName;

/// A row larger than this (its values' text) is sent with its short values only, and
/// Supabase's `Error 413: Payload Too Large`.
const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// The longest value kept in a row too large to send whole.
const MAX_TRIMMED_VALUE: usize = 64;

/// A transaction's rows held for realtime at most (the rest are dropped, and subscribers told).
pub const MAX_TRANSACTION_ROWS: usize = 100_000;

/// The publication Supabase users add tables to.
pub const PUBLICATION: &str = "supabase_realtime";

/// A relation as the stream describes it.
#[derive(Debug)]
pub struct StreamRelation {
    /// Its OID.
    pub oid: u32,
    /// Schema and name.
    pub name: QualifiedName,
    /// Columns: name and type OID.
    pub columns: Vec<(String, u32)>,
}

/// A value as the stream sent it.
#[derive(Debug, Clone)]
pub enum Cell {
    /// NULL.
    Null,
    /// A TOASTed value the update did not change (not sent).
    Unchanged,
    /// Its text.
    Text(Bytes),
}

/// A row change as the stream sent it.
#[derive(Debug)]
pub struct RawChange {
    /// The relation.
    pub relation: Arc<StreamRelation>,
    /// What happened.
    pub kind: Kind,
    /// The new row (inserts, updates).
    pub new: Vec<Cell>,
    /// The old row's replica identity, if sent.
    pub old: Option<Vec<Cell>>,
    /// Whether that is the whole old row (`REPLICA IDENTITY FULL`), not only its key.
    pub old_full: bool,
}

/// A transaction's changes, with its commit time (microseconds since 2000-01-01).
#[derive(Debug, Default)]
pub struct RawCommit {
    /// Its transaction id, as the stream gives it.
    pub xid: u32,
    /// When it committed.
    pub at: i64,
    /// Its changes.
    pub changes: Vec<RawChange>,
}

/// Converts and hands over; remembers type names and primary keys.
pub struct RealtimeSide {
    /// Realtime's feed.
    pub feed: Feed,
    types: HashMap<u32, TypeInfo>,
    /// Per stream relation (by address), its converted description.
    relations: HashMap<usize, (Arc<StreamRelation>, Arc<Relation>)>,
}

impl RealtimeSide {
    /// The realtime side of a feed.
    pub fn new(feed: Feed) -> RealtimeSide {
        RealtimeSide { feed, types: HashMap::new(), relations: HashMap::new() }
    }

    /// Converts `commits` (their transactions visible now) and hands them to realtime.
    pub async fn hand_over(
        &mut self,
        helper: &Client,
        commits: Vec<RawCommit>,
    ) -> Result<(), tokio_postgres::Error> {
        for commit in commits {
            let mut changes = Vec::with_capacity(commit.changes.len());
            for raw in commit.changes {
                let relation = self.relation(helper, &raw.relation).await?;
                changes.push(self.convert(relation, raw));
            }
            let at = UNIX_EPOCH
                + Duration::from_secs(946_684_800)
                + Duration::from_micros(commit.at.max(0) as u64);
            self.feed.commit(Commit {
                at: at.max(UNIX_EPOCH).min(SystemTime::now() + Duration::from_secs(86_400)),
                changes,
            });
        }
        Ok(())
    }

    /// The relation's description: type names and primary key read from the catalog once.
    async fn relation(
        &mut self,
        helper: &Client,
        rel: &Arc<StreamRelation>,
    ) -> Result<Arc<Relation>, tokio_postgres::Error> {
        let id = Arc::as_ptr(rel) as usize;
        if let Some((_, r)) = self.relations.get(&id) {
            return Ok(r.clone());
        }
        let unknown: Vec<u32> =
            rel.columns.iter().map(|c| c.1).filter(|t| !self.types.contains_key(t)).collect();
        if !unknown.is_empty() {
            let rows = helper
                .query(
                    "SELECT t.oid, t.typname::text, b.typname::text, e.typname::text
                     FROM pg_catalog.pg_type t
                     JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
                     LEFT JOIN pg_catalog.pg_type e0 ON e0.oid = b.typelem AND b.typcategory = 'A'
                     LEFT JOIN pg_catalog.pg_type e ON e.oid = CASE WHEN e0.typtype = 'd' THEN e0.typbasetype ELSE e0.oid END
                     WHERE t.oid = ANY($1)",
                    &[&unknown],
                )
                .await?;
            for row in rows {
                let oid: u32 = row.get(0);
                self.types.insert(oid, TypeInfo { name: row.get(1), base: row.get(2), element: row.get(3) });
            }
        }
        let key: Vec<String> = helper
            .query_one(
                "SELECT coalesce(array_agg(a.attname::text ORDER BY k.n), '{}')
                 FROM pg_catalog.pg_index i
                 CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                 WHERE i.indrelid = $1 AND i.indisprimary",
                &[&rel.oid],
            )
            .await?
            .get(0);
        let relation = Arc::new(Relation {
            name: rel.name.clone(),
            columns: rel
                .columns
                .iter()
                .map(|(name, oid)| {
                    (name.clone(), self.types.get(oid).map_or_else(|| oid.to_string(), |t| t.name.clone()))
                })
                .collect(),
            key,
        });
        self.relations.retain(|_, (r, _)| r.oid != rel.oid);
        self.relations.insert(id, (rel.clone(), relation.clone()));
        Ok(relation)
    }

    fn convert(&self, relation: Arc<Relation>, raw: RawChange) -> Change {
        let size = |cells: &[Cell]| {
            cells.iter().map(|c| if let Cell::Text(t) = c { t.len() } else { 0 }).sum::<usize>()
        };
        let too_large = size(&raw.new) + raw.old.as_deref().map_or(0, size) > MAX_RECORD_BYTES;
        let record = |cells: &[Cell]| -> Map<String, Value> {
            let mut m = Map::new();
            for ((name, oid), cell) in raw.relation.columns.iter().zip(cells) {
                let value = match cell {
                    Cell::Null => Value::Null,
                    Cell::Unchanged => continue,
                    Cell::Text(t) if too_large && t.len() > MAX_TRIMMED_VALUE => continue,
                    Cell::Text(t) => {
                        let text = String::from_utf8_lossy(t);
                        match self.types.get(oid) {
                            Some(ty) => values::json(&text, ty),
                            None => Value::String(text.into_owned()),
                        }
                    }
                };
                m.insert(name.clone(), value);
            }
            m
        };
        let mut new = record(&raw.new);
        let old = match &raw.old {
            Some(cells) => {
                let mut m = record(cells);
                if !raw.old_full {
                    // A key-only identity sends NULL for the other columns: not their values.
                    m.retain(|k, _| relation.key.contains(k));
                }
                m
            }
            // An update that did not change the key: the key, from the new row.
            None if raw.kind == Kind::Update => new
                .iter()
                .filter(|(k, _)| relation.key.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            None => Map::new(),
        };
        // Unchanged TOASTed values come from the old row where it was sent whole.
        for ((name, _), cell) in raw.relation.columns.iter().zip(&raw.new) {
            if matches!(cell, Cell::Unchanged) {
                if let Some(v) = old.get(name) {
                    new.insert(name.clone(), v.clone());
                }
            }
        }
        let (record, old_record) = match raw.kind {
            Kind::Insert => (new, Map::new()),
            Kind::Update => (new, old),
            Kind::Delete => (Map::new(), old),
        };
        Change {
            relation,
            kind: raw.kind,
            record,
            old_record,
            error: too_large.then_some("Error 413: Payload Too Large"),
        }
    }
}
