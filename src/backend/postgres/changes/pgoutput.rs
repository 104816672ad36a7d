//! PostgreSQL's `pgoutput` messages decoded: relations as the stream describes them, row
//! changes recorded in the response cache and kept for realtime, and the instances' logical
//! messages handed to the feed.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Buf, Bytes};

use super::feed::{Batch, FeedError, Redo};
use super::realtime::{Cell, RawChange, RawCommit, StreamRelation};
use crate::cache::{ResponseCache, CHANNEL};
use crate::realtime::{Feed, Kind};
use crate::schema::QualifiedName;

/// A row value longer than this is not kept as a key: the change counts for every value of
/// its column.
const MAX_KEY_LEN: usize = 256;

/// A relation as the stream described it: per column, its name and whether its values are
/// kept as row keys, and whether it belongs to the replica identity; and for realtime, its
/// names and types.
pub(super) struct Relation {
    columns: Vec<(Arc<str>, bool, bool)>,
    stream: Arc<StreamRelation>,
}

/// Types whose text form is canonical (see `canonical_text`): int2, int4, int8, text,
/// varchar, uuid.
fn keyed_type(oid: u32) -> bool {
    matches!(oid, 21 | 23 | 20 | 25 | 1043 | 2950)
}

/// Applies one `pgoutput` message: changes at once (and again in [`settle`]); instance messages
/// are left to [`settle`].
pub(super) fn decode(
    relations: &mut HashMap<u32, Relation>,
    cache: Option<&ResponseCache>,
    realtime: Option<&Feed>,
    mut m: Bytes,
    batch: &mut Batch,
    open: &mut RawCommit,
) -> Result<(), FeedError> {
    let short = || FeedError::Protocol("short pgoutput message".into());
    if m.is_empty() {
        return Err(short());
    }
    match m.get_u8() {
        b'R' => {
            let oid = get_u32(&mut m)?;
            let namespace = get_cstring(&mut m)?;
            let name = get_cstring(&mut m)?;
            if m.remaining() < 3 {
                return Err(short());
            }
            m.advance(1);
            let n = m.get_i16().max(0) as usize;
            let mut columns: Vec<(Arc<str>, bool, bool)> = Vec::with_capacity(n);
            let mut typed = Vec::with_capacity(n);
            for _ in 0..n {
                if m.remaining() < 1 {
                    return Err(short());
                }
                let flags = m.get_u8();
                let name = get_cstring(&mut m)?;
                let type_oid = get_u32(&mut m)?;
                get_u32(&mut m)?;
                columns.push((Arc::from(name.as_str()), keyed_type(type_oid), flags & 1 == 1));
                typed.push((name, type_oid));
            }
            if let Some(cache) = cache {
                cache.watched_columns(oid, columns.iter().filter(|c| c.1).map(|c| c.0.clone()).collect());
            }
            let stream = Arc::new(StreamRelation {
                oid,
                name: QualifiedName { schema: namespace, name },
                columns: typed,
            });
            relations.insert(oid, Relation { columns, stream });
        }
        op @ (b'I' | b'U' | b'D') => {
            let oid = get_u32(&mut m)?;
            let rel = relations.get(&oid).ok_or_else(|| FeedError::Protocol(format!("relation {oid}")))?;
            // Per keyed column: its values before and after, or None where one is unknown.
            let mut values: Vec<Option<Vec<Bytes>>> = vec![Some(Vec::new()); rel.columns.len()];
            let mut old_seen = false;
            let wanted = realtime.is_some_and(|f| f.wants(&rel.stream.name.schema, &rel.stream.name.name));
            let mut row = RawChange {
                relation: rel.stream.clone(),
                kind: match op {
                    b'I' => Kind::Insert,
                    b'U' => Kind::Update,
                    _ => Kind::Delete,
                },
                new: Vec::new(),
                old: None,
                old_full: false,
            };
            loop {
                if m.remaining() < 1 {
                    return Err(short());
                }
                let kind = m.get_u8();
                let tuple = get_tuple(&mut m, rel.columns.len())?;
                if wanted {
                    let cells = tuple.iter().map(Value::cell).collect();
                    match kind {
                        b'N' => row.new = cells,
                        _ => {
                            row.old = Some(cells);
                            row.old_full = kind == b'O';
                        }
                    }
                }
                for (i, v) in tuple.into_iter().enumerate() {
                    match (v, &mut values[i]) {
                        (_, None) => {}
                        (Value::Null, _) => {}
                        (Value::Text(t), Some(vs)) if t.len() <= MAX_KEY_LEN => vs.push(t),
                        (_, slot) => *slot = None,
                    }
                }
                match kind {
                    b'K' if op == b'D' => {
                        // The old key only: the other columns' values are unknown.
                        mark_unknown(rel, &mut values, |key| !key);
                        break;
                    }
                    b'O' if op == b'D' => break,
                    b'N' if op == b'I' => break,
                    b'K' if op == b'U' => {
                        old_seen = true;
                        // Old values of the non-key columns are unknown.
                        mark_unknown(rel, &mut values, |key| !key);
                    }
                    b'O' if op == b'U' => old_seen = true,
                    b'N' if op == b'U' => {
                        if !old_seen {
                            // No old tuple: the key did not change; the other columns' old
                            // values are unknown.
                            mark_unknown(rel, &mut values, |key| !key);
                        }
                        break;
                    }
                    other => return Err(FeedError::Protocol(format!("tuple kind '{}'", other as char))),
                }
            }
            let mut carried = Vec::new();
            let mut unknown = Vec::new();
            for ((name, keyed, _), v) in rel.columns.iter().zip(values) {
                match (keyed, v) {
                    (false, _) => {}
                    (true, Some(vs)) => carried.push((
                        name.clone(),
                        vs.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect(),
                    )),
                    (true, None) => unknown.push(name.clone()),
                }
            }
            if let Some(cache) = cache {
                cache.columns_changed(oid, carried.clone(), unknown.clone());
                batch.redo.push(Redo::Columns(oid, carried, unknown));
            }
            if wanted {
                // A transaction's rows are held until it commits: past the bound, realtime is
                // told changes were dropped rather than memory growing with the transaction.
                match open.changes.len() < super::realtime::MAX_TRANSACTION_ROWS {
                    true => open.changes.push(row),
                    false => realtime.into_iter().for_each(|f| f.dropped()),
                }
            }
        }
        b'T' => {
            let n = get_u32(&mut m)?;
            if m.remaining() < 1 {
                return Err(short());
            }
            m.advance(1);
            for _ in 0..n {
                let table = get_u32(&mut m)?;
                if let Some(cache) = cache {
                    cache.table_changed(table);
                    batch.redo.push(Redo::Table(table));
                }
            }
        }
        b'M' => {
            if m.remaining() < 9 {
                return Err(short());
            }
            m.advance(9);
            let prefix = get_cstring(&mut m)?;
            let len = get_u32(&mut m)? as usize;
            if let (Some(cache), true) = (cache, prefix == CHANNEL && m.remaining() >= len) {
                let payload = String::from_utf8_lossy(&m[..len]).into_owned();
                // An unlogged table's change (its trigger's report) is a change: recorded now
                // too. Instance messages wait for the batch to settle.
                if payload.starts_with('{') || payload.parse::<u32>().is_ok() {
                    cache.notified(&payload);
                }
                batch.redo.push(Redo::Notify(payload));
            }
        }
        b'B' => {
            if m.remaining() < 20 {
                return Err(short());
            }
            m.advance(8);
            let at = m.get_i64();
            let xid = m.get_u32();
            *open = RawCommit { xid, at, changes: Vec::new() };
            batch.xids.push(xid);
            batch.open_from = Some(batch.redo.len());
        }
        // A transaction's end (its changes arrive only once it committed). Its begin may have
        // come in an earlier batch: its id must be seen finished before this batch settles.
        b'C' => {
            if m.remaining() < 17 {
                return Err(short());
            }
            // After the flags and the commit record's start: its end, which a replica has
            // passed once it has replayed the commit.
            m.advance(9);
            batch.through = batch.through.max(m.get_u64());
            batch.open_from = None;
            if !batch.xids.contains(&open.xid) {
                batch.xids.push(open.xid);
            }
            if !open.changes.is_empty() {
                batch.commits.push(std::mem::take(open));
            }
        }
        // Origin, type: nothing to do.
        b'O' | b'Y' => {}
        other => return Err(FeedError::Protocol(format!("pgoutput message '{}'", other as char))),
    }
    Ok(())
}

/// Marks the keyed columns `which(in replica identity)` selects as of unknown value.
fn mark_unknown(rel: &Relation, values: &mut [Option<Vec<Bytes>>], which: impl Fn(bool) -> bool) {
    for (i, (_, keyed, key)) in rel.columns.iter().enumerate() {
        if *keyed && which(*key) {
            values[i] = None;
        }
    }
}

enum Value {
    Null,
    Unchanged,
    Text(Bytes),
}

impl Value {
    fn cell(&self) -> Cell {
        match self {
            Value::Null => Cell::Null,
            Value::Unchanged => Cell::Unchanged,
            Value::Text(t) => Cell::Text(t.clone()),
        }
    }
}

fn get_tuple(m: &mut Bytes, expected: usize) -> Result<Vec<Value>, FeedError> {
    if m.remaining() < 2 {
        return Err(FeedError::Protocol("short tuple".into()));
    }
    let n = m.get_i16().max(0) as usize;
    if n != expected {
        return Err(FeedError::Protocol(format!("tuple of {n} columns, relation of {expected}")));
    }
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        if m.remaining() < 1 {
            return Err(FeedError::Protocol("short tuple".into()));
        }
        values.push(match m.get_u8() {
            b'n' => Value::Null,
            b'u' => Value::Unchanged,
            b't' | b'b' => {
                let len = get_u32(m)? as usize;
                if m.remaining() < len {
                    return Err(FeedError::Protocol("short tuple value".into()));
                }
                Value::Text(m.split_to(len))
            }
            other => return Err(FeedError::Protocol(format!("tuple value kind '{}'", other as char))),
        });
    }
    Ok(values)
}

fn get_u32(m: &mut Bytes) -> Result<u32, FeedError> {
    if m.remaining() < 4 {
        return Err(FeedError::Protocol("short pgoutput message".into()));
    }
    Ok(m.get_u32())
}

fn get_cstring(m: &mut Bytes) -> Result<String, FeedError> {
    let end =
        m.iter().position(|b| *b == 0).ok_or_else(|| FeedError::Protocol("unterminated string".into()))?;
    let s = String::from_utf8_lossy(&m[..end]).into_owned();
    m.advance(end + 1);
    Ok(s)
}
