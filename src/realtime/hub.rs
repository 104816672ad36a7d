//! Who is subscribed to what: each connection's [`Outbox`] (its bounded queue), the members of
//! each topic (broadcast and presence), and the channels listening to database changes
//! ([`PgChannel`]), with the set of tables the feed is asked to convert.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;

use super::change::{Kind, Wanted};
use super::filter::Filter;
use super::frame::{BroadcastBody, Outbound, Vsn};
use super::presence::Presence;
use crate::auth::Principal;
use crate::schema::QualifiedName;

/// A connection's queue of messages to send. Bounded: a connection that cannot keep up is
/// marked overflowed (its task then tells the client and closes), and what does not fit is
/// dropped, so no subscriber holds unbounded memory.
pub struct Outbox {
    /// The connection's number.
    pub id: u64,
    /// Its serializer.
    pub vsn: Vsn,
    queue: tokio::sync::mpsc::Sender<Message>,
    /// Why nothing more is queued: a [`Stop`] as a number, 0 while it is not stopped.
    stopped: AtomicU8,
    /// Wakes the connection's task when it stopped.
    pub wake: Notify,
}

/// Why a connection's outbox takes nothing more; its task tells the client and closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// It did not read its messages fast enough.
    Overflowed = 1,
    /// Its filters took longer to match than any connection may make the others wait.
    SlowFilters = 2,
}

impl Outbox {
    /// A connection's outbox of `capacity` messages, and the receiving end its task drains.
    pub fn new(id: u64, vsn: Vsn, capacity: usize) -> (Arc<Outbox>, tokio::sync::mpsc::Receiver<Message>) {
        let (queue, rx) = tokio::sync::mpsc::channel(capacity.max(1));
        (Arc::new(Outbox { id, vsn, queue, stopped: AtomicU8::new(0), wake: Notify::new() }), rx)
    }

    /// Queues `m`; false if the connection is gone or stopped (now or before).
    pub fn push(&self, m: Message) -> bool {
        if self.stopped.load(Ordering::Relaxed) != 0 {
            return false;
        }
        match self.queue.try_send(m) {
            Ok(()) => true,
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                self.stop(Stop::Overflowed);
                false
            }
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Takes nothing more, for `why` (the first reason stays), and wakes the connection's task.
    pub fn stop(&self, why: Stop) {
        if self.stopped.compare_exchange(0, why as u8, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.wake.notify_one();
        }
    }

    /// Why it stopped, if it did.
    pub fn stopped(&self) -> Option<Stop> {
        match self.stopped.load(Ordering::Relaxed) {
            1 => Some(Stop::Overflowed),
            2 => Some(Stop::SlowFilters),
            _ => None,
        }
    }
}

/// The caller a channel acts for, and when its token expires.
#[derive(Debug, Clone)]
pub struct Who {
    /// Role and claims.
    pub principal: Principal,
    /// The token's `exp` (seconds since the epoch), if it has one.
    pub exp: Option<u64>,
    /// A hash of role and claims, made once: callers with the same rights are grouped by it.
    pub key: u64,
}

/// A channel's `postgres_changes` binding.
#[derive(Debug)]
pub struct Binding {
    /// The id the join reply gave it (and change messages carry).
    pub id: u32,
    /// The event it takes (`None`: every event).
    pub event: Option<Kind>,
    /// Its schema (`None`: every schema).
    pub schema: Option<String>,
    /// Its table (`None`: every table of the schema).
    pub table: Option<String>,
    /// Its filter.
    pub filter: Filter,
    /// The columns it asked for (`None`: all).
    pub select: Option<Vec<String>>,
}

impl Binding {
    /// Whether a change of `kind` to `table` with these values concerns this binding.
    pub fn matches(
        &self,
        table: &QualifiedName,
        kind: Kind,
        values: &serde_json::Map<String, Value>,
    ) -> bool {
        self.event.is_none_or(|e| e == kind)
            && self.schema.as_deref().is_none_or(|s| s == table.schema)
            && self.table.as_deref().is_none_or(|t| t == table.name)
            && self.filter.matches(values)
    }
}

/// A channel listening to database changes.
pub struct PgChannel {
    /// Its connection's outbox.
    pub outbox: Arc<Outbox>,
    /// `realtime:<name>`.
    pub topic: Arc<str>,
    /// Its join ref.
    pub join_ref: Arc<str>,
    /// Its bindings, in the client's order.
    pub bindings: Vec<Binding>,
    /// Whether a binding's filter tests a pattern: such channels are matched apart, so that
    /// no pattern delays the others' deliveries.
    pub patterned: bool,
    /// The time its patterns took to match in the current second, and when that second began.
    pub matching: Mutex<(std::time::Instant, std::time::Duration)>,
    /// Whom it acts for; replaced when the client sends a new token.
    pub who: ArcSwap<Who>,
    /// How another door's channel writes its changes (`None`: a Supabase channel, in Phoenix's
    /// frames); such a channel sees every table of the API's schema, published or not.
    pub writer: Option<Arc<dyn super::door::ChangeWriter>>,
}

impl PgChannel {
    /// The channel's `system` message for the postgres_changes extension (none for another
    /// door's channel: its protocol has no such message).
    pub fn system(&self, ok: bool, message: &str) -> Option<Message> {
        if self.writer.is_some() {
            return None;
        }
        let payload = serde_json::json!({
            "channel": self.topic.strip_prefix("realtime:").unwrap_or(&self.topic),
            "extension": "postgres_changes",
            "message": message,
            "status": if ok { "ok" } else { "error" },
        })
        .to_string();
        Outbound::Push {
            topic: &self.topic,
            join_ref: Some(&self.join_ref),
            event: "system",
            payload: &payload,
        }
        .encode(self.outbox.vsn)
    }
}

/// A member of a topic.
struct Member {
    outbox: Arc<Outbox>,
    /// Whether its own broadcasts come back to it (`broadcast.self`).
    own: bool,
}

#[derive(Default)]
struct Topic {
    /// By connection.
    members: HashMap<u64, Member>,
    presence: Presence,
}

/// What a binding asks the feed for: a table, a schema's tables (`None` table), or every
/// table (`None` schema).
type Scope = (Option<String>, Option<String>);

/// The channels listening to changes, by connection and topic, and how many bindings ask for
/// each scope (the feed is told only when the set of scopes changes).
#[derive(Default)]
struct Listening {
    channels: HashMap<(u64, Arc<str>), Arc<PgChannel>>,
    scopes: HashMap<Scope, usize>,
}

/// Every subscription of the server. Joining and leaving cost the same however many others
/// are subscribed: the dispatcher's list of listening channels is rebuilt at most once per
/// batch of changes, when it has changed.
#[derive(Default)]
pub struct Hub {
    topics: Mutex<HashMap<Arc<str>, Topic>>,
    listening: Mutex<Listening>,
    /// Whether `snapshot` is behind `listening`.
    changed: AtomicBool,
    /// The tables with subscribers, which the feed converts changes of.
    pub wanted: Arc<ArcSwap<Wanted>>,
    snapshot: ArcSwapOption<Listeners>,
}

/// The channels listening to changes, as the dispatcher delivers to them: those whose filters
/// are comparisons only, and those with a pattern (matched apart).
#[derive(Default)]
pub struct Listeners {
    /// Channels without a pattern.
    pub plain: Vec<Arc<PgChannel>>,
    /// Channels with a pattern.
    pub patterned: Vec<Arc<PgChannel>>,
}

impl Listeners {
    /// Every channel.
    pub fn all(&self) -> impl Iterator<Item = &Arc<PgChannel>> {
        self.plain.iter().chain(&self.patterned)
    }
}

fn scopes(channel: &PgChannel) -> impl Iterator<Item = Scope> + '_ {
    channel.bindings.iter().map(|b| (b.schema.clone(), b.table.clone()))
}

impl Hub {
    /// Every topic with its members, presences and change bindings (`schema.table` and event),
    /// as the dashboard's inspector lists them.
    pub fn channels(&self) -> Value {
        let mut bindings: HashMap<Arc<str>, Vec<String>> = HashMap::new();
        {
            let listening = self.listening.lock().unwrap_or_else(|e| e.into_inner());
            for ((_, topic), channel) in &listening.channels {
                let described = channel.bindings.iter().map(|b| {
                    let event = b.event.map_or_else(|| "*".to_owned(), |k| format!("{k:?}").to_uppercase());
                    let table = format!(
                        "{}.{}",
                        b.schema.as_deref().unwrap_or("*"),
                        b.table.as_deref().unwrap_or("*")
                    );
                    match b.filter.0.is_empty() {
                        true => format!("{event} {table}"),
                        false => format!("{event} {table} (filtered)"),
                    }
                });
                bindings.entry(topic.clone()).or_default().extend(described);
            }
        }
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Value> = topics
            .iter()
            .map(|(topic, t)| {
                let mut b = bindings.remove(topic).unwrap_or_default();
                b.sort();
                b.dedup();
                serde_json::json!({"topic": &**topic, "members": t.members.len(), "presences": t.presence.len(), "changes": b})
            })
            .collect();
        out.sort_by(|a, b| a["topic"].as_str().cmp(&b["topic"].as_str()));
        Value::Array(out)
    }

    /// Adds a member to `topic`.
    pub fn join(&self, topic: &Arc<str>, outbox: &Arc<Outbox>, own: bool) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let t = topics.entry(topic.clone()).or_default();
        t.members.insert(outbox.id, Member { outbox: outbox.clone(), own });
    }

    /// Removes connection `conn` from `topic`: its membership, presence and change bindings.
    pub fn leave(&self, topic: &Arc<str>, conn: u64) {
        {
            let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = topics.get_mut(topic) {
                t.members.remove(&conn);
                if let Some(diff) = t.presence.untrack(conn) {
                    fan_out(t, None, "presence_diff", &diff.to_string(), topic);
                }
                if t.members.is_empty() && t.presence.is_empty() {
                    topics.remove(topic);
                }
            }
        }
        self.unlisten(conn, topic);
    }

    /// Removes every subscription of connection `conn` (its joined `topics`).
    pub fn drop_connection(&self, conn: u64, topics: impl Iterator<Item = Arc<str>>) {
        for topic in topics {
            self.leave(&topic, conn);
        }
    }

    /// Sends a broadcast to the members of `topic`; `from` is the sending connection (left out
    /// unless it asked for its own messages). Returns how many received it.
    pub fn broadcast(&self, topic: &str, from: Option<u64>, event: &str, body: &BroadcastBody) -> usize {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = topics.get(topic) else { return 0 };
        let out = Outbound::Broadcast { topic, event, body };
        let mut encoded: [Option<Option<Message>>; 2] = [None, None];
        let mut sent = 0;
        for m in t.members.values() {
            if from == Some(m.outbox.id) && !m.own {
                continue;
            }
            let slot = &mut encoded[m.outbox.vsn as usize];
            if let Some(msg) = slot.get_or_insert_with(|| out.encode(m.outbox.vsn)) {
                sent += usize::from(m.outbox.push(msg.clone()));
            }
        }
        sent
    }

    /// Tracks presence for `conn` on `topic`; every member gets the diff.
    pub fn track(&self, topic: &str, conn: u64, key: &str, payload: &serde_json::Map<String, Value>) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = topics.get_mut(topic) else { return };
        let diff = t.presence.track(conn, key, payload);
        fan_out(t, None, "presence_diff", &diff.to_string(), topic);
    }

    /// Untracks `conn`'s presence on `topic`.
    pub fn untrack(&self, topic: &str, conn: u64) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = topics.get_mut(topic) else { return };
        if let Some(diff) = t.presence.untrack(conn) {
            fan_out(t, None, "presence_diff", &diff.to_string(), topic);
        }
    }

    /// The presence state of `topic`.
    pub fn presence_state(&self, topic: &str) -> Value {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics.get(topic).map_or_else(|| Value::Object(Default::default()), |t| t.presence.state())
    }

    /// Adds a channel listening to changes (replacing the connection's earlier one on its topic).
    pub fn listen(&self, channel: Arc<PgChannel>) {
        let mut l = self.listening.lock().unwrap_or_else(|e| e.into_inner());
        let mut new_scope = false;
        for scope in scopes(&channel) {
            let n = l.scopes.entry(scope).or_default();
            new_scope |= *n == 0;
            *n += 1;
        }
        let key = (channel.outbox.id, channel.topic.clone());
        if let Some(old) = l.channels.insert(key, channel) {
            new_scope |= forget_scopes(&mut l.scopes, &old);
        }
        if new_scope {
            self.wanted.store(Arc::new(wanted(&l.scopes)));
        }
        self.changed.store(true, Ordering::Release);
    }

    /// Removes connection `conn`'s channel on `topic` from those listening to changes.
    pub fn unlisten(&self, conn: u64, topic: &Arc<str>) {
        let mut l = self.listening.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = l.channels.remove(&(conn, topic.clone())) {
            if forget_scopes(&mut l.scopes, &old) {
                self.wanted.store(Arc::new(wanted(&l.scopes)));
            }
            self.changed.store(true, Ordering::Release);
        }
    }

    /// Every channel listening to changes.
    pub fn listening(&self) -> Arc<Listeners> {
        if self.changed.swap(false, Ordering::AcqRel) {
            let l = self.listening.lock().unwrap_or_else(|e| e.into_inner());
            let (patterned, plain) = l.channels.values().cloned().partition(|c| c.patterned);
            self.snapshot.store(Some(Arc::new(Listeners { plain, patterned })));
        }
        self.snapshot.load_full().unwrap_or_default()
    }
}

/// Counts a channel's scopes down; whether one is no longer asked for.
fn forget_scopes(counts: &mut HashMap<Scope, usize>, channel: &PgChannel) -> bool {
    let mut gone = false;
    for scope in scopes(channel) {
        if let Some(n) = counts.get_mut(&scope) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&scope);
                gone = true;
            }
        }
    }
    gone
}

/// What the feed converts changes of, from the scopes asked for.
fn wanted(scopes: &HashMap<Scope, usize>) -> Wanted {
    let mut w = Wanted::default();
    for (schema, table) in scopes.keys() {
        match (schema, table) {
            (None, _) => w.all = true,
            (Some(s), None) => {
                w.schemas.insert(s.clone());
            }
            (Some(s), Some(t)) => {
                w.tables.insert(QualifiedName { schema: s.clone(), name: t.clone() });
            }
        }
    }
    w
}

/// Sends one message to every member of a topic, encoded once per serializer.
fn fan_out(t: &Topic, skip: Option<u64>, event: &str, payload: &str, topic: &str) {
    let out = Outbound::Fanout { topic, event, payload };
    let mut encoded: [Option<Option<Message>>; 2] = [None, None];
    for m in t.members.values() {
        if skip == Some(m.outbox.id) {
            continue;
        }
        if let Some(msg) = encoded[m.outbox.vsn as usize].get_or_insert_with(|| out.encode(m.outbox.vsn)) {
            m.outbox.push(msg.clone());
        }
    }
}
