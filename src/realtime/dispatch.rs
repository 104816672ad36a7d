//! Delivering committed changes: each change is matched against every listening channel's
//! bindings (event, table, filter), the matches are checked against the subscriber's rights —
//! once per distinct role (and, where rows are decided by claims, per distinct set of claims)
//! and table for all the changes taken together, never once per subscriber — and the
//! messages go out in commit order, each encoded once for every channel that receives the
//! same bytes.

use std::collections::hash_map::Entry;

/// The dispatcher's maps, hashed with foldhash: their keys are the server's own (a delivery
/// hashes several per subscriber, where SipHash showed in profiles).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::stream::{self, StreamExt};
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::Message;

use super::change::{Change, Commit, FeedEvent, Kind, TableAccess};
use super::frame::Outbound;
use super::hub::{PgChannel, Who};
use super::Realtime;

/// Commits taken together at most (their checks are shared).
const MAX_BATCH: usize = 256;

/// Checks run at once against the database.
const CONCURRENT_CHECKS: usize = 8;

/// Takes the feed's events until it is dropped, delivering commits in order.
pub async fn run(rt: Arc<Realtime>, mut rx: tokio::sync::mpsc::Receiver<FeedEvent>) {
    while let Some(first) = rx.recv().await {
        let mut commits = Vec::new();
        let mut next = Some(first);
        while let Some(event) = next.take() {
            match event {
                FeedEvent::Commit(c) => {
                    commits.push(c);
                    if commits.len() < MAX_BATCH {
                        next = rx.try_recv().ok();
                    }
                }
                other => {
                    deliver(&rt, std::mem::take(&mut commits)).await;
                    rt.feed_event(other);
                    next = rx.try_recv().ok();
                }
            }
        }
        deliver(&rt, commits).await;
    }
}

/// A change a channel is to receive, once its rights are checked.
struct Pending {
    /// The change (an index into the batch's changes).
    change: usize,
    channel: Arc<PgChannel>,
    ids: Vec<u32>,
    who: Arc<Who>,
}

/// Whose rights are checked together: a table (its relation's address in the batch), a role,
/// and the claims where they matter. Hashed by the caller's precomputed key; compared whole.
#[derive(Clone)]
struct Group {
    table: usize,
    role: Arc<str>,
    claims: Option<(u64, Arc<str>)>,
}

impl std::hash::Hash for Group {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.table.hash(state);
        self.role.hash(state);
        self.claims.as_ref().map(|c| c.0).hash(state);
    }
}

impl PartialEq for Group {
    fn eq(&self, o: &Group) -> bool {
        self.table == o.table
            && self.role == o.role
            && match (&self.claims, &o.claims) {
                (None, None) => true,
                (Some(a), Some(b)) => a.0 == b.0 && (Arc::ptr_eq(&a.1, &b.1) || a.1 == b.1),
                _ => false,
            }
    }
}

impl Eq for Group {}

/// Where in the batch's list of rights each role's for each table is (by role and relation
/// address).
type TableRights = HashMap<(Arc<str>, usize), usize>;

/// What a subscriber may be sent of a change.
enum Verdict {
    /// Nothing.
    Nothing,
    /// The change, with the old row cut to its key or not.
    Send { key_only: bool },
}

/// The bytes a message shares with every channel it is encoded the same for: the change, the
/// binding ids, the columns (the role's readable ones — its rights' index in the batch — and
/// the binding's `select`, by address), whether the old row is cut to its key, the topic.
#[derive(Hash, PartialEq, Eq)]
struct Shape<'a> {
    change: usize,
    ids: &'a [u32],
    access: usize,
    select: usize,
    key_only: bool,
    topic: &'a str,
}

async fn deliver(rt: &Realtime, commits: Vec<Commit>) {
    let changes: Vec<(&Commit, &Change)> =
        commits.iter().flat_map(|c| c.changes.iter().map(move |ch| (c, ch))).collect();
    let channels = rt.hub.listening();
    let Some(access) = rt.access.get() else { return };
    if changes.is_empty() || channels.is_empty() {
        return;
    }
    let pending = matches(&changes, &channels);
    if pending.is_empty() {
        return;
    }
    let relation = |p: &Pending| Arc::as_ptr(&changes[p.change].1.relation) as usize;
    // What each pending subscriber's role may read of the table: an index into `rights`.
    let mut rights: Vec<TableAccess> = Vec::new();
    let mut asked: TableRights = HashMap::default();
    let mut right_of = Vec::with_capacity(pending.len());
    for p in &pending {
        let i = match asked.entry((p.who.principal.role.clone(), relation(p))) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let table = &changes[p.change].1.relation.name;
                rights.push(rt.table_access(access.as_ref(), &p.who.principal, table).await);
                *e.insert(rights.len() - 1)
            }
        };
        right_of.push(i);
    }
    let group = |p: &Pending, a: &TableAccess| Group {
        table: relation(p),
        role: p.who.principal.role.clone(),
        claims: a.by_claims.then(|| (p.who.key, p.who.principal.claims.clone())),
    };
    // Rows decided row by row: each group's rows asked for at once; deleted rows apart.
    let mut asks: HashMap<Group, (Arc<Who>, Vec<usize>)> = HashMap::default();
    let mut deleted: HashMap<(Group, usize), Arc<Who>> = HashMap::default();
    for (p, &r) in pending.iter().zip(&right_of) {
        let a = &rights[r];
        if a.columns.is_empty() || !a.by_row {
            continue;
        }
        let g = group(p, a);
        if changes[p.change].1.kind == Kind::Delete {
            deleted.entry((g, p.change)).or_insert_with(|| p.who.clone());
        } else {
            let (_, rows) = asks.entry(g).or_insert_with(|| (p.who.clone(), Vec::new()));
            // Pending is in change order: a row already asked for is the last one.
            if rows.last() != Some(&p.change) {
                rows.push(p.change);
            }
        }
    }
    let visible: HashMap<Group, HashSet<usize>> = stream::iter(asks)
        .map(|(g, (who, rows))| {
            let changes = &changes;
            async move {
                let relation = &changes[rows[0]].1.relation;
                let keys: Vec<Vec<Value>> = rows.iter().map(|i| key_of(changes[*i].1)).collect();
                let seen = match access.readable(&who.principal, &relation.name, &relation.key, &keys).await {
                    Ok(seen) => seen,
                    Err(e) => {
                        tracing::warn!(error = %e, table = %relation.name.name, "realtime: a subscriber's rights could not be checked; its changes are not sent");
                        Vec::new()
                    }
                };
                (g, rows.into_iter().zip(seen).filter(|(_, s)| *s).map(|(i, _)| i).collect())
            }
        })
        .buffer_unordered(CONCURRENT_CHECKS)
        .collect()
        .await;
    // A deleted row can no longer be read: where the backend can tell who saw it, whole;
    // elsewhere its key goes to every reader of the table (as Supabase does); a failed
    // check sends nothing.
    let mut saw: HashMap<(Group, usize), Option<bool>> = HashMap::default();
    for ((g, i), who) in deleted {
        let change = changes[i].1;
        let answer = access.saw_deleted(&who.principal, &change.relation.name, &change.old_record).await;
        saw.insert((g, i), answer.unwrap_or(Some(false)));
    }
    let verdict = |p: &Pending, a: &TableAccess| -> Verdict {
        if a.columns.is_empty() {
            return Verdict::Nothing;
        }
        if !a.by_row {
            return Verdict::Send { key_only: false };
        }
        let g = group(p, a);
        match changes[p.change].1.kind {
            Kind::Delete => match saw.get(&(g, p.change)).copied().flatten() {
                Some(false) => Verdict::Nothing,
                Some(true) => Verdict::Send { key_only: false },
                None => Verdict::Send { key_only: true },
            },
            // The old row of an update may not have been the subscriber's to read.
            _ if visible.get(&g).is_some_and(|s| s.contains(&p.change)) => Verdict::Send { key_only: true },
            _ => Verdict::Nothing,
        }
    };
    let mut encoded: HashMap<Shape<'_>, [Option<Message>; 2]> = HashMap::default();
    let mut sent = 0u64;
    for (p, &r) in pending.iter().zip(&right_of) {
        let a = &rights[r];
        let Verdict::Send { key_only } = verdict(p, a) else { continue };
        let (commit, change) = changes[p.change];
        let selected =
            p.channel.bindings.iter().find(|b| p.ids.contains(&b.id)).and_then(|b| b.select.as_ref());
        let vsn = p.channel.outbox.vsn;
        let shape = Shape {
            change: p.change,
            ids: &p.ids,
            access: r,
            select: selected.map_or(0, |s| s as *const Vec<String> as usize),
            key_only,
            topic: &p.channel.topic,
        };
        let message = match encoded.entry(shape) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert([None, None]),
        };
        let slot = &mut message[vsn as usize];
        if slot.is_none() {
            let columns: Vec<&str> = a
                .columns
                .iter()
                .map(String::as_str)
                .filter(|c| selected.is_none_or(|s| s.iter().any(|x| x == c)))
                .collect();
            let data = data(commit.at, change, &columns, key_only);
            let ids = serde_json::to_string(&p.ids).unwrap_or_default();
            let payload = format!(r#"{{"data":{data},"ids":{ids}}}"#);
            *slot =
                Outbound::Fanout { topic: &p.channel.topic, event: "postgres_changes", payload: &payload }
                    .encode(vsn);
        }
        if let Some(m) = slot.clone() {
            sent += u64::from(p.channel.outbox.push(m));
        }
    }
    rt.metrics.delivered.fetch_add(sent, std::sync::atomic::Ordering::Relaxed);
}

/// Every (change, channel) whose bindings take the change, in commit order.
fn matches(changes: &[(&Commit, &Change)], channels: &[Arc<PgChannel>]) -> Vec<Pending> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut pending = Vec::new();
    for (i, (_, change)) in changes.iter().enumerate() {
        let values = if change.kind == Kind::Delete { &change.old_record } else { &change.record };
        for ch in channels {
            let ids: Vec<u32> = ch
                .bindings
                .iter()
                .filter(|b| b.matches(&change.relation.name, change.kind, values))
                .map(|b| b.id)
                .collect();
            if ids.is_empty() {
                continue;
            }
            let who = ch.who.load_full();
            if who.exp.is_some_and(|e| e <= now) {
                continue; // its connection closes the channel
            }
            pending.push(Pending { change: i, channel: ch.clone(), ids, who });
        }
    }
    pending
}

/// The primary key's values of a change's row (the old row's for a delete).
fn key_of(change: &Change) -> Vec<Value> {
    let values = if change.kind == Kind::Delete { &change.old_record } else { &change.record };
    change.relation.key.iter().map(|k| values.get(k).cloned().unwrap_or(Value::Null)).collect()
}

/// Supabase's `data` of a change: `columns`, `commit_timestamp`, `errors`, `old_record`
/// (updates and deletes), `record` (inserts and updates), `schema`, `table`, `type`, with the
/// columns a subscriber may read and asked for; `key_only`: the old row's key columns only.
fn data(at: SystemTime, change: &Change, columns: &[&str], key_only: bool) -> String {
    let rel = &change.relation;
    let pick = |values: &Map<String, Value>, only_key: bool| -> Value {
        Value::Object(
            columns
                .iter()
                .filter(|c| !only_key || rel.key.iter().any(|k| k == *c))
                .filter_map(|c| values.get(*c).map(|v| ((*c).to_owned(), v.clone())))
                .collect(),
        )
    };
    let mut d = Map::new();
    d.insert(
        "columns".into(),
        Value::Array(
            rel.columns
                .iter()
                .filter(|(name, _)| columns.contains(&name.as_str()))
                .map(|(name, ty)| serde_json::json!({ "name": name, "type": ty }))
                .collect(),
        ),
    );
    d.insert("commit_timestamp".into(), Value::String(timestamp(at)));
    d.insert(
        "errors".into(),
        change.error.map_or(Value::Null, |e| Value::Array(vec![Value::String(e.into())])),
    );
    if change.kind != Kind::Insert {
        d.insert("old_record".into(), pick(&change.old_record, key_only));
    }
    if change.kind != Kind::Delete {
        d.insert("record".into(), pick(&change.record, false));
    }
    d.insert("schema".into(), Value::String(rel.name.schema.clone()));
    d.insert("table".into(), Value::String(rel.name.name.clone()));
    d.insert("type".into(), Value::String(change.kind.as_str().into()));
    Value::Object(d).to_string()
}

/// `2025-09-10T12:34:56.789Z`: Supabase's `commit_timestamp` (UTC, milliseconds).
pub fn timestamp(at: SystemTime) -> String {
    let ms = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn commit_timestamps_are_utc_milliseconds() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            timestamp(UNIX_EPOCH + Duration::from_millis(1_757_507_696_789)),
            "2025-09-10T12:34:56.789Z"
        );
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }
}
