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
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::stream::{self, StreamExt};
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::Message;

use super::change::{Change, Commit, Kind, Row, TableAccess};
use super::frame::Outbound;
use super::hub::{PgChannel, Stop, Who};
use super::Realtime;

/// Commits taken together at most (their checks are shared).
const MAX_BATCH: usize = 256;

/// Checks run at once against the database.
const CONCURRENT_CHECKS: usize = 8;

/// Batches waiting for the patterned channels' matcher at most; past it, those channels are
/// told they fell behind and closed, rather than anyone waiting for them.
const PATTERNED_BACKLOG: usize = 64;

/// The time one channel's filter patterns may take to match in any second: past it the
/// channel's connection is told and closed, so that no subscriber holds up the patterned
/// others for long.
const PATTERN_BUDGET: Duration = Duration::from_millis(100);

/// Which channels a delivery is for: those whose filters are only comparisons, matched on the
/// dispatcher's task, or those with a pattern (`like`, `match`, ...), whose time in proportion
/// to the text matched is spent on a thread of their own, never ahead of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Plain,
    Patterned,
}

/// Takes the feed's commits until it is dropped, delivering them in order, and tells
/// subscribers the feed's news.
pub async fn run(rt: Arc<Realtime>, mut rx: tokio::sync::mpsc::Receiver<Commit>) {
    let news = rt.feed.news.clone();
    let (patterned, backlog) = tokio::sync::mpsc::channel(PATTERNED_BACKLOG);
    tokio::spawn(run_patterned(rt.clone(), backlog));
    loop {
        tokio::select! {
            first = rx.recv() => {
                let Some(first) = first else { return };
                let mut commits = vec![first];
                while commits.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(c) => commits.push(c),
                        Err(_) => break,
                    }
                }
                let commits = Arc::new(commits);
                deliver(&rt, &commits, Part::Plain).await;
                let listeners = rt.hub.listening();
                if !listeners.patterned.is_empty() && patterned.try_send(commits).is_err() {
                    for c in &listeners.patterned {
                        c.outbox.stop(Stop::Overflowed);
                    }
                }
            }
            () = news.wake.notified() => {}
        }
        for event in news.take() {
            rt.feed_event(event);
        }
    }
}

/// Delivers each batch to the patterned channels, in order.
async fn run_patterned(rt: Arc<Realtime>, mut backlog: tokio::sync::mpsc::Receiver<Arc<Vec<Commit>>>) {
    while let Some(commits) = backlog.recv().await {
        deliver(&rt, &commits, Part::Patterned).await;
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
enum Verdict<'a> {
    /// Nothing.
    Nothing,
    /// The change, with the old row cut to its key or not.
    Send { key_only: bool },
    /// The change with the row as the subscriber's group (numbered from 1) read it, the old row
    /// cut to its key.
    Read { group: usize, row: &'a Row },
}

/// A group's rows to read: who reads, with which rights (an index), which changes' rows.
struct Ask {
    who: Arc<Who>,
    rights: usize,
    changes: Vec<usize>,
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
    /// The group whose read the row comes from (0: the change's own values).
    group: usize,
    topic: &'a str,
}

async fn deliver(rt: &Realtime, commits: &Arc<Vec<Commit>>, part: Part) {
    let changes: Vec<(&Commit, &Change)> =
        commits.iter().flat_map(|c| c.changes.iter().map(move |ch| (c, ch))).collect();
    let listeners = rt.hub.listening();
    let channels = match part {
        Part::Plain => &listeners.plain,
        Part::Patterned => &listeners.patterned,
    };
    let Some(access) = rt.access.get() else { return };
    if changes.is_empty() || channels.is_empty() {
        return;
    }
    // Only tables that publish their changes and that the API exposes: the feed may carry
    // others (the response cache's publication has every table).
    let published = rt.published.load();
    let only_published = rt.feed.only_published.load(std::sync::atomic::Ordering::SeqCst);
    let schema = rt.schema.load();
    // Another door's channels see every table the API exposes.
    let servable: Vec<Servable> = changes
        .iter()
        .map(|(_, c)| match schema.as_ref().is_some_and(|s| s.relations.contains_key(&c.relation.name)) {
            false => Servable::Not,
            true if only_published || published.contains(&c.relation.name) => Servable::Published,
            true => Servable::Exposed,
        })
        .collect();
    let pending = match part {
        Part::Plain => matches(&changes, channels, &servable, false),
        Part::Patterned => {
            let (commits, listeners) = (commits.clone(), listeners.clone());
            let matched = tokio::task::spawn_blocking(move || {
                let changes: Vec<(&Commit, &Change)> =
                    commits.iter().flat_map(|c| c.changes.iter().map(move |ch| (c, ch))).collect();
                matches(&changes, &listeners.patterned, &servable, true)
            });
            matched.await.unwrap_or_default()
        }
    };
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
    let mut asks: HashMap<Group, Ask> = HashMap::default();
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
            let ask =
                asks.entry(g).or_insert_with(|| Ask { who: p.who.clone(), rights: r, changes: Vec::new() });
            // Pending is in change order: a row already asked for is the last one.
            if ask.changes.last() != Some(&p.change) {
                ask.changes.push(p.change);
            }
        }
    }
    // Each group's rows as it reads them now: a change goes to it only if it can read the row,
    // and with the values it reads — which are the change's own unless the row changed again
    // meanwhile (that change follows), and never values it may not read (a row's earlier
    // values may have been another's: its owner may have changed since).
    let visible: HashMap<Group, (usize, HashMap<usize, Row>)> = stream::iter(asks.into_iter().enumerate())
        .map(|(n, (g, ask))| {
            let (changes, rights) = (&changes, &rights);
            async move {
                let relation = &changes[ask.changes[0]].1.relation;
                let keys: Vec<Vec<Value>> = ask.changes.iter().map(|i| key_of(changes[*i].1)).collect();
                let columns = &rights[ask.rights].columns;
                let read = access.rows(&ask.who.principal, &relation.name, &relation.key, columns, &keys).await;
                let read = read.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, table = %relation.name.name, "realtime: a subscriber's rights could not be checked; its changes are not sent");
                    Vec::new()
                });
                let seen = ask.changes.into_iter().zip(read).filter_map(|(i, row)| row.map(|row| (i, row))).collect();
                (g, (n + 1, seen))
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
        // A binding that filters on or selects a column the role may not read (grants changed
        // since it joined) gets nothing: what passes its filter would tell of that column.
        let readable = |c: &str| a.columns.iter().any(|x| x == c);
        let blind =
            p.channel.bindings.iter().filter(|b| p.ids.contains(&b.id)).any(|b| {
                !b.filter.columns().all(readable) || !b.select.iter().flatten().all(|c| readable(c))
            });
        if a.columns.is_empty() || blind {
            return Verdict::Nothing;
        }
        if !a.by_row {
            return Verdict::Send { key_only: false };
        }
        let g = group(p, a);
        let change = changes[p.change].1;
        match change.kind {
            Kind::Delete => match saw.get(&(g, p.change)).copied().flatten() {
                Some(false) => Verdict::Nothing,
                Some(true) => Verdict::Send { key_only: false },
                // Only its key goes out, to readers who may never have seen the row: a binding
                // filtering on another column would tell which of them held (a filtered delete
                // goes to nobody, as Supabase's documentation says of them).
                None if filters_beyond_key(p, change) => Verdict::Nothing,
                // Another door's protocol promises a deleted record only to who could read it
                // (PocketBase's): not even its key goes to the others.
                None if p.channel.writer.is_some() => Verdict::Nothing,
                None => Verdict::Send { key_only: true },
            },
            // The old row of an update may not have been the subscriber's to read.
            _ => match visible.get(&g).and_then(|(n, rows)| rows.get(&p.change).map(|row| (*n, row))) {
                Some((group, row)) => Verdict::Read { group, row },
                None => Verdict::Nothing,
            },
        }
    };
    let mut encoded: HashMap<Shape<'_>, [Option<Message>; 2]> = HashMap::default();
    let mut written: HashMap<Shape<'_>, Option<Message>> = HashMap::default();
    let mut sent = 0u64;
    for (p, &r) in pending.iter().zip(&right_of) {
        let a = &rights[r];
        let (key_only, read) = match verdict(p, a) {
            Verdict::Nothing => continue,
            Verdict::Send { key_only } => (key_only, None),
            Verdict::Read { group, row } => (true, Some((group, row))),
        };
        let (commit, change) = changes[p.change];
        if let Some(writer) = &p.channel.writer {
            // A door's messages are its subscriber's own (they carry its client's id).
            let shape = Shape {
                change: p.change,
                ids: &p.ids,
                access: r,
                select: Arc::as_ptr(writer) as *const () as usize,
                key_only,
                group: read.map_or(0, |(group, _)| group),
                topic: &p.channel.topic,
            };
            let message = written.entry(shape).or_insert_with(|| {
                let row = door_row(change, read.map(|(_, row)| row), &a.columns, key_only);
                writer.write(&p.channel.topic, change.kind, &change.relation.name, &row)
            });
            if let Some(m) = message.clone() {
                sent += u64::from(p.channel.outbox.push(m));
            }
            continue;
        }
        let selected =
            p.channel.bindings.iter().find(|b| p.ids.contains(&b.id)).and_then(|b| b.select.as_ref());
        let vsn = p.channel.outbox.vsn;
        let shape = Shape {
            change: p.change,
            ids: &p.ids,
            access: r,
            select: selected.map_or(0, |s| s as *const Vec<String> as usize),
            key_only,
            group: read.map_or(0, |(group, _)| group),
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
            let data = data(commit.at, change, read.map(|(_, row)| row), &columns, key_only);
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

/// Whether a change may go to a channel: of a table the API exposes and publishes, one it
/// exposes (for another door's channels), or neither.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Servable {
    Published,
    Exposed,
    Not,
}

/// The row another door's subscriber is sent: as it read it, else the change's own (the old
/// row of a delete, cut to its key where the subscriber may not have seen it), of the columns
/// it may read.
fn door_row(change: &Change, read: Option<&Row>, columns: &[String], key_only: bool) -> Row {
    let key_only = key_only && read.is_none() && change.kind == Kind::Delete;
    let values = match (read, change.kind) {
        (Some(row), _) => row,
        (None, Kind::Delete) => &change.old_record,
        (None, _) => &change.record,
    };
    values
        .iter()
        .filter(|(k, _)| columns.iter().any(|c| c == *k))
        .filter(|(k, _)| !key_only || change.relation.key.iter().any(|c| c == *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Every (change, channel) whose bindings take the change, in commit order, of the changes
/// marked `servable`. With `timed`, each channel's matching counts against its
/// [`PATTERN_BUDGET`]: one past it is stopped (its connection told and closed) and matched no
/// more.
fn matches(
    changes: &[(&Commit, &Change)],
    channels: &[Arc<PgChannel>],
    servable: &[Servable],
    timed: bool,
) -> Vec<Pending> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut pending = Vec::new();
    for (i, (_, change)) in changes.iter().enumerate() {
        if servable[i] == Servable::Not {
            continue;
        }
        let values = if change.kind == Kind::Delete { &change.old_record } else { &change.record };
        for ch in channels {
            if timed && ch.outbox.stopped().is_some() {
                continue;
            }
            if servable[i] == Servable::Exposed && ch.writer.is_none() {
                continue;
            }
            let started = timed.then(Instant::now);
            let ids: Vec<u32> = ch
                .bindings
                .iter()
                .filter(|b| b.matches(&change.relation.name, change.kind, values))
                .map(|b| b.id)
                .collect();
            if let Some(started) = started {
                let mut spent = ch.matching.lock().unwrap_or_else(|e| e.into_inner());
                if spent.0.elapsed() > Duration::from_secs(1) {
                    *spent = (started, Duration::ZERO);
                }
                spent.1 += started.elapsed();
                if spent.1 > PATTERN_BUDGET {
                    ch.outbox.stop(Stop::SlowFilters);
                    continue;
                }
            }
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

/// Whether a binding of the pending delivery filters on a column outside the row's key.
fn filters_beyond_key(p: &Pending, change: &Change) -> bool {
    let key = &change.relation.key;
    p.channel
        .bindings
        .iter()
        .filter(|b| p.ids.contains(&b.id))
        .any(|b| b.filter.columns().any(|c| !key.iter().any(|k| k == c)))
}

/// The primary key's values of a change's row (the old row's for a delete).
fn key_of(change: &Change) -> Vec<Value> {
    let values = if change.kind == Kind::Delete { &change.old_record } else { &change.record };
    change.relation.key.iter().map(|k| values.get(k).cloned().unwrap_or(Value::Null)).collect()
}

/// Supabase's `data` of a change: `columns`, `commit_timestamp`, `errors`, `old_record`
/// (updates and deletes), `record` (inserts and updates: `read`, the row as the subscriber read
/// it, where given), `schema`, `table`, `type`, with the columns a subscriber may read and asked
/// for; `key_only`: the old row's key columns only.
fn data(at: SystemTime, change: &Change, read: Option<&Row>, columns: &[&str], key_only: bool) -> String {
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
        d.insert("record".into(), pick(read.unwrap_or(&change.record), false));
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
