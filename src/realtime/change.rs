//! What crosses the seam between a backend and realtime: the committed changes a backend's
//! feed hands over ([`Feed`], [`Commit`], [`Change`]), and what realtime asks a backend about
//! a subscriber's rights ([`RowAccess`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};

use crate::auth::Principal;
use crate::error::Error;
use crate::schema::QualifiedName;

/// A changed relation as the feed describes it.
#[derive(Debug)]
pub struct Relation {
    /// Schema and name.
    pub name: QualifiedName,
    /// Every column, in table order: name and type name as `pg_type.typname` writes it
    /// (`int4`, `text`, `_int4`), or SQLite's declared type.
    pub columns: Vec<(String, String)>,
    /// The primary key's columns (empty without one).
    pub key: Vec<String>,
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A row was inserted.
    Insert,
    /// A row was updated.
    Update,
    /// A row was deleted.
    Delete,
}

impl Kind {
    /// `INSERT`, `UPDATE` or `DELETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Insert => "INSERT",
            Kind::Update => "UPDATE",
            Kind::Delete => "DELETE",
        }
    }
}

/// One row's change, its values as typed JSON (`to_jsonb`'s forms).
#[derive(Debug)]
pub struct Change {
    /// The relation.
    pub relation: Arc<Relation>,
    /// Insert, update or delete.
    pub kind: Kind,
    /// The new row (empty for a delete).
    pub record: Map<String, Value>,
    /// What is known of the old row: the primary key, or the whole row where the database
    /// keeps it (`REPLICA IDENTITY FULL`, SQLite); empty for an insert.
    pub old_record: Map<String, Value>,
    /// Why values were left out (a row too large to send whole), Supabase's `errors`.
    pub error: Option<&'static str>,
}

/// The changes of one committed transaction, in the order it made them.
#[derive(Debug)]
pub struct Commit {
    /// When it committed.
    pub at: SystemTime,
    /// Its changes to tables realtime asked for (see [`Feed::wants`]).
    pub changes: Vec<Change>,
}

/// The hand-over from a backend's change feed to realtime: commits in commit order, and
/// whether the feed is running. Never blocks the feed: if realtime falls this far behind,
/// the commit is dropped and subscribers are told changes were missed.
#[derive(Clone)]
pub struct Feed {
    pub(super) tx: tokio::sync::mpsc::Sender<Commit>,
    pub(super) wanted: Arc<ArcSwap<Wanted>>,
    pub(super) live: Arc<AtomicBool>,
    pub(super) news: Arc<News>,
    /// Whether every change the feed hands over is of a published table (a stream of the
    /// realtime publication alone): then none waits on the published set, which a table just
    /// added to the publication reaches only with the next schema reload.
    pub(super) only_published: Arc<AtomicBool>,
}

/// What happened to the feed since the dispatcher last looked: kept beside the commits' queue,
/// so that news is never lost to a full queue.
#[derive(Default)]
pub struct News {
    /// Commits were dropped (realtime fell behind).
    pub(super) overrun: AtomicBool,
    /// The feed stopped (why), since last told.
    pub(super) lost: std::sync::Mutex<Option<String>>,
    /// The feed runs (again), since last told.
    pub(super) ready: AtomicBool,
    /// Wakes the dispatcher.
    pub(super) wake: tokio::sync::Notify,
}

/// What the feed tells subscribers.
#[derive(Debug)]
pub enum FeedEvent {
    /// The feed runs (again): from now on every commit arrives.
    Ready,
    /// The feed stopped: commits may be missed until it is ready again.
    Lost(String),
    /// Commits were dropped (realtime fell behind).
    Overrun,
}

impl News {
    /// What to tell subscribers, in order: loss, then recovery, then overrun.
    pub(super) fn take(&self) -> Vec<FeedEvent> {
        let mut told = Vec::new();
        if let Some(why) = self.lost.lock().unwrap_or_else(|e| e.into_inner()).take() {
            told.push(FeedEvent::Lost(why));
        }
        if self.ready.swap(false, Ordering::SeqCst) {
            told.push(FeedEvent::Ready);
        }
        if self.overrun.swap(false, Ordering::SeqCst) {
            told.push(FeedEvent::Overrun);
        }
        told
    }
}

/// The tables realtime has subscribers for, which a feed converts changes of.
#[derive(Debug, Default)]
pub struct Wanted {
    /// Every table of these schemas.
    pub schemas: HashSet<String>,
    /// These tables.
    pub tables: HashSet<QualifiedName>,
    /// Every table.
    pub all: bool,
}

impl Feed {
    /// Whether changes to `schema.table` have subscribers (cheap; asked before a change's
    /// values are converted).
    pub fn wants(&self, schema: &str, table: &str) -> bool {
        let w = self.wanted.load();
        w.all
            || w.schemas.contains(schema)
            || w.tables.contains(&QualifiedName { schema: schema.to_owned(), name: table.to_owned() })
    }

    /// The tables with subscribers now: a new value each time the set changes (a feed that
    /// looks at it only when it is another may compare it by address).
    pub fn wanted_now(&self) -> Arc<Wanted> {
        self.wanted.load_full()
    }

    /// Whether any change has subscribers.
    pub fn wants_any(&self) -> bool {
        let w = self.wanted.load();
        w.all || !w.schemas.is_empty() || !w.tables.is_empty()
    }

    /// Says whether the feed's changes are all of published tables (see `only_published`).
    pub fn only_published(&self, only: bool) {
        self.only_published.store(only, Ordering::SeqCst);
    }

    /// Hands over a commit.
    pub fn commit(&self, commit: Commit) {
        if commit.changes.is_empty() {
            return;
        }
        if self.tx.try_send(commit).is_err() {
            self.news.overrun.store(true, Ordering::SeqCst);
            self.news.wake.notify_one();
        }
    }

    /// Changes were dropped before they could be handed over (a transaction too large).
    pub fn dropped(&self) {
        self.news.overrun.store(true, Ordering::SeqCst);
        self.news.wake.notify_one();
    }

    /// The feed runs: every commit from now on arrives.
    pub fn ready(&self) {
        if !self.live.swap(true, Ordering::SeqCst) {
            self.news.ready.store(true, Ordering::SeqCst);
            self.news.wake.notify_one();
        }
    }

    /// The feed stopped (`why`, for the log and subscribers).
    pub fn lost(&self, why: String) {
        if self.live.swap(false, Ordering::SeqCst) {
            self.news.lost.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(why);
            self.news.wake.notify_one();
        }
    }
}

/// A row as JSON.
pub type Row = Map<String, Value>;

/// What a role may read of a relation, beside its rows.
#[derive(Debug, Clone)]
pub struct TableAccess {
    /// The columns it may read, in table order (empty: not the table).
    pub columns: Vec<String>,
    /// Whether rows are decided row by row, by the caller's claims (row-level security is on,
    /// or an access rule reads a claim): then each distinct set of claims is asked apart;
    /// otherwise every caller of the role sees the same.
    pub by_claims: bool,
    /// Whether rows are decided row by row at all (RLS, a rule's row filter).
    pub by_row: bool,
}

/// What realtime asks a backend about subscribers' rights.
pub trait RowAccess: Send + Sync {
    /// What `who`'s role may read of `table`.
    fn table_access<'a>(
        &'a self,
        who: &'a Principal,
        table: &'a QualifiedName,
    ) -> BoxFuture<'a, Result<TableAccess, Error>>;

    /// The rows keyed by `keys` (values of `key`'s columns, in order) as `who` reads them now,
    /// its readable `columns` of each (`None` for a row it may not read), as a read by that
    /// caller would answer.
    fn rows<'a>(
        &'a self,
        who: &'a Principal,
        table: &'a QualifiedName,
        key: &'a [String],
        columns: &'a [String],
        keys: &'a [Vec<Value>],
    ) -> BoxFuture<'a, Result<Vec<Option<Row>>, Error>>;

    /// Whether `who` may have seen the deleted row `old` (the whole old row, which only some
    /// databases keep): `None` where the backend cannot tell, and then only the row's key is
    /// sent, as Supabase does.
    fn saw_deleted<'a>(
        &'a self,
        _who: &'a Principal,
        _table: &'a QualifiedName,
        _old: &'a Map<String, Value>,
    ) -> BoxFuture<'a, Result<Option<bool>, Error>> {
        Box::pin(async { Ok(None) })
    }
}
